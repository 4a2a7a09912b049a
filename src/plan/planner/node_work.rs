//! What one node needs in one hop: its download, kubeadm step, pin, stage
//! and roll (or only an uncordon), from its simulated state and the hop's
//! wanted level. A child of the planner, sharing its simulation types.

use super::*;

/// What `sim` needs in a hop to `want`, or `None` when nothing.
///
/// * Upgrade and Converge hops bring every node fully to `want`.
/// * A Finish hop (cluster already at this minor, target further on) only
///   catches up nodes that run an older minor, and finishes nodes an
///   interrupted upgrade left cordoned; everything else waits for the next
///   hop, so no node reboots twice for one minor.
/// * A node that crosses to a new minor gets its kubeadm step (by the
///   downloaded image's kubeadm) before it is staged, unless fleetctl's
///   marker says that step already ran for this minor.
/// * containerd rides the node's first reboot (or, in the last hop, gets
///   one if it still needs it).
pub(super) fn node_work(
    ctx: &HopInputs,
    sim: &NodeSim,
    kind: HopKind,
    want: &Level,
    last: bool,
) -> Result<Option<Work>, Refusal> {
    let m = want.minor;
    let running = sim.kubernetes.running.as_ref();
    let crossing = running.is_none_or(|r| r.minor < m);
    // A first control plane already booted onto the hop's minor before its
    // `upgrade apply` (by hand, or by an older fleetctl): it gets the apply,
    // then a reboot, the kubelet restart that loads the config apply wrote.
    let ahead_first =
        sim.first && kind == HopKind::Upgrade && running.is_some_and(|r| r.minor == m);
    let cordoned_here = sim.cordoned && running.is_some_and(|r| r.minor == m);
    let full = kind != HopKind::Finish || crossing;
    if !full && !cordoned_here {
        return Ok(None);
    }

    let mut after = sim.clone();
    let mut download = None;
    let mut stage = Vec::new();
    let mut boot = false;
    if full {
        boot |= converge(
            ctx,
            Component::Kubernetes,
            &mut after.kubernetes,
            want,
            Some(&mut download),
            &mut stage,
        )?;
        if let Some(c) = ctx.containerd
            && (boot || last)
        {
            let ctr_want = Level {
                minor: c,
                version: None,
            };
            boot |= converge(
                ctx,
                Component::Containerd,
                &mut after.containerd,
                &ctr_want,
                None,
                &mut stage,
            )?;
        }
    }
    boot |= ahead_first;
    if boot {
        after.kubernetes.running = after.kubernetes.staged.clone();
        after.containerd.running = after.containerd.staged.clone();
    }

    let image = after
        .kubernetes
        .staged
        .as_ref()
        .filter(|l| l.minor == m)
        .and_then(|l| l.version.clone());
    let step_done = sim.kubeadm_step == Some(m);
    let kubeadm = if sim.first && kind == HopKind::Upgrade {
        Some(Action::UpgradeApply {
            minor: m,
            version: image,
        })
    } else if !step_done && crossing && boot {
        Some(Action::UpgradeNode {
            minor: m,
            version: image,
        })
    } else {
        None
    };
    if kubeadm.is_some() {
        after.kubeadm_step = Some(m);
    }
    let uncordon = sim.cordoned && !boot;
    after.cordoned = false;

    if download.is_none() && kubeadm.is_none() && stage.is_empty() && !boot && !uncordon {
        return Ok(None);
    }
    Ok(Some(Work {
        download,
        kubeadm,
        stage,
        roll: boot,
        uncordon,
        after,
    }))
}

/// A worker that jumps over this hop: nothing changes on it, except that a
/// node an earlier run left cordoned gets its capacity back (it would fail
/// every other node's gate otherwise).
pub(super) fn uncordon_only(sim: &NodeSim) -> Option<Work> {
    if !sim.cordoned {
        return None;
    }
    let mut after = sim.clone();
    after.cordoned = false;
    Some(Work {
        download: None,
        kubeadm: None,
        stage: Vec::new(),
        roll: false,
        uncordon: true,
        after,
    })
}

/// Pins and stages `component` to `want` on one node, recording the actions
/// and the predicted result; returns whether the node must reboot for it.
/// `download`: `Some` for kubernetes, whose image is downloaded first
/// unless it is on disk (the kubeadm step, which the caller places before
/// the stage, runs the downloaded image's kubeadm); `None` for a component
/// that sysupdate downloads as it stages (containerd).
fn converge(
    ctx: &HopInputs,
    component: Component,
    sim: &mut ComponentSim,
    want: &Level,
    download: Option<&mut Option<Action>>,
    stage: &mut Vec<Action>,
) -> Result<bool, Refusal> {
    pin(ctx, component, sim, want.minor, stage)?;
    if !sim.staged.as_ref().is_some_and(|s| s.reaches(want)) {
        // Without the hub's list the patch is unknown: download anyway, it
        // is a no-op for sysupdate when the newest is already there.
        let on_disk = want.version.is_some() && sim.images.iter().any(|i| i == want);
        if let Some(download) = download
            && !on_disk
        {
            *download = Some(Action::Download {
                component,
                minor: want.minor,
                expect: want.version.clone(),
            });
            sim.images.push(want.clone());
        }
        stage.push(Action::Stage {
            component,
            minor: want.minor,
            expect: want.version.clone(),
        });
        sim.staged = Some(want.clone());
    }
    Ok(needs_boot(sim, want))
}

/// The pinned config for `minor`, unless the node has exactly that and nothing else.
fn pin(
    ctx: &HopInputs,
    component: Component,
    sim: &mut ComponentSim,
    minor: Minor,
    stage: &mut Vec<Action>,
) -> Result<(), Refusal> {
    let config = render_config(component, minor, ctx.hub).map_err(|e| Refusal::InvalidHub {
        hub: ctx.hub.to_string(),
        reason: format!("{e:#}"),
    })?;
    if sim.main.as_deref() != Some(config.as_str()) || !sim.strays.is_empty() {
        stage.push(Action::Pin {
            component,
            minor,
            path: component.config_path(),
            config: config.clone(),
            previous: sim.main.take(),
            replaces: std::mem::take(&mut sim.strays),
        });
        sim.main = Some(config);
    }
    Ok(())
}

fn needs_boot(sim: &ComponentSim, want: &Level) -> bool {
    match (&sim.running, &sim.staged) {
        (Some(running), Some(staged)) => !running.reaches(want) || staged.newer_patch_than(running),
        _ => true,
    }
}

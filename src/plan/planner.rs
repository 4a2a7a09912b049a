//! The planner: fleet facts + target + hub versions in, the ordered steps out.
//! Pure: no I/O, no clock, so every rule is unit- and property-tested.
//!
//! It simulates each node hop by hop (what it runs, has downloaded and
//! staged, is pinned to, whether its kubeadm step ran, whether it is
//! cordoned) and the cluster's version, so a later hop sees the predicted
//! result of earlier ones and a fleet left halfway yields only the steps it
//! still needs. docs/upgrade-path.md has the rules.

use std::collections::BTreeMap;

use crate::inventory::Role;
use crate::version::{Minor, TargetVersion, Version};

use super::fingerprint::Fingerprint;
use super::model::{
    Action, Component, Hop, HopKind, Phase, PhaseKind, Plan, PlannedNode, Refusal, Step, Warning,
};
use super::rules;
use super::state::FleetState;
use super::sysupdate::render_config;
use super::workers::{self, Behind, Stops, WorkerPlan, WorkerStrategy};
use crate::hub::HubVersions;
use node_work::{node_work, uncordon_only};

mod node_sim;
mod node_work;

use node_sim::{ComponentSim, NodeSim};

use super::level::Level;

/// What one node does in one hop, and the state it is predicted to be in after.
struct Work {
    download: Option<Action>,
    kubeadm: Option<Action>,
    /// Pins and stages, run after the node's kubeadm step.
    stage: Vec<Action>,
    roll: bool,
    /// Left cordoned by an earlier run and not rolled in this hop.
    uncordon: bool,
    after: NodeSim,
}

/// Facts shared by every hop.
struct HopInputs<'a> {
    hub: &'a str,
    containerd: Option<Minor>,
    /// Where each jumping worker stops (`workers::stops`).
    stops: Stops,
}

/// The plan with every node taking every hop (`--workers every-hop`).
pub fn plan(
    state: &FleetState,
    target: &TargetVersion,
    hub: &HubVersions,
) -> Result<Plan, Refusal> {
    plan_with(state, target, hub, WorkerStrategy::EveryHop)
}

/// Computes the plan, or refuses with the reason. See docs/upgrade-path.md.
/// `workers`: how the workers take the hops (`plan::workers`); the plan
/// also counts the reboots `--workers every-hop` would take.
pub fn plan_with(
    state: &FleetState,
    target: &TargetVersion,
    hub: &HubVersions,
    workers: WorkerStrategy,
) -> Result<Plan, Refusal> {
    let mut plan = build(state, target, hub, workers)?;
    plan.workers.every_hop_reboots = match workers {
        WorkerStrategy::EveryHop => plan.workers.reboots,
        WorkerStrategy::Jump => {
            build(state, target, hub, WorkerStrategy::EveryHop)?.total_reboots()
        }
    };
    Ok(plan)
}

fn build(
    state: &FleetState,
    target: &TargetVersion,
    hub: &HubVersions,
    strategy: WorkerStrategy,
) -> Result<Plan, Refusal> {
    let first = state.first_control_plane().ok_or(Refusal::NoControlPlane)?;
    let mut warnings = Vec::new();
    let cluster = rules::cluster_level(state, first, &mut warnings)?;
    rules::direction(&cluster, target, hub)?;
    rules::hub_url(&state.hub)?;
    let wants = rules::wants(&cluster, target, hub, &mut warnings)?;
    rules::skew(state, first, &cluster, target.minor())?;

    let minors: Vec<Minor> = wants.keys().copied().collect();
    let (stops, why) = workers::stops(state, &minors, strategy);
    let ctx = HopInputs {
        hub: &state.hub,
        containerd: state.containerd_version,
        stops,
    };
    let mut sims: Vec<NodeSim> = state
        .nodes
        .iter()
        .map(|n| NodeSim::from_facts(state, n, n.name == first.name))
        .collect();
    let (mut hops, final_cluster, behind) = build_hops(&ctx, &mut sims, cluster.clone(), &wants)?;
    for hop in &mut hops {
        hop.sha256 = hop
            .version
            .as_ref()
            .and_then(|v| hub.digest(v))
            .map(String::from);
    }
    rules::current_published(&hops, &cluster, &wants, hub)?;
    rules::kubeadm_floor(&hops)?;

    warnings.extend(rules::fleet_warnings(state, first, &cluster, hub, &hops));
    warnings.extend(rules::hub_warnings(&state.hub, hub, &hops));
    if let (Some(kubelets), Some(cluster_now)) = (
        wants.get(&target.minor()).and_then(|w| w.version.clone()),
        final_cluster.version,
    ) && kubelets > cluster_now
    {
        warnings.push(Warning::ControlPlaneStays {
            cluster: cluster_now,
            kubelets,
        });
    }

    let mut plan = Plan {
        requested: target.clone(),
        target: target.minor(),
        cluster_from: cluster.version,
        hub: state.hub.clone(),
        containerd: state.containerd_version,
        nodes: PlannedNode::of_fleet(state),
        hops,
        warnings,
        fingerprint: Fingerprint::of(state),
        ignored_checks: Vec::new(),
        workers: WorkerPlan {
            strategy,
            stops: why,
            behind,
            reboots: 0,
            every_hop_reboots: 0,
        },
    };
    plan.workers.reboots = plan.total_reboots();
    // A worker's intermediate stop the plan does not need after all (it
    // already runs that minor) is not worth a line.
    let rebooted: Vec<(String, Minor)> = plan
        .hops
        .iter()
        .flat_map(|h| {
            h.steps()
                .filter(|s| s.action == Action::Roll)
                .map(|s| (s.node.clone(), h.minor))
        })
        .collect();
    plan.workers.stops.retain(|w| {
        w.minors
            .iter()
            .any(|m| rebooted.contains(&(w.node.clone(), *m)))
    });
    Ok(plan)
}

/// One hop per minor from the cluster's to the target, each computed on the
/// state the previous ones leave; empty hops are dropped.
fn build_hops(
    ctx: &HopInputs,
    sims: &mut [NodeSim],
    mut cluster: Level,
    wants: &BTreeMap<Minor, Level>,
) -> Result<(Vec<Hop>, Level, Vec<Behind>), Refusal> {
    let mut hops = Vec::new();
    let mut behind = Vec::new();
    let last = wants.keys().next_back().copied();
    for (minor, want) in wants {
        let kind = if cluster.minor < *minor {
            HopKind::Upgrade
        } else if Some(*minor) == last {
            HopKind::Converge
        } else {
            HopKind::Finish
        };
        let phases = hop_phases(ctx, sims, &mut cluster, kind, want, Some(*minor) == last)?;
        if phases.is_empty() {
            continue;
        }
        let kubeadm = phases.iter().flat_map(|p| &p.steps).any(|s| {
            matches!(
                s.action,
                Action::UpgradeApply { .. } | Action::UpgradeNode { .. }
            )
        });
        // Workers that jump keep an older kubelet past this hop.
        let nodes: Vec<String> = sims
            .iter()
            .filter(|s| {
                s.kubernetes
                    .running
                    .as_ref()
                    .is_some_and(|r| r.minor < *minor)
            })
            .map(|s| s.name.clone())
            .collect();
        hops.push(Hop {
            kind,
            minor: *minor,
            version: want.version.clone(),
            kubeadm,
            sha256: None,
            phases,
            checks: Vec::new(),
            skip_system_verification: Vec::new(),
        });
        if !nodes.is_empty() {
            behind.push(Behind {
                minor: *minor,
                nodes,
            });
        }
    }
    Ok((hops, cluster, behind))
}

/// The phases of one hop, in the order the skew policy needs (see
/// [`PhaseKind`]): every control plane's kubeadm step before any control
/// plane reboots onto the new kubelet, every control plane rebooted before
/// any worker is staged.
fn hop_phases(
    ctx: &HopInputs,
    sims: &mut [NodeSim],
    cluster: &mut Level,
    kind: HopKind,
    want: &Level,
    last: bool,
) -> Result<Vec<Phase>, Refusal> {
    let mut works = Vec::with_capacity(sims.len());
    for sim in sims.iter() {
        let jumps_over = sim.role == Role::Worker
            && !last
            && ctx
                .stops
                .get(&sim.name)
                .is_some_and(|at| !at.contains(&want.minor));
        works.push(match jumps_over {
            true => uncordon_only(sim),
            false => node_work(ctx, sim, kind, want, last)?,
        });
    }
    // Control planes roll first (the first one before the others), then
    // workers, each in inventory order.
    let mut order: Vec<usize> = Vec::new();
    order.extend((0..sims.len()).filter(|&i| sims[i].first));
    order.extend((0..sims.len()).filter(|&i| !sims[i].first && sims[i].role == Role::ControlPlane));
    order.extend((0..sims.len()).filter(|&i| sims[i].role == Role::Worker));
    let first_roll = order
        .iter()
        .copied()
        .find(|&i| works[i].as_ref().is_some_and(|w| w.roll));

    let mut prepare = Vec::new();
    for &i in &order {
        let Some(work) = &works[i] else { continue };
        if let Some(d) = &work.download {
            prepare.push(Step::new(&sims[i].name, d.clone()));
        }
    }
    // A node an earlier run left cordoned would fail every other node's
    // gate ("one node out at a time"): it gets its capacity back first,
    // unless it is the node the hop takes down first anyway.
    for &i in &order {
        let Some(work) = &works[i] else { continue };
        if sims[i].cordoned && (work.uncordon || (work.roll && Some(i) != first_roll)) {
            prepare.push(Step::new(&sims[i].name, Action::Uncordon));
        }
    }

    let kubeadm_of = |i: usize| -> Vec<Step> {
        works[i]
            .as_ref()
            .and_then(|w| w.kubeadm.clone())
            .map(|a| Step::new(&sims[i].name, a))
            .into_iter()
            .collect()
    };
    let rolling = |i: usize, with_kubeadm: bool| -> Vec<Step> {
        let Some(w) = &works[i] else {
            return Vec::new();
        };
        let node = &sims[i].name;
        let mut steps = Vec::new();
        if with_kubeadm && let Some(k) = &w.kubeadm {
            steps.push(Step::new(node, k.clone()));
        }
        steps.extend(w.stage.iter().map(|a| Step::new(node, a.clone())));
        if w.roll {
            steps.push(Step::new(node, Action::Roll));
        }
        steps
    };
    let (control_planes, workers): (Vec<usize>, Vec<usize>) = order
        .iter()
        .copied()
        .partition(|&i| sims[i].role == Role::ControlPlane);

    let first_cp: Vec<Step> = control_planes
        .iter()
        .filter(|&&i| sims[i].first)
        .flat_map(|&i| kubeadm_of(i))
        .collect();
    let other_cps: Vec<Step> = control_planes
        .iter()
        .filter(|&&i| !sims[i].first)
        .flat_map(|&i| kubeadm_of(i))
        .collect();
    let cp_reboots: Vec<Step> = control_planes
        .iter()
        .flat_map(|&i| rolling(i, false))
        .collect();
    let mut worker_prep = Vec::new();
    let mut worker_reboots = Vec::new();
    for &i in &workers {
        for step in rolling(i, true) {
            if step.action == Action::Roll {
                worker_reboots.push(step);
            } else {
                worker_prep.push(step);
            }
        }
    }

    if let Some(Some(Action::UpgradeApply { version, .. })) = control_planes
        .first()
        .map(|&i| works[i].as_ref().and_then(|w| w.kubeadm.as_ref()))
    {
        *cluster = Level {
            minor: want.minor,
            version: version.clone(),
        };
    }
    for (sim, work) in sims.iter_mut().zip(works) {
        if let Some(work) = work {
            *sim = work.after;
        }
    }
    let cleanup: Vec<Step> = sims
        .iter()
        .filter_map(|s| {
            let running = s.kubernetes.running.as_ref()?.version.as_ref()?;
            let images: Vec<Version> = s
                .kubernetes
                .images
                .iter()
                .filter_map(|l| l.version.clone())
                .collect();
            let staged = s
                .kubernetes
                .staged
                .as_ref()
                .and_then(|l| l.version.as_ref());
            let versions = images_to_remove(&images, running, staged);
            (!versions.is_empty()).then(|| Step::new(&s.name, Action::RemoveImages { versions }))
        })
        .collect();
    let only_cleanup = [
        &prepare,
        &first_cp,
        &other_cps,
        &cp_reboots,
        &worker_prep,
        &worker_reboots,
    ]
    .iter()
    .all(|s| s.is_empty());
    if only_cleanup {
        // Old images alone are not worth a hop; the next hop removes them.
        return Ok(Vec::new());
    }
    for s in sims.iter_mut() {
        let Some(running) = s
            .kubernetes
            .running
            .as_ref()
            .and_then(|l| l.version.clone())
        else {
            continue;
        };
        let staged = s.kubernetes.staged.as_ref().and_then(|l| l.version.clone());
        let gone = images_to_remove(
            &s.kubernetes
                .images
                .iter()
                .filter_map(|l| l.version.clone())
                .collect::<Vec<_>>(),
            &running,
            staged.as_ref(),
        );
        s.kubernetes
            .images
            .retain(|l| l.version.as_ref().is_none_or(|v| !gone.contains(v)));
    }

    Ok([
        (PhaseKind::Prepare, prepare),
        (PhaseKind::FirstControlPlane, first_cp),
        (PhaseKind::OtherControlPlanes, other_cps),
        (PhaseKind::ControlPlaneReboots, cp_reboots),
        (PhaseKind::WorkerPreparation, worker_prep),
        (PhaseKind::WorkerReboots, worker_reboots),
        (PhaseKind::Cleanup, cleanup),
    ]
    .into_iter()
    .filter(|(_, steps)| !steps.is_empty())
    .map(|(kind, steps)| Phase { kind, steps })
    .collect())
}

/// The kubernetes images a node can do without: every image of an older
/// minor than the running one except the newest of them, which is kept to
/// roll back to. After a hop that is the newest patch of the previous minor;
/// after a worker's jump (v1.34 to v1.37) it is the image the worker ran
/// before the jump, so rolling back stays a matter of repointing the
/// symlink. Judged from the images alone, not from what the node ran before
/// this run, so a rerun after a reboot keeps the same one. The running and
/// the staged image, and anything of the running minor or newer, always stay.
pub fn images_to_remove(
    images: &[Version],
    running: &Version,
    staged: Option<&Version>,
) -> Vec<Version> {
    let current = running.minor();
    let fallback = images.iter().filter(|v| v.minor() < current).max();
    let mut out: Vec<Version> = images
        .iter()
        .filter(|v| v.minor() < current)
        .filter(|v| Some(*v) != fallback)
        .filter(|v| *v != running && Some(*v) != staged)
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

//! The planner: fleet facts + target + hub versions in, the ordered steps out.
//! Pure: no I/O, no clock, so every rule is unit- and property-tested.
//!
//! It simulates each node hop by hop (what it runs, has staged, is pinned
//! to, whether it is cordoned) and the cluster's version, so a later hop
//! sees the predicted result of earlier ones and a fleet left halfway
//! yields only the steps it still needs. docs/upgrade-path.md has the rules.

use std::collections::BTreeMap;

use crate::inventory::Role;
use crate::version::{Minor, Target, Version};

use super::checks;
use super::config::render_config;
use super::fingerprint::Fingerprint;
use super::hub::HubVersions;
use super::model::{Action, Component, Hop, HopKind, Plan, PlannedNode, Refusal, Step, Warning};
use super::state::{FleetNode, FleetState};

/// A version as far as the plan can know it: the minor always, the patch
/// only when the hub's list was readable (or the facts said so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Level {
    pub minor: Minor,
    pub version: Option<Version>,
}

impl Level {
    pub fn exact(v: &Version) -> Level {
        Level {
            minor: v.minor(),
            version: Some(v.clone()),
        }
    }

    /// A node at `self` needs nothing more to be at `want`: same minor, and
    /// at least the wanted patch when both are known.
    fn reaches(&self, want: &Level) -> bool {
        self.minor == want.minor
            && match (&self.version, &want.version) {
                (_, None) => true,
                (Some(have), Some(wanted)) => have >= wanted,
                (None, Some(_)) => false,
            }
    }

    /// Same minor, known to be a newer patch: staged but not yet booted.
    fn newer_patch_than(&self, other: &Level) -> bool {
        self.minor == other.minor
            && matches!((&self.version, &other.version), (Some(a), Some(b)) if a > b)
    }
}

/// One sysext component of one node, as the plan predicts it.
#[derive(Debug, Clone)]
struct ComponentSim {
    running: Option<Level>,
    staged: Option<Level>,
    /// Content of `/etc/sysupdate.<name>.d/<name>.conf`, if present.
    main: Option<String>,
    /// Every other `.conf` in that directory.
    strays: Vec<String>,
}

impl ComponentSim {
    fn from_facts(component: Component, ext: Option<&crate::node::Extension>) -> ComponentSim {
        let Some(ext) = ext else {
            return ComponentSim {
                running: None,
                staged: None,
                main: None,
                strays: Vec::new(),
            };
        };
        let main_path = component.config_path();
        ComponentSim {
            running: ext.running.as_ref().map(Level::exact),
            staged: ext.staged.as_ref().map(Level::exact),
            main: ext
                .configs
                .iter()
                .find(|c| c.path == main_path)
                .map(|c| c.content.clone()),
            strays: ext
                .configs
                .iter()
                .filter(|c| c.path != main_path)
                .map(|c| c.path.clone())
                .collect(),
        }
    }
}

#[derive(Debug, Clone)]
struct NodeSim {
    name: String,
    role: Role,
    first: bool,
    kubernetes: ComponentSim,
    containerd: ComponentSim,
    cordoned: bool,
}

impl NodeSim {
    fn from_facts(state: &FleetState, node: &FleetNode, first: bool) -> NodeSim {
        NodeSim {
            name: node.name.clone(),
            role: node.role,
            first,
            kubernetes: ComponentSim::from_facts(
                Component::Kubernetes,
                Some(&node.facts.kubernetes),
            ),
            containerd: ComponentSim::from_facts(
                Component::Containerd,
                node.facts.containerd.as_ref(),
            ),
            cordoned: state.cordoned(&node.name),
        }
    }
}

/// What one node does in one hop, and the state it is predicted to be in after.
struct Work {
    prepare: Vec<Action>,
    boot: bool,
    kubeadm: Option<Action>,
    uncordon: bool,
    after: NodeSim,
}

/// Facts shared by every hop.
struct Ctx<'a> {
    hub: &'a str,
    containerd: Option<Minor>,
}

/// Computes the plan, or refuses with the reason. See docs/upgrade-path.md.
pub fn plan(state: &FleetState, target: &Target, hub: &HubVersions) -> Result<Plan, Refusal> {
    let first = state.first_control_plane().ok_or(Refusal::NoControlPlane)?;
    let mut warnings = Vec::new();
    let cluster = checks::cluster_level(state, first, &mut warnings)?;
    checks::direction(&cluster, target)?;
    checks::hub_url(&state.hub)?;
    let wants = checks::wants(&cluster, target, hub, &mut warnings)?;
    checks::skew(state, first, &cluster, target.minor())?;

    let ctx = Ctx {
        hub: &state.hub,
        containerd: state.containerd_version,
    };
    let mut sims: Vec<NodeSim> = state
        .nodes
        .iter()
        .map(|n| NodeSim::from_facts(state, n, n.name == first.name))
        .collect();
    let (hops, final_cluster) = build_hops(&ctx, &mut sims, cluster.clone(), &wants)?;
    checks::current_published(&hops, &cluster, &wants, hub)?;

    warnings.extend(checks::fleet_warnings(state, first, &cluster, hub, &hops));
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

    Ok(Plan {
        requested: target.clone(),
        target: target.minor(),
        cluster_from: cluster.version,
        hub: state.hub.clone(),
        containerd: state.containerd_version,
        nodes: state
            .nodes
            .iter()
            .map(|n| PlannedNode {
                name: n.name.clone(),
                role: n.role,
            })
            .collect(),
        hops,
        warnings,
        fingerprint: Fingerprint::of(state),
    })
}

/// One hop per minor from the cluster's to the target, each computed on the
/// state the previous ones leave; empty hops are dropped.
fn build_hops(
    ctx: &Ctx,
    sims: &mut [NodeSim],
    mut cluster: Level,
    wants: &BTreeMap<Minor, Level>,
) -> Result<(Vec<Hop>, Level), Refusal> {
    let mut hops = Vec::new();
    let last = wants.keys().next_back().copied();
    for (minor, want) in wants {
        let kind = if cluster.minor < *minor {
            HopKind::Upgrade
        } else if Some(*minor) == last {
            HopKind::Converge
        } else {
            HopKind::Finish
        };
        let steps = hop_steps(ctx, sims, &mut cluster, kind, want, Some(*minor) == last)?;
        hops.push(Hop {
            kind,
            minor: *minor,
            version: want.version.clone(),
            kubeadm: false,
            steps,
        });
    }
    drop_redundant_uncordons(&mut hops);
    hops.retain(|h| !h.steps.is_empty());
    for hop in &mut hops {
        hop.kubeadm = hop
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::UpgradeApply { .. } | Action::UpgradeNode));
    }
    Ok((hops, cluster))
}

/// The steps of one hop in the order the skew policy needs: the first
/// control-plane node all the way through `upgrade apply`; only then the
/// other nodes' pins and stages; then other control-plane nodes, then
/// workers, one at a time.
fn hop_steps(
    ctx: &Ctx,
    sims: &mut [NodeSim],
    cluster: &mut Level,
    kind: HopKind,
    want: &Level,
    last: bool,
) -> Result<Vec<Step>, Refusal> {
    let mut works = Vec::with_capacity(sims.len());
    for sim in sims.iter() {
        works.push(node_work(ctx, sim, kind, want, last)?);
    }
    let mut steps = Vec::new();
    if let Some((sim, Some(work))) = sims.iter().zip(&works).find(|(s, _)| s.first) {
        push_prepare(&mut steps, &sim.name, work);
        push_roll(&mut steps, &sim.name, work);
        if let Some(Action::UpgradeApply { version, .. }) = &work.kubeadm {
            *cluster = Level {
                minor: want.minor,
                version: version.clone(),
            };
        }
    }
    let others = || {
        sims.iter()
            .zip(&works)
            .filter(|(s, _)| !s.first)
            .filter_map(|(s, w)| w.as_ref().map(|w| (s, w)))
    };
    for (sim, work) in others() {
        push_prepare(&mut steps, &sim.name, work);
    }
    for role in [Role::ControlPlane, Role::Worker] {
        for (sim, work) in others().filter(|(s, _)| s.role == role) {
            push_roll(&mut steps, &sim.name, work);
        }
    }
    for (sim, work) in sims.iter_mut().zip(works) {
        if let Some(work) = work {
            *sim = work.after;
        }
    }
    Ok(steps)
}

fn push_prepare(steps: &mut Vec<Step>, node: &str, work: &Work) {
    for action in &work.prepare {
        steps.push(Step::new(node, action.clone()));
    }
}

fn push_roll(steps: &mut Vec<Step>, node: &str, work: &Work) {
    if work.boot {
        steps.push(Step::new(node, Action::Drain));
        steps.push(Step::new(node, Action::Reboot));
    }
    if let Some(action) = &work.kubeadm {
        steps.push(Step::new(node, action.clone()));
    }
    if work.uncordon {
        steps.push(Step::new(node, Action::Uncordon));
    }
}

/// What `sim` needs in a hop to `want`, or `None` when nothing.
///
/// * Upgrade and Converge hops bring every node fully to `want`.
/// * A Finish hop (cluster already at this minor, target further on) only
///   catches up nodes that run an older minor, and finishes nodes an
///   interrupted upgrade left cordoned; everything else waits for the next
///   hop, so no node reboots twice for one minor.
/// * containerd rides the node's first reboot (or, in the last hop, gets
///   one if it still needs it).
fn node_work(
    ctx: &Ctx,
    sim: &NodeSim,
    kind: HopKind,
    want: &Level,
    last: bool,
) -> Result<Option<Work>, Refusal> {
    let m = want.minor;
    let running = sim.kubernetes.running.as_ref();
    let crossing = running.is_none_or(|r| r.minor < m);
    let cordoned_here = sim.cordoned && running.is_some_and(|r| r.minor == m);
    let full = kind != HopKind::Finish || crossing;
    if !full && !cordoned_here {
        return Ok(None);
    }

    let mut after = sim.clone();
    let mut prepare = Vec::new();
    let mut boot = false;
    if full {
        boot |= converge(
            ctx,
            Component::Kubernetes,
            &mut after.kubernetes,
            want,
            &mut prepare,
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
                &mut prepare,
            )?;
        }
    }
    if boot {
        after.kubernetes.running = after.kubernetes.staged.clone();
        after.containerd.running = after.containerd.staged.clone();
    }

    let kubeadm = if sim.first && kind == HopKind::Upgrade {
        Some(Action::UpgradeApply {
            minor: m,
            version: after
                .kubernetes
                .running
                .as_ref()
                .and_then(|r| r.version.clone()),
        })
    } else if (boot && crossing) || (cordoned_here && !sim.first) {
        Some(Action::UpgradeNode)
    } else {
        None
    };
    let uncordon = boot || sim.cordoned;
    after.cordoned = false;

    if prepare.is_empty() && !boot && kubeadm.is_none() && !uncordon {
        return Ok(None);
    }
    Ok(Some(Work {
        prepare,
        boot,
        kubeadm,
        uncordon,
        after,
    }))
}

/// Pins and stages one component toward `want`, recording the actions and
/// the predicted result. Returns whether the node must reboot for it.
fn converge(
    ctx: &Ctx,
    component: Component,
    sim: &mut ComponentSim,
    want: &Level,
    prepare: &mut Vec<Action>,
) -> Result<bool, Refusal> {
    let config =
        render_config(component, want.minor, ctx.hub).map_err(|e| Refusal::InvalidHub {
            hub: ctx.hub.to_string(),
            reason: format!("{e:#}"),
        })?;
    if sim.main.as_deref() != Some(config.as_str()) || !sim.strays.is_empty() {
        prepare.push(Action::Pin {
            component,
            minor: want.minor,
            path: component.config_path(),
            config: config.clone(),
            previous: sim.main.take(),
            replaces: std::mem::take(&mut sim.strays),
        });
        sim.main = Some(config);
    }
    if !sim.staged.as_ref().is_some_and(|s| s.reaches(want)) {
        prepare.push(Action::Stage {
            component,
            minor: want.minor,
            expect: want.version.clone(),
        });
        sim.staged = Some(want.clone());
    }
    Ok(match (&sim.running, &sim.staged) {
        (Some(running), Some(staged)) => !running.reaches(want) || staged.newer_patch_than(running),
        _ => true,
    })
}

/// An `Uncordon` immediately followed by a `Drain` of the same node (a node
/// left cordoned whose next hop starts by draining it) is dropped: the node
/// stays cordoned and the drain still runs.
fn drop_redundant_uncordons(hops: &mut [Hop]) {
    let flat: Vec<(usize, Step)> = hops
        .iter_mut()
        .enumerate()
        .flat_map(|(i, h)| {
            std::mem::take(&mut h.steps)
                .into_iter()
                .map(move |s| (i, s))
        })
        .collect();
    for (k, (hop, step)) in flat.iter().enumerate() {
        let redundant = step.action == Action::Uncordon
            && flat
                .get(k + 1)
                .is_some_and(|(_, next)| next.action == Action::Drain && next.node == step.node);
        if !redundant {
            hops[*hop].steps.push(step.clone());
        }
    }
}

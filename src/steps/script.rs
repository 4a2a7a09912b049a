//! The one description of a run: the list of tasks `apply` (or `reboot`)
//! carries out, in order, built once from the plan and the settings. The
//! run executes it task by task ([`super::execute`]) and `--dry-run` is
//! the same interpreter over a dry world: the same list, so what the dry run shows
//! is what the run does — the last look before a reboot, the readiness wait
//! before kubeadm restarts an API server, the etcd snapshot, the holds
//! (soak, window, alert gate) and the gates included. As k0sctl's phase
//! manager does (`phase/manager.go`: each phase either runs or prints its
//! `DryMsg`), every task has one home for what it runs and what it shows.
//!
//! The run journals each task as it starts (`task` events, with the same
//! title the dry run prints), so a test can hold the two side by side.

use crate::inventory::{Inventory, Role};
use crate::plan::{Action, Hop, HopKind, MaxUnavailable, PhaseKind, Plan};
use crate::version::{Minor, Version};

/// One task. Tasks of a hop point into the plan by index (`hop`, `phase`,
/// `step`), so the plan stays the one source of what each step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Task {
    /// A hop begins; with a maintenance window, only if its first node
    /// could still be done in it.
    HopStart { hop: usize },
    /// The checks before a hop (the hub, deprecated APIs, budgets,
    /// certificates); the first hop's are skipped when apply judged them
    /// on the live fleet moments ago.
    Checks { hop: usize },
    /// The hop's image on the nodes that had it before this run: checked
    /// against the plan's sha256 before anything of the hop runs from it.
    PresentImages { hop: usize, nodes: Vec<String> },
    /// A phase begins.
    Phase { hop: usize, phase: usize },
    /// Every control-plane Node Ready and `/readyz` ok: kubeadm's own
    /// preflight wants it, and `node`'s kubeadm restarts an API server.
    ControlPlanesReady { node: String },
    /// The etcd snapshot before `upgrade apply`, copied to the laptop.
    EtcdSnapshot { node: String, minor: Minor },
    /// One step of the plan, alone.
    Step {
        hop: usize,
        phase: usize,
        step: usize,
        /// The node's last step of the hop: its new state is recorded after it.
        finishes: bool,
    },
    /// A phase whose nodes work in parallel (bounded by `--parallel`).
    Parallel { hop: usize, phase: usize },
    /// The last look at what a node's new kubelet will read, before its reboot.
    LastLook { hop: usize, nodes: Vec<String> },
    /// Holds, gates, drain, reboot, wait, uncordon: one control plane, or
    /// workers of one zone up to `--max-unavailable`.
    Roll {
        nodes: Vec<String>,
        minor: Minor,
        /// The version they must boot; `None`: whatever patch of `minor`
        /// is staged (a reboot without a hop, or an unread hub).
        expect: Option<Version>,
        /// Whose last step of the hop this is.
        finishes: Vec<String>,
        /// Back to an older kubelet (`fleetctl rollback`): a control plane's
        /// static pods stay at the cluster's version, ahead of it.
        rollback: bool,
    },
    /// The hop's end state: every kubelet at its version, kubeadm-config at
    /// its minor, no kube-proxy.
    Verify { hop: usize },
    /// Every node of the hop is through.
    HopDone { hop: usize },
    /// After a hop: watch the fleet for `--soak`, then the gates again.
    Soak { hop: usize },
    /// A rollback's kept images on `node` checked against the hub's
    /// `SHA256SUMS` before its first step (`super::kept_images`).
    KeptImages { hop: usize, node: String },
}

/// What shapes the list beyond the plan: known before any node is touched.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub max_unavailable: MaxUnavailable,
    /// `--soak` is set: a hold after each hop.
    pub soak: bool,
    /// An etcd snapshot before each `upgrade apply` (not `--skip-etcd-snapshot`).
    pub etcd_snapshot: bool,
}

/// The tasks of `plan`'s hops, in the order they run.
pub fn of_plan(plan: &Plan, inv: &Inventory, shape: Shape) -> Vec<Task> {
    let mut tasks = Vec::new();
    for (h, hop) in plan.hops.iter().enumerate() {
        tasks.push(Task::HopStart { hop: h });
        tasks.push(Task::Checks { hop: h });
        let present = super::download::present_images(hop);
        if !present.is_empty() {
            tasks.push(Task::PresentImages {
                hop: h,
                nodes: present,
            });
        }
        let last = last_steps(hop);
        let mut verified = false;
        for (p, phase) in hop.phases.iter().enumerate() {
            if phase.kind == PhaseKind::Cleanup {
                tasks.push(Task::Verify { hop: h });
                verified = true;
            }
            tasks.push(Task::Phase { hop: h, phase: p });
            if phase.kind.parallel() {
                tasks.push(Task::Parallel { hop: h, phase: p });
                continue;
            }
            if phase.kind == PhaseKind::WorkerReboots {
                for batch in batches_of(inv, phase, shape.max_unavailable) {
                    tasks.push(Task::LastLook {
                        hop: h,
                        nodes: batch.clone(),
                    });
                    tasks.push(Task::Roll {
                        nodes: batch.clone(),
                        minor: hop.minor,
                        expect: hop.version.clone(),
                        finishes: batch,
                        rollback: false,
                    });
                }
                continue;
            }
            for (i, step) in phase.steps.iter().enumerate() {
                let node = &step.node;
                let first_of_node = i == 0 || phase.steps[i - 1].node != *node;
                if phase.kind == PhaseKind::ControlPlaneReboots && first_of_node {
                    // Before its pin and stage: a refused control plane is
                    // left unstaged, not armed for a power cut.
                    tasks.push(Task::LastLook {
                        hop: h,
                        nodes: vec![node.clone()],
                    });
                }
                let finishes = last.get(node) == Some(&(p, i));
                let control_plane = inv.node(node).is_some_and(|n| n.role == Role::ControlPlane);
                match &step.action {
                    Action::Roll => {
                        tasks.push(Task::Roll {
                            nodes: vec![node.clone()],
                            minor: hop.minor,
                            expect: hop.version.clone(),
                            finishes: if finishes { vec![node.clone()] } else { vec![] },
                            rollback: false,
                        });
                        continue;
                    }
                    Action::UpgradeApply { minor, .. } => {
                        tasks.push(Task::ControlPlanesReady { node: node.clone() });
                        if shape.etcd_snapshot {
                            tasks.push(Task::EtcdSnapshot {
                                node: node.clone(),
                                minor: *minor,
                            });
                        }
                    }
                    Action::UpgradeNode { .. } if control_plane => {
                        tasks.push(Task::ControlPlanesReady { node: node.clone() });
                    }
                    _ => {}
                }
                tasks.push(Task::Step {
                    hop: h,
                    phase: p,
                    step: i,
                    finishes,
                });
            }
        }
        if !verified {
            tasks.push(Task::Verify { hop: h });
        }
        tasks.push(Task::HopDone { hop: h });
        if shape.soak {
            tasks.push(Task::Soak { hop: h });
        }
    }
    tasks
}

/// `fleetctl reboot`: one roll per batch, each onto what it has staged.
pub fn of_reboots(batches: &[(Vec<String>, Minor)]) -> Vec<Task> {
    batches
        .iter()
        .map(|(nodes, minor)| Task::Roll {
            nodes: nodes.clone(),
            minor: *minor,
            expect: None,
            finishes: nodes.clone(),
            rollback: false,
        })
        .collect()
}

/// `fleetctl rollback`: each hop of `plan` takes one node back (see
/// [`crate::plan::rollbacks`]): its pinned config, its symlink, its roll;
/// one node at a time.
pub fn of_rollbacks(plan: &Plan) -> Vec<Task> {
    let mut tasks = Vec::new();
    for (h, hop) in plan.hops.iter().enumerate() {
        // Before anything of the node moves: what it will boot is checked.
        let mut nodes: Vec<&str> = hop.steps().map(|s| s.node.as_str()).collect();
        nodes.dedup();
        for node in nodes {
            tasks.push(Task::KeptImages {
                hop: h,
                node: node.to_string(),
            });
        }
        for (p, phase) in hop.phases.iter().enumerate() {
            for (i, step) in phase.steps.iter().enumerate() {
                if step.action == Action::Roll {
                    tasks.push(Task::Roll {
                        nodes: vec![step.node.clone()],
                        minor: hop.minor,
                        expect: hop.version.clone(),
                        finishes: vec![step.node.clone()],
                        rollback: true,
                    });
                } else {
                    tasks.push(Task::Step {
                        hop: h,
                        phase: p,
                        step: i,
                        finishes: false,
                    });
                }
            }
        }
    }
    tasks
}

impl Task {
    /// What the task does, as the dry run heads it and the journal records
    /// its start.
    pub fn title(&self, plan: &Plan) -> String {
        match self {
            Task::HopStart { hop } => {
                let what = match plan.hops[*hop].kind {
                    HopKind::Upgrade => "upgrade to",
                    HopKind::Finish => "finish",
                    HopKind::Converge => "converge on",
                };
                format!(
                    "hop {}/{}: {what} {}",
                    hop + 1,
                    plan.hops.len(),
                    hop_version(&plan.hops[*hop])
                )
            }
            Task::Checks { hop } => {
                format!(
                    "the checks before the hop to {}",
                    hop_version(&plan.hops[*hop])
                )
            }
            Task::PresentImages { nodes, .. } => format!(
                "{}: check the image downloaded before this run",
                nodes.join(", ")
            ),
            Task::Phase { hop, phase } => {
                let kind = plan.hops[*hop].phases[*phase].kind;
                let how = if kind.parallel() {
                    "nodes in parallel"
                } else {
                    "one step at a time"
                };
                format!("phase: {} ({how})", kind.title())
            }
            Task::ControlPlanesReady { node } => {
                format!("{node}: wait until every control plane is Ready, before its kubeadm")
            }
            Task::EtcdSnapshot { node, minor } => {
                format!("{node}: etcd snapshot before the upgrade to {minor}, copied here")
            }
            Task::Step {
                hop, phase, step, ..
            } => plan.hops[*hop].phases[*phase].steps[*step].describe(),
            Task::Parallel { hop, phase } => {
                let phase = &plan.hops[*hop].phases[*phase];
                format!("{}: {}", nodes_of(phase).join(", "), phase.kind.title())
            }
            Task::LastLook { nodes, .. } => format!(
                "{}: last look at what the new kubelet will read",
                nodes.join(", ")
            ),
            Task::Roll {
                nodes,
                rollback: true,
                expect,
                minor,
                ..
            } => format!(
                "{}: drain, reboot back into {}, wait, uncordon",
                nodes.join(", "),
                expect
                    .as_ref()
                    .map_or_else(|| minor.to_string(), Version::to_string)
            ),
            Task::Roll { nodes, .. } => {
                format!("{}: drain, reboot, wait, uncordon", nodes.join(", "))
            }
            Task::Verify { hop } => {
                format!("verify: every kubelet at {}", hop_version(&plan.hops[*hop]))
            }
            Task::HopDone { hop } => format!(
                "hop {}/{} done: every node runs {}",
                hop + 1,
                plan.hops.len(),
                hop_version(&plan.hops[*hop])
            ),
            Task::Soak { hop } => format!(
                "soak after the hop to {}, then the gates",
                hop_version(&plan.hops[*hop])
            ),
            Task::KeptImages { node, .. } => format!(
                "{node}: check the kept images it goes back to against the hub's SHA256SUMS"
            ),
        }
    }

    /// The node the task works on, when there is one.
    pub fn node(&self) -> Option<&str> {
        match self {
            Task::ControlPlanesReady { node }
            | Task::EtcdSnapshot { node, .. }
            | Task::KeptImages { node, .. } => Some(node),
            Task::Roll { nodes, .. } | Task::LastLook { nodes, .. } if nodes.len() == 1 => {
                Some(&nodes[0])
            }
            _ => None,
        }
    }
}

/// The hop's patch, or its minor when the hub's list was unreadable.
pub fn hop_version(hop: &Hop) -> String {
    hop.version
        .as_ref()
        .map_or_else(|| hop.minor.to_string(), Version::to_string)
}

/// Where a step is in its hop: (phase, step) indexes.
pub type At = (usize, usize);

/// Each node's last step of the hop before the clean-up: after it, the
/// node is done and its new state becomes the plan's baseline.
pub fn last_steps(hop: &Hop) -> std::collections::BTreeMap<String, At> {
    let mut last = std::collections::BTreeMap::new();
    for (p, phase) in hop.phases.iter().enumerate() {
        if phase.kind == PhaseKind::Cleanup {
            continue;
        }
        for (i, step) in phase.steps.iter().enumerate() {
            last.insert(step.node.clone(), (p, i));
        }
    }
    last
}

/// The nodes of a phase, in the order of their first step.
pub fn nodes_of(phase: &crate::plan::Phase) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for s in &phase.steps {
        if !order.contains(&s.node) {
            order.push(s.node.clone());
        }
    }
    order
}

/// The workers' rolls in batches of `--max-unavailable`, each within one
/// zone (see [`crate::plan::batches`]).
pub fn batches_of(
    inv: &Inventory,
    phase: &crate::plan::Phase,
    max: MaxUnavailable,
) -> Vec<Vec<String>> {
    let workers = inv.nodes.iter().filter(|n| n.role == Role::Worker).count();
    let nodes: Vec<(&str, Option<&str>)> = phase
        .steps
        .iter()
        .map(|s| {
            let zone = inv.node(&s.node).and_then(|n| n.zone.as_deref());
            (s.node.as_str(), zone)
        })
        .collect();
    crate::plan::batches(&nodes, max.of(workers))
        .into_iter()
        .map(|b| b.into_iter().map(String::from).collect())
        .collect()
}

#[cfg(test)]
pub(in crate::steps) mod tests;

//! Which hops the workers take. Control planes take every minor (kubeadm
//! upgrades a control plane one minor per `upgrade apply`), but a worker's
//! kubelet may run up to three minors older than the API server: the
//! version skew policy (https://kubernetes.io/releases/version-skew-policy/,
//! "kubelet must not be newer than kube-apiserver, and may be up to three
//! minor versions older", since v1.28). So with `--workers jump` (the
//! default) a worker keeps its kubelet while the control planes take each
//! minor, then runs the *target* image's `kubeadm upgrade node` and reboots
//! once. `--workers every-hop` is the one-minor-per-reboot order.
//!
//! A worker stops at an intermediate minor only when jumping would break
//! something, and the plan says why:
//! - the skew policy: at no moment may its kubelet be more than three
//!   minors behind the API server;
//! - a kubelet flag in its kubeadm-flags.env that a minor on the way
//!   removed and only an intermediate kubeadm's upgrade strips
//!   (`crate::checks::REMOVED_KUBELET_FLAGS`): `--pod-infra-container-image`
//!   is stripped by kubeadm v1.35 alone (kubernetes/kubernetes#133778),
//!   v1.36 dropped that cleanup (kubernetes/kubernetes#135807, closing
//!   kubernetes/kubeadm#3108 and #3236), so a v1.34 worker holding it takes
//!   the v1.35 hop rather than boot a kubelet that refuses it.
//!
//! Pure, like the rest of the planner.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::checks::{KUBEADM_FLAGS_ENV, flag_removed_by, kubelet_flags};
use crate::inventory::Role;
use crate::version::Minor;

use super::state::FleetState;

/// How many minors a kubelet may trail kube-apiserver (skew policy, since v1.28).
/// Here, under the workers' pacing that keeps to it, so that the rules (which
/// read the model, which holds a [`WorkerPlan`]) import it and not the reverse.
pub(super) const KUBELET_MAX_BEHIND: u64 = 3;

/// How workers take a plan of several hops.
/// On the command line as `--workers` (its clap conversion: `crate::cli`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerStrategy {
    /// Control planes take every hop; each worker runs the target's
    /// `kubeadm upgrade node` and reboots once, after the last control plane.
    #[default]
    Jump,
    /// Every node takes every hop: one reboot per minor.
    EveryHop,
}

impl fmt::Display for WorkerStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WorkerStrategy::Jump => "jump",
            WorkerStrategy::EveryHop => "every-hop",
        })
    }
}

/// What the plan does with the workers, and what it costs in reboots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct WorkerPlan {
    /// What was asked for (`--workers`); apply follows the saved one.
    pub strategy: WorkerStrategy,
    /// Workers that take an intermediate hop too, and why.
    #[serde(default)]
    pub stops: Vec<WorkerStop>,
    /// Per hop, the nodes still on an older minor when it is done (workers
    /// that jump later): the hop's verification leaves their kubelet alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub behind: Vec<Behind>,
    /// Reboots of the whole plan (every node).
    pub reboots: usize,
    /// Reboots the same fleet would take with `--workers every-hop`.
    pub every_hop_reboots: usize,
}

impl Default for WorkerPlan {
    /// A plan saved before the strategy existed was planned hop by hop.
    fn default() -> WorkerPlan {
        WorkerPlan {
            strategy: WorkerStrategy::EveryHop,
            stops: Vec::new(),
            behind: Vec::new(),
            reboots: 0,
            every_hop_reboots: 0,
        }
    }
}

impl WorkerPlan {
    /// Reboots saved against `--workers every-hop`.
    pub fn saved(&self) -> usize {
        self.every_hop_reboots.saturating_sub(self.reboots)
    }

    /// The hop to `minor` leaves `node` on an older kubelet on purpose.
    pub fn leaves_behind(&self, minor: Minor, node: &str) -> bool {
        self.behind
            .iter()
            .any(|b| b.minor == minor && b.nodes.iter().any(|n| n == node))
    }
}

/// The nodes a hop leaves on an older minor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Behind {
    pub minor: Minor,
    pub nodes: Vec<String>,
}

/// A worker that does not jump straight to the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct WorkerStop {
    pub node: String,
    /// The intermediate minors it takes (the target is always taken).
    pub minors: Vec<Minor>,
    pub reason: String,
}

/// Per worker, the minors it is upgraded to; a worker absent from the map
/// takes every hop. Empty for [`WorkerStrategy::EveryHop`].
pub(super) type Stops = BTreeMap<String, BTreeSet<Minor>>;

/// Where each worker stops on the way from the cluster's minor through
/// `hops` (every minor the plan visits, in order, the target last).
pub(super) fn stops(
    state: &FleetState,
    hops: &[Minor],
    strategy: WorkerStrategy,
) -> (Stops, Vec<WorkerStop>) {
    let mut out = Stops::new();
    let mut why = Vec::new();
    let Some(&target) = hops.last() else {
        return (out, why);
    };
    if strategy == WorkerStrategy::EveryHop {
        return (out, why);
    }
    for node in state.nodes.iter().filter(|n| n.role == Role::Worker) {
        let Some(running) = node.facts.kubernetes.running.as_ref().map(|v| v.minor()) else {
            why.push(WorkerStop {
                node: node.name.clone(),
                minors: hops[..hops.len() - 1].to_vec(),
                reason: "its kubelet version is unknown, so it takes every hop".into(),
            });
            continue;
        };
        let mut at = BTreeSet::from([target]);
        let mut reasons = Vec::new();
        for (flag, strip) in flag_stops(node, running, hops) {
            reasons.push(format!(
                "{flag} is in its {KUBEADM_FLAGS_ENV}: the {target} kubelet refuses it and only \
                 kubeadm {strip}'s upgrade removes it"
            ));
            at.insert(strip);
        }
        // The skew policy, stop by stop: while the API server climbs to
        // the next stop, this kubelet stays where the previous one left it.
        let mut cur = running;
        for s in at.clone() {
            while s.minor > cur.minor + KUBELET_MAX_BEHIND {
                let forced = Minor::new(cur.major, cur.minor + KUBELET_MAX_BEHIND);
                reasons.push(format!(
                    "kubelet {cur} would be more than {KUBELET_MAX_BEHIND} minors behind the {} API \
                     server (version skew policy)",
                    forced.next()
                ));
                at.insert(forced);
                cur = forced;
            }
            cur = s;
        }
        // A stop below the plan's first hop cannot be taken; the checks
        // say what is wrong then.
        at.retain(|m| hops.contains(m));
        let intermediate: Vec<Minor> = at.iter().copied().filter(|&m| m != target).collect();
        if !intermediate.is_empty() {
            why.push(WorkerStop {
                node: node.name.clone(),
                minors: intermediate,
                reason: reasons.join("; "),
            });
        }
        out.insert(node.name.clone(), at);
    }
    (out, why)
}

/// The removed flags in the node's kubeadm-flags.env that the target's
/// kubeadm leaves in place while an intermediate one strips them: (flag,
/// the latest minor on the way whose kubeadm strips it). A flag nothing on
/// the way strips gets no stop: the kubelet-flags check blocks the plan.
fn flag_stops(
    node: &super::state::FleetNode,
    running: Minor,
    hops: &[Minor],
) -> Vec<(&'static str, Minor)> {
    let Some(&target) = hops.last() else {
        return Vec::new();
    };
    let Some(content) = node.facts.kubelet_files.get(KUBEADM_FLAGS_ENV) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for found in kubelet_flags(KUBEADM_FLAGS_ENV, content) {
        if !found.origin.kubeadm_owned() {
            continue;
        }
        let Some(removed) = flag_removed_by(&found.flag, target) else {
            continue;
        };
        if removed.stripped_by(target) {
            continue;
        }
        let strip = hops
            .iter()
            .rev()
            .copied()
            .find(|&m| m > running && m < target && removed.stripped_by(m));
        if let Some(strip) = strip
            && !out.iter().any(|(f, _)| *f == removed.flag)
        {
            out.push((removed.flag, strip));
        }
    }
    out
}

#[cfg(test)]
mod tests;

//! A fingerprint of the fleet state a plan was computed from. A plan is only
//! right for the state it saw: if a node rebooted, staged something else or
//! had its config edited since, `apply` must refuse the plan and say what
//! changed rather than execute steps computed for another fleet.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::version::Version;

use super::state::{FleetNode, FleetState};

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Fingerprint {
    /// kubeadm-config's `kubernetesVersion`.
    pub cluster_version: Option<Version>,
    pub nodes: BTreeMap<String, NodeFingerprint>,
    /// Nodes the executor is changing right now: a rerun after a failure
    /// must not call the plan stale because of its own half-done work.
    #[serde(default)]
    pub in_progress: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct NodeFingerprint {
    pub boot_id: String,
    pub kubernetes_running: Option<Version>,
    pub kubernetes_staged: Option<Version>,
    /// sha256 of every sysupdate config (kubernetes and containerd), by path.
    pub configs: BTreeMap<String, String>,
}

impl NodeFingerprint {
    pub fn of(node: &FleetNode) -> NodeFingerprint {
        let facts = &node.facts;
        let configs = facts
            .kubernetes
            .configs
            .iter()
            .chain(facts.containerd.iter().flat_map(|c| c.configs.iter()))
            .map(|c| (c.path.clone(), c.sha256.clone()))
            .collect();
        NodeFingerprint {
            boot_id: facts.boot_id.clone(),
            kubernetes_running: facts.kubernetes.running.clone(),
            kubernetes_staged: facts.kubernetes.staged.clone(),
            configs,
        }
    }
}

impl Fingerprint {
    pub fn of(state: &FleetState) -> Fingerprint {
        Fingerprint {
            cluster_version: state.cluster.version.clone(),
            nodes: state
                .nodes
                .iter()
                .map(|n| (n.name.clone(), NodeFingerprint::of(n)))
                .collect(),
            in_progress: BTreeSet::new(),
        }
    }

    /// Marks a node the executor is about to change; [`Fingerprint::diff`]
    /// then ignores it.
    pub fn mark_in_progress(&mut self, node: &str) {
        self.in_progress.insert(node.to_string());
    }

    pub fn clear_in_progress(&mut self, node: &str) {
        self.in_progress.remove(node);
    }

    /// What changed between this (planned) fingerprint and `now`, one line
    /// per change, for apply's stale-plan refusal. Empty: the plan still holds.
    /// Nodes in progress are skipped, and so is the cluster version while any
    /// node is (its `upgrade apply` is what moves it).
    pub fn diff(&self, now: &Fingerprint) -> Vec<String> {
        let mut lines = Vec::new();
        if self.in_progress.is_empty() && self.cluster_version != now.cluster_version {
            lines.push(format!(
                "cluster: kubeadm-config says {}, was {}",
                opt(&now.cluster_version),
                opt(&self.cluster_version)
            ));
        }
        let names: BTreeSet<&String> = self.nodes.keys().chain(now.nodes.keys()).collect();
        for name in names {
            if self.in_progress.contains(name.as_str()) {
                continue;
            }
            match (self.nodes.get(name), now.nodes.get(name)) {
                (Some(was), Some(is)) => node_diff(name, was, is, &mut lines),
                (Some(_), None) => lines.push(format!("{name}: in the plan, not in the fleet now")),
                (None, Some(_)) => lines.push(format!("{name}: in the fleet now, not in the plan")),
                (None, None) => {}
            }
        }
        lines
    }
}

fn opt(v: &Option<Version>) -> String {
    v.as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "nothing".to_string())
}

fn node_diff(name: &str, was: &NodeFingerprint, is: &NodeFingerprint, lines: &mut Vec<String>) {
    if was.boot_id != is.boot_id {
        lines.push(format!("{name}: rebooted since the plan (boot id changed)"));
    }
    if was.kubernetes_running != is.kubernetes_running {
        lines.push(format!(
            "{name}: runs kubernetes {}, was {}",
            opt(&is.kubernetes_running),
            opt(&was.kubernetes_running)
        ));
    }
    if was.kubernetes_staged != is.kubernetes_staged {
        lines.push(format!(
            "{name}: staged {}, was {}",
            opt(&is.kubernetes_staged),
            opt(&was.kubernetes_staged)
        ));
    }
    let paths: BTreeSet<&String> = was.configs.keys().chain(is.configs.keys()).collect();
    for path in paths {
        match (was.configs.get(path), is.configs.get(path)) {
            (Some(a), Some(b)) if a != b => lines.push(format!("{name}: {path} changed")),
            (Some(_), None) => lines.push(format!("{name}: {path} was removed")),
            (None, Some(_)) => lines.push(format!("{name}: {path} appeared")),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(boot: &str, running: &str, staged: &str) -> NodeFingerprint {
        NodeFingerprint {
            boot_id: boot.into(),
            kubernetes_running: Some(running.parse().unwrap()),
            kubernetes_staged: Some(staged.parse().unwrap()),
            configs: BTreeMap::from([(
                "/etc/sysupdate.kubernetes.d/kubernetes.conf".to_string(),
                "aa".to_string(),
            )]),
        }
    }

    fn fleet() -> Fingerprint {
        Fingerprint {
            cluster_version: Some("v1.34.2".parse().unwrap()),
            nodes: BTreeMap::from([
                ("cp-1".to_string(), node("b1", "v1.34.2", "v1.35.1")),
                ("w-1".to_string(), node("b2", "v1.34.2", "v1.34.2")),
            ]),
            in_progress: BTreeSet::new(),
        }
    }

    #[test]
    fn same_state_has_no_diff() {
        assert!(fleet().diff(&fleet()).is_empty());
    }

    #[test]
    fn names_every_change_per_node() {
        let planned = fleet();
        let mut now = fleet();
        now.cluster_version = Some("v1.35.1".parse().unwrap());
        let cp = now.nodes.get_mut("cp-1").unwrap();
        cp.kubernetes_staged = Some("v1.35.2".parse().unwrap());
        let w = now.nodes.get_mut("w-1").unwrap();
        w.boot_id = "b9".into();
        w.configs.insert(
            "/etc/sysupdate.kubernetes.d/kubernetes.conf".into(),
            "bb".into(),
        );
        w.configs.insert(
            "/etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf".into(),
            "cc".into(),
        );
        now.nodes
            .insert("w-2".into(), node("b3", "v1.34.2", "v1.34.2"));
        assert_eq!(
            planned.diff(&now),
            vec![
                "cluster: kubeadm-config says v1.35.1, was v1.34.2",
                "cp-1: staged v1.35.2, was v1.35.1",
                "w-1: rebooted since the plan (boot id changed)",
                "w-1: /etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf appeared",
                "w-1: /etc/sysupdate.kubernetes.d/kubernetes.conf changed",
                "w-2: in the fleet now, not in the plan",
            ]
        );
    }

    #[test]
    fn nodes_in_progress_are_not_stale() {
        let mut planned = fleet();
        let mut now = fleet();
        let cp = now.nodes.get_mut("cp-1").unwrap();
        cp.boot_id = "b7".into();
        cp.kubernetes_running = Some("v1.35.1".parse().unwrap());
        now.cluster_version = Some("v1.35.1".parse().unwrap());
        assert_eq!(planned.diff(&now).len(), 3);
        planned.mark_in_progress("cp-1");
        assert!(planned.diff(&now).is_empty());
        // Another node's change still counts.
        now.nodes.get_mut("w-1").unwrap().boot_id = "b8".into();
        assert_eq!(
            planned.diff(&now),
            vec!["w-1: rebooted since the plan (boot id changed)"]
        );
        planned.clear_in_progress("cp-1");
        assert_eq!(planned.diff(&now).len(), 4);
    }
}

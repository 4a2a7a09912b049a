//! The truth an operator reads from `fleetctl status`: for each node what it
//! runs versus what it has staged, what its sysupdate config tracks, and
//! whether a reboot is pending. Built from gathered facts by pure functions;
//! the JSON shape is documented in docs/status.md and kept stable.

use std::collections::BTreeMap;

use serde::Serialize;

pub mod storage;

use crate::gather::Gathered;
use crate::inventory::Role;
use crate::node::{ClusterFacts, ClusterNode, Extension, NodeFacts, Pin};
use crate::version::{Minor, Version};

pub const SCHEMA: &str = "fleetctl.status/v1";

#[derive(Debug, Serialize)]
pub struct StatusReport {
    pub schema: &'static str,
    pub cluster: ClusterReport,
    pub summary: Summary,
    pub nodes: Vec<NodeStatus>,
    /// Each CephCluster (`storage`); absent without Ceph.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceph: Option<Vec<storage::CephReport>>,
    /// With kubeadm's stacked etcd (`status` only): each member.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd: Option<etcd_table::EtcdReport>,
    /// Kured's DaemonSet and its blockers active now (`status` only);
    /// absent without Kured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kured: Option<kured_blockers::KuredReport>,
}

#[derive(Debug, Serialize)]
pub struct ClusterReport {
    /// `kubernetesVersion` from kubeadm-config.
    pub version: Option<Version>,
    pub kube_proxy: Option<bool>,
    /// The control-plane node that answered.
    pub answered_by: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub nodes: usize,
    pub answered: usize,
    pub reboot_pending: usize,
    pub floating: usize,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub role: Role,
    pub address: String,
    pub reachable: bool,
    pub error: Option<String>,
    /// From the API server; `None` when it could not be asked or does not know the node.
    pub ready: Option<bool>,
    pub cordoned: Option<bool>,
    /// Summary of the kubernetes sysupdate configs: the one thing to check at a glance.
    pub pin: PinSummary,
    /// The next boot changes something (a staged sysext or Flatcar update),
    /// or `/run/reboot-required` asks for one: see `reboot_reasons`.
    pub reboot_pending: bool,
    /// Why, one entry per reason: `kubernetes v1.34.6`, `containerd v2.1.5`,
    /// `Flatcar 4081.3.0`, `/run/reboot-required`.
    pub reboot_reasons: Vec<String>,
    /// The kubernetes version the node runs when its image is gone from
    /// `/opt/extensions/kubernetes/` (deleted while merged); `None` otherwise.
    pub running_image_gone: Option<Version>,
    /// The kept image `fleetctl rollback` would take it back to.
    pub rollback_to: Option<Version>,
    pub facts: Option<NodeFacts>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PinSummary {
    /// Every config pins the same minor.
    Pinned { minor: Minor },
    /// At least one config floats: it will stage whatever upstream publishes.
    Floating,
    /// Configs pin different minors (e.g. a leftover kubernetes-v1.32.conf).
    Mixed { minors: Vec<Minor> },
    /// No config at all: sysupdate will not update this node.
    None,
    /// A config fleetctl cannot read a pin from.
    Unknown,
    /// The node did not answer.
    Unreachable,
}

pub fn pin_summary(ext: &Extension) -> PinSummary {
    if ext.configs.is_empty() {
        return PinSummary::None;
    }
    if ext.configs.iter().any(|c| c.pin == Pin::Floating) {
        return PinSummary::Floating;
    }
    let mut minors: Vec<Minor> = ext
        .configs
        .iter()
        .filter_map(|c| match c.pin {
            Pin::Pinned(m) => Some(m),
            _ => None,
        })
        .collect();
    minors.sort();
    minors.dedup();
    match minors.as_slice() {
        [] => PinSummary::Unknown,
        [m] if ext.configs.iter().all(|c| matches!(c.pin, Pin::Pinned(_))) => {
            PinSummary::Pinned { minor: *m }
        }
        [_] => PinSummary::Unknown,
        _ => PinSummary::Mixed { minors },
    }
}

pub use crate::node::reboot_pending;

/// One node's input to the report.
pub struct NodeInput<'a> {
    pub name: &'a str,
    pub role: Role,
    pub address: &'a str,
    pub facts: Result<&'a NodeFacts, String>,
}

pub fn build(
    nodes: Vec<NodeInput<'_>>,
    cluster: Result<(&str, &ClusterFacts), String>,
) -> StatusReport {
    let api_node = |name: &str| -> Option<&ClusterNode> {
        cluster
            .as_ref()
            .ok()
            .and_then(|(_, c)| c.nodes.iter().find(|n| n.name == name))
    };
    let statuses: Vec<NodeStatus> = nodes
        .into_iter()
        .map(|n| {
            let api = api_node(n.name);
            match n.facts {
                Ok(f) => NodeStatus {
                    name: n.name.to_string(),
                    role: n.role,
                    address: n.address.to_string(),
                    reachable: true,
                    error: None,
                    ready: api.map(|a| a.ready),
                    cordoned: api.map(|a| a.cordoned),
                    pin: pin_summary(&f.kubernetes),
                    reboot_pending: !f.reboot_reasons().is_empty(),
                    reboot_reasons: f.reboot_reasons(),
                    running_image_gone: crate::node::running_image_gone(&f.kubernetes).cloned(),
                    rollback_to: crate::node::rollback_image(&f.kubernetes).cloned(),
                    facts: Some(f.clone()),
                },
                Err(e) => NodeStatus {
                    name: n.name.to_string(),
                    role: n.role,
                    address: n.address.to_string(),
                    reachable: false,
                    error: Some(e),
                    ready: api.map(|a| a.ready),
                    cordoned: api.map(|a| a.cordoned),
                    pin: PinSummary::Unreachable,
                    reboot_pending: false,
                    reboot_reasons: Vec::new(),
                    running_image_gone: None,
                    rollback_to: None,
                    facts: None,
                },
            }
        })
        .collect();

    let mut warnings = Vec::new();
    let cluster_report = match &cluster {
        Ok((by, c)) => {
            if c.kube_proxy {
                warnings.push(
                    "a kube-proxy DaemonSet exists beside Cilium: an upgrade ran without \
                     --skip-phases addon/kube-proxy; delete it (kubectl -n kube-system delete ds kube-proxy)"
                        .to_string(),
                );
            }
            ClusterReport {
                version: c.version.clone(),
                kube_proxy: Some(c.kube_proxy),
                answered_by: Some(by.to_string()),
                error: None,
            }
        }
        Err(e) => {
            warnings.push(format!("the API server could not be asked: {e}"));
            ClusterReport {
                version: None,
                kube_proxy: None,
                answered_by: None,
                error: Some(e.clone()),
            }
        }
    };
    let mut minors: Vec<Minor> = statuses
        .iter()
        .filter_map(|s| {
            s.facts
                .as_ref()?
                .kubernetes
                .running
                .as_ref()
                .map(Version::minor)
        })
        .collect();
    minors.sort();
    minors.dedup();
    if minors.len() > 1 {
        let list: Vec<String> = minors.iter().map(Minor::to_string).collect();
        warnings.push(format!(
            "kubelets run mixed minors ({}): an upgrade is unfinished",
            list.join(", ")
        ));
    }
    let mut plain_http: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &statuses {
        let Some(f) = &s.facts else { continue };
        let configs = f
            .kubernetes
            .configs
            .iter()
            .chain(f.containerd.iter().flat_map(|c| c.configs.iter()));
        for c in configs {
            for hub in c
                .content
                .lines()
                .filter_map(|l| l.trim().strip_prefix("Path="))
            {
                if hub.starts_with("http://") {
                    let nodes = plain_http.entry(hub.to_string()).or_default();
                    if !nodes.contains(&s.name) {
                        nodes.push(s.name.clone());
                    }
                }
            }
        }
    }
    for (hub, nodes) in plain_http {
        warnings.push(format!(
            "{}: sysupdate fetches from {hub}, plain HTTP: images travel unprotected and the \
             bakery's configs say Verify=false; use an https:// hub",
            nodes.join(", ")
        ));
    }
    for s in &statuses {
        if let Some(v) = &s.running_image_gone {
            warnings.push(running_image_gone_warning(&s.name, v));
        }
    }
    for s in &statuses {
        match &s.pin {
            PinSummary::Floating => warnings.push(format!(
                "{}: its sysupdate config floats; it will stage the newest Kubernetes upstream publishes, \
                 even a minor kubeadm cannot upgrade to (fleetctl plan re-pins it)",
                s.name
            )),
            PinSummary::Mixed { minors } => {
                let list: Vec<String> = minors.iter().map(Minor::to_string).collect();
                warnings.push(format!(
                    "{}: several sysupdate configs pin different minors ({})",
                    s.name,
                    list.join(", ")
                ))
            }
            PinSummary::None => {
                warnings.push(format!("{}: no sysupdate config for kubernetes; it never gets patches", s.name))
            }
            _ => {}
        }
    }

    let summary = Summary {
        nodes: statuses.len(),
        answered: statuses.iter().filter(|s| s.reachable).count(),
        reboot_pending: statuses.iter().filter(|s| s.reboot_pending).count(),
        floating: statuses
            .iter()
            .filter(|s| s.pin == PinSummary::Floating)
            .count(),
        warnings,
    };
    StatusReport {
        schema: SCHEMA,
        cluster: cluster_report,
        summary,
        nodes: statuses,
        ceph: None,
        etcd: None,
        kured: None,
    }
}

/// What an operator must know about a node whose running image is gone.
pub fn running_image_gone_warning(node: &str, running: &Version) -> String {
    format!(
        "{node}: runs kubernetes {running}, but its image is gone from /opt/extensions/kubernetes/ \
         (removed while merged; systemd-sysupdate's clean-up does not spare the running image): \
         there is nothing to go back to if what is staged fails. Copy kubernetes-{running}-x86-64.raw \
         from the hub back into /opt/extensions/kubernetes/ (check it against the hub's SHA256SUMS)"
    )
}

/// Gathered facts → the report `status` prints (also the fleet's state in
/// the report after a failed run).
pub fn report(gathered: &Gathered) -> StatusReport {
    let inputs = gathered
        .nodes
        .iter()
        .map(|r| NodeInput {
            name: &r.node.name,
            role: r.node.role,
            address: &r.node.address,
            facts: r.facts.as_ref().map_err(|e| format!("{e:#}")),
        })
        .collect();
    let cluster = gathered
        .cluster
        .as_ref()
        .map(|(by, c)| (by.as_str(), c))
        .map_err(|e| format!("{e:#}"));
    build(inputs, cluster)
}

mod etcd_table;
mod status_table;
pub use etcd_table::{EtcdReport, etcd_report};
#[cfg(test)]
use status_table::reason_line;
pub use status_table::render_table;
pub mod kured_blockers;

#[cfg(test)]
mod tests;

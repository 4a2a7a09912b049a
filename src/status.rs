//! The truth an operator reads from `fleetctl status`: for each node what it
//! runs versus what it has staged, what its sysupdate config tracks, and
//! whether a reboot is pending. Built from gathered facts by pure functions;
//! the JSON shape is documented in docs/status.md and kept stable.

use std::collections::BTreeMap;

use serde::Serialize;

pub mod storage;

use crate::gather::Gathered;
use crate::inventory::Role;
use crate::node::{ClusterFacts, ClusterNode, Extension, NodeFacts, OsFacts, Pin};
use crate::ui::{self, Table};
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

fn arrow(running: Option<String>, staged: Option<String>) -> (String, bool) {
    match (running, staged) {
        (Some(r), Some(s)) if r != s => (format!("{r} → {s}"), true),
        (Some(r), _) => (r, false),
        (None, Some(s)) => (format!("? → {s}"), true),
        (None, None) => ("-".to_string(), false),
    }
}

fn kubernetes_cell(k: &Extension) -> String {
    let (text, pending) = arrow(
        k.running.as_ref().map(Version::to_string),
        k.staged.as_ref().map(Version::to_string),
    );
    let text = if pending {
        format!("{} {}", text, ui::attention("(reboot pending)"))
    } else {
        text
    };
    if crate::node::running_image_gone(k).is_some() {
        format!("{text} {}", ui::bad("(running image gone)"))
    } else {
        text
    }
}

fn os_cell(os: &OsFacts) -> String {
    let (text, pending) = arrow(Some(os.running.clone()), os.staged.clone());
    // The node's own words: escaped before they meet our colours.
    if pending {
        ui::attention(&text)
    } else {
        ui::escape::escape_controls(&text).into_owned()
    }
}

fn pin_cell(p: &PinSummary) -> String {
    match p {
        PinSummary::Pinned { minor } => minor.to_string(),
        PinSummary::Floating => ui::bad("FLOATING"),
        PinSummary::Mixed { minors } => ui::attention(
            &minors
                .iter()
                .map(Minor::to_string)
                .collect::<Vec<_>>()
                .join("+"),
        ),
        PinSummary::None => ui::attention("none"),
        PinSummary::Unknown => ui::attention("unknown"),
        PinSummary::Unreachable => "-".to_string(),
    }
}

fn state_cell(s: &NodeStatus) -> String {
    if !s.reachable {
        return ui::bad("unreachable");
    }
    let mut text = match s.ready {
        Some(true) => ui::good("Ready"),
        Some(false) => ui::bad("NotReady"),
        None => ui::dim("?"),
    };
    if s.cordoned == Some(true) {
        text.push_str(&ui::attention(",cordoned"));
    }
    text
}

/// Why `node` did not answer, naming it once: transport errors already start
/// with the node's name (`w-2: cannot connect …`, `w-1 (10.0.0.21:22): …`).
fn reason_line(node: &str, error: &str) -> String {
    // An error may quote what a node printed: escaped first, so that on
    // stdout it cannot pass for fleetctl's own colours.
    let error = &ui::escape::escape_controls(error);
    let rest = match error.strip_prefix(node) {
        Some(rest) if rest.starts_with(':') || rest.starts_with(' ') => rest.to_string(),
        _ => format!(": {error}"),
    };
    format!("{}{rest}\n", ui::bad(node))
}

pub fn render_table(r: &StatusReport) -> String {
    let mut t = Table::new(&[
        "NODE",
        "ROLE",
        "STATE",
        "KUBERNETES (running → staged)",
        "PIN",
        "ROLLBACK TO",
        "FLATCAR",
        "REBOOT",
    ]);
    for s in &r.nodes {
        let role = match s.role {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
        };
        let (k, os, reboot) = match &s.facts {
            Some(f) => (
                kubernetes_cell(&f.kubernetes),
                os_cell(&f.os),
                if f.reboot_required {
                    ui::attention("required")
                } else if s.reboot_pending {
                    // Staged, but nothing asks Kured to reboot it.
                    ui::attention("pending")
                } else {
                    "-".to_string()
                },
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        t.row(vec![
            s.name.clone(),
            role.into(),
            state_cell(s),
            k,
            pin_cell(&s.pin),
            s.rollback_to
                .as_ref()
                .map_or_else(|| "-".to_string(), Version::to_string),
            os,
            reboot,
        ]);
    }
    let mut out = t.render();
    for s in r.nodes.iter().filter(|s| !s.reachable) {
        out.push_str(&reason_line(
            &s.name,
            s.error.as_deref().unwrap_or("no answer"),
        ));
    }
    out.push('\n');
    let version = r
        .cluster
        .version
        .as_ref()
        .map_or_else(|| "unknown".to_string(), Version::to_string);
    out.push_str(&format!(
        "cluster {} · {} nodes ({} answered) · {} need a reboot · {} floating\n",
        ui::bold(&version),
        r.summary.nodes,
        r.summary.answered,
        r.summary.reboot_pending,
        r.summary.floating
    ));
    if let Some(etcd) = &r.etcd {
        out.push_str(&etcd_table::render(etcd));
    }
    for w in &r.summary.warnings {
        let w = ui::escape::escape_controls(w);
        out.push_str(&format!("{} {w}\n", ui::attention("warning:")));
    }
    if let Some(ceph) = &r.ceph {
        out.push_str(&storage::render(ceph));
    }
    if let Some(kured) = &r.kured {
        out.push_str(&kured_blockers::render(kured));
    }
    out
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
pub use etcd_table::{EtcdReport, etcd_report};
pub mod kured_blockers;

#[cfg(test)]
mod tests;

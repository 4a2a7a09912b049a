//! Every check of one hop, from what was read before it: the one place that
//! decides which nodes, files and versions each rule looks at.
//!
//! A source that could not be read is a `warn` naming the failure, never a
//! silent `pass`: the operator decides whether to go on without it.

use super::model::{Action, Hop, PhaseKind};
use crate::checks::ClusterConfigs;
use crate::checks::{Budget, Pod, check_drains};
use crate::checks::{CertExpiration, check_certificates};
use crate::checks::{Check, CheckName, Verdict, apply_ignores};
use crate::checks::{GateSources, NODE_LOCAL_CRI_SOCKET, check_feature_gates};
use crate::checks::{HubImage, check_hub};
use crate::checks::{InstanceMetrics, check_removed_apis_across};
use crate::checks::{KubeletView, check_kubelet_config, views};
use crate::checks::{NodeCgroup, check_cgroup_hop};
use crate::checks::{NodeKubeletFiles, check_kubelet_flags};
use crate::version::Minor;

/// What the checks read before a hop; each source as far as it could be read
/// (`Err` says why not).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// From every kube-apiserver instance's `/metrics`.
    pub deprecated_apis: Result<Vec<InstanceMetrics>, String>,
    /// Every PodDisruptionBudget.
    pub budgets: Result<Vec<Budget>, String>,
    /// The running pods of the namespaces whose budgets allow no disruption
    /// (no other pod can be held by one).
    pub pods: Result<Vec<Pod>, String>,
    /// `kubeadm certs check-expiration` on the first control plane.
    pub certificates: Result<Vec<CertExpiration>, String>,
    /// Every node's kubelet flag files.
    pub kubelet_files: Vec<NodeKubeletFiles>,
    /// The hub's images, every architecture; `None` when unreadable.
    pub hub_images: Option<Vec<HubImage>>,
    /// Node name → `uname -m`.
    pub arches: Vec<(String, String)>,
    /// Every node's cgroup hierarchy and kubelet configuration.
    pub cgroups: Vec<NodeCgroup>,
    /// The kubelet-config and kubeadm-config ConfigMaps, from the first
    /// control plane: what every hop's kubeadm works from.
    pub cluster_configs: ClusterConfigs,
}

/// The nodes a hop drains and reboots.
pub fn drained(hop: &Hop) -> Vec<String> {
    let mut nodes: Vec<String> = hop
        .steps()
        .filter(|s| s.action == Action::Roll)
        .map(|s| s.node.clone())
        .collect();
    nodes.dedup();
    nodes
}

/// The nodes a hop runs kubeadm on (`upgrade apply` or `upgrade node`).
pub fn kubeadm_nodes(hop: &Hop) -> Vec<&str> {
    hop.steps()
        .filter(|s| {
            matches!(
                s.action,
                Action::UpgradeApply { .. } | Action::UpgradeNode { .. }
            )
        })
        .map(|s| s.node.as_str())
        .collect()
}

/// Every node's kubelet as `hop` leaves it (`super::prediction`).
fn hop_views(inputs: &Inputs, hop: &Hop) -> Vec<KubeletView> {
    views(
        &inputs.cgroups,
        &inputs.kubelet_files,
        &inputs.cluster_configs.kubelet,
        &kubeadm_nodes(hop),
        hop.minor,
        // kubeadm reads its own gate from kubeadm-config.
        match &inputs.cluster_configs.cluster {
            Ok(Some(c)) => c.feature_gates.get(NODE_LOCAL_CRI_SOCKET).copied(),
            _ => None,
        },
    )
}

/// The checks of `hop` on a plan that ends at `target`, in [`CheckName::ALL`]
/// order, with the operator's `ignored` blocks turned into `ignored`.
pub fn evaluate(inputs: &Inputs, hop: &Hop, target: Minor, ignored: &[CheckName]) -> Vec<Check> {
    let drained = drained(hop);
    let kubelets = hop_views(inputs, hop);
    let version = hop.version.as_ref();
    let mut checks = vec![
        match &inputs.deprecated_apis {
            Ok(instances) => check_removed_apis_across(instances, hop.minor, target),
            Err(e) => unread(
                CheckName::RemovedApis,
                "the API server's deprecated-API metric",
                e,
            ),
        },
        {
            // Only nodes this hop restarts: a node already done keeps its
            // kubelet until its next reboot, which a later hop checks.
            let nodes: Vec<NodeKubeletFiles> = inputs
                .kubelet_files
                .iter()
                .filter(|n| drained.contains(&n.node))
                .cloned()
                .collect();
            check_kubelet_flags(&nodes, hop.minor, hop.kubeadm)
        },
        match (&inputs.budgets, &inputs.pods) {
            (Ok(budgets), Ok(pods)) => check_drains(budgets, pods, &drained),
            (Err(e), _) | (_, Err(e)) => {
                unread(CheckName::Pdb, "the PodDisruptionBudgets and their pods", e)
            }
        },
        match &inputs.certificates {
            Ok(certs) => check_certificates(certs),
            Err(e) => unread(
                CheckName::Certificates,
                "`kubeadm certs check-expiration`",
                e,
            ),
        },
        {
            let arches: Vec<String> = inputs
                .arches
                .iter()
                .filter(|(node, _)| drained.contains(node))
                .map(|(_, arch)| arch.clone())
                .collect();
            check_hub(inputs.hub_images.as_deref(), hop.minor, version, &arches)
        },
        // Every node, not only those this hop reboots: any later boot
        // starts the new kubelet there too.
        check_cgroup_hop(&kubelets, hop.minor),
        check_kubelet_config(&kubelets, hop.minor, version),
        check_feature_gates(
            GateSources {
                kubelets: &kubelets,
                cluster: &inputs.cluster_configs.cluster,
            },
            hop.minor,
            &drained,
            renders_control_plane(hop),
        ),
    ];
    apply_ignores(&mut checks, ignored);
    checks
}

/// Whether the hop runs kubeadm's upgrade on a control plane, which writes
/// its static pods anew from the ClusterConfiguration.
fn renders_control_plane(hop: &Hop) -> bool {
    hop.phases
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                PhaseKind::FirstControlPlane | PhaseKind::OtherControlPlanes
            )
        })
        .flat_map(|p| &p.steps)
        .any(|s| {
            matches!(
                s.action,
                Action::UpgradeApply { .. } | Action::UpgradeNode { .. }
            )
        })
}

/// Every hop of a plan judged on the fleet as the earlier hops leave it:
/// a flag an earlier hop's kubeadm strips from a node's kubeadm-flags.env
/// no longer counts against that node in the later hops, and a node whose
/// kubeadm ran has the kubelet files that kubeadm wrote
/// (`super::prediction`).
pub fn evaluate_all(
    inputs: &Inputs,
    hops: &[Hop],
    target: Minor,
    ignored: &[CheckName],
) -> Vec<Vec<Check>> {
    let mut projected = inputs.clone();
    let mut all = Vec::with_capacity(hops.len());
    for hop in hops {
        all.push(evaluate(&projected, hop, target, ignored));
        let ran_kubeadm = kubeadm_nodes(hop);
        for view in hop_views(&projected, hop) {
            let Some(Ok(p)) = view.predicted else {
                continue;
            };
            if let Some(n) = projected.cgroups.iter_mut().find(|n| n.node == view.node) {
                // JSON is YAML: what the later hops parse again.
                n.kubelet_config = Some(serde_json::Value::Object(p.config.fields).to_string());
                n.instance_config = p
                    .instance
                    .map(|i| serde_json::Value::Object(i.fields).to_string());
            }
            if let Some(f) = projected
                .kubelet_files
                .iter_mut()
                .find(|f| f.node == view.node)
            {
                match p.flags_env {
                    Some(env) => f
                        .files
                        .insert(crate::checks::KUBEADM_FLAGS_ENV.to_string(), env),
                    None => f.files.remove(crate::checks::KUBEADM_FLAGS_ENV),
                };
            }
        }
        for node in &mut projected.kubelet_files {
            if ran_kubeadm.contains(&node.node.as_str()) {
                node.after_kubeadm(hop.minor);
            }
        }
    }
    all
}

/// A source that could not be read: a warning, so the plan says what it
/// did not check instead of passing it.
fn unread(name: CheckName, what: &str, error: &str) -> Check {
    Check {
        name,
        verdict: Verdict::Warn,
        summary: format!("could not read {what}, so this is unchecked"),
        details: vec![error.to_string()],
        remedy: Some(format!(
            "fix what the error says and plan again, or go on knowing `{name}` was not checked"
        )),
    }
}

/// The checks that stop the hop (blocks the operator did not ignore).
pub fn blocking(checks: &[Check]) -> Vec<&Check> {
    checks.iter().filter(|c| !c.allows_hop()).collect()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod projection_tests;

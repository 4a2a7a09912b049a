//! The objects the API server serves, rendered from the one cluster state
//! (`cluster.json`, `faults.json`) in the shapes of the real API: Nodes,
//! pods (the control planes' mirror pods and the workloads' pods),
//! DaemonSets, ConfigMaps and PodDisruptionBudgets with the disruption
//! controller's status. `store` lists them; what only the API does (pods it
//! deleted or evicted) is kept there.

use crate::state::Cluster;

pub(crate) mod budgets;
pub(crate) mod configmaps;
pub(crate) mod daemonsets;
pub(crate) mod nodes;
pub(crate) mod pods;
#[cfg(test)]
mod tests;

/// kubeadm's ConfigMap of the cluster's ClusterConfiguration.
pub(crate) const KUBEADM_CONFIG: &str = "kubeadm-config";
pub(crate) const KUBE_SYSTEM: &str = "kube-system";

/// When the cluster was created, as far as the state knows: its oldest boot
/// (never after `now`).
pub(crate) fn cluster_created(c: &Cluster, now: f64) -> f64 {
    c.nodes
        .values()
        .map(|n| n.booted_at)
        .fold(f64::INFINITY, f64::min)
        .min(now)
}

//! The checks script's output, split into its probes: on its own
//! (`CHECKS_SCRIPT`), or with the cluster script's reads the checks take
//! instead of asking again (`CHECKS_AFTER_CLUSTER_SCRIPT`, when planning).

use anyhow::Result;

use super::cluster_json::found_objects;
use super::sections::Sections;
use super::{KUBE_SYSTEM_READ, object};

/// What `CHECKS_SCRIPT` printed: each probe's stdout, or why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOutputs {
    /// The deprecated-API gauge lines of `/metrics`.
    pub metrics: Result<String, String>,
    /// `kubectl get pdb -A -o json`.
    pub pdbs: Result<String, String>,
    /// `kubeadm certs check-expiration`.
    pub certs: Result<String, String>,
    /// `kubectl -n kube-system get pods -o json` (or only those labelled
    /// `component=kube-apiserver`): the kube-apiserver mirror pods.
    pub apiservers: Result<String, String>,
    /// The kubelet-config ConfigMap's JSON, read with kubeadm-config in one
    /// `kubectl -n kube-system get configmap … --ignore-not-found -o json`;
    /// `Ok(None)` when the API server has none.
    pub kubelet_configmap: Result<Option<String>, String>,
    /// The same for the kubeadm-config ConfigMap.
    pub kubeadm_configmap: Result<Option<String>, String>,
    /// `kubectl get nodes -l node-role.kubernetes.io/control-plane -o json`
    /// (or every node): the control planes' InternalIPs.
    pub control_plane_nodes: Result<String, String>,
}

/// Parses the output of `CHECKS_SCRIPT`. Only output with no sections at all
/// is an error; a probe that failed is kept as its failure, for its check
/// to report.
pub fn parse_check_outputs(output: &str) -> Result<CheckOutputs> {
    let sections = Sections::of_script("checks", output)?;
    Ok(check_outputs(&sections, &sections, &OWN_READS))
}

/// Parses the output of `CHECKS_AFTER_CLUSTER_SCRIPT` with that of the
/// `CLUSTER_SCRIPT` run just before it: the kube-apiserver pods, the
/// control planes (in every node's list, `crate::checks::parse_internal_ips`)
/// and the two ConfigMaps are the cluster script's.
pub fn parse_check_outputs_after_cluster(output: &str, cluster: &str) -> Result<CheckOutputs> {
    let sections = Sections::of_script("checks", output)?;
    let cluster = Sections::of_script("cluster", cluster)?;
    Ok(check_outputs(&sections, &cluster, &CLUSTER_READS))
}

/// Where the checks' reads of the cluster are: each probe's section name,
/// and what it ran (for its error).
struct ClusterReads {
    apiservers: (&'static str, &'static str),
    control_planes: (&'static str, &'static str),
    configmaps: (&'static str, &'static str),
}

/// In `CHECKS_SCRIPT` itself.
const OWN_READS: ClusterReads = ClusterReads {
    apiservers: ("apiservers", "kubectl -n kube-system get pods -o json"),
    control_planes: ("cpnodes", "kubectl get nodes -o json (control planes)"),
    configmaps: (
        "configmaps",
        "kubectl -n kube-system get configmap kubelet-config kubeadm-config",
    ),
};

/// In `CLUSTER_SCRIPT`.
const CLUSTER_READS: ClusterReads = ClusterReads {
    apiservers: (
        "apiservers",
        "kubectl -n kube-system get pods -l component=kube-apiserver -o json",
    ),
    control_planes: ("nodes", "kubectl get nodes -o json"),
    configmaps: ("kube-system", KUBE_SYSTEM_READ),
};

fn check_outputs(checks: &Sections, cluster: &Sections, reads: &ClusterReads) -> CheckOutputs {
    let take = |sections: &Sections, (name, what): (&str, &str)| -> Result<String, String> {
        sections
            .succeeded(name, what)
            .map(|s| s.stdout.clone())
            .map_err(|e| e.to_string())
    };
    let (name, what) = reads.configmaps;
    let configmaps = cluster
        .succeeded(name, what)
        .and_then(|s| found_objects(&s.stdout, what))
        .map_err(|e| e.to_string());
    let configmap = |name: &str| -> Result<Option<String>, String> {
        let found = configmaps.as_ref().map_err(Clone::clone)?;
        Ok(found.get(&object("ConfigMap", name)).cloned())
    };
    CheckOutputs {
        kubelet_configmap: configmap("kubelet-config"),
        kubeadm_configmap: configmap("kubeadm-config"),
        metrics: take(checks, ("metrics", "kubectl get --raw /metrics")),
        pdbs: take(checks, ("pdbs", "kubectl get pdb -A -o json")),
        certs: take(checks, ("certs", "kubeadm certs check-expiration")),
        apiservers: take(cluster, reads.apiservers),
        control_plane_nodes: take(cluster, reads.control_planes),
    }
}

//! The rules every random run of `super` keeps, in one place: checked
//! after every effect of the script (`super::model_world`) and after every
//! step of a roll (through `FakeFleet::observe`), on a neutral view of the
//! fleet ([`FleetNow`]) both build.
//!
//! The version skew policy (kubernetes/website,
//! `content/en/releases/version-skew-policy.md`, "kubelet"): "kubelet must
//! not be newer than kube-apiserver" and "may be up to three minor
//! versions older than kube-apiserver"; in an HA cluster the allowed range
//! narrows to the oldest kube-apiserver instance ("kube-apiserver
//! instances are 1.35 and 1.34: kubelet is supported at 1.34 and 1.33").
//! Its "Supported component upgrade order" puts kube-apiserver first and
//! the kubelets after, and kubeadm's upgrade page
//! (`content/en/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade.md`)
//! runs `kubeadm upgrade apply` on the first control plane, `kubeadm
//! upgrade node` on the others, then each control plane's kubelet, then
//! the workers' (`upgrade node`, drain, kubelet, uncordon). fleetctl's own
//! rules come from the same place (`crate::plan::KUBELET_SKEW`).

use std::collections::BTreeMap;

use crate::version::{Minor, Version};

/// One node as the rules see it.
#[derive(Debug, Clone)]
pub(super) struct NodeNow {
    pub(super) name: String,
    pub(super) control_plane: bool,
    pub(super) up: bool,
    pub(super) ready: bool,
    pub(super) cordoned: bool,
    /// The kubelet it runs (the last it ran, while down).
    pub(super) kubelet: Version,
    /// What it boots next (a power cut would boot it).
    pub(super) staged: Version,
    /// The minor of its last kubeadm step (`upgrade apply` or `node`).
    pub(super) kubeadm: Option<Minor>,
}

/// The fleet as the rules see it.
#[derive(Debug, Clone)]
pub(super) struct FleetNow {
    pub(super) nodes: Vec<NodeNow>,
    /// Each control plane's kube-apiserver: where its last kubeadm step
    /// left its static pods.
    pub(super) apiservers: BTreeMap<String, Minor>,
    /// kubeadm-config's version: the newest kube-apiserver.
    pub(super) cluster: Minor,
    /// How many nodes may be out of service at once: one control plane,
    /// or `--max-unavailable` workers.
    pub(super) max_out: usize,
}

/// Every breach of the rules after `after` (a step's words), empty when
/// none.
pub(super) fn check(now: &FleetNow, after: &str) -> Vec<String> {
    let mut breaches = Vec::new();
    let mut breach = |text: String| breaches.push(format!("after `{after}`: {text}"));
    let oldest_api = now.apiservers.values().min().copied();
    let newest_api = now
        .apiservers
        .values()
        .max()
        .copied()
        .unwrap_or(now.cluster);
    let oldest_cp = now
        .nodes
        .iter()
        .filter(|n| n.control_plane)
        .map(|n| n.kubelet.minor())
        .min();
    let mut out = Vec::new();
    for n in &now.nodes {
        let (kubelet, staged) = (n.kubelet.minor(), n.staged.minor());
        if let Some(api) = oldest_api {
            // Never newer than any kube-apiserver, running or armed.
            if kubelet > api {
                breach(format!(
                    "{} runs kubelet {} with a kube-apiserver at {api}",
                    n.name, n.kubelet
                ));
            }
            if staged > api {
                breach(format!(
                    "{} would boot kubelet {} with a kube-apiserver at {api}",
                    n.name, n.staged
                ));
            }
        }
        // At most three minors older than the newest kube-apiserver.
        if kubelet.minor + crate::plan::KUBELET_SKEW < newest_api.minor {
            breach(format!(
                "{} runs kubelet {} with the API at {newest_api}",
                n.name, n.kubelet
            ));
        }
        // kubeadm's step on a node comes after `upgrade apply` moved the
        // cluster to its minor, and a node armed with a new minor had its
        // own kubeadm step for it.
        if n.kubeadm.is_some_and(|k| k > now.cluster) {
            breach(format!(
                "{}'s kubeadm step ran before `upgrade apply` to its minor",
                n.name
            ));
        }
        if staged > kubelet && n.kubeadm != Some(staged) {
            breach(format!(
                "{} staged {} before its kubeadm step for it",
                n.name, n.staged
            ));
        }
        // Control planes before workers within a hop.
        if !n.control_plane && oldest_cp.is_some_and(|cp| kubelet > cp) {
            breach(format!(
                "worker {} runs {} before every control plane does",
                n.name, n.kubelet
            ));
        }
        if !n.up || !n.ready || n.cordoned {
            out.push(n.name.as_str());
        }
    }
    if out.len() > now.max_out {
        breach(format!(
            "{out:?} out of service at once (at most {})",
            now.max_out
        ));
    }
    breaches
}

/// The step that reboots `node`: onto a newer minor only after its
/// kubeadm step for that minor.
pub(super) fn check_reboot(now: &FleetNow, node: &str, after: &str) -> Vec<String> {
    let Some(n) = now.nodes.iter().find(|n| n.name == node) else {
        return vec![format!(
            "after `{after}`: {node} is not a node of the fleet"
        )];
    };
    let staged = n.staged.minor();
    match staged > n.kubelet.minor() && n.kubeadm != Some(staged) {
        true => vec![format!(
            "after `{after}`: {node} rebooted into {} before its kubeadm step",
            n.staged
        )],
        false => Vec::new(),
    }
}

//! Why there is no plan: each refusal says what was found and what the
//! operator can do about it.

use std::fmt;

use crate::version::{Minor, TargetVersion, Version};

use super::KUBEADM_SKIP_PHASES;

/// Why no plan was made. Nothing was changed on any node; the CLI exits 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NoControlPlane,
    /// Neither kubeadm-config nor the first control-plane node's kubelet gave a version.
    UnknownClusterVersion {
        node: String,
    },
    MajorChange {
        from: Minor,
        to: Minor,
    },
    Downgrade {
        cluster: String,
        target: TargetVersion,
    },
    /// More hops than anyone plans on purpose.
    TooFar {
        from: Minor,
        to: Minor,
        max: u64,
    },
    /// The hub publishes no image of a minor the path needs.
    Unpublished {
        minor: Minor,
        published: Vec<Minor>,
    },
    /// An exact target that is not on the hub.
    NotOnHub {
        requested: Version,
        available: Vec<Version>,
    },
    /// A kubelet newer than the API server allows.
    KubeletAhead {
        node: String,
        kubelet: Version,
        limit: String,
    },
    /// A kubelet more than three minors older than the API server.
    KubeletTooOld {
        node: String,
        kubelet: Version,
        cluster: Minor,
    },
    /// A control-plane node more than one minor behind the cluster.
    ControlPlaneBehind {
        node: String,
        kubelet: Version,
        cluster: Minor,
    },
    InvalidHub {
        hub: String,
        reason: String,
    },
    /// A hop to a minor whose `kubeadm upgrade node` has no kube-proxy addon
    /// phase, so the `--skip-phases addon/kube-proxy` fleetctl always passes
    /// would be refused as an invalid phase.
    KubeadmTooOld {
        minor: Minor,
    },
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    items
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoControlPlane => f.write_str(
                "the inventory has no control-plane node: `kubeadm upgrade apply` has nowhere to run",
            ),
            Refusal::UnknownClusterVersion { node } => write!(
                f,
                "cannot tell the cluster's version: kubeadm-config has no kubernetesVersion and \
                 {node} reports no kubelet version; check `fleetctl status`"
            ),
            Refusal::MajorChange { from, to } => write!(
                f,
                "the cluster is at {from} and the target is {to}: fleetctl plans within one major version"
            ),
            Refusal::Downgrade { cluster, target } => write!(
                f,
                "refusing to downgrade: the cluster is at {cluster} and the target is {target}; \
                 kubeadm cannot go back (restore from an etcd backup instead)"
            ),
            Refusal::TooFar { from, to, max } => write!(
                f,
                "{from} → {to} is more than {max} minors: check the target for a typo, \
                 or upgrade in stages"
            ),
            Refusal::Unpublished { minor, published } => write!(
                f,
                "the hub publishes no kubernetes {minor} image (it has: {}); the path goes through \
                 every minor, so it cannot reach the target. Pick a published target or another hub",
                list(published)
            ),
            Refusal::NotOnHub {
                requested,
                available,
            } => write!(
                f,
                "{requested} is not on the hub (it has: {}); ask for the minor (e.g. {}) or a listed patch",
                list(available),
                requested.minor()
            ),
            Refusal::KubeletAhead {
                node,
                kubelet,
                limit,
            } => write!(
                f,
                "{node} runs kubelet {kubelet}, newer than {limit}: the skew policy forbids a \
                 kubelet newer than the API server. Fix this node by hand (re-pin and reboot it \
                 onto the cluster's minor) before planning"
            ),
            Refusal::KubeletTooOld {
                node,
                kubelet,
                cluster,
            } => write!(
                f,
                "{node} runs kubelet {kubelet}, more than three minors behind the cluster's \
                 {cluster}: the skew policy is already broken and no path fixes it; re-provision \
                 the node"
            ),
            Refusal::ControlPlaneBehind {
                node,
                kubelet,
                cluster,
            } => write!(
                f,
                "control-plane node {node} runs {kubelet}, more than one minor behind the \
                 cluster's {cluster}: kubeadm cannot upgrade its control plane that far in one step"
            ),
            Refusal::KubeadmTooOld { minor } => write!(
                f,
                "the path goes through {minor}, but fleetctl upgrades only to v1.32 and later: it \
                 always runs `kubeadm upgrade node --skip-phases {KUBEADM_SKIP_PHASES}`, and before \
                 v1.32 `upgrade node` has no addon phases, so kubeadm refuses the flag. Upgrade to \
                 v1.32 by hand first"
            ),
            Refusal::InvalidHub { hub, reason } => {
                write!(f, "cannot pin configs to hub `{hub}`: {reason}; fix `hub` in the inventory")
            }
        }
    }
}

impl std::error::Error for Refusal {}

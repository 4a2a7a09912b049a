//! What a plan warns about: findings that do not stop it, printed with it
//! and carried in its JSON.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::node::Pin;
use crate::version::{Minor, Version};

use super::{Component, KUBEADM_SKIP_PHASES};

/// A config file that sysupdate would also read, and what it would pull.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StrayConfig {
    pub path: String,
    pub pin: Pin,
}

/// Something wrong with the fleet now, or worth knowing before `apply`.
/// None of these stops the plan; each says what the plan does about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Warning {
    /// A sysupdate config with `MatchPattern=<name>-@v-%a.raw`.
    Floating {
        node: String,
        component: Component,
        path: String,
        /// What the hub would give it on its own: the newest release overall.
        would_stage: Option<Version>,
    },
    /// More than one `.conf`, or one not at [`Component::config_path`].
    StrayConfigs {
        node: String,
        component: Component,
        configs: Vec<StrayConfig>,
    },
    /// update_engine has a Flatcar update waiting for the next boot.
    OsUpdateStaged {
        node: String,
        version: String,
        /// The first hop that reboots the node, if the plan reboots it.
        reboot_hop: Option<Minor>,
    },
    NotReady {
        node: String,
    },
    /// The API server does not list the node.
    NotInCluster {
        node: String,
    },
    Cordoned {
        node: String,
    },
    /// `kubelet --version` gave nothing usable.
    UnknownRunning {
        node: String,
    },
    /// The staged kubernetes image is not from the minor the config pins.
    StagedOtherMinor {
        node: String,
        staged: Version,
        pinned: Minor,
    },
    /// A node other than the first control-plane node has a minor newer
    /// than the API server staged: a reboot now would break the skew policy.
    StagedAhead {
        node: String,
        staged: Version,
        cluster: Minor,
    },
    HubUnresolved {
        reason: String,
    },
    ClusterVersionUnknown {
        node: String,
        assumed: Version,
    },
    /// The operator asked for an exact patch older than the hub's newest.
    ExactOlderThanHub {
        requested: Version,
        staged: Version,
    },
    /// A converge moves kubelets to a newer patch than kubeadm-config says;
    /// the control plane stays where it is.
    ControlPlaneStays {
        cluster: Version,
        kubelets: Version,
    },
    /// The hub is plain HTTP: nothing protects the images in transit.
    InsecureHub {
        hub: String,
    },
    /// The hub's list has no (single) checksum for an image a hop stages.
    UnverifiedImage {
        version: Version,
    },
}

/// How a sysupdate config's pin reads in a sentence.
pub(in crate::plan) fn pin_text(pin: &Pin) -> String {
    match pin {
        Pin::Pinned(m) => format!("pulls {m}"),
        Pin::Floating => "floats to the newest release".to_string(),
        Pin::Unknown => "has no MatchPattern fleetctl recognises".to_string(),
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Floating {
                node,
                component,
                path,
                would_stage,
            } => {
                let what = would_stage
                    .as_ref()
                    .map(|v| format!("it would stage {v} on its own"))
                    .unwrap_or_else(|| {
                        "it would stage whatever the hub publishes as newest".into()
                    });
                write!(
                    f,
                    "{node}: {path} floats ({component}-@v-%a.raw): {what}, \
                     possibly a minor kubeadm cannot reach in one step; the plan re-pins it"
                )
            }
            Warning::StrayConfigs {
                node,
                component,
                configs,
            } => {
                let list: Vec<String> = configs
                    .iter()
                    .map(|c| format!("{} ({})", c.path, pin_text(&c.pin)))
                    .collect();
                write!(
                    f,
                    "{node}: sysupdate reads every {component} config: {}; \
                     the plan replaces them with one pinned {}",
                    list.join(", "),
                    component.config_path()
                )
            }
            Warning::OsUpdateStaged {
                node,
                version,
                reboot_hop,
            } => match reboot_hop {
                Some(m) => write!(
                    f,
                    "{node}: Flatcar {version} is staged; its reboot in hop {m} boots the new OS too"
                ),
                None => write!(
                    f,
                    "{node}: Flatcar {version} is staged; the plan does not reboot this node, \
                     its next reboot boots the new OS"
                ),
            },
            Warning::NotReady { node } => write!(
                f,
                "{node}: not Ready; its drain may stall and apply waits for it to be Ready \
                 after each reboot (check `kubectl describe node {node}`)"
            ),
            Warning::NotInCluster { node } => write!(
                f,
                "{node}: the API server does not list this node; is its name in the inventory \
                 the Kubernetes node name?"
            ),
            Warning::Cordoned { node } => write!(
                f,
                "{node}: cordoned; an interrupted upgrade leaves nodes cordoned, so the plan \
                 finishes its upgrade and uncordons it"
            ),
            Warning::UnknownRunning { node } => write!(
                f,
                "{node}: cannot tell which kubelet it runs; the plan reboots it onto the staged version"
            ),
            Warning::StagedOtherMinor {
                node,
                staged,
                pinned,
            } => write!(
                f,
                "{node}: {staged} is staged but its config pins {pinned}; the plan stages the pinned series"
            ),
            Warning::StagedAhead {
                node,
                staged,
                cluster,
            } => write!(
                f,
                "{node}: {staged} is staged while the API server is at {cluster}: any reboot \
                 before the first control-plane node's `upgrade apply` would run a kubelet newer \
                 than the API server; do not reboot it by hand"
            ),
            Warning::HubUnresolved { reason } => write!(
                f,
                "could not read the hub's image list ({reason}); patches are unresolved: each hop \
                 stages whatever patch is newest when apply runs"
            ),
            Warning::ClusterVersionUnknown { node, assumed } => write!(
                f,
                "kubeadm-config has no kubernetesVersion; assuming the cluster is at {assumed}, \
                 the kubelet of {node}"
            ),
            Warning::ExactOlderThanHub { requested, staged } => write!(
                f,
                "{requested} was asked for, but sysupdate always stages the newest patch of the \
                 pinned series: the nodes will get {staged}"
            ),
            Warning::InsecureHub { hub } => write!(
                f,
                "the hub {hub} is plain HTTP: images and their SHA256SUMS travel unprotected (and the \
                 bakery's configs say Verify=false); fleetctl checks each image against the SHA256SUMS \
                 it read, which an attacker in the path could change too. Use an https:// hub"
            ),
            Warning::UnverifiedImage { version } => write!(
                f,
                "the hub's SHA256SUMS gives no single checksum for kubernetes {version}: apply cannot \
                 verify that image before running its kubeadm"
            ),
            Warning::ControlPlaneStays { cluster, kubelets } => write!(
                f,
                "kubelets move to {kubelets} without kubeadm; the control plane stays at {cluster} \
                 (allowed: same minor). To move it too, run `kubeadm upgrade apply {kubelets} \
                 --skip-phases {KUBEADM_SKIP_PHASES}` on the first control-plane node"
            ),
        }
    }
}

//! The plan's vocabulary: what `plan` produces, `--output json` prints, the
//! saved plan file holds and `apply` executes. Every type here is part of a
//! stable machine format, so names are kebab-case and enums are tagged.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::checks::{Check, CheckName};
use crate::inventory::Role;
use crate::version::{Minor, TargetVersion, Version};

use super::fingerprint::Fingerprint;
use super::state::FleetState;
use super::workers::WorkerPlan;

mod refusal;
mod warning;
pub use refusal::Refusal;
pub use warning::{StrayConfig, Warning};

pub use crate::remote::upgrade::KUBEADM_SKIP_PHASES;

/// A sysext-delivered component whose sysupdate config fleetctl pins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    Kubernetes,
    Containerd,
}

impl Component {
    pub fn name(self) -> &'static str {
        match self {
            Component::Kubernetes => "kubernetes",
            Component::Containerd => "containerd",
        }
    }

    /// `/etc/sysupdate.<name>.d`: every `.conf` in it is a transfer sysupdate runs.
    pub fn config_dir(self) -> String {
        format!("/etc/sysupdate.{}.d", self.name())
    }

    /// The one config fleetctl writes: `/etc/sysupdate.<name>.d/<name>.conf`.
    pub fn config_path(self) -> String {
        format!("{}/{}.conf", self.config_dir(), self.name())
    }

    /// How sysext-bakery writes a minor series in this component's image
    /// names, the part a pinned MatchPattern repeats: `v1.37` for
    /// kubernetes (`kubernetes.sysext/funcs.inc` prefixes a `v`), `2.1` for
    /// containerd (`containerd.sysext/create.sh` strips the `v` of
    /// containerd's tags: `containerd-2.1.9-x86-64.raw`).
    pub fn series(self, minor: Minor) -> String {
        match self {
            Component::Kubernetes => minor.to_string(),
            Component::Containerd => format!("{}.{}", minor.major, minor.minor),
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The whole plan: every hop in order, what is wrong with the fleet now, and
/// the fingerprint of the state it was computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Plan {
    /// What the operator asked for (`v1.37` or `v1.37.2`).
    pub requested: TargetVersion,
    /// The minor series the plan ends on.
    pub target: Minor,
    /// The cluster's version when planned (kubeadm-config, or the first
    /// control-plane node's kubelet when that was unreadable).
    pub cluster_from: Option<Version>,
    pub hub: String,
    /// The containerd series pinned by the first hop, when the inventory sets one.
    pub containerd: Option<Minor>,
    /// The inventory's nodes in order; the first control-plane node runs `upgrade apply`.
    pub nodes: Vec<PlannedNode>,
    pub hops: Vec<Hop>,
    pub warnings: Vec<Warning>,
    pub fingerprint: Fingerprint,
    /// Checks whose blocks the operator chose to go past (`--ignore-check`
    /// on `plan`); apply honours them too, and adds its own.
    #[serde(default)]
    pub ignored_checks: Vec<CheckName>,
    /// How the workers take the hops (`--workers`), and the reboots it costs.
    #[serde(default)]
    pub workers: WorkerPlan,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PlannedNode {
    pub name: String,
    pub role: Role,
}

impl PlannedNode {
    /// Every node of the fleet, in its order: the nodes a plan covers,
    /// whether it upgrades (the planner) or not (`fixed_plan`).
    pub(super) fn of_fleet(state: &FleetState) -> Vec<PlannedNode> {
        state
            .nodes
            .iter()
            .map(|n| PlannedNode {
                name: n.name.clone(),
                role: n.role,
            })
            .collect()
    }
}

/// Why a hop exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HopKind {
    /// The cluster moves to this minor: `kubeadm upgrade apply` on the first
    /// control-plane node, `upgrade node` on the others, then the reboots.
    Upgrade,
    /// The cluster is already at this minor but some nodes are not (an
    /// interrupted upgrade): they catch up before the next minor starts.
    Finish,
    /// Target minor reached: re-pin, stage and reboot nodes that lag a
    /// patch, float or have an update staged, without calling kubeadm
    /// (except `upgrade node` for a node an interrupted upgrade left behind).
    Converge,
}

/// One minor series worth of steps, in kubeadm's order: the phases run one
/// after the other, and [`PhaseKind`] says how the steps inside one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Hop {
    pub kind: HopKind,
    pub minor: Minor,
    /// The patch sysupdate will stage: the newest of this minor on the hub;
    /// `None` when the hub could not be read.
    pub version: Option<Version>,
    /// The hop calls kubeadm (`upgrade apply` or `upgrade node`).
    pub kubeadm: bool,
    /// The sha256 of the hop's image as the hub's `SHA256SUMS` publishes
    /// it: apply checks the downloaded file against it before anything runs
    /// from it. `None` when the hub's list was unreadable or contradictory.
    #[serde(default)]
    pub sha256: Option<String>,
    pub phases: Vec<Phase>,
    /// What the checks before the hop found (`crate::checks`); filled in
    /// after planning, from what the cluster says, and again by apply right
    /// before the hop.
    #[serde(default)]
    pub checks: Vec<Check>,
    /// The nodes whose kubeadm step runs with
    /// `--ignore-preflight-errors=SystemVerification`: cgroup v1 nodes of a
    /// hop to v1.35 or later, once the operator ignored the `cgroup` check
    /// (`crate::checks::skips_system_verification`). Filled in with the checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_system_verification: Vec<String>,
}

impl Hop {
    /// Every step of the hop, phase after phase.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.phases.iter().flat_map(|p| p.steps.iter())
    }
}

/// A group of steps of one hop that run together, in one way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Phase {
    pub kind: PhaseKind,
    /// In order; each node's own steps keep their order.
    pub steps: Vec<Step>,
}

/// The phases of a hop, in the order they run. The order is the skew
/// policy's: every kube-apiserver reaches the new minor (through each
/// control plane's own kubeadm step, run by the *downloaded* image's kubeadm
/// while the old kubelet keeps running) before any kubelet does, and every
/// node's kubeadm step rewrites its kubelet config before its reboot starts
/// the new kubelet. docs/upgrade-path.md explains why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PhaseKind {
    /// Every node that needs it, in parallel: download the hop's image
    /// (not staged: the symlink does not move) and uncordon nodes an earlier
    /// run left cordoned that are not the first to roll.
    Prepare,
    /// The first control-plane node: the downloaded image's
    /// `kubeadm upgrade apply` (or `upgrade node` when the cluster is there already).
    FirstControlPlane,
    /// Every other control-plane node, one at a time: its `kubeadm upgrade node`.
    OtherControlPlanes,
    /// Control-plane nodes, one at a time: stage, drain, reboot onto the new
    /// kubelet, wait until it is Ready with its static pods, uncordon.
    ControlPlaneReboots,
    /// Workers, in bounded parallel, once every control plane runs the new
    /// minor: `kubeadm upgrade node`, then stage.
    WorkerPreparation,
    /// Workers, one at a time: drain, reboot, wait, uncordon.
    WorkerReboots,
    /// Every node, in parallel: remove images of minors older than the one
    /// before the running one.
    Cleanup,
}

impl PhaseKind {
    /// The phase's steps of different nodes run at the same time.
    pub fn parallel(self) -> bool {
        matches!(
            self,
            PhaseKind::Prepare | PhaseKind::WorkerPreparation | PhaseKind::Cleanup
        )
    }

    pub fn title(self) -> &'static str {
        match self {
            PhaseKind::Prepare => "download the new image",
            PhaseKind::FirstControlPlane => "first control plane: kubeadm upgrade",
            PhaseKind::OtherControlPlanes => "other control planes: kubeadm upgrade node",
            PhaseKind::ControlPlaneReboots => "control planes: reboot onto the new kubelet",
            PhaseKind::WorkerPreparation => "workers: kubeadm upgrade node, stage",
            PhaseKind::WorkerReboots => "workers: reboot onto the new kubelet",
            PhaseKind::Cleanup => "remove old images",
        }
    }
}

/// One action on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Step {
    pub node: String,
    pub action: Action,
}

impl Step {
    pub fn new(node: &str, action: Action) -> Step {
        Step {
            node: node.to_string(),
            action,
        }
    }

    /// `cp-1: kubeadm upgrade apply v1.35.3 …`
    pub fn describe(&self) -> String {
        format!("{}: {}", self.node, self.action.describe())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Action {
    /// Download the newest patch of `minor` into `/opt/extensions/<name>/`
    /// with systemd-sysupdate, *without* moving the symlink: the node keeps
    /// booting what it runs until its kubeadm step is done and it is staged.
    Download {
        component: Component,
        minor: Minor,
        /// The version it should download; `None` when the hub was unreadable.
        expect: Option<Version>,
    },
    /// `kubeadm upgrade apply` on the first control-plane node, run by the
    /// downloaded image's own kubeadm while the old kubelet keeps running.
    UpgradeApply {
        minor: Minor,
        /// The image whose kubeadm runs; `None` when unknown at planning time
        /// (the executor then uses the newest downloaded image of `minor`).
        version: Option<Version>,
    },
    /// `kubeadm upgrade node` on every other node, by the downloaded image's kubeadm.
    UpgradeNode {
        minor: Minor,
        version: Option<Version>,
    },
    /// Write the pinned sysupdate config and neutralise every other `.conf`
    /// of the component, so sysupdate can only pull patches of `minor`.
    Pin {
        component: Component,
        minor: Minor,
        /// Where the config goes: [`Component::config_path`].
        path: String,
        /// The rendered config, byte for byte.
        config: String,
        /// What `path` holds before this step (from the facts, or as an
        /// earlier hop leaves it); `None` when absent.
        previous: Option<String>,
        /// Other `.conf` files in the component's directory, to disable.
        #[serde(default)]
        replaces: Vec<String>,
    },
    /// Make the next boot merge the new image: for kubernetes, point
    /// `/etc/extensions/kubernetes.raw` at the downloaded image (after the
    /// node's kubeadm step); for containerd, `systemd-sysupdate` itself.
    Stage {
        component: Component,
        minor: Minor,
        /// The version it should stage; `None` when the hub was unreadable
        /// (or for containerd, whose hub list fleetctl does not read).
        expect: Option<Version>,
    },
    /// Drain, reboot into the staged images (the only moment a staged
    /// sysext, and a staged Flatcar update, take effect), wait until the new
    /// kubelet runs and the node is Ready, uncordon.
    Roll,
    /// Uncordon a node an earlier run left cordoned.
    Uncordon,
    /// Remove kubernetes images of minors older than the one before the
    /// running one (`/opt/extensions/kubernetes/`).
    RemoveImages { versions: Vec<Version> },
}

impl Action {
    /// One line for the plan text and apply's dry run.
    pub fn describe(&self) -> String {
        match self {
            Action::Download {
                component,
                minor,
                expect,
            } => match expect {
                Some(v) => format!("download {component} {v} (systemd-sysupdate; not staged yet)"),
                None => format!(
                    "download the newest {component} {minor} patch (systemd-sysupdate; not staged yet)"
                ),
            },
            Action::UpgradeApply { minor, version } => format!(
                "kubeadm upgrade apply {} --skip-phases {KUBEADM_SKIP_PHASES} --yes (the {} image's kubeadm)",
                image_text(*minor, version),
                image_text(*minor, version)
            ),
            Action::UpgradeNode { minor, version } => format!(
                "kubeadm upgrade node --skip-phases {KUBEADM_SKIP_PHASES} (the {} image's kubeadm)",
                image_text(*minor, version)
            ),
            Action::Pin {
                component,
                minor,
                path,
                replaces,
                ..
            } => {
                let mut line = format!("pin {component} to {minor}: write {path}");
                if !replaces.is_empty() {
                    line.push_str(&format!(", disable {}", replaces.join(", ")));
                }
                line
            }
            Action::Stage {
                component: Component::Kubernetes,
                minor,
                expect,
            } => format!(
                "stage kubernetes {}: point /etc/extensions/kubernetes.raw at it",
                image_text(*minor, expect)
            ),
            Action::Stage {
                component,
                minor,
                expect,
            } => match expect {
                Some(v) => format!("stage {component} {v} (systemd-sysupdate)"),
                None => format!("stage the newest {component} {minor} patch (systemd-sysupdate)"),
            },
            Action::Roll => {
                "drain, reboot into the staged images, wait until Ready, uncordon".to_string()
            }
            Action::Uncordon => "uncordon".to_string(),
            Action::RemoveImages { versions } => format!(
                "remove old kubernetes images: {}",
                versions
                    .iter()
                    .map(Version::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// `v1.35.3`, or `<newest v1.35>` while the patch is unresolved.
fn image_text(minor: Minor, version: &Option<Version>) -> String {
    version
        .as_ref()
        .map_or_else(|| format!("<newest {minor}>"), Version::to_string)
}

impl Plan {
    /// Nothing to do: no hop has a step.
    pub fn is_noop(&self) -> bool {
        self.hops.is_empty()
    }

    /// Reboots per node over the whole plan, every planned node listed.
    pub fn reboots(&self) -> BTreeMap<String, usize> {
        let mut counts: BTreeMap<String, usize> =
            self.nodes.iter().map(|n| (n.name.clone(), 0)).collect();
        for step in self.steps() {
            if step.action == Action::Roll {
                *counts.entry(step.node.clone()).or_default() += 1;
            }
        }
        counts
    }

    pub fn total_reboots(&self) -> usize {
        self.reboots().values().sum()
    }

    /// Every step of every hop, in execution order.
    pub fn steps(&self) -> impl Iterator<Item = &Step> {
        self.hops.iter().flat_map(|h| h.steps())
    }

    /// The version the last hop stages, when known.
    pub fn final_version(&self) -> Option<&Version> {
        self.hops.last().and_then(|h| h.version.as_ref())
    }
}

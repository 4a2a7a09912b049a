//! Node facts: what a node really runs, has staged and tracks, gathered in
//! one round trip by the script in `crate::remote` and parsed here by pure
//! functions (tested with real command output kept under `fixtures/`).

mod kubeadm_config;
mod mirror_pods;
mod parse;
#[cfg(test)]
mod script_output_tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::version::{Minor, Version};

pub use kubeadm_config::{
    CLUSTER_CONFIGURATION_KEY, ClusterConfiguration, ControlPlaneComponent, EtcdLocal,
    configmap_data, parse_kubeadm_configmap,
};
pub use mirror_pods::{
    MIRROR_ANNOTATION, MirrorPod, mirror_pod_lag, parse_boot_time, parse_mirror_pods,
};
pub use parse::{
    CheckOutputs, GateView, detect_pin, image_version, parse_check_outputs,
    parse_check_outputs_after_cluster, parse_cluster, parse_facts, parse_gates,
    parse_instance_metrics, parse_probes,
};

/// Everything `status` and `plan` need to know about one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFacts {
    pub hostname: String,
    pub boot_id: String,
    pub uptime_seconds: u64,
    pub os: OsFacts,
    pub kubernetes: Extension,
    /// `None` when the node has no containerd sysext at all.
    pub containerd: Option<Extension>,
    /// `/run/reboot-required` exists.
    pub reboot_required: bool,
    /// The version whose kubeadm last ran its upgrade step on this node for
    /// fleetctl ([`crate::remote::upgrade::KUBEADM_STEP_MARKER`]): evidence
    /// that the node's kubelet config is ready for that minor's kubelet.
    #[serde(default)]
    pub kubeadm_step: Option<Version>,
    /// `uname -m`: which image architecture the hub must publish.
    #[serde(default)]
    pub arch: Option<String>,
    /// The files the kubelet unit reads its flags from, path → content
    /// (only those that exist), for `crate::checks::check_kubelet_flags`.
    /// Not part of `status --output json`: the checks report what matters.
    #[serde(skip)]
    pub kubelet_files: BTreeMap<String, String>,
    /// The cgroup hierarchy and the kubelet configuration, for
    /// `crate::checks::check_cgroup`. Not part of `status --output json`.
    #[serde(skip)]
    pub cgroup: CgroupFacts,
    /// component → the last move of its symlink fleetctl recorded
    /// (`crate::remote::stage_record`), for a rollback to tell what the
    /// last reboot changed. Not part of `status --output json`.
    #[serde(skip)]
    pub stage_records: BTreeMap<String, StageRecord>,
}

/// One recorded move of a sysext's symlink.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StageRecord {
    /// The boot the symlink was moved in.
    pub boot_id: String,
    /// What it pointed at before, when that was an image of the component.
    pub previous: Option<Version>,
}

/// What decides whether a v1.35+ kubelet starts on the node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CgroupFacts {
    /// `Some(true)` on cgroup v2, `Some(false)` on v1, `None` when the probe
    /// did not answer.
    pub v2: Option<bool>,
    /// `/var/lib/kubelet/config.yaml`, when it exists and could be read.
    pub kubelet_config: Option<String>,
    /// `/var/lib/kubelet/instance-config.yaml` (kubeadm >= v1.34), likewise.
    pub instance_config: Option<String>,
}

impl NodeFacts {
    /// Why the node needs a reboot, empty when it does not: what its next boot
    /// would change (a staged sysext, a staged Flatcar update), and the marker
    /// sysupdate's drop-in and the Flatcar reboot sentinel leave for Kured.
    pub fn reboot_reasons(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        let sysexts = [
            ("kubernetes", Some(&self.kubernetes)),
            ("containerd", self.containerd.as_ref()),
        ];
        for (name, ext) in sysexts {
            if let Some(ext) = ext
                && reboot_pending(ext)
            {
                let staged = ext
                    .staged
                    .as_ref()
                    .map_or_else(|| "an unknown version".to_string(), Version::to_string);
                reasons.push(format!("{name} {staged}"));
            }
        }
        if let Some(os) = &self.os.staged {
            reasons.push(format!("Flatcar {os}"));
        }
        if self.reboot_required {
            reasons.push("/run/reboot-required".to_string());
        }
        reasons
    }
}

/// Staged differs from running: the node reports "up to date" but runs the old version.
pub fn reboot_pending(ext: &Extension) -> bool {
    match (&ext.running, &ext.staged) {
        (Some(r), Some(s)) => r != s,
        (None, Some(_)) => true,
        _ => false,
    }
}

/// The version the node runs from this sysext when its image file is no
/// longer in `/opt/extensions/<name>/` (deleted while merged: the merged
/// `/usr` keeps working, but there is nothing to boot or unstage back to).
/// systemd-sysupdate's clean-up does that: it spares only `ProtectVersion=`
/// and the version it installs, not the image the node booted
/// (src/sysupdate/sysupdate-transfer.c `transfer_vacuum`). Only for a node
/// whose symlink is set, i.e. that boots the sysext at all.
pub fn running_image_gone(ext: &Extension) -> Option<&Version> {
    let running = ext.running.as_ref()?;
    ext.staged_target.as_ref()?;
    (!ext.images.contains(running)).then_some(running)
}

/// The image `ext` would go back to (`fleetctl rollback`): the newest kept
/// image older than the one it runs, i.e. the previous minor after a hop
/// (the clean-up keeps it), or an older patch of its minor.
pub fn rollback_image(ext: &Extension) -> Option<&Version> {
    let running = ext.running.as_ref()?;
    ext.images.iter().filter(|v| *v < running).max()
}

/// `ext`'s sysupdate configs as a pin sees them: the content of the one at
/// `main` (the config fleetctl writes), if there is one, and the paths of
/// every other, which a pin disables. The planner predicts with it and
/// `rollback` pins back with it.
pub fn main_and_stray_configs(ext: &Extension, main: &str) -> (Option<String>, Vec<String>) {
    let content = ext
        .configs
        .iter()
        .find(|c| c.path == main)
        .map(|c| c.content.clone());
    let strays = ext
        .configs
        .iter()
        .filter(|c| c.path != main)
        .map(|c| c.path.clone())
        .collect();
    (content, strays)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsFacts {
    /// `VERSION` from `/etc/os-release`.
    pub running: String,
    /// `NEW_VERSION` when update_engine has an update staged for the next boot
    /// (`CURRENT_OP` is `UPDATE_STATUS_UPDATED_NEED_REBOOT`); `"unknown"` when
    /// one is staged but update_engine does not say which.
    pub staged: Option<String>,
    /// `CURRENT_OP` from `update_engine_client -status`, e.g. `UPDATE_STATUS_IDLE`;
    /// empty when update_engine could not be asked.
    pub current_op: String,
}

/// A sysext-delivered component (kubernetes, containerd).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extension {
    /// What the node booted with (`kubelet --version`, `containerd --version`);
    /// `None` when the binary is not there or does not run.
    pub running: Option<Version>,
    /// What `/etc/extensions/<name>.raw` points at: what the next boot merges.
    pub staged: Option<Version>,
    /// Raw symlink target, for messages when it does not parse as a version.
    pub staged_target: Option<String>,
    /// Image versions present in `/opt/extensions/<name>/`.
    pub images: Vec<Version>,
    /// Every `.conf` (and systemd ≥ 257's `.transfer`) in
    /// `/etc/sysupdate.<name>.d/`, sorted by path.
    pub configs: Vec<SysupdateConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysupdateConfig {
    pub path: String,
    /// sha256 of the file, hex: what the plan fingerprints.
    pub sha256: String,
    pub pin: Pin,
    /// The whole file, for diffs in the plan.
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "minor", rename_all = "kebab-case")]
pub enum Pin {
    /// `MatchPattern=<name>-v1.37.@v-%a.raw`: only patches of v1.37 arrive.
    Pinned(Minor),
    /// `MatchPattern=<name>-@v-%a.raw`: whatever upstream publishes as newest.
    Floating,
    /// No MatchPattern, or one fleetctl does not recognise.
    Unknown,
}

/// What the API server says, read from the first reachable control-plane node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterFacts {
    pub nodes: Vec<ClusterNode>,
    /// `kubernetesVersion` from the kubeadm-config ConfigMap.
    pub version: Option<Version>,
    /// A kube-proxy DaemonSet exists (it should not: Cilium replaces it).
    pub kube_proxy: bool,
    /// The versions the kube-apiserver pods run (their image tags), as
    /// listed in kube-system by `component=kube-apiserver`; empty when
    /// unknown. A pod someone else labelled so can only make a skew check
    /// stricter (a higher newest, a lower oldest).
    #[serde(default)]
    pub apiservers: Vec<Version>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterNode {
    pub name: String,
    pub ready: bool,
    /// `spec.unschedulable`: cordoned.
    pub cordoned: bool,
    pub kubelet_version: Option<Version>,
    pub control_plane: bool,
}

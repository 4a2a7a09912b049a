//! What one node says about its cgroup hierarchy and its kubelet's own
//! config.yaml: the input of both the cgroup check (`super::cgroup`) and the
//! per-node kubelet views (`super::kubelet_config`), kept apart so that
//! each of those imports it and neither imports the other for it.

use serde::Deserialize;

/// Where kubeadm writes the kubelet's configuration (`--config`).
pub const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";

/// What one node said about its cgroup hierarchy and its kubelet config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCgroup {
    pub node: String,
    /// `Some(true)`: cgroup v2; `Some(false)`: v1; `None`: not known.
    pub v2: Option<bool>,
    /// The content of [`KUBELET_CONFIG`], `None` when absent or unreadable.
    pub kubelet_config: Option<String>,
    /// `/var/lib/kubelet/instance-config.yaml`, `None` when absent or unreadable.
    pub instance_config: Option<String>,
}

#[derive(Deserialize)]
struct KubeletConfiguration {
    #[serde(rename = "failCgroupV1")]
    fail_cgroup_v1: Option<bool>,
}

/// `failCgroupV1` as the kubelet config sets it: `Ok(None)` when unset (the
/// kubelet's default then applies), `Err` when the file is not YAML the
/// kubelet would load.
pub fn fail_cgroup_v1(config: &str) -> Result<Option<bool>, String> {
    crate::untrusted_yaml::from_str::<KubeletConfiguration>(config)
        .map(|c| c.fail_cgroup_v1)
        .map_err(|e| format!("{KUBELET_CONFIG} is not a kubelet configuration: {e}"))
}

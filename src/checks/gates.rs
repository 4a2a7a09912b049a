//! Feature gates the hop's minor removed. A kubelet given a gate it no
//! longer knows exits before it does anything (cmd/kubelet/app/server.go:
//! `failed to set feature gates from initial flags-based config:
//! unrecognized feature gate: <Gate>`), so the node comes back from its
//! reboot NotReady. kube-apiserver, kube-controller-manager and
//! kube-scheduler refuse the same way (component-base's featuregate), and
//! kubeadm renders their `--feature-gates` into the new static pods from
//! ClusterConfiguration's `extraArgs`: the new pod never comes up, and
//! `kubeadm upgrade apply` puts the old manifests back and fails
//! (cmd/kubeadm/app/phases/upgrade/staticpods.go, `rollbackOldManifests`),
//! after fleetctl has already started the hop.
//!
//! Where gates are set, and so read here:
//! - the kubelet: the `kube-system/kubelet-config` ConfigMap's
//!   `featureGates` (kubeadm's kubelet-config phase writes it into every
//!   node's config.yaml at the hop), each node's own
//!   `/var/lib/kubelet/config.yaml`, and `--feature-gates` in any file the
//!   kubelet unit reads its flags from (kubeadm-flags.env, the drop-ins,
//!   `KUBELET_EXTRA_ARGS`), read by [`super::flags::kubelet_flags`];
//! - the control plane: ClusterConfiguration's `apiServer`,
//!   `controllerManager` and `scheduler` `extraArgs`, as a map
//!   (kubeadm.k8s.io/v1beta3) or a list of `{name, value}` (v1beta4).
//!
//! Setting a gate that is locked to its default (a GA gate kept for a few
//! releases) to the other value fails too (`cannot set feature gate X to
//! false, feature is locked to true`); that is not checked here yet.

mod table;

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::cgroup::KUBELET_CONFIG;
use super::flags::{NodeKubeletFiles, kubelet_flags};
use super::model::{Check, CheckName, Verdict};
use crate::version::Minor;

pub use table::{REMOVED_FEATURE_GATES, RemovedGate, removed_by};

/// The ConfigMap kubeadm keeps the cluster-wide kubelet configuration in.
pub const KUBELET_CONFIGMAP: &str = "kube-system/kubelet-config";

/// A component that takes `--feature-gates`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KubeComponent {
    Kubelet,
    KubeApiserver,
    KubeControllerManager,
    KubeScheduler,
}

impl fmt::Display for KubeComponent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KubeComponent::Kubelet => "kubelet",
            KubeComponent::KubeApiserver => "kube-apiserver",
            KubeComponent::KubeControllerManager => "kube-controller-manager",
            KubeComponent::KubeScheduler => "kube-scheduler",
        })
    }
}

/// The gates of a `--feature-gates` value (`A=true,B=false`), as
/// component-base splits it: by commas, each `name=value` trimmed; a pair
/// without `=` still names a gate (the component refuses it too, for its
/// missing value).
pub fn parse_gate_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|pair| pair.split('=').next().unwrap_or("").trim())
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct KubeletConfiguration {
    #[serde(default)]
    feature_gates: BTreeMap<String, serde::de::IgnoredAny>,
}

/// The gate names of a KubeletConfiguration's `featureGates`.
pub fn kubelet_config_gates(config: &str) -> Result<Vec<String>, String> {
    if config.trim().is_empty() {
        return Ok(Vec::new());
    }
    serde_saphyr::from_str::<Option<KubeletConfiguration>>(config)
        .map(|c| c.unwrap_or_default().feature_gates.into_keys().collect())
        .map_err(|e| format!("not a kubelet configuration: {e}"))
}

#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// The gates of the kubelet-config ConfigMap (`kubectl get configmap -o
/// json`): its `kubelet` key holds the KubeletConfiguration.
pub fn kubelet_configmap_gates(configmap_json: &str) -> Result<Vec<String>, String> {
    let map: ConfigMap = serde_json::from_str(configmap_json)
        .map_err(|e| format!("{KUBELET_CONFIGMAP} is not a ConfigMap: {e}"))?;
    match map.data.get("kubelet") {
        Some(config) => {
            kubelet_config_gates(config).map_err(|e| format!("{KUBELET_CONFIGMAP}: {e}"))
        }
        None => Ok(Vec::new()),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ExtraArgs {
    /// kubeadm.k8s.io/v1beta3: `extraArgs: {feature-gates: "A=true"}`.
    Map(BTreeMap<String, String>),
    /// v1beta4: `extraArgs: [{name: feature-gates, value: "A=true"}]`.
    List(Vec<Arg>),
}

#[derive(Deserialize)]
struct Arg {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ControlPlaneComponent {
    extra_args: Option<ExtraArgs>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ClusterConfiguration {
    #[serde(default)]
    api_server: Option<ControlPlaneComponent>,
    #[serde(default)]
    controller_manager: Option<ControlPlaneComponent>,
    #[serde(default)]
    scheduler: Option<ControlPlaneComponent>,
}

/// One control-plane component's `--feature-gates` in the ClusterConfiguration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlaneGates {
    pub component: KubeComponent,
    /// `apiServer.extraArgs`, …
    pub field: &'static str,
    pub gates: Vec<String>,
}

/// The `--feature-gates` of each control-plane component in kubeadm-config's
/// ClusterConfiguration (`kubectl get configmap kubeadm-config -o json`).
pub fn control_plane_gates(kubeadm_config_json: &str) -> Result<Vec<ControlPlaneGates>, String> {
    let map: ConfigMap = serde_json::from_str(kubeadm_config_json)
        .map_err(|e| format!("kube-system/kubeadm-config is not a ConfigMap: {e}"))?;
    let Some(yaml) = map.data.get("ClusterConfiguration") else {
        return Err("the kubeadm-config ConfigMap has no ClusterConfiguration".into());
    };
    let config: ClusterConfiguration = serde_saphyr::from_str::<Option<ClusterConfiguration>>(yaml)
        .map_err(|e| format!("the ClusterConfiguration in kubeadm-config is not valid: {e}"))?
        .unwrap_or_default();
    let mut found = Vec::new();
    for (component, field, section) in [
        (
            KubeComponent::KubeApiserver,
            "apiServer.extraArgs",
            config.api_server,
        ),
        (
            KubeComponent::KubeControllerManager,
            "controllerManager.extraArgs",
            config.controller_manager,
        ),
        (
            KubeComponent::KubeScheduler,
            "scheduler.extraArgs",
            config.scheduler,
        ),
    ] {
        let values: Vec<String> = match section.and_then(|s| s.extra_args) {
            None => Vec::new(),
            Some(ExtraArgs::Map(map)) => map.get("feature-gates").cloned().into_iter().collect(),
            Some(ExtraArgs::List(list)) => list
                .into_iter()
                .filter(|a| a.name == "feature-gates")
                .map(|a| a.value)
                .collect(),
        };
        let gates: Vec<String> = values.iter().flat_map(|v| parse_gate_list(v)).collect();
        if !gates.is_empty() {
            found.push(ControlPlaneGates {
                component,
                field,
                gates,
            });
        }
    }
    Ok(found)
}

/// Everything the check reads, each source as far as it could be read.
#[derive(Debug, Clone, Copy)]
pub struct GateSources<'a> {
    /// `kubectl -n kube-system get configmap kubelet-config -o json`;
    /// `Ok(None)`: there is no such ConfigMap.
    pub kubelet_configmap: &'a Result<Option<String>, String>,
    /// `kubectl -n kube-system get configmap kubeadm-config -o json`.
    pub kubeadm_config: &'a Result<String, String>,
    /// Node → its `/var/lib/kubelet/config.yaml`, `None` when unread.
    pub node_configs: &'a [(String, Option<String>)],
    /// Every node's kubelet flag files.
    pub kubelet_files: &'a [NodeKubeletFiles],
}

/// The `feature-gates` check of a hop to `hop`: the kubelets of the
/// `restarted` nodes and, when the hop runs kubeadm's upgrade
/// (`control_plane`), the control-plane components it re-renders must all
/// know every gate they are given. Gates removed before `hop` count too: a
/// kubelet that lags the cluster still starts with them today.
pub fn check_feature_gates(
    sources: GateSources<'_>,
    hop: Minor,
    restarted: &[String],
    control_plane: bool,
) -> Check {
    let mut blocking = Vec::new();
    let mut unread = Vec::new();
    let mut judge = |gate: &str, component: KubeComponent, at: &str| {
        if let Some(removed) = removed_by(gate, hop) {
            blocking.push(format!(
                "{at}: feature gate {gate} ({component}), removed in {}",
                removed.removed_in
            ));
        }
    };
    if !restarted.is_empty() {
        match sources.kubelet_configmap {
            Ok(Some(json)) => match kubelet_configmap_gates(json) {
                Ok(gates) => {
                    for gate in gates {
                        judge(
                            &gate,
                            KubeComponent::Kubelet,
                            &format!("ConfigMap {KUBELET_CONFIGMAP} (featureGates)"),
                        );
                    }
                }
                Err(e) => unread.push(e),
            },
            Ok(None) => {}
            Err(e) => unread.push(format!("{KUBELET_CONFIGMAP}: {e}")),
        }
    }
    for (node, config) in sources.node_configs {
        if !restarted.contains(node) {
            continue;
        }
        if let Some(config) = config {
            match kubelet_config_gates(config) {
                Ok(gates) => {
                    for gate in gates {
                        judge(
                            &gate,
                            KubeComponent::Kubelet,
                            &format!("{node}: {KUBELET_CONFIG} (featureGates)"),
                        );
                    }
                }
                Err(e) => unread.push(format!("{node}: {KUBELET_CONFIG} is {e}")),
            }
        }
    }
    for node in sources.kubelet_files {
        if !restarted.contains(&node.node) {
            continue;
        }
        for (path, content) in &node.files {
            for flag in kubelet_flags(path, content) {
                if flag.flag != "--feature-gates" {
                    continue;
                }
                for gate in parse_gate_list(flag.value.as_deref().unwrap_or("")) {
                    judge(
                        &gate,
                        KubeComponent::Kubelet,
                        &format!(
                            "{}: {path} ({} --feature-gates)",
                            node.node, flag.origin.variable
                        ),
                    );
                }
            }
        }
    }
    if control_plane {
        match sources
            .kubeadm_config
            .as_deref()
            .map_err(String::clone)
            .and_then(control_plane_gates)
        {
            Ok(components) => {
                for c in components {
                    let at = format!(
                        "ConfigMap kube-system/kubeadm-config (ClusterConfiguration {} feature-gates)",
                        c.field
                    );
                    for gate in &c.gates {
                        judge(gate, c.component, &at);
                    }
                }
            }
            Err(e) => unread.push(e),
        }
    }
    if !blocking.is_empty() {
        let mut details = blocking;
        details.extend(unread.into_iter().map(|e| format!("not read: {e}")));
        return Check {
            name: CheckName::FeatureGates,
            verdict: Verdict::Block,
            summary: format!(
                "a {hop} component would refuse to start: a feature gate it no longer knows is set \
                 (\"unrecognized feature gate\")"
            ),
            details,
            remedy: Some(
                "remove the gate where it is set: the kubelet-config ConfigMap (`kubectl -n kube-system \
                 edit configmap kubelet-config`) or that node's file for the kubelet; the \
                 ClusterConfiguration's extraArgs (`kubectl -n kube-system edit configmap \
                 kubeadm-config`) for the control plane, which kubeadm renders into the new static \
                 pods; then plan again"
                    .to_string(),
            ),
        };
    }
    if !unread.is_empty() {
        return Check {
            name: CheckName::FeatureGates,
            verdict: Verdict::Warn,
            summary: "could not read every place feature gates are set, so those are unchecked"
                .into(),
            details: unread,
            remedy: Some(format!(
                "fix what the error says and plan again, or go on knowing `{}` was not fully checked",
                CheckName::FeatureGates
            )),
        };
    }
    Check::pass(
        CheckName::FeatureGates,
        format!("no feature gate set for the kubelet or the control plane is one {hop} removed"),
    )
}

#[cfg(test)]
mod tests;

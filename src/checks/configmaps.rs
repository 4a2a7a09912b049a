//! The two ConfigMaps of kube-system that kubeadm's `upgrade` works from,
//! read once on the first control plane before the plan is made.
//!
//! - `kubelet-config` (key `kubelet`): the cluster's KubeletConfiguration.
//!   Every `kubeadm upgrade apply|node` rewrites each node's
//!   `/var/lib/kubelet/config.yaml` from it (`WriteKubeletConfigFiles`,
//!   cmd/kubeadm/app/phases/upgrade/postupgrade.go, then
//!   `kubeletphase.WriteConfigToDisk`, cmd/kubeadm/app/phases/kubelet/config.go),
//!   so what the node's kubelet starts with after a hop is this document,
//!   not the node's file of today (`super::prediction`).
//! - `kubeadm-config` (key `ClusterConfiguration`): among others the
//!   `extraArgs` kubeadm puts on the command line of each control-plane
//!   static pod it writes during `upgrade apply` (a removed
//!   `--feature-gates` entry there keeps the new kube-apiserver from starting).
//!
//! Only what the checks need is kept, as parsed YAML: the whole kubelet
//! document (any field may matter to a later rule) and the extra arguments
//! per component, whichever kubeadm API version stored them (v1beta3: a
//! map; v1beta4: a list of `name`/`value`, duplicates allowed).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The ConfigMap key kubeadm keeps the KubeletConfiguration under
/// (`constants.KubeletBaseConfigurationConfigMapKey`).
pub const KUBELET_CONFIGMAP_KEY: &str = "kubelet";

/// Where the checks say the cluster's kubelet configuration lives.
pub const KUBELET_CONFIGMAP: &str = "the kube-system/kubelet-config ConfigMap";

/// A KubeletConfiguration document, parsed: its top-level fields.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubeletConfigDoc {
    pub fields: Map<String, Value>,
}

impl KubeletConfigDoc {
    /// A KubeletConfiguration (or a fragment of one, as
    /// `instance-config.yaml` is). An empty document has no fields.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let value: Value =
            crate::untrusted_yaml::from_str(text).context("not YAML a kubelet would load")?;
        match value {
            Value::Object(fields) => Ok(KubeletConfigDoc { fields }),
            Value::Null => Ok(Self::default()),
            other => anyhow::bail!("a kubelet configuration is a mapping, not `{other}`"),
        }
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.fields.get(field)
    }

    /// `failCgroupV1`, when the document sets it to a boolean.
    pub fn fail_cgroup_v1(&self) -> Option<bool> {
        self.get("failCgroupV1").and_then(Value::as_bool)
    }

    /// `featureGates`, gate → enabled (entries that are not booleans are
    /// kept out: the kubelet refuses those anyway).
    pub fn feature_gates(&self) -> BTreeMap<String, bool> {
        self.get("featureGates")
            .and_then(Value::as_object)
            .map(|gates| {
                gates
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_bool()?)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The control-plane components kubeadm writes static pods for, as the
/// ClusterConfiguration names their sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ControlPlaneComponent {
    ApiServer,
    ControllerManager,
    Scheduler,
    /// `etcd.local` (stacked etcd only).
    Etcd,
}

impl ControlPlaneComponent {
    pub const ALL: [ControlPlaneComponent; 4] = [
        ControlPlaneComponent::ApiServer,
        ControlPlaneComponent::ControllerManager,
        ControlPlaneComponent::Scheduler,
        ControlPlaneComponent::Etcd,
    ];

    /// The binary (and static pod) name: `kube-apiserver`.
    pub fn binary(self) -> &'static str {
        match self {
            ControlPlaneComponent::ApiServer => "kube-apiserver",
            ControlPlaneComponent::ControllerManager => "kube-controller-manager",
            ControlPlaneComponent::Scheduler => "kube-scheduler",
            ControlPlaneComponent::Etcd => "etcd",
        }
    }

    /// Where its extra arguments sit in a ClusterConfiguration.
    pub fn section(self) -> &'static str {
        match self {
            ControlPlaneComponent::ApiServer => "apiServer.extraArgs",
            ControlPlaneComponent::ControllerManager => "controllerManager.extraArgs",
            ControlPlaneComponent::Scheduler => "scheduler.extraArgs",
            ControlPlaneComponent::Etcd => "etcd.local.extraArgs",
        }
    }

    fn path(self) -> &'static [&'static str] {
        match self {
            ControlPlaneComponent::ApiServer => &["apiServer"],
            ControlPlaneComponent::ControllerManager => &["controllerManager"],
            ControlPlaneComponent::Scheduler => &["scheduler"],
            ControlPlaneComponent::Etcd => &["etcd", "local"],
        }
    }
}

/// What the checks read from kubeadm's ClusterConfiguration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterConfiguration {
    /// `kubernetesVersion`, as written.
    pub kubernetes_version: Option<String>,
    /// Each component's `extraArgs` as (flag name without dashes, value),
    /// in the order the document gives them.
    pub extra_args: BTreeMap<ControlPlaneComponent, Vec<(String, String)>>,
    /// `featureGates`: kubeadm's own gates, gate → value (kubeadm reads
    /// them as `map[string]bool`; an entry that is not a boolean is kept
    /// out, kubeadm refuses the whole document for it).
    pub feature_gates: BTreeMap<String, bool>,
}

impl ClusterConfiguration {
    pub fn parse(text: &str) -> Result<Self> {
        let value: Value = crate::untrusted_yaml::from_str(text)
            .context("the ClusterConfiguration is not YAML")?;
        let mut config = ClusterConfiguration {
            kubernetes_version: value
                .get("kubernetesVersion")
                .and_then(Value::as_str)
                .map(str::to_string),
            feature_gates: value
                .get("featureGates")
                .and_then(Value::as_object)
                .map(|gates| {
                    gates
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_bool()?)))
                        .collect()
                })
                .unwrap_or_default(),
            ..Default::default()
        };
        for component in ControlPlaneComponent::ALL {
            let mut at = Some(&value);
            for key in component.path() {
                at = at.and_then(|v| v.get(*key));
            }
            let args = at
                .and_then(|v| v.get("extraArgs"))
                .map(extra_args)
                .transpose()
                .with_context(|| {
                    format!(
                        "{} is neither v1beta3's map nor v1beta4's list",
                        component.section()
                    )
                })?
                .unwrap_or_default();
            if !args.is_empty() {
                config.extra_args.insert(component, args);
            }
        }
        Ok(config)
    }

    /// The values of one flag (`feature-gates`) of one component, in order.
    pub fn args(&self, component: ControlPlaneComponent, name: &str) -> Vec<&str> {
        self.extra_args
            .get(&component)
            .into_iter()
            .flatten()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// v1beta3: `{name: value}`; v1beta4: `[{name, value}]`.
fn extra_args(v: &Value) -> Result<Vec<(String, String)>> {
    fn text(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Object(map) => Ok(map.iter().map(|(k, v)| (k.clone(), text(v))).collect()),
        Value::Array(list) => list
            .iter()
            .map(|entry| {
                let name = entry
                    .get("name")
                    .and_then(Value::as_str)
                    .context("an extraArgs entry without a name")?;
                Ok((
                    name.to_string(),
                    entry.get("value").map(text).unwrap_or_default(),
                ))
            })
            .collect(),
        other => anyhow::bail!("extraArgs is `{other}`"),
    }
}

/// Both ConfigMaps as far as they could be read: `Ok(None)` when the API
/// server says the ConfigMap does not exist, `Err` why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfigs {
    pub kubelet: Result<Option<KubeletConfigDoc>, String>,
    pub cluster: Result<Option<ClusterConfiguration>, String>,
}

impl Default for ClusterConfigs {
    fn default() -> Self {
        let unread = "no control-plane node answered".to_string();
        ClusterConfigs {
            kubelet: Err(unread.clone()),
            cluster: Err(unread),
        }
    }
}

#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

fn configmap(json: &str, name: &str) -> Result<ConfigMap> {
    serde_json::from_str(json).with_context(|| {
        format!("`kubectl get configmap {name} -o json` printed something that is not a ConfigMap")
    })
}

/// `kubectl -n kube-system get configmap kubelet-config -o json`: its
/// KubeletConfiguration; an error when the key is missing (kubeadm's
/// upgrade then fails the same way).
pub fn parse_kubelet_configmap(json: &str) -> Result<KubeletConfigDoc> {
    let map = configmap(json, "kubelet-config")?;
    let text = map.data.get(KUBELET_CONFIGMAP_KEY).with_context(|| {
        format!("{KUBELET_CONFIGMAP} has no `{KUBELET_CONFIGMAP_KEY}` key, which kubeadm's upgrade reads")
    })?;
    KubeletConfigDoc::parse(text).with_context(|| format!("in {KUBELET_CONFIGMAP}"))
}

/// `kubectl -n kube-system get configmap kubeadm-config -o json`: its
/// ClusterConfiguration.
pub fn parse_kubeadm_configmap(json: &str) -> Result<ClusterConfiguration> {
    let map = configmap(json, "kubeadm-config")?;
    let text = map
        .data
        .get("ClusterConfiguration")
        .context("the kubeadm-config ConfigMap has no `ClusterConfiguration` key")?;
    ClusterConfiguration::parse(text).context("in the kubeadm-config ConfigMap")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(key: &str, text: &str) -> String {
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {key: text}})
            .to_string()
    }

    #[test]
    fn the_kubelet_document_keeps_every_field() {
        let json = cm(
            "kubelet",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             cgroupDriver: systemd\nfailCgroupV1: false\nfeatureGates:\n  Foo: true\n  Bar: false\n",
        );
        let doc = parse_kubelet_configmap(&json).unwrap();
        assert_eq!(doc.fail_cgroup_v1(), Some(false));
        assert_eq!(doc.get("cgroupDriver"), Some(&Value::from("systemd")));
        assert_eq!(
            doc.feature_gates(),
            BTreeMap::from([("Bar".to_string(), false), ("Foo".to_string(), true)])
        );
        assert!(parse_kubelet_configmap(&cm("other", "a: 1")).is_err());
        assert!(parse_kubelet_configmap(&cm("kubelet", "a: [")).is_err());
        assert!(parse_kubelet_configmap("not json").is_err());
        assert_eq!(
            KubeletConfigDoc::parse("").unwrap(),
            KubeletConfigDoc::default()
        );
    }

    #[test]
    fn extra_args_of_both_kubeadm_api_versions() {
        let v1beta3 = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n\
                       kubernetesVersion: v1.34.2\napiServer:\n  extraArgs:\n    \
                       feature-gates: Foo=true\n    audit-log-maxage: \"30\"\n";
        let c = parse_kubeadm_configmap(&cm("ClusterConfiguration", v1beta3)).unwrap();
        assert_eq!(c.kubernetes_version.as_deref(), Some("v1.34.2"));
        assert_eq!(
            c.args(ControlPlaneComponent::ApiServer, "feature-gates"),
            ["Foo=true"]
        );
        assert!(
            c.args(ControlPlaneComponent::Scheduler, "feature-gates")
                .is_empty()
        );
        let v1beta4 = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n\
                       controllerManager:\n  extraArgs:\n  - name: feature-gates\n    value: A=true\n  \
                       - name: feature-gates\n    value: B=false\netcd:\n  local:\n    extraArgs:\n    \
                       - name: quota-backend-bytes\n      value: \"8589934592\"\n";
        let c = parse_kubeadm_configmap(&cm("ClusterConfiguration", v1beta4)).unwrap();
        assert_eq!(
            c.args(ControlPlaneComponent::ControllerManager, "feature-gates"),
            ["A=true", "B=false"]
        );
        assert_eq!(
            c.args(ControlPlaneComponent::Etcd, "quota-backend-bytes"),
            ["8589934592"]
        );
        let gates = "featureGates:\n  NodeLocalCRISocket: false\n  Odd: maybe\n";
        let c = parse_kubeadm_configmap(&cm("ClusterConfiguration", gates)).unwrap();
        assert_eq!(
            c.feature_gates,
            BTreeMap::from([("NodeLocalCRISocket".to_string(), false)])
        );
        let bad = "apiServer:\n  extraArgs: 3\n";
        assert!(parse_kubeadm_configmap(&cm("ClusterConfiguration", bad)).is_err());
    }
}

//! kube-system/kubeadm-config, parsed once: the one reader of kubeadm's
//! ClusterConfiguration, used by the cluster facts (its version), the etcd
//! snapshot and gate (`checks::etcd_topology`, `checks::cluster_name`) and
//! the checks (extra arguments, kubeadm's feature gates). It sits here, under
//! `checks`, because the cluster facts read the version from it.
//!
//! The document is read as YAML into a generic value and only the fields
//! fleetctl uses are taken out, whichever kubeadm API version stored them
//! (v1beta3: `extraArgs` a map; v1beta4: a list of `name`/`value`,
//! duplicates allowed; cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go
//! `ClusterConfiguration`, `Etcd`, `LocalEtcd`, `ExternalEtcd`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::Value;

/// The key kubeadm keeps the ClusterConfiguration under in kubeadm-config
/// (`constants.ClusterConfigurationConfigMapKey`).
pub const CLUSTER_CONFIGURATION_KEY: &str = "ClusterConfiguration";

#[derive(Deserialize)]
struct ConfigMapData {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// The `data` of a ConfigMap as `kubectl get configmap -o json` prints it
/// (empty when it has none). Each caller says which ConfigMap in its error.
pub fn configmap_data(json: &str) -> serde_json::Result<BTreeMap<String, String>> {
    serde_json::from_str::<ConfigMapData>(json).map(|m| m.data)
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

/// What fleetctl reads from kubeadm's ClusterConfiguration: the cluster's
/// version (`node`'s cluster facts), its name and etcd (the etcd snapshot
/// and gate), the control-plane components' `extraArgs` and kubeadm's own
/// `featureGates` (the checks).
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
    /// `clusterName`, as written (kubeadm's default, `kubernetes`, applies
    /// when it is missing or empty).
    pub cluster_name: Option<String>,
    /// `etcd.local`, when the section is there (stacked etcd).
    pub etcd_local: Option<EtcdLocal>,
    /// `etcd.external`, when the section is there: its `endpoints`.
    pub etcd_external: Option<Vec<String>>,
}

/// `etcd.local` of a ClusterConfiguration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EtcdLocal {
    /// `dataDir`, as written.
    pub data_dir: Option<String>,
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
            cluster_name: value
                .get("clusterName")
                .and_then(Value::as_str)
                .map(str::to_string),
            etcd_local: section(&value, &["etcd", "local"]).map(|local| EtcdLocal {
                data_dir: local
                    .get("dataDir")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }),
            etcd_external: section(&value, &["etcd", "external"]).map(|external| {
                external
                    .get("endpoints")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            }),
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

/// The mapping at `path`, when it is there and not null (`local:` alone is
/// no section, as kubeadm's decoder reads it).
fn section<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut at = value;
    for key in path {
        at = at.get(*key)?;
    }
    (!at.is_null()).then_some(at)
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

/// `kubectl -n kube-system get configmap kubeadm-config -o json`: its
/// ClusterConfiguration.
pub fn parse_kubeadm_configmap(json: &str) -> Result<ClusterConfiguration> {
    let map = configmap_data(json).context(
        "`kubectl get configmap kubeadm-config -o json` printed something that is not a ConfigMap",
    )?;
    let text = map
        .get(CLUSTER_CONFIGURATION_KEY)
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

    #[test]
    fn cluster_name_and_etcd_as_written() {
        let yaml = "clusterName: prod-eu\netcd:\n  local:\n    dataDir: /data/etcd\n";
        let c = ClusterConfiguration::parse(yaml).unwrap();
        assert_eq!(c.cluster_name.as_deref(), Some("prod-eu"));
        assert_eq!(
            c.etcd_local,
            Some(EtcdLocal {
                data_dir: Some("/data/etcd".into())
            })
        );
        assert_eq!(c.etcd_external, None);
        let c = ClusterConfiguration::parse("etcd:\n  local:\n  external:\n    endpoints: [a]\n")
            .unwrap();
        assert_eq!(c.etcd_local, None, "a null section is no section");
        assert_eq!(c.etcd_external, Some(vec!["a".to_string()]));
    }
}

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
//! map; v1beta4: a list of `name`/`value`, duplicates allowed). The
//! ClusterConfiguration has one parser for all of fleetctl,
//! `crate::node::kubeadm_config`, re-exported here.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{Map, Value};

use crate::node::configmap_data;
pub use crate::node::{ClusterConfiguration, ControlPlaneComponent, parse_kubeadm_configmap};

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

fn configmap(json: &str, name: &str) -> Result<BTreeMap<String, String>> {
    configmap_data(json).with_context(|| {
        format!("`kubectl get configmap {name} -o json` printed something that is not a ConfigMap")
    })
}

/// `kubectl -n kube-system get configmap kubelet-config -o json`: its
/// KubeletConfiguration; an error when the key is missing (kubeadm's
/// upgrade then fails the same way).
pub fn parse_kubelet_configmap(json: &str) -> Result<KubeletConfigDoc> {
    let map = configmap(json, "kubelet-config")?;
    let text = map.get(KUBELET_CONFIGMAP_KEY).with_context(|| {
        format!("{KUBELET_CONFIGMAP} has no `{KUBELET_CONFIGMAP_KEY}` key, which kubeadm's upgrade reads")
    })?;
    KubeletConfigDoc::parse(text).with_context(|| format!("in {KUBELET_CONFIGMAP}"))
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
}

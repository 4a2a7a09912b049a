//! The Kubernetes API's JSON fleetctl reads (nodes, the kubeadm-config
//! ConfigMap, static pods): only the fields it needs, each optional where
//! the API may leave it out.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;

use super::ClusterNode;
use crate::node::{CLUSTER_CONFIGURATION_KEY, ClusterConfiguration, configmap_data};
use crate::version::Version;

use super::sections::excerpt;

#[derive(Deserialize)]
pub(super) struct NodeList {
    #[serde(default)]
    pub(super) items: Vec<KubeNode>,
}

#[derive(Deserialize)]
pub(super) struct KubeNode {
    pub(super) metadata: KubeMeta,
    #[serde(default)]
    pub(super) spec: KubeNodeSpec,
    #[serde(default)]
    pub(super) status: KubeNodeStatus,
}

#[derive(Deserialize)]
pub(super) struct KubeMeta {
    pub(super) name: String,
    #[serde(default)]
    pub(super) labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
pub(super) struct KubeNodeSpec {
    #[serde(default)]
    pub(super) unschedulable: bool,
}

#[derive(Deserialize, Default)]
pub(super) struct KubeNodeStatus {
    #[serde(default)]
    pub(super) conditions: Vec<KubeCondition>,
    #[serde(default, rename = "nodeInfo")]
    pub(super) node_info: KubeNodeInfo,
}

#[derive(Deserialize)]
pub(super) struct KubeCondition {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) status: String,
}

#[derive(Deserialize, Default)]
pub(super) struct KubeNodeInfo {
    #[serde(default, rename = "kubeletVersion")]
    pub(super) kubelet_version: String,
}

pub(super) const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";

pub(super) fn cluster_nodes(json: &str) -> Result<Vec<ClusterNode>> {
    let list: NodeList = serde_json::from_str(json).with_context(|| {
        format!(
            "`kubectl get nodes -o json` printed something that is not a node list: {}",
            excerpt(json)
        )
    })?;
    Ok(list.items.into_iter().map(cluster_node).collect())
}

pub(super) fn cluster_node(node: KubeNode) -> ClusterNode {
    let ready = node
        .status
        .conditions
        .iter()
        .any(|c| c.kind == "Ready" && c.status == "True");
    ClusterNode {
        control_plane: node.metadata.labels.contains_key(CONTROL_PLANE_LABEL),
        name: node.metadata.name,
        ready,
        cordoned: node.spec.unschedulable,
        kubelet_version: node.status.node_info.kubelet_version.parse().ok(),
    }
}

/// What `kubectl get KIND/NAME KIND/NAME … --ignore-not-found -o json`
/// printed: the objects that exist, by kind and name, each as its own JSON.
/// kubectl prints nothing when none exists, and a List of those that do
/// otherwise: two or more names never imply a single item (kubectl
/// `pkg/cmd/get/get.go`, `printGeneric`). A lone object is taken too.
pub(super) fn found_objects(json: &str, what: &str) -> Result<BTreeMap<(String, String), String>> {
    if json.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let unreadable = || {
        format!(
            "`{what}` printed something that is not a List: {}",
            excerpt(json)
        )
    };
    let doc: serde_json::Value = serde_json::from_str(json).with_context(unreadable)?;
    let items = match doc.get("kind").and_then(|k| k.as_str()) {
        Some("List") => doc
            .get("items")
            .and_then(|i| i.as_array())
            .cloned()
            .unwrap_or_default(),
        Some(_) => vec![doc],
        None => anyhow::bail!(unreadable()),
    };
    let mut found = BTreeMap::new();
    for item in items {
        let kind = item.get("kind").and_then(|k| k.as_str());
        let name = item.pointer("/metadata/name").and_then(|n| n.as_str());
        let (Some(kind), Some(name)) = (kind, name) else {
            anyhow::bail!(
                "`{what}` printed an object without a kind or a name: {}",
                excerpt(&item.to_string())
            );
        };
        found.insert((kind.to_string(), name.to_string()), item.to_string());
    }
    Ok(found)
}

/// `kubernetesVersion` from the ClusterConfiguration inside the
/// kubeadm-config ConfigMap, read by the one parser of that document
/// (`node::kubeadm_config`).
pub(super) fn kubeadm_version(json: &str) -> Result<Option<Version>> {
    let map = configmap_data(json).with_context(|| {
        format!(
            "`kubectl get configmap kubeadm-config -o json` printed something that is \
             not a ConfigMap: {}",
            excerpt(json)
        )
    })?;
    let Some(config) = map.get(CLUSTER_CONFIGURATION_KEY) else {
        return Ok(None);
    };
    let config = ClusterConfiguration::parse(config).context("in the kubeadm-config ConfigMap")?;
    let Some(raw) = config.kubernetes_version else {
        return Ok(None);
    };
    let version = raw.parse().with_context(|| {
        format!("kubeadm-config says kubernetesVersion `{raw}`, which is not a version")
    })?;
    Ok(Some(version))
}

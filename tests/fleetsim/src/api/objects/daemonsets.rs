//! The DaemonSets the API lists: Cilium (the CNI, always there), the
//! kube-proxy DaemonSet (whose absence is the point) and Kured's (whose lock
//! annotation fleetctl takes with a resource-version precondition).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::KUBE_SYSTEM;
use super::cluster_created;
use super::nodes::{Readiness, readiness};
use crate::state::{Cluster, DaemonSet};
use crate::tools::util::{rfc3339, uid_of};

/// A DaemonSet the API would list.
enum Ds<'a> {
    /// The CNI, always there: it is why kube-proxy must stay away.
    Cilium,
    KubeProxy,
    Kured(&'a DaemonSet),
}

/// One listed DaemonSet: namespace, name, which.
pub(crate) struct Listed<'a> {
    pub namespace: String,
    pub name: String,
    ds: Ds<'a>,
}

/// The DaemonSets in `ns` (every namespace when `None`), sorted by
/// namespace then name, as the API lists them (by etcd key).
pub(crate) fn daemonsets<'a>(c: &'a Cluster, ns: Option<&str>) -> Vec<Listed<'a>> {
    let mut list = vec![Listed {
        namespace: KUBE_SYSTEM.into(),
        name: "cilium".into(),
        ds: Ds::Cilium,
    }];
    if c.kube_proxy {
        list.push(Listed {
            namespace: KUBE_SYSTEM.into(),
            name: "kube-proxy".into(),
            ds: Ds::KubeProxy,
        });
    }
    if let Some(k) = &c.kured {
        list.push(Listed {
            namespace: k.namespace.clone(),
            name: k.name.clone(),
            ds: Ds::Kured(k),
        });
    }
    list.retain(|l| ns.is_none_or(|ns| l.namespace == ns));
    list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    list
}

impl Listed<'_> {
    /// The pod template's one container, as the API returns it.
    pub fn container(&self, c: &Cluster) -> Value {
        match self.ds {
            Ds::Cilium => json!({
                "args": ["--config-dir=/tmp/cilium/config-map"],
                "command": ["cilium-agent"],
                "env": [{"name": "K8S_NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "image": "quay.io/cilium/cilium:v1.16.5",
                "imagePullPolicy": "IfNotPresent",
                "name": "cilium-agent",
            }),
            Ds::KubeProxy => json!({
                "command": [
                    "/usr/local/bin/kube-proxy",
                    "--config=/var/lib/kube-proxy/config.conf",
                    "--hostname-override=$(NODE_NAME)",
                ],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "image": format!("registry.k8s.io/kube-proxy:{}", c.version),
                "imagePullPolicy": "IfNotPresent",
                "name": "kube-proxy",
            }),
            Ds::Kured(k) => crate::kured::container_json(k),
        }
    }

    fn labels(&self) -> Value {
        match self.ds {
            Ds::Kured(k) if !k.labels.is_empty() => json!(k.labels),
            _ => json!({"k8s-app": self.name}),
        }
    }

    fn resource_version(&self, c: &Cluster) -> u64 {
        match self.ds {
            Ds::Cilium => 1,
            Ds::KubeProxy => c.resource_version,
            Ds::Kured(k) => k.resource_version,
        }
    }

    pub fn uid(&self) -> String {
        uid_of(&format!("daemonset/{}/{}", self.namespace, self.name))
    }

    pub fn is_kured(&self) -> bool {
        matches!(self.ds, Ds::Kured(_))
    }
}

/// (desired, ready) pods: one per node, ready where the node is Ready.
fn ds_counts(c: &Cluster) -> (usize, usize) {
    let now = crate::state::now();
    let ready = c
        .nodes
        .values()
        .filter(|n| matches!(readiness(c, n, now), Readiness::Ready { .. }))
        .count();
    (c.nodes.len(), ready)
}

pub(crate) fn ds_json(c: &Cluster, l: &Listed) -> Value {
    let (desired, ready) = ds_counts(c);
    let mut annotations = match l.ds {
        Ds::Kured(k) => k.annotations.clone(),
        _ => BTreeMap::new(),
    };
    annotations.insert(
        "deprecated.daemonset.template.generation".to_string(),
        "1".to_string(),
    );
    let labels = l.labels();
    let selector = match l.ds {
        Ds::Kured(k) if k.labels.contains_key("app.kubernetes.io/instance") => json!({
            "app.kubernetes.io/instance": k.labels["app.kubernetes.io/instance"],
            "app.kubernetes.io/name": "kured",
        }),
        _ => labels.clone(),
    };
    let account = if l.is_kured() {
        "kured"
    } else {
        l.name.as_str()
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": rfc3339(cluster_created(c, crate::state::now())),
            "generation": 1,
            "labels": labels,
            "name": l.name,
            "namespace": l.namespace,
            "resourceVersion": l.resource_version(c).to_string(),
            "uid": l.uid(),
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [l.container(c)],
                    "hostPID": l.is_kured(),
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "serviceAccountName": account,
                    "tolerations": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
                },
            },
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"},
        },
        "status": {
            "currentNumberScheduled": desired,
            "desiredNumberScheduled": desired,
            "numberAvailable": ready,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "observedGeneration": 1,
            "updatedNumberScheduled": desired,
        },
    })
}

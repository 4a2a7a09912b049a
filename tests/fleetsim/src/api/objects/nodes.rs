//! Nodes as the API server shows them: the real Node object shape (labels,
//! taints, `spec.unschedulable` omitted when false, the Ready condition with
//! the kubelet's reasons, `status.nodeInfo`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::state::{Cluster, ClusterNode, Role};
use crate::tools::util::{hex_of, rfc3339, uid_of};

/// The Ready condition as the node controller would report it now.
pub(crate) enum Readiness {
    Ready { since: f64 },
    NotReady { since: f64 },
    Unknown,
}

/// A node whose kubelet does not run posts no status: the node controller
/// reports it Unknown, whether the node is down or its kubelet failed.
pub(crate) fn readiness(c: &Cluster, n: &ClusterNode, now: f64) -> Readiness {
    match n.kubelet_running() {
        None => Readiness::Unknown,
        Some(k) if now >= k.started_at + c.kubelet_delay => Readiness::Ready {
            since: k.started_at + c.kubelet_delay,
        },
        Some(k) => Readiness::NotReady {
            since: k.started_at,
        },
    }
}

/// Each node's Ready condition as its status word. A change is a status
/// the kubelet (or the node controller) writes, which a real API server
/// stores under a new resourceVersion; here readiness follows the clock,
/// so `super::super::manage` bumps the version when this changes. Without
/// it a watch started from a list's version (`kubectl wait`: list, then
/// watch from the list's version) misses a node that turned Ready in
/// between, and waits out its whole timeout.
pub(crate) fn ready_statuses(c: &Cluster, now: f64) -> BTreeMap<String, &'static str> {
    c.nodes
        .iter()
        .map(|(name, n)| {
            let word = match readiness(c, n, now) {
                Readiness::Ready { .. } => "True",
                Readiness::NotReady { .. } => "False",
                Readiness::Unknown => "Unknown",
            };
            (name.clone(), word)
        })
        .collect()
}

fn condition(
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    heartbeat: f64,
    since: f64,
) -> Value {
    json!({
        "lastHeartbeatTime": rfc3339(heartbeat),
        "lastTransitionTime": rfc3339(since),
        "message": message,
        "reason": reason,
        "status": status,
        "type": kind,
    })
}

fn conditions(r: &Readiness, n: &ClusterNode, now: f64) -> Vec<Value> {
    let pressure = [
        (
            "MemoryPressure",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    ];
    let lost = "Kubelet stopped posting node status.";
    let (ready, heartbeat) = match r {
        Readiness::Ready { since } => (
            condition(
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status",
                now,
                *since,
            ),
            now,
        ),
        Readiness::NotReady { since } => (
            condition(
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime status check may not have completed yet",
                now,
                *since,
            ),
            now,
        ),
        Readiness::Unknown => (
            condition(
                "Ready",
                "Unknown",
                "NodeStatusUnknown",
                lost,
                n.booted_at,
                now,
            ),
            n.booted_at,
        ),
    };
    let mut all: Vec<Value> = pressure
        .iter()
        .map(|(kind, reason, msg)| match r {
            Readiness::Unknown => {
                condition(kind, "Unknown", "NodeStatusUnknown", lost, heartbeat, now)
            }
            _ => condition(kind, "False", reason, msg, heartbeat, n.booted_at),
        })
        .collect();
    all.push(ready);
    all
}

fn taints(r: &Readiness, n: &ClusterNode) -> Vec<Value> {
    let mut taints = Vec::new();
    if n.role == Role::ControlPlane {
        taints
            .push(json!({"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}));
    }
    match r {
        Readiness::Unknown => {
            for effect in ["NoSchedule", "NoExecute"] {
                taints.push(json!({"effect": effect, "key": "node.kubernetes.io/unreachable"}));
            }
        }
        Readiness::NotReady { .. } => {
            taints.push(json!({"effect": "NoSchedule", "key": "node.kubernetes.io/not-ready"}));
        }
        Readiness::Ready { .. } => {}
    }
    if n.unschedulable {
        taints.push(json!({"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable"}));
    }
    taints
}

/// The Node object for `name`, as `kubectl get node NAME -o json` prints it.
pub(crate) fn node_json(c: &Cluster, name: &str, n: &ClusterNode, index: usize, now: f64) -> Value {
    let r = readiness(c, n, now);
    let mut labels = json!({
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    });
    if n.role == Role::ControlPlane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
        labels["node.kubernetes.io/exclude-from-external-load-balancers"] = json!("");
    }
    // What `kubectl label` set (`api::write`), never over the kubelet's own.
    for (k, v) in &n.labels {
        if labels.get(k).is_none() {
            labels[k] = json!(v);
        }
    }
    let cidr = format!("10.244.{index}.0/24");
    let mut spec = json!({ "podCIDR": cidr, "podCIDRs": [cidr] });
    let taints = taints(&r, n);
    if !taints.is_empty() {
        spec["taints"] = Value::Array(taints);
    }
    if n.unschedulable {
        spec["unschedulable"] = json!(true);
    }
    let os_image = if n.os.is_empty() {
        "Flatcar Container Linux by Kinvolk".to_string()
    } else {
        format!("Flatcar Container Linux by Kinvolk {} (Oklo)", n.os)
    };
    let resources = json!({
        "cpu": "2",
        "ephemeral-storage": "28408440Ki",
        "hugepages-2Mi": "0",
        "memory": "4015884Ki",
        "pods": "110",
    });
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": rfc3339(n.booted_at),
            "labels": labels,
            "name": name,
            "resourceVersion": c.resource_version.to_string(),
            "uid": uid_of(&format!("node/{name}")),
        },
        "spec": spec,
        "status": {
            "addresses": addresses(name, n),
            "allocatable": resources,
            "capacity": resources,
            "conditions": conditions(&r, n, now),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": n.boot_id,
                "containerRuntimeVersion": "containerd://1.7.23",
                "kernelVersion": "6.6.60-flatcar",
                "kubeProxyVersion": n.kubelet_version,
                "kubeletVersion": n.kubelet_version,
                "machineID": hex_of(&format!("machine-id {name}"), 32),
                "operatingSystem": "linux",
                "osImage": os_image,
                "systemUUID": uid_of(&format!("system {name}")),
            },
        },
    })
}

fn addresses(name: &str, n: &ClusterNode) -> Value {
    let mut list = Vec::new();
    if !n.address.is_empty() {
        list.push(json!({"address": n.address, "type": "InternalIP"}));
    }
    list.push(json!({"address": name, "type": "Hostname"}));
    Value::Array(list)
}

//! The mirror pods of the control planes' static pods in `kube-system`:
//! `etcd-<node>`, `kube-apiserver-<node>`, `kube-controller-manager-<node>`
//! and `kube-scheduler-<node>`, shaped like the real objects (labels
//! `component` and `tier: control-plane`, owned by the Node,
//! `spec.nodeName`, the image of the node's control-plane version, phase,
//! Ready condition, container statuses). A node's pods exist while they run:
//! the node up, its kubelet running, `api_delay` past its start. (The real
//! API keeps a mirror pod across a reboot with stale status until the
//! kubelet updates it; here absent means not running, nothing more.)
//!
//! Beside them, the pods DaemonSets and ReplicaSets placed
//! ([`workload_pods`]).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::KUBE_SYSTEM;
use crate::state::{Cluster, Role};
use crate::tools::util::{hex_of, pod_suffix, rfc3339, uid_of};
const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// One running static pod.
struct StaticPod {
    name: String,
    component: &'static str,
    node: String,
    address: String,
    image: String,
    started: f64,
    ready_since: f64,
    /// kube-apiserver's `--etcd-servers`.
    etcd_servers: String,
}

/// The static pods that run now, sorted by name as the API lists them.
fn running(c: &Cluster, now: f64) -> Vec<StaticPod> {
    let mut pods = Vec::new();
    for (node, n) in &c.nodes {
        if !c.static_pods_running(node, now) {
            continue;
        }
        let Some(k) = n.kubelet_running() else {
            continue;
        };
        let version = n
            .control_plane_version
            .clone()
            .unwrap_or_else(|| c.version.clone());
        for component in COMPONENTS {
            if component == "etcd" && !c.external_etcd.is_empty() {
                continue;
            }
            let image = if component == "etcd" {
                format!(
                    "registry.k8s.io/etcd:{}",
                    crate::etcd_pod::tag::running(c, node)
                )
            } else {
                format!("registry.k8s.io/{component}:{version}")
            };
            pods.push(StaticPod {
                name: format!("{component}-{node}"),
                component,
                node: node.clone(),
                address: n.address.clone(),
                image,
                started: k.started_at,
                ready_since: k.started_at + c.api_delay,
                etcd_servers: if c.external_etcd.is_empty() {
                    "https://127.0.0.1:2379".into()
                } else {
                    c.external_etcd.join(",")
                },
            });
        }
    }
    pods.sort_by(|a, b| a.name.cmp(&b.name));
    pods
}

fn command(p: &StaticPod) -> Vec<String> {
    let mut cmd = vec![p.component.to_string()];
    match p.component {
        "kube-apiserver" => cmd.extend([
            format!("--advertise-address={}", p.address),
            "--allow-privileged=true".into(),
            "--authorization-mode=Node,RBAC".into(),
            format!("--etcd-servers={}", p.etcd_servers),
            "--secure-port=6443".into(),
        ]),
        "etcd" => cmd.extend([
            format!("--advertise-client-urls=https://{}:2379", p.address),
            "--data-dir=/var/lib/etcd".into(),
            format!("--name={}", p.node),
        ]),
        _ => cmd.extend([
            "--kubeconfig=/etc/kubernetes/".to_string()
                + if p.component == "kube-scheduler" {
                    "scheduler.conf"
                } else {
                    "controller-manager.conf"
                },
            "--leader-elect=true".into(),
        ]),
    }
    cmd
}

fn pod_json(p: &StaticPod, resource_version: u64) -> Value {
    let hash = hex_of(&format!("manifest {} {}", p.name, p.image), 32);
    let mut annotations = json!({
        "kubernetes.io/config.hash": hash,
        "kubernetes.io/config.mirror": hash,
        "kubernetes.io/config.seen": rfc3339(p.started),
        "kubernetes.io/config.source": "file",
    });
    if p.component == "kube-apiserver" {
        annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] =
            json!(format!("{}:6443", p.address));
    }
    if p.component == "etcd" {
        annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"] =
            json!(format!("https://{}:2379", p.address));
    }
    let condition = |kind: &str, since: f64| json!({"lastProbeTime": null, "lastTransitionTime": rfc3339(since), "status": "True", "type": kind});
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": rfc3339(p.started),
            "labels": {"component": p.component, "tier": "control-plane"},
            "name": p.name,
            "namespace": KUBE_SYSTEM,
            "ownerReferences": [{
                "apiVersion": "v1",
                "controller": true,
                "kind": "Node",
                "name": p.node,
                "uid": uid_of(&format!("node/{}", p.node)),
            }],
            "resourceVersion": resource_version.to_string(),
            "uid": uid_of(&format!("pod/{}/{}", p.name, p.started)),
        },
        "spec": {
            "containers": [{
                "command": command(p),
                "image": p.image,
                "imagePullPolicy": "IfNotPresent",
                "name": p.component,
                "resources": {"requests": {"cpu": "100m"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "hostNetwork": true,
            "nodeName": p.node,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoExecute", "operator": "Exists"}],
        },
        "status": {
            "conditions": [
                condition("PodReadyToStartContainers", p.started),
                condition("Initialized", p.started),
                condition("Ready", p.ready_since),
                condition("ContainersReady", p.ready_since),
                condition("PodScheduled", p.started),
            ],
            "containerStatuses": [{
                "containerID": format!("containerd://{}", hex_of(&format!("container {} {}", p.name, p.started), 64)),
                "image": p.image,
                "imageID": format!("{}@sha256:{}", p.image.split(':').next().unwrap_or(""), hex_of(&p.image, 64)),
                "lastState": {},
                "name": p.component,
                "ready": true,
                "restartCount": 0,
                "started": true,
                "state": {"running": {"startedAt": rfc3339(p.started)}},
            }],
            "hostIP": p.address,
            "hostIPs": [{"ip": p.address}],
            "phase": "Running",
            "podIP": p.address,
            "podIPs": [{"ip": p.address}],
            "qosClass": "Burstable",
            "startTime": rfc3339(p.started),
        },
    })
}

/// A pod as the API lists it.
pub(crate) struct ApiPod {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub ready: bool,
    pub labels: BTreeMap<String, String>,
    /// The controller's kind (`DaemonSet`, `ReplicaSet`, `Node` for a
    /// mirror pod…); `None` for a bare pod.
    pub owner_kind: Option<String>,
    pub json: Value,
}

/// The pods a DaemonSet, a ReplicaSet (CoreDNS on control planes, an app
/// with an emptyDir on workers) placed, one set per node, named as the
/// drain emulation names them. A pod stays in the API while its node is
/// down (phase Running, as last reported), as real ones do until they are
/// evicted.
fn workload_pods(c: &Cluster, now: f64) -> Vec<ApiPod> {
    let mut pods = Vec::new();
    let created = super::cluster_created(c, now);
    let daemonsets = super::daemonsets::daemonsets(c, None);
    let by_name: BTreeMap<&str, &crate::state::ClusterNode> =
        c.nodes.iter().map(|(k, v)| (k.as_str(), v)).collect();
    for p in &c.pods {
        let Some(n) = by_name.get(p.node.as_str()) else {
            continue;
        };
        let running = p.phase == "Running";
        let ready = running && c.node_ready(&p.node, now);
        let owner = p.owner.as_ref().and_then(|o| o.split_once('/')).map(|(kind, name)| {
            let api = if kind == "Job" { "batch/v1" } else { "apps/v1" };
            json!({"apiVersion": api, "blockOwnerDeletion": true, "controller": true, "kind": kind, "name": name,
                   "uid": uid_of(&format!("{kind}/{}/{name}", p.namespace))})
        });
        let mut metadata = json!({
            "creationTimestamp": rfc3339(created),
            "labels": p.labels,
            "name": p.name,
            "namespace": p.namespace,
            "resourceVersion": c.resource_version.to_string(),
            "uid": uid_of(&format!("pod/{}/{}", p.namespace, p.name)),
        });
        if let Some(o) = &owner {
            metadata["ownerReferences"] = json!([o]);
        }
        if !p.annotations.is_empty() {
            metadata["annotations"] = json!(p.annotations);
        }
        let json = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {
                "containers": [{"image": p.image.as_deref().unwrap_or("registry.example/app:1"), "imagePullPolicy": "IfNotPresent", "name": "app"}],
                "nodeName": p.node,
                "restartPolicy": if owner.as_ref().is_some_and(|o| o["kind"] == "Job") { "Never" } else { "Always" },
                "schedulerName": "default-scheduler",
            },
            "status": {
                "conditions": [{"lastProbeTime": null, "lastTransitionTime": rfc3339(n.booted_at), "status": if ready { "True" } else { "False" }, "type": "Ready"}],
                "hostIP": n.address,
                "phase": p.phase,
                "startTime": rfc3339(created),
            },
        });
        pods.push(ApiPod {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            node: p.node.clone(),
            ready,
            labels: p.labels.clone(),
            owner_kind: p
                .owner
                .as_ref()
                .and_then(|o| o.split_once('/'))
                .map(|(k, _)| k.to_string()),
            json,
        });
    }
    for (node, n) in &c.nodes {
        let ready = c.node_ready(node, now);
        let sfx = |app: &str| pod_suffix(&format!("{app}@{node}"), 5);
        let mut add = |ns: &str,
                       name: String,
                       owner: Value,
                       labels: Value,
                       container: Value,
                       extra: Value| {
            let mut spec = json!({
                "containers": [container],
                "nodeName": node,
                "restartPolicy": "Always",
                "schedulerName": "default-scheduler",
            });
            if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
                spec.extend(extra.clone());
            }
            let json = json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "creationTimestamp": rfc3339(created),
                    "labels": labels.clone(),
                    "name": name,
                    "namespace": ns,
                    "ownerReferences": [owner.clone()],
                    "resourceVersion": c.resource_version.to_string(),
                    "uid": uid_of(&format!("pod/{ns}/{name}")),
                },
                "spec": spec,
                "status": {
                    "conditions": [{"lastProbeTime": null, "lastTransitionTime": rfc3339(n.booted_at), "status": if ready { "True" } else { "False" }, "type": "Ready"}],
                    "hostIP": n.address,
                    "phase": "Running",
                    "podIP": n.address,
                    "startTime": rfc3339(created),
                },
            });
            pods.push(ApiPod {
                namespace: ns.to_string(),
                name,
                node: node.clone(),
                ready,
                labels: serde_json::from_value(labels).unwrap_or_default(),
                owner_kind: owner["kind"].as_str().map(str::to_string),
                json,
            });
        };
        for ds in &daemonsets {
            let owner = json!({"apiVersion": "apps/v1", "blockOwnerDeletion": true, "controller": true, "kind": "DaemonSet", "name": ds.name, "uid": ds.uid()});
            let container = ds.container(c);
            let labels = json!({"controller-revision-hash": hex_of(&ds.name, 10), "pod-template-generation": "1"});
            // The pod template's hostPID, as the DaemonSet has it.
            let extra = if ds.is_kured() {
                json!({"hostPID": true})
            } else {
                json!({})
            };
            add(
                &ds.namespace,
                format!("{}-{}", ds.name, sfx(&ds.name)),
                owner,
                labels,
                container,
                extra,
            );
        }
        let rs = |name: &str| json!({"apiVersion": "apps/v1", "blockOwnerDeletion": true, "controller": true, "kind": "ReplicaSet", "name": name, "uid": uid_of(&format!("replicaset/{name}"))});
        match n.role {
            Role::ControlPlane => add(
                KUBE_SYSTEM,
                format!("coredns-668d6bf9bc-{}", sfx("coredns")),
                rs("coredns-668d6bf9bc"),
                json!({"app.kubernetes.io/instance": format!("coredns-{node}"), "k8s-app": "kube-dns", "pod-template-hash": "668d6bf9bc"}),
                json!({"args": ["-conf", "/etc/coredns/Corefile"], "image": "registry.k8s.io/coredns/coredns:v1.12.0", "imagePullPolicy": "IfNotPresent", "name": "coredns"}),
                json!({}),
            ),
            Role::Worker => add(
                "default",
                format!("web-7d9f8b6c5d-{}", sfx("web")),
                rs("web-7d9f8b6c5d"),
                json!({"app": "web", "app.kubernetes.io/instance": format!("web-{node}"), "pod-template-hash": "7d9f8b6c5d"}),
                json!({"image": "nginx:1.27", "imagePullPolicy": "IfNotPresent", "name": "web", "volumeMounts": [{"mountPath": "/cache", "name": "cache"}]}),
                json!({"volumes": [{"emptyDir": {}, "name": "cache"}]}),
            ),
        }
    }
    pods
}

/// Every pod in the API, sorted by namespace then name as it lists them.
pub(crate) fn all_pods(c: &Cluster, now: f64) -> Vec<ApiPod> {
    let mut pods: Vec<ApiPod> = running(c, now)
        .into_iter()
        .map(|p| ApiPod {
            namespace: KUBE_SYSTEM.to_string(),
            json: pod_json(&p, c.resource_version),
            labels: BTreeMap::from([
                ("component".to_string(), p.component.to_string()),
                ("tier".to_string(), "control-plane".to_string()),
            ]),
            name: p.name,
            node: p.node,
            ready: true,
            owner_kind: Some("Node".into()),
        })
        .collect();
    pods.extend(workload_pods(c, now));
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    pods
}

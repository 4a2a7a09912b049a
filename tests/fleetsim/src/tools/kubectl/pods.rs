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
//! `get pod NAME…` answers as kubectl does: one name, the object; several,
//! a `List` of those found; each missing one an `Error from server
//! (NotFound)` line on stderr and exit 1, the found ones still printed.

use anyhow::Result;
use serde_json::{Value, json};

use super::{Cli, Env, Res, connect};
use crate::state::Cluster;
use crate::tools::util::{hex_of, human_age, rfc3339, table, uid_of};
use crate::tools::{complain, say};

const KUBE_SYSTEM: &str = "kube-system";
/// The etcd kubeadm v1.34 deploys; one fixed tag is all the sim needs.
const ETCD_IMAGE: &str = "registry.k8s.io/etcd:3.6.4-0";
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
            let image = if component == "etcd" {
                ETCD_IMAGE.to_string()
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
            "--etcd-servers=https://127.0.0.1:2379".into(),
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

/// `get pod[s] [NAME…]` in the namespace of `cli`.
pub(super) fn get(env: &mut Env, args: &[String], cli: &Cli, names: &[String]) -> Result<Res> {
    if !matches!(cli.output(), None | Some("json") | Some("name")) {
        return Ok(Res::unsupported(env, args));
    }
    let c = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    let now = crate::state::now();
    let ns = cli.namespace();
    let pods: Vec<StaticPod> = if ns == KUBE_SYSTEM {
        running(&c, now)
    } else {
        Vec::new()
    };
    let (found, missing): (Vec<&StaticPod>, Vec<&String>) = if names.is_empty() {
        (pods.iter().collect(), Vec::new())
    } else {
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for n in names {
            match pods.iter().find(|p| &p.name == n) {
                Some(p) => found.push(p),
                None => missing.push(n),
            }
        }
        (found, missing)
    };
    let single = names.len() == 1;
    match cli.output() {
        Some("json") => {
            let items: Vec<Value> = found
                .iter()
                .map(|p| pod_json(p, c.resource_version))
                .collect();
            if single {
                if let Some(one) = items.into_iter().next() {
                    say!(env, "{}", serde_json::to_string_pretty(&one)?);
                }
            } else {
                let list = json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}});
                say!(env, "{}", serde_json::to_string_pretty(&list)?);
            }
        }
        Some(_) => {
            for p in &found {
                say!(env, "pod/{}", p.name);
            }
        }
        None if found.is_empty() && names.is_empty() => {
            complain!(env, "No resources found in {ns} namespace.");
        }
        None if !found.is_empty() => {
            let mut rows = vec![
                ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
                    .map(String::from)
                    .to_vec(),
            ];
            for p in &found {
                rows.push(vec![
                    p.name.clone(),
                    "1/1".into(),
                    "Running".into(),
                    "0".into(),
                    human_age(now - p.started),
                ]);
            }
            let _ = std::io::Write::write_all(&mut *env.out, table(&rows, 3).as_bytes());
        }
        None => {}
    }
    if missing.is_empty() {
        return Ok(Res::ok());
    }
    for n in &missing {
        complain!(env, "Error from server (NotFound): pods \"{n}\" not found");
    }
    Ok(Res {
        code: 1,
        record: None,
    })
}

//! Nodes as the API server shows them — the real Node object shape (labels,
//! taints, `spec.unschedulable` omitted when false, the Ready condition with
//! the kubelet's reasons, `status.nodeInfo`) — and the node verbs: get,
//! cordon, uncordon and `wait --for=condition=Ready`.

use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use super::{Cli, Env, Kind, Res, connect, resource};
use crate::state::{Cluster, ClusterNode, Role};
use crate::tools::say;
use crate::tools::util::{hex_of, human_age, parse_go_duration, rfc3339, table, uid_of};

/// kubectl wait's default `--timeout`.
const WAIT_DEFAULT: f64 = 30.0;
/// How often `wait` looks at the cluster again.
const WAIT_POLL: Duration = Duration::from_millis(100);

/// The Ready condition as the node controller would report it now.
pub(super) enum Readiness {
    Ready { since: f64 },
    NotReady { since: f64 },
    Unknown,
}

/// A node whose kubelet does not run posts no status: the node controller
/// reports it Unknown, whether the node is down or its kubelet failed.
pub(super) fn readiness(c: &Cluster, n: &ClusterNode, now: f64) -> Readiness {
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

fn table_row(c: &Cluster, name: &str, n: &ClusterNode, now: f64) -> Vec<String> {
    let mut status = match readiness(c, n, now) {
        Readiness::Ready { .. } => "Ready".to_string(),
        _ => "NotReady".to_string(),
    };
    if n.unschedulable {
        status.push_str(",SchedulingDisabled");
    }
    let role = if n.role == Role::ControlPlane {
        "control-plane"
    } else {
        "<none>"
    };
    vec![
        name.to_string(),
        status,
        role.to_string(),
        human_age(now - n.booted_at),
        n.kubelet_version.clone(),
    ]
}

pub(super) fn not_found(kind: &str, name: &str) -> String {
    format!("Error from server (NotFound): {kind} \"{name}\" not found")
}

pub(super) fn get(env: &mut Env, args: &[String], cli: &Cli, name: Option<&str>) -> Result<Res> {
    if cli.output() == Some("yaml") {
        return Ok(Res::unsupported(env, args));
    }
    let c = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    let now = crate::state::now();
    let selected: Vec<(usize, &String, &ClusterNode)> = c
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, (n, _))| name.is_none_or(|want| want == n.as_str()))
        .map(|(i, (n, node))| (i, n, node))
        .collect();
    if let Some(want) = name
        && selected.is_empty()
    {
        return Ok(Res::fail(env, &not_found("nodes", want)));
    }
    match cli.output() {
        Some("json") => {
            let items: Vec<Value> = selected
                .iter()
                .map(|(i, n, node)| node_json(&c, n, node, *i, now))
                .collect();
            let doc = super::objects::get_doc(name.is_some(), items);
            say!(env, "{}", serde_json::to_string_pretty(&doc)?);
        }
        Some("name") => {
            for (_, n, _) in &selected {
                say!(env, "node/{n}");
            }
        }
        _ => {
            let mut rows = vec![
                ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
                    .map(String::from)
                    .to_vec(),
            ];
            rows.extend(
                selected
                    .iter()
                    .map(|(_, n, node)| table_row(&c, n, node, now)),
            );
            let _ = std::io::Write::write_all(&mut *env.out, table(&rows, 3).as_bytes());
        }
    }
    Ok(Res::ok())
}

/// Sets or clears `spec.unschedulable`; Ok(false) when it already was so.
pub(super) fn set_unschedulable(env: &Env, name: &str, value: bool) -> Result<Option<bool>> {
    env.shared().update_cluster(|c| {
        let changed = match c.nodes.get_mut(name) {
            None => return Ok(None),
            Some(n) if n.unschedulable == value => false,
            Some(n) => {
                n.unschedulable = value;
                true
            }
        };
        if changed {
            c.resource_version += 1;
        }
        Ok(Some(changed))
    })
}

pub(super) fn cordon(env: &mut Env, args: &[String], cli: &Cli, on: bool) -> Result<Res> {
    let [_, name] = cli.words.as_slice() else {
        return Ok(Res::unsupported(env, args));
    };
    match connect(env, cli)? {
        // The GET of the Node, then its PATCH.
        Ok(c) => super::round_trip(&c),
        Err(msg) => return Ok(Res::fail(env, &msg)),
    }
    let verb = if on { "cordoned" } else { "uncordoned" };
    match set_unschedulable(env, name, on)? {
        None => Ok(Res::fail(env, &not_found("nodes", name))),
        Some(true) => {
            say!(env, "node/{name} {verb}");
            Ok(Res::ok())
        }
        Some(false) => {
            say!(env, "node/{name} already {verb}");
            Ok(Res::ok())
        }
    }
}

/// `wait --for=condition=Ready node/NAME [--timeout=…]`, polling the cluster.
pub(super) fn wait(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let wants_ready = cli.flag("for").is_some_and(|f| {
        let f = f.to_ascii_lowercase();
        f == "condition=ready" || f == "condition=ready=true"
    });
    let Some((Kind::Node, Some(name))) = resource(&cli.words[1..]) else {
        return Ok(Res::unsupported(env, args));
    };
    if !wants_ready {
        return Ok(Res::unsupported(env, args));
    }
    let timeout = match cli.flag("timeout") {
        None => WAIT_DEFAULT,
        Some(t) => match parse_go_duration(t) {
            Some(secs) if secs < 0.0 => 7.0 * 86400.0,
            Some(secs) => secs,
            None => {
                let msg = format!(
                    "error: invalid argument \"{t}\" for \"--timeout\" flag: time: invalid duration \"{t}\""
                );
                return Ok(Res::fail(env, &msg));
            }
        },
    };
    if let Err(msg) = connect(env, cli)? {
        return Ok(Res::fail(env, &msg));
    }
    let started = Instant::now();
    loop {
        let c = env.shared().cluster()?;
        let Some(node) = c.nodes.get(name) else {
            return Ok(Res::fail(env, &not_found("nodes", name)));
        };
        if let Readiness::Ready { .. } = readiness(&c, node, crate::state::now()) {
            say!(env, "node/{name} condition met");
            return Ok(Res::ok());
        }
        let elapsed = started.elapsed().as_secs_f64();
        if elapsed >= timeout {
            let msg = format!("error: timed out waiting for the condition on nodes/{name}");
            return Ok(Res::fail(env, &msg));
        }
        std::thread::sleep(WAIT_POLL.min(Duration::from_secs_f64(timeout - elapsed)));
    }
}

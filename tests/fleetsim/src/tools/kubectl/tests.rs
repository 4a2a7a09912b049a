//! kubectl against a three-node simulated cluster.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::super::testutil::{Fleet, Node, Output};
use crate::state::Role;

/// cp1 (control plane, has admin.conf), w1, w2 — all v1.34.2 and Ready.
fn cluster() -> (Node, Node, Node) {
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
    let w2 = fleet.node("w2", Role::Worker, "v1.34.2");
    (cp, w1, w2)
}

fn kubectl(node: &Node, args: &[&str]) -> Output {
    node.run("kubectl", args)
}

// The Node fields a client reads, named as in the Kubernetes API (core/v1).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeList {
    api_version: String,
    kind: String,
    items: Vec<K8sNode>,
}

#[derive(Deserialize)]
struct K8sNode {
    kind: String,
    metadata: Meta,
    spec: NodeSpec,
    status: NodeStatus,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Meta {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    resource_version: String,
    creation_timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSpec {
    unschedulable: Option<bool>,
    #[serde(default)]
    taints: Vec<Taint>,
}

#[derive(Deserialize)]
struct Taint {
    key: String,
    effect: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeStatus {
    conditions: Vec<Condition>,
    node_info: NodeInfo,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
    reason: String,
    last_transition_time: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeInfo {
    kubelet_version: String,
    os_image: String,
    kernel_version: String,
    #[serde(rename = "bootID")]
    boot_id: String,
    container_runtime_version: String,
}

fn ready(n: &K8sNode) -> &str {
    &n.status
        .conditions
        .iter()
        .find(|c| c.kind == "Ready")
        .unwrap()
        .status
}

fn get_node(cp: &Node, name: &str) -> K8sNode {
    let r = kubectl(cp, &["get", "node", name, "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

#[test]
fn without_a_kubeconfig_it_is_refused_like_the_real_one() {
    let (_cp, w1, _) = cluster();
    let r = kubectl(&w1, &["get", "nodes"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "The connection to the server localhost:8080 was refused - did you specify the right host or port?\n"
    );
    let r = kubectl(
        &w1,
        &["--kubeconfig", "/etc/kubernetes/admin.conf", "get", "nodes"],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim(),
        "error: stat /etc/kubernetes/admin.conf: no such file or directory"
    );
}

#[test]
fn node_list_json_has_the_real_shape() {
    let (cp, _, _) = cluster();
    let r = kubectl(&cp, &["get", "nodes", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let list: NodeList = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (list.api_version.as_str(), list.kind.as_str()),
        ("v1", "List")
    );
    let names: Vec<&str> = list
        .items
        .iter()
        .map(|n| n.metadata.name.as_str())
        .collect();
    assert_eq!(names, ["cp1", "w1", "w2"]);
    let cp1 = &list.items[0];
    assert_eq!(cp1.kind, "Node");
    assert_eq!(
        cp1.metadata
            .labels
            .get("node-role.kubernetes.io/control-plane")
            .map(String::as_str),
        Some("")
    );
    assert!(
        !list.items[1]
            .metadata
            .labels
            .contains_key("node-role.kubernetes.io/control-plane")
    );
    assert_eq!(cp1.metadata.labels["kubernetes.io/hostname"], "cp1");
    assert!(
        cp1.metadata
            .annotations
            .contains_key("kubeadm.alpha.kubernetes.io/cri-socket")
    );
    assert!(cp1.metadata.resource_version.parse::<u64>().is_ok());
    assert!(cp1.metadata.creation_timestamp.ends_with('Z'));
    assert!(
        cp1.spec
            .taints
            .iter()
            .any(|t| t.key == "node-role.kubernetes.io/control-plane" && t.effect == "NoSchedule")
    );
    assert_eq!(
        cp1.spec.unschedulable, None,
        "omitted when false, like the API"
    );
    assert_eq!(ready(cp1), "True");
    let ready_cond = cp1
        .status
        .conditions
        .iter()
        .find(|c| c.kind == "Ready")
        .unwrap();
    assert_eq!(ready_cond.reason, "KubeletReady");
    assert!(ready_cond.last_transition_time.ends_with('Z'));
    let info = &cp1.status.node_info;
    assert_eq!(info.kubelet_version, "v1.34.2");
    assert_eq!(
        info.os_image,
        "Flatcar Container Linux by Kinvolk 4081.2.0 (Oklo)"
    );
    assert_eq!(info.boot_id, "boot-cp1");
    assert!(info.kernel_version.ends_with("-flatcar"));
    assert!(info.container_runtime_version.starts_with("containerd://"));
}

#[test]
fn cordon_uncordon_and_the_table() {
    let (cp, _, _) = cluster();
    let r = kubectl(&cp, &["cordon", "w1"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "node/w1 cordoned\n"));
    assert_eq!(
        kubectl(&cp, &["cordon", "w1"]).stdout,
        "node/w1 already cordoned\n"
    );
    let w1 = get_node(&cp, "w1");
    assert_eq!(w1.spec.unschedulable, Some(true));
    assert!(
        w1.spec
            .taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable")
    );

    let table = kubectl(&cp, &["get", "nodes"]).stdout;
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "NAME   STATUS                     ROLES           AGE   VERSION"
    );
    assert!(lines[1].starts_with("cp1    Ready                      control-plane   "));
    assert!(lines[2].starts_with("w1     Ready,SchedulingDisabled   <none>          "));
    assert!(lines[2].ends_with("   v1.34.2"));

    assert_eq!(
        kubectl(&cp, &["uncordon", "w1"]).stdout,
        "node/w1 uncordoned\n"
    );
    assert_eq!(get_node(&cp, "w1").spec.unschedulable, None);
    let r = kubectl(&cp, &["cordon", "w9"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (1, "Error from server (NotFound): nodes \"w9\" not found\n")
    );

    let events: Vec<String> = cp
        .events()
        .iter()
        .map(|e| format!("{} {}", e.argv[1], e.result))
        .collect();
    assert_eq!(events[0], "cordon ok");
    assert_eq!(events[2], "uncordon ok");
    assert!(events[3].starts_with("cordon Error from server (NotFound)"));
}

#[test]
fn readiness_follows_the_kubelet_and_kubelet_delay() {
    let (cp, w1, _) = cluster();
    w1.update_cluster(|c| c.nodes.get_mut("w1").unwrap().up = false);
    let n = get_node(&cp, "w1");
    assert_eq!(ready(&n), "Unknown");
    assert!(
        n.spec
            .taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable")
    );
    // Up again, but its kubelet has not started (or failed to): no status.
    w1.update_cluster(|c| {
        let n = c.nodes.get_mut("w1").unwrap();
        n.up = true;
        n.kubelet = None;
    });
    assert_eq!(ready(&get_node(&cp, "w1")), "Unknown");
    // The kubelet started, and is not Ready before kubelet_delay.
    w1.update_cluster(|c| {
        c.kubelet_delay = 3600.0;
        let n = c.nodes.get_mut("w1").unwrap();
        n.kubelet = Some(crate::state::KubeletRun {
            boot_id: n.boot_id.clone(),
            started_at: crate::state::now(),
        });
    });
    assert_eq!(ready(&get_node(&cp, "w1")), "False");
    assert!(
        kubectl(&cp, &["get", "nodes"])
            .stdout
            .contains("\nw1     NotReady ")
    );
    // A kubelet of an earlier boot does not count.
    w1.update_cluster(|c| {
        c.kubelet_delay = 0.0;
        c.nodes.get_mut("w1").unwrap().boot_id = "a-later-boot".into();
    });
    assert_eq!(ready(&get_node(&cp, "w1")), "Unknown");
}

#[test]
fn drain_evicts_with_the_usual_flags() {
    let (cp, _, _) = cluster();
    let r = kubectl(
        &cp,
        &[
            "drain",
            "w1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=30s",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(out[0], "node/w1 cordoned");
    assert!(out[1].starts_with("evicting pod default/web-7d9f8b6c5d-"));
    assert!(out[2].starts_with("pod/web-7d9f8b6c5d-") && out[2].ends_with(" evicted"));
    assert_eq!(out[3], "node/w1 drained");
    assert!(
        r.stderr
            .starts_with("Warning: ignoring DaemonSet-managed Pods: kube-system/cilium-")
    );
    assert!(cp.cluster().nodes["w1"].unschedulable);
    assert_eq!(cp.events()[0].result, "ok");
}

#[test]
fn drain_without_the_flags_refuses_but_stays_cordoned() {
    let (cp, _, _) = cluster();
    let r = kubectl(&cp, &["drain", "w1"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.starts_with(
        "error: unable to drain node \"w1\" due to error: [cannot delete DaemonSet-managed Pods \
         (use --ignore-daemonsets to ignore): kube-system/cilium-"
    ), "{}", r.stderr);
    assert!(r.stderr.contains("cannot delete Pods with local storage (use --delete-emptydir-data to override): default/web-"));
    assert!(
        r.stderr
            .contains("There are pending nodes to be drained:\n w1\n")
    );
    assert!(cp.cluster().nodes["w1"].unschedulable);
}

#[test]
fn a_pdb_blocked_drain_times_out_naming_the_pod() {
    let (cp, _, _) = cluster();
    cp.shared()
        .update_faults(|f| f.pdb_block = vec!["w1".to_string()])
        .unwrap();
    let r = kubectl(
        &cp,
        &[
            "drain",
            "w1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=200ms",
        ],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("error when evicting pods/\"web-7d9f8b6c5d-"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(
        "-n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n"
    ));
    assert!(
        r.stderr
            .contains("-n \"default\": global timeout reached: 200ms")
    );
    assert!(r.stderr.contains("error: unable to drain node \"w1\" due to error: error when evicting pods/\"web-7d9f8b6c5d-"));
    assert!(!r.stdout.contains("drained"));
    let e = &cp.events()[0];
    assert_eq!(e.argv[..2], ["kubectl", "drain"]);
    assert!(e.result.starts_with("error: unable to drain node \"w1\""));
    // Other nodes drain fine.
    let r = kubectl(
        &cp,
        &[
            "drain",
            "w2",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn lifting_the_pdb_during_the_wait_lets_the_drain_finish() {
    let (cp, _, _) = cluster();
    let shared = cp.shared();
    shared
        .update_faults(|f| f.pdb_block = vec!["w1".to_string()])
        .unwrap();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(150));
            shared.update_faults(|f| f.pdb_block.clear()).unwrap();
        });
        kubectl(
            &cp,
            &[
                "drain",
                "w1",
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--timeout=1m",
            ],
        )
    });
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.ends_with("node/w1 drained\n"));
}

#[test]
fn kubeadm_config_keeps_proxy_empty() {
    let (cp, _, _) = cluster();
    let r = kubectl(
        &cp,
        &[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "kubeadm-config",
            "-o",
            "yaml",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .starts_with("apiVersion: v1\ndata:\n  ClusterConfiguration: |\n    apiServer: {}\n")
    );
    assert!(r.stdout.contains("\n    kubernetesVersion: v1.34.2\n"));
    assert!(r.stdout.contains("\n    proxy: {}\n"));
    assert!(r.stdout.contains("\nkind: ConfigMap\nmetadata:\n"));
    assert!(
        r.stdout
            .contains("  name: kubeadm-config\n  namespace: kube-system\n")
    );
    let r = kubectl(
        &cp,
        &[
            "get",
            "cm",
            "kubeadm-config",
            "--namespace=kube-system",
            "-ojson",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let text = v["data"]["ClusterConfiguration"].as_str().unwrap();
    assert!(text.contains("kubernetesVersion: v1.34.2\n") && text.contains("proxy: {}\n"));
    assert_eq!(v["metadata"]["namespace"], "kube-system");
    // Not in another namespace.
    let r = kubectl(&cp, &["get", "configmap", "kubeadm-config"]);
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): configmaps \"kubeadm-config\" not found\n"
    );
}

#[test]
fn kubeadm_config_carries_the_control_planes_extra_args_as_v1beta4_lists() {
    let (cp, _, _) = cluster();
    cp.update_cluster(|c| {
        c.control_plane_args.insert(
            "controllerManager".into(),
            [(
                "feature-gates".to_string(),
                "ComponentSLIs=true".to_string(),
            )]
            .into(),
        );
    });
    let r = kubectl(
        &cp,
        &["-n", "kube-system", "get", "cm", "kubeadm-config", "-ojson"],
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let text = v["data"]["ClusterConfiguration"].as_str().unwrap();
    assert!(
        text.contains(
            "controllerManager:\n  extraArgs:\n  - name: feature-gates\n    value: \"ComponentSLIs=true\"\n"
        ),
        "{text}"
    );
    assert!(
        text.starts_with("apiServer: {}\n") && text.ends_with("scheduler: {}\n"),
        "{text}"
    );
}

#[test]
fn kube_proxy_is_not_found_until_deployed() {
    let (cp, _, _) = cluster();
    let r = kubectl(
        &cp,
        &["-n", "kube-system", "get", "daemonset", "kube-proxy"],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): daemonsets.apps \"kube-proxy\" not found\n"
    );
    let r = kubectl(&cp, &["-n", "kube-system", "get", "ds", "-o", "name"]);
    assert_eq!(r.stdout, "daemonset.apps/cilium\n");
    cp.update_cluster(|c| c.kube_proxy = true);
    let r = kubectl(&cp, &["-n", "kube-system", "get", "ds", "-o", "name"]);
    assert_eq!(
        r.stdout,
        "daemonset.apps/cilium\ndaemonset.apps/kube-proxy\n"
    );
    let r = kubectl(&cp, &["-n", "kube-system", "get", "ds", "kube-proxy"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("NAME         DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR            AGE\n"));
    assert!(r.stdout.contains("\nkube-proxy   3         3         3       3            3           kubernetes.io/os=linux   "));
    let r = kubectl(
        &cp,
        &["-n", "kube-system", "get", "ds", "kube-proxy", "-o", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["apiVersion"].as_str()),
        (Some("DaemonSet"), Some("apps/v1"))
    );
}

#[test]
fn readyz_and_a_down_api() {
    let (cp, _, _) = cluster();
    let r = kubectl(&cp, &["get", "--raw", "/readyz"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "ok"));
    cp.update_cluster(|c| c.nodes.get_mut("cp1").unwrap().up = false);
    let r = kubectl(&cp, &["get", "--raw=/readyz"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "The connection to the server cp1:6443 was refused - did you specify the right host or port?\n"
    );
    // Mutating calls against a down API are still on the record.
    assert_eq!(kubectl(&cp, &["cordon", "w1"]).code, 1);
    assert!(
        cp.events()[0]
            .result
            .starts_with("The connection to the server cp1:6443 was refused")
    );
}

#[test]
fn wait_for_ready_and_its_timeout() {
    let (cp, w1, _) = cluster();
    let r = kubectl(
        &cp,
        &["wait", "--for=condition=Ready", "node/w1", "--timeout=5s"],
    );
    assert_eq!((r.code, r.stdout.as_str()), (0, "node/w1 condition met\n"));
    w1.update_cluster(|c| c.nodes.get_mut("w1").unwrap().up = false);
    let r = kubectl(
        &cp,
        &[
            "wait",
            "node",
            "w1",
            "--for",
            "condition=Ready",
            "--timeout=200ms",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "error: timed out waiting for the condition on nodes/w1\n"
    );
    assert!(cp.events().is_empty(), "wait does not mutate");
}

fn with_kured(node: &Node) {
    node.update_cluster(|c| {
        c.resource_version = 7;
        let mut ds = crate::kured::KuredSpec {
            period: 60.0,
            ..Default::default()
        }
        .daemonset();
        ds.resource_version = 7;
        c.kured = Some(ds);
    });
}

#[test]
fn kured_daemonset_json_and_annotation_lock() {
    let (cp, _, _) = cluster();
    with_kured(&cp);
    let r = kubectl(
        &cp,
        &[
            "-n",
            "kube-system",
            "get",
            "daemonset",
            "kured",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["metadata"]["resourceVersion"], "7");
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0]["command"],
        serde_json::json!([
            "/usr/bin/kured",
            "--reboot-sentinel=/sentinel/reboot-required",
            "--period=1m0s"
        ])
    );

    let lock = "weave.works/kured-node-lock={\"nodeID\":\"fleetctl\"}";
    let r = kubectl(
        &cp,
        &[
            "-n",
            "kube-system",
            "annotate",
            "ds",
            "kured",
            lock,
            "--resource-version=7",
        ],
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "daemonset.apps/kured annotated\n"),
        "{}",
        r.stderr
    );

    // A second holder with the stale version loses.
    let other = "weave.works/kured-node-lock={\"nodeID\":\"w2\"}";
    let r = kubectl(
        &cp,
        &[
            "-n",
            "kube-system",
            "annotate",
            "ds",
            "kured",
            other,
            "--overwrite",
            "--resource-version=7",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps \"kured\": the object has \
         been modified; please apply your changes to the latest version and try again\n"
    );
    // Without --overwrite an existing different value is refused client-side.
    let r = kubectl(
        &cp,
        &["-n", "kube-system", "annotate", "daemonset/kured", other],
    );
    assert_eq!(
        r.stderr,
        "error: --overwrite is false but found the following declared annotation(s): \
         'weave.works/kured-node-lock' already has a value ({\"nodeID\":\"fleetctl\"})\n"
    );
    let r = kubectl(
        &cp,
        &[
            "-n",
            "kube-system",
            "annotate",
            "ds",
            "kured",
            "weave.works/kured-node-lock-",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let kured = cp.cluster().kured.unwrap();
    assert!(kured.annotations.is_empty());
    assert_eq!(kured.resource_version, 9);
    let results: Vec<String> = cp.events().iter().map(|e| e.result.clone()).collect();
    assert_eq!(results[0], "ok");
    assert!(results[1].starts_with("Error from server (Conflict)"));
    assert!(results[2].starts_with("error: --overwrite is false"));
    assert_eq!(results[3], "ok");
}

#[test]
fn configmap_lock_create_get_delete() {
    let (cp, _, _) = cluster();
    let args = [
        "-n",
        "kube-system",
        "create",
        "configmap",
        "fleetctl-lock",
        "--from-literal=holder=laptop",
        "--from-literal=since=now",
    ];
    let r = kubectl(&cp, &args);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "configmap/fleetctl-lock created\n"),
        "{}",
        r.stderr
    );
    let r = kubectl(&cp, &args);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "error: failed to create configmap: configmaps \"fleetctl-lock\" already exists\n"
    );
    let r = kubectl(
        &cp,
        &[
            "-n",
            "kube-system",
            "get",
            "configmap",
            "fleetctl-lock",
            "-o",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["data"]["holder"], "laptop");
    assert_eq!(v["kind"], "ConfigMap");
    let r = kubectl(
        &cp,
        &["-n", "kube-system", "delete", "configmap", "fleetctl-lock"],
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "configmap \"fleetctl-lock\" deleted\n")
    );
    let r = kubectl(&cp, &["-n", "kube-system", "delete", "cm", "fleetctl-lock"]);
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): configmaps \"fleetctl-lock\" not found\n"
    );
    assert_eq!(
        kubectl(
            &cp,
            &[
                "-n",
                "kube-system",
                "delete",
                "cm/fleetctl-lock",
                "--ignore-not-found"
            ]
        )
        .code,
        0
    );
}

#[test]
fn concurrent_lock_attempts_have_one_winner() {
    let (cp, w1, w2) = cluster();
    let nodes = [&cp, &w1, &w2];
    for n in &nodes[1..] {
        n.write(
            "/etc/kubernetes/admin.conf",
            &cp.read("/etc/kubernetes/admin.conf"),
        );
    }
    let codes: Vec<i32> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let node = nodes[i % 3];
                s.spawn(move || {
                    kubectl(
                        node,
                        &["create", "cm", "lock", &format!("--from-literal=by={i}")],
                    )
                    .code
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert_eq!(cp.events().len(), 6);
}

#[test]
fn concurrent_cordons_lose_no_update() {
    let (cp, _, _) = cluster();
    std::thread::scope(|s| {
        for n in ["cp1", "w1", "w2"] {
            let cp = &cp;
            s.spawn(move || assert_eq!(kubectl(cp, &["cordon", n]).code, 0));
        }
    });
    assert!(cp.cluster().nodes.values().all(|n| n.unschedulable));
}

#[test]
fn versions() {
    let (cp, w1, _) = cluster();
    cp.reboot_into("v1.35.1");
    let r = kubectl(&cp, &["version", "--client"]);
    assert_eq!(
        r.stdout,
        "Client Version: v1.35.1\nKustomize Version: v5.7.1\n"
    );
    let r = kubectl(&cp, &["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["clientVersion"]["gitVersion"], "v1.35.1");
    assert_eq!(v["serverVersion"]["gitVersion"], "v1.34.2");
    assert_eq!(v["serverVersion"]["minor"], "34");
    let r = kubectl(&w1, &["version"]);
    assert_eq!(r.code, 1);
    assert!(r.stdout.starts_with("Client Version: v1.34.2\n"));
    assert!(r.stderr.contains("localhost:8080 was refused"));
}

#[test]
fn anything_else_is_unsupported_and_recorded() {
    let (cp, _, _) = cluster();
    for args in [
        vec!["apply", "-f", "x.yaml"],
        vec!["get", "pods", "-o", "yaml"],
        vec!["get", "nodes", "-o", "wide"],
        vec!["drain", "w1", "--pod-selector=app=web"],
        vec!["get", "-é", "nodes"],
    ] {
        let r = kubectl(&cp, &args);
        assert_eq!(r.code, 1);
        assert_eq!(
            r.stderr.trim(),
            format!(
                "fleetsim: unsupported: kubectl {}",
                crate::tools::util::shell_join(
                    &args.iter().map(|a| a.to_string()).collect::<Vec<_>>()
                )
            )
        );
    }
    let events = cp.events();
    assert_eq!(events.len(), 5);
    assert_eq!(events[0].argv, ["kubectl", "apply", "-f", "x.yaml"]);
    assert!(
        events
            .iter()
            .all(|e| e.result.starts_with("fleetsim: unsupported: kubectl "))
    );
}

// ---------------------------------------------------------------- pods

const FLEETCTL_PODS: &[&str] = &[
    "--kubeconfig=/etc/kubernetes/admin.conf",
    "--request-timeout=20s",
    "-n",
    "kube-system",
    "get",
    "pod",
    "kube-apiserver-cp1",
    "kube-controller-manager-cp1",
    "kube-scheduler-cp1",
    "-o",
    "json",
];

#[test]
fn static_pods_as_fleetctl_reads_them() {
    let (cp, _, _) = cluster();
    cp.update_cluster(|c| {
        c.nodes.get_mut("cp1").unwrap().control_plane_version = Some("v1.35.3".into());
    });
    let r = kubectl(&cp, FLEETCTL_PODS);
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
    let list: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    let names: Vec<&str> = items
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "kube-apiserver-cp1",
            "kube-controller-manager-cp1",
            "kube-scheduler-cp1"
        ]
    );
    let api = &items[0];
    assert_eq!(api["kind"], "Pod");
    assert_eq!(api["metadata"]["namespace"], "kube-system");
    assert_eq!(api["metadata"]["labels"]["component"], "kube-apiserver");
    assert_eq!(api["metadata"]["labels"]["tier"], "control-plane");
    assert_eq!(api["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(api["spec"]["nodeName"], "cp1");
    assert_eq!(
        api["spec"]["containers"][0]["image"],
        "registry.k8s.io/kube-apiserver:v1.35.3"
    );
    assert_eq!(api["status"]["phase"], "Running");
    let ready = api["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "True");
    let cs = &api["status"]["containerStatuses"][0];
    assert_eq!(cs["ready"], true);
    assert_eq!(cs["image"], "registry.k8s.io/kube-apiserver:v1.35.3");
    assert!(cp.events().is_empty(), "get does not mutate");
}

#[test]
fn one_pod_by_name_is_the_object_and_etcd_has_its_own_image() {
    let (cp, _, _) = cluster();
    let r = kubectl(
        &cp,
        &["-n", "kube-system", "get", "pod", "etcd-cp1", "-o", "json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let pod: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(
        pod["spec"]["containers"][0]["image"],
        "registry.k8s.io/etcd:3.6.5-0"
    );
    let r = kubectl(&cp, &["-n", "kube-system", "get", "pods"]);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "NAME                          READY   STATUS    RESTARTS   AGE"
    );
    assert!(lines[1].starts_with("cilium-"), "{}", r.stdout);
    let etcd = lines.iter().find(|l| l.starts_with("etcd-")).unwrap();
    assert!(etcd.starts_with("etcd-cp1                      1/1     Running   0          "));
    // Four static pods, cilium on three nodes, CoreDNS on the control plane.
    assert_eq!(lines.len(), 1 + 4 + 3 + 1);
    let r = kubectl(&cp, &["get", "pods"]);
    assert_eq!(r.stdout.lines().count(), 3, "the app's pod on each worker");
    let r = kubectl(&cp, &["-n", "empty", "get", "pods"]);
    assert_eq!(r.stderr, "No resources found in empty namespace.\n");
}

#[test]
fn missing_pods_are_not_found_and_the_others_still_printed() {
    let fleet = Fleet::new();
    let cp1 = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    let _cp2 = fleet.node("cp2", Role::ControlPlane, "v1.34.2");
    // cp2 is up but its kubelet did not start: no static pods there.
    cp1.update_cluster(|c| c.nodes.get_mut("cp2").unwrap().kubelet = None);
    let r = kubectl(
        &cp1,
        &[
            "-n",
            "kube-system",
            "get",
            "pod",
            "kube-apiserver-cp1",
            "kube-apiserver-cp2",
            "-o",
            "json",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): pods \"kube-apiserver-cp2\" not found\n"
    );
    let list: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(list["kind"], "List", "several names: a List, even of one");
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    let r = kubectl(
        &cp1,
        &[
            "-n",
            "kube-system",
            "get",
            "pod",
            "kube-apiserver-cp2",
            "-o",
            "json",
        ],
    );
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): pods \"kube-apiserver-cp2\" not found\n"
    );
}

// ---------------------------------------------------------------- the lock's calls

/// The templates of fleetctl's `remote/kubectl.rs`, byte for byte.
const DS_TEMPLATE: &str = concat!(
    r#"jsonpath={range .items[*]}daemonset{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}"#,
    r#"{range .spec.template.spec.containers[*]}"#,
    r#"container{"\t"}{.name}{"\t"}{.image}{"\t"}{.command[0]}{"\n"}"#,
    r#"{end}{end}"#,
);
const SETTINGS_TEMPLATE: &str = concat!(
    r#"jsonpath={.spec.template.spec.containers[0].name}{"\t"}"#,
    r#"{.spec.template.spec.containers[0].command}{"\t"}"#,
    r#"{.spec.template.spec.containers[0].args}{"\t"}"#,
    r#"{.spec.template.spec.containers[0].env}{"\t"}"#,
    r#"{.spec.template.spec.containers[0].envFrom}"#,
);
const POD_TEMPLATE: &str = concat!(
    r#"jsonpath={range .items[*]}pod{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}"#,
    r#"{range .spec.containers[*]}container{"\t"}{.name}{"\t"}{.image}{"\t"}{.command[0]}{"\n"}{end}{end}"#,
);
const LOCK_TEMPLATE: &str = r#"jsonpath={.metadata.resourceVersion}{"\t"}{.metadata.annotations.weave\.works/kured-node-lock}"#;
const CM_TEMPLATE: &str =
    r#"jsonpath={.metadata.resourceVersion}{"\t"}{.metadata.uid}{"\t"}{.data}"#;

fn admin(node: &Node, args: &[&str]) -> Output {
    let mut all = vec![
        "--kubeconfig=/etc/kubernetes/admin.conf",
        "--request-timeout=20s",
    ];
    all.extend_from_slice(args);
    kubectl(node, &all)
}

fn with_helm_kured(node: &Node) {
    node.update_cluster(|c| {
        let spec = crate::kured::KuredSpec {
            helm: Some("kured/kured".into()),
            ..Default::default()
        };
        c.kured = Some(spec.daemonset());
    });
}

#[test]
fn daemonsets_and_pods_as_the_lock_lists_them() {
    let (cp, _, _) = cluster();
    with_helm_kured(&cp);
    let r = admin(
        &cp,
        &["get", "daemonsets", "--all-namespaces", "-o", DS_TEMPLATE],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "daemonset\tkube-system\tcilium\n\
         container\tcilium-agent\tquay.io/cilium/cilium:v1.16.5\tcilium-agent\n\
         daemonset\tkured\tkured\n\
         container\tkured\tghcr.io/kubereboot/kured:1.23.0\t/usr/bin/kured\n",
        "sorted by namespace, then name; the program only, no args or env; no newline added"
    );
    // Kured's own container, by position: its flags and env, as JSON.
    let r = admin(
        &cp,
        &[
            "-n",
            "kured",
            "get",
            "daemonset",
            "kured",
            "-o",
            SETTINGS_TEMPLATE,
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let node_id = r#"[{"name":"KURED_NODE_ID","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"spec.nodeName"}}}]"#;
    assert_eq!(
        r.stdout,
        format!(
            "kured\t[\"/usr/bin/kured\"]\t\
             [\"--ds-name=kured\",\"--ds-namespace=kured\",\"--metrics-port=8080\",\"--reboot-sentinel=/sentinel/reboot-required\",\
             \"--reboot-command=/bin/systemctl reboot\",\"--log-format=text\",\"--concurrency=1\"]\t{node_id}\t"
        ),
        "unset fields empty"
    );
    let r = admin(
        &cp,
        &["get", "pods", "--all-namespaces", "-o", POD_TEMPLATE],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let kured: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("pod\tkured\tkured-"))
        .collect();
    assert_eq!(kured.len(), 3, "one Kured pod per node:\n{}", r.stdout);
    assert!(
        r.stdout
            .contains("container\tkured\tghcr.io/kubereboot/kured:1.23.0\t/usr/bin/kured\n")
    );
    assert!(r.stdout.contains(
        "pod\tkube-system\tetcd-cp1\ncontainer\tetcd\tregistry.k8s.io/etcd:3.6.5-0\tetcd\n"
    ));
    let r = admin(
        &cp,
        &["get", "pods", "-A", "-o", "jsonpath={.items[?(@.x)]}"],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with("fleetsim: unsupported: kubectl"),
        "{}",
        r.stderr
    );
}

#[test]
fn kureds_lock_annotation_read_taken_and_given_back() {
    let (cp, _, _) = cluster();
    with_helm_kured(&cp);
    let get = |cp: &Node| {
        admin(
            cp,
            &[
                "-n",
                "kured",
                "get",
                "daemonset",
                "kured",
                "-o",
                LOCK_TEMPLATE,
            ],
        )
    };
    let r = get(&cp);
    assert_eq!((r.code, r.stdout.as_str()), (0, "1\t"), "{}", r.stderr);
    let value = r#"{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":900000000000}"#;
    let set = format!("weave.works/kured-node-lock={value}");
    let r = admin(
        &cp,
        &[
            "-n",
            "kured",
            "annotate",
            "daemonset",
            "kured",
            &set,
            "--resource-version=1",
            "--overwrite",
        ],
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "daemonset.apps/kured annotated\n"),
        "{}",
        r.stderr
    );
    let r = get(&cp);
    let (rv, got) = r.stdout.split_once('\t').unwrap();
    assert_eq!(got, value);
    let r = admin(
        &cp,
        &[
            "-n",
            "kured",
            "annotate",
            "daemonset",
            "kured",
            "weave.works/kured-node-lock-",
            "--resource-version=1",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps \"kured\": the object has \
         been modified; please apply your changes to the latest version and try again\n"
    );
    let r = admin(
        &cp,
        &[
            "-n",
            "kured",
            "annotate",
            "daemonset",
            "kured",
            "weave.works/kured-node-lock-",
            &format!("--resource-version={rv}"),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(get(&cp).stdout.ends_with('\t'));
    let r = admin(
        &cp,
        &[
            "-n",
            "kube-system",
            "get",
            "daemonset",
            "kured",
            "-o",
            LOCK_TEMPLATE,
        ],
    );
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): daemonsets.apps \"kured\" not found\n"
    );

    cp.shared()
        .update_faults(|f| f.kured_lock_forbidden = true)
        .unwrap();
    let rv = get(&cp).stdout.trim_end().to_string();
    let r = admin(
        &cp,
        &[
            "-n",
            "kured",
            "annotate",
            "daemonset",
            "kured",
            &set,
            &format!("--resource-version={rv}"),
            "--overwrite",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "Error from server (Forbidden): daemonsets.apps \"kured\" is forbidden: User \"kubernetes-admin\" cannot \
         patch resource \"daemonsets\" in API group \"apps\" in the namespace \"kured\"\n"
    );
    assert_eq!(get(&cp).stdout, format!("{rv}\t"), "nothing changed");
}

#[test]
fn fleetctls_own_lock_configmap_read_patched_and_deleted_with_preconditions() {
    let (cp, _, _) = cluster();
    let ns = ["-n", "kube-system"];
    let r = admin(
        &cp,
        &[
            &ns[..],
            &[
                "create",
                "configmap",
                "fleetctl-lock",
                "--from-literal=holder=me",
                "--from-literal=heartbeat=T0",
            ],
        ]
        .concat(),
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "configmap/fleetctl-lock created\n"),
        "{}",
        r.stderr
    );
    let read = |cp: &Node| {
        let r = admin(
            cp,
            &[
                &ns[..],
                &["get", "configmap", "fleetctl-lock", "-o", CM_TEMPLATE],
            ]
            .concat(),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        let f: Vec<String> = r.stdout.split('\t').map(String::from).collect();
        (f[0].clone(), f[1].clone(), f[2].clone())
    };
    let (rv, uid, data) = read(&cp);
    assert_eq!(data, r#"{"heartbeat":"T0","holder":"me"}"#);
    assert_eq!(uid.len(), 36);
    let patch = |rv: &str| {
        format!(r#"{{"data":{{"heartbeat":"T1"}},"metadata":{{"resourceVersion":"{rv}"}}}}"#)
    };
    let r = admin(
        &cp,
        &[
            &ns[..],
            &[
                "patch",
                "configmap",
                "fleetctl-lock",
                "--type=merge",
                "-p",
                &patch(&rv),
            ],
        ]
        .concat(),
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "configmap/fleetctl-lock patched\n"),
        "{}",
        r.stderr
    );
    let r = admin(
        &cp,
        &[
            &ns[..],
            &[
                "patch",
                "configmap",
                "fleetctl-lock",
                "--type=merge",
                "-p",
                &patch(&rv),
            ],
        ]
        .concat(),
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "Error from server (Conflict): Operation cannot be fulfilled on configmaps \"fleetctl-lock\": the object has \
         been modified; please apply your changes to the latest version and try again\n"
    );
    let (rv2, uid2, data) = read(&cp);
    assert_eq!(
        (uid2.as_str(), data.as_str()),
        (uid.as_str(), r#"{"heartbeat":"T1","holder":"me"}"#)
    );

    let delete = |cp: &Node, rv: &str, uid: &str| {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{{"resourceVersion":"{rv}","uid":"{uid}"}}}}"#
        );
        let args = [
            "--kubeconfig=/etc/kubernetes/admin.conf",
            "--request-timeout=20s",
            "delete",
            "--raw",
            "/api/v1/namespaces/kube-system/configmaps/fleetctl-lock",
            "-f",
            "-",
        ];
        cp.run_with_stdin("kubectl", &args, &body)
    };
    let r = delete(&cp, &rv2, "6f1d8f2e-0c1a-4a56-9d8e-2b7f0c3a9e11");
    assert_eq!((r.code, r.stdout.as_str()), (1, ""));
    assert_eq!(
        r.stderr,
        format!(
            "Error from server (Conflict): Operation cannot be fulfilled on ConfigMap \"fleetctl-lock\": the UID in the \
             precondition (6f1d8f2e-0c1a-4a56-9d8e-2b7f0c3a9e11) does not match the UID in record ({uid}). The object \
             might have been deleted and then recreated\n"
        )
    );
    let r = delete(&cp, &rv, &uid);
    assert_eq!(
        r.stderr,
        format!(
            "Error from server (Conflict): Operation cannot be fulfilled on ConfigMap \"fleetctl-lock\": the \
             ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({rv2}). The \
             object might have been modified\n"
        )
    );
    let r = delete(&cp, &rv2, &uid);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!(
            "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Success\",\"details\":\
             {{\"name\":\"fleetctl-lock\",\"kind\":\"configmaps\",\"uid\":\"{uid}\"}}}}\n"
        )
    );
    let r = delete(&cp, &rv2, &uid);
    assert_eq!(
        r.stderr,
        "Error from server (NotFound): configmaps \"fleetctl-lock\" not found\n"
    );
    // Created again: a new uid, so a stale holder's delete cannot remove it.
    admin(
        &cp,
        &[
            &ns[..],
            &[
                "create",
                "configmap",
                "fleetctl-lock",
                "--from-literal=holder=other",
            ],
        ]
        .concat(),
    );
    assert_ne!(read(&cp).1, uid);
    let argvs: Vec<String> = cp.events().iter().map(|e| e.argv[3..].join(" ")).collect();
    assert!(
        argvs
            .iter()
            .any(|a| a.starts_with("-n kube-system patch configmap")),
        "{argvs:?}"
    );
    assert!(
        argvs.iter().any(|a| a.starts_with("delete --raw")),
        "{argvs:?}"
    );
}

// ---------------------------------------------------------------- what the checks read

#[test]
fn metrics_name_the_deprecated_apis_clients_use() {
    let (cp, _, _) = cluster();
    let r = admin(&cp, &["get", "--raw", "/metrics"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        !r.stdout.contains("apiserver_requested_deprecated_apis"),
        "none requested"
    );
    cp.update_cluster(|c| {
        c.deprecated_apis = vec![crate::state::DeprecatedApi {
            group: "flowcontrol.apiserver.k8s.io".into(),
            version: "v1beta3".into(),
            resource: "flowschemas".into(),
            subresource: String::new(),
            removed_release: "1.32".into(),
            served_by: Vec::new(),
        }]
    });
    let r = admin(&cp, &["get", "--raw", "/metrics"]);
    let text = r.stdout;
    assert!(text.contains(
        "# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.\n\
         # TYPE apiserver_requested_deprecated_apis gauge\n\
         apiserver_requested_deprecated_apis{group=\"flowcontrol.apiserver.k8s.io\",removed_release=\"1.32\",resource=\"flowschemas\",subresource=\"\",version=\"v1beta3\"} 1\n"
    ), "{text}");
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "families in name order");
}

#[test]
fn pdbs_carry_the_disruption_controllers_status_and_block_drains() {
    let (cp, _, _) = cluster();
    cp.update_cluster(|c| {
        c.pods = ["zk-0", "zk-1", "zk-2"]
            .iter()
            .zip(["w1", "w2", "w2"])
            .map(|(name, node)| crate::state::PodSpec {
                namespace: "default".into(),
                name: name.to_string(),
                node: node.into(),
                labels: [("app".to_string(), "zookeeper".to_string())].into(),
                annotations: Default::default(),
                owner: Some("StatefulSet/zk".into()),
                phase: "Running".into(),
                image: None,
            })
            .chain(std::iter::once(crate::state::PodSpec {
                namespace: "default".into(),
                name: "backup-x".into(),
                node: "w1".into(),
                labels: Default::default(),
                annotations: Default::default(),
                owner: Some("Job/backup".into()),
                phase: "Succeeded".into(),
                image: None,
            }))
            .collect();
        c.pdbs = vec![crate::state::PdbSpec {
            namespace: "default".into(),
            name: "zk-pdb".into(),
            min_available: Some(serde_json::json!(2)),
            match_labels: [("app".to_string(), "zookeeper".to_string())].into(),
            ..Default::default()
        }];
    });
    let r = admin(&cp, &["get", "pdb", "-A", "-o", "json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let zk = &v["items"][0];
    assert_eq!(zk["apiVersion"], "policy/v1");
    assert_eq!(zk["spec"]["minAvailable"], 2);
    assert_eq!(zk["status"]["expectedPods"], 3);
    assert_eq!(zk["status"]["currentHealthy"], 3);
    assert_eq!(zk["status"]["desiredHealthy"], 2);
    assert_eq!(zk["status"]["disruptionsAllowed"], 1);
    assert_eq!(zk["status"]["conditions"][0]["reason"], "SufficientPods");
    // w2 goes down: two of the three are not Ready, so nothing may go.
    cp.update_cluster(|c| c.nodes.get_mut("w2").unwrap().kubelet = None);
    let v: serde_json::Value =
        serde_json::from_str(&admin(&cp, &["get", "pdb", "-A", "-o", "json"]).stdout).unwrap();
    assert_eq!(v["items"][0]["status"]["disruptionsAllowed"], 0);
    assert_eq!(v["items"][0]["status"]["conditions"][0]["status"], "False");
    // Running pods only, and one node's.
    let r = admin(
        &cp,
        &[
            "get",
            "pods",
            "-A",
            "--field-selector=spec.nodeName=w1,status.phase=Running",
            "-o",
            "json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let names: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"zk-0") && !names.contains(&"backup-x"),
        "{names:?}"
    );
    assert!(names.iter().all(|n| !n.starts_with("zk-1")));
    // The budget blocks the drain of w1 (zk-0 is under it) until the timeout.
    let r = admin(
        &cp,
        &[
            "drain",
            "w1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=200ms",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(r.stderr.contains("error when evicting pods/\"zk-0\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."), "{}", r.stderr);
    // The pdb_block fault is a real budget too.
    cp.shared()
        .update_faults(|f| f.pdb_block = vec!["w1".into()])
        .unwrap();
    let r = admin(
        &cp,
        &[
            "-n",
            "default",
            "get",
            "pdb",
            "fleetsim-block-w1",
            "-o",
            "json",
        ],
    );
    let b: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(b["status"]["disruptionsAllowed"], 0);
    assert_eq!(b["status"]["expectedPods"], 1);
}

#[test]
fn etcd_images_follow_kubeadms_constants_and_kubeadm_upgrades_them() {
    let tag = super::etcd::image_tag;
    assert_eq!(tag("v1.33.9"), "3.5.21-0");
    assert_eq!(tag("v1.34.0"), "3.6.4-0");
    assert_eq!(tag("v1.34.1"), "3.6.4-0");
    assert_eq!(tag("v1.34.2"), "3.6.5-0");
    assert_eq!(tag("v1.35.0"), "3.6.6-0");
    assert_eq!(tag("v1.36.1"), "3.6.8-0");
    let mut c = crate::state::Cluster::default();
    c.etcd_images.insert("cp1".into(), "3.6.4-0".into());
    super::etcd::upgraded_by_kubeadm(&mut c, "cp1", "v1.34.3");
    assert!(c.etcd_images.is_empty(), "kubeadm v1.34.3 deploys 3.6.5-0");
    c.etcd_images.insert("cp1".into(), "3.6.9-0".into());
    super::etcd::upgraded_by_kubeadm(&mut c, "cp1", "v1.35.0");
    assert_eq!(c.etcd_images["cp1"], "3.6.9-0", "never a downgrade");
    assert_eq!(super::etcd::etcd_tag("3.6.4-0"), Some((3, 6, 4, 0)));
    assert_eq!(super::etcd::etcd_tag("3.6.4"), None);
    assert_eq!(super::etcd::etcd_tag("v3.6.4-0"), None);
}

//! Every node's `kubectl` is the real one: the machine image's kubectl of
//! the minor closest to the node's sysext image, against the sim's API
//! server, with the sim adding only the event log entry of a mutating call.

use crate::common::{run, small, start};

/// `kubectl` as root on `node`, with admin.conf; (exit code, stdout, stderr).
fn kubectl(
    fleet: &fleetsim::Fleet,
    node: &str,
    kubeconfig: &str,
    args: &str,
) -> (i32, String, String) {
    let o = fleet
        .ssh(
            node,
            "root",
            &format!("kubectl --kubeconfig={kubeconfig} --request-timeout=20s {args}"),
        )
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_nodes_kubectl_is_the_real_one_of_the_closest_minor() {
    let fleet = start(small(1).kubernetes("v1.32.4"));
    // kubectl's own version line: no emulation prints a real build's.
    let version = run(&fleet, "w-1", "root", "kubectl version --client -o json");
    let v: serde_json::Value = serde_json::from_str(&version).unwrap();
    assert_eq!(v["clientVersion"]["minor"], "32", "{version}");
    assert!(
        v["clientVersion"]["gitCommit"]
            .as_str()
            .is_some_and(|c| c.len() == 40),
        "{version}"
    );
    // The binary is the image's: a v1.32 node runs kubectl 1.32.
    let which = run(&fleet, "cp-1", "root", "ls /usr/lib/fleetsim/clients/");
    assert!(which.lines().any(|l| l == "kubectl.1.32"), "{which}");
}

#[test]
fn a_refused_cordon_exits_0_and_is_recorded_as_refused() {
    let fleet = start(small(2));
    let admin = "/etc/kubernetes/admin.conf";
    let (code, out, _) = kubectl(&fleet, "cp-1", admin, "cordon w-1");
    assert_eq!((code, out.trim()), (0, "node/w-1 cordoned"));
    assert!(fleet.cluster().unwrap().nodes["w-1"].unschedulable);

    // A node's identity may not change another Node (NodeRestriction):
    // kubectl prints the refusal and still exits 0.
    let (code, _, err) = kubectl(&fleet, "w-1", "/etc/kubernetes/kubelet.conf", "cordon w-2");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("error: unable to cordon node \"w-2\": nodes \"w-2\" is forbidden: node \"w-1\" is not allowed to modify node \"w-2\""),
        "{err}"
    );
    assert!(!fleet.cluster().unwrap().nodes["w-2"].unschedulable);

    let events = fleet.events().unwrap();
    let kubectl_events: Vec<_> = events
        .iter()
        .filter(|e| e.argv.first().is_some_and(|a| a == "kubectl"))
        .collect();
    assert_eq!(kubectl_events.len(), 2, "{kubectl_events:?}");
    assert_eq!(kubectl_events[0].node, "cp-1");
    assert_eq!(kubectl_events[0].result, "ok");
    assert_eq!(kubectl_events[1].node, "w-1");
    assert!(
        kubectl_events[1]
            .result
            .starts_with("error: unable to cordon node \"w-2\""),
        "{:?}",
        kubectl_events[1]
    );
    // Reads are not events.
    kubectl(&fleet, "cp-1", admin, "get nodes");
    assert_eq!(fleet.events().unwrap().len(), events.len());
}

#[test]
fn a_frozen_node_refuses_cordon_with_the_webhooks_message() {
    let fleet = start(small(1));
    fleet
        .faults(|f| f.deny_node_updates = vec!["w-1".into()])
        .unwrap();
    let (code, _, err) = kubectl(&fleet, "cp-1", "/etc/kubernetes/admin.conf", "cordon w-1");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "error: unable to cordon node \"w-1\": admission webhook \"freeze.policy.example.com\" denied the request: nodes are frozen by policy"
        ),
        "{err}"
    );
    assert!(!fleet.cluster().unwrap().nodes["w-1"].unschedulable);
}

//! Tests of the API servers' check: their own file, so the check reads as one
//! piece under the 500-line bound.

use super::*;

fn m(s: &str) -> Minor {
    s.parse().unwrap()
}

fn api(group: &str, version: &str, resource: &str, removed: &str) -> DeprecatedApi {
    DeprecatedApi {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        subresource: String::new(),
        removed_release: removed.into(),
    }
}

fn mirror_pod(node: &str, command: &[&str], endpoint: Option<&str>) -> serde_json::Value {
    let mut annotations = serde_json::json!({"kubernetes.io/config.mirror": "x"});
    if let Some(e) = endpoint {
        annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] = e.into();
    }
    serde_json::json!({
        "metadata": {"name": format!("kube-apiserver-{node}"), "namespace": "kube-system",
                     "labels": {"component": "kube-apiserver", "tier": "control-plane"},
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                          "uid": "u", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "kube-apiserver", "command": command}]}
    })
}

fn cp(name: &str, addresses: &[&str]) -> ControlPlane {
    ControlPlane {
        name: name.into(),
        addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
    }
}

fn control_planes() -> Vec<ControlPlane> {
    vec![
        cp("cp-1", &["10.0.0.1"]),
        cp("cp-2", &["10.0.0.2"]),
        cp("cp-3", &["fd00::3"]),
        cp("cp-4", &["10.0.0.4"]),
        cp("cp-5", &["10.0.0.5"]),
    ]
}

#[test]
fn only_mirror_pods_of_the_control_planes_at_their_own_address_are_asked() {
    let mut user = mirror_pod(
        "cp-1",
        &["kube-apiserver", "--advertise-address=10.9.9.9"],
        None,
    );
    user["metadata"]["namespace"] = "team-a".into();
    let mut bare = mirror_pod(
        "cp-2",
        &["kube-apiserver", "--advertise-address=10.0.0.2"],
        None,
    );
    bare["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    bare["metadata"]["name"] = "decoy".into();
    let mut unannotated = mirror_pod("cp-2", &["kube-apiserver"], Some("10.0.0.2:6443"));
    unannotated["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("kubernetes.io/config.mirror");
    let list = serde_json::json!({"kind": "PodList", "items": [
        user,
        bare,
        unannotated,
        // A worker's kubelet can create a mirror pod for itself.
        mirror_pod("w-1", &["kube-apiserver", "--advertise-address=10.0.1.1"], None),
        // A control plane's mirror pod naming another host.
        mirror_pod("cp-3", &["kube-apiserver", "--advertise-address=10.9.9.9"], None),
        mirror_pod("cp-1", &["kube-apiserver", "--advertise-address=10.0.0.1"], None),
    ]});
    let (found, problems) =
        parse_apiserver_instances(&list.to_string(), &control_planes()).unwrap();
    assert_eq!(
        found,
        [ApiServerInstance {
            node: "cp-1".into(),
            endpoint: "10.0.0.1:6443".parse().unwrap()
        }]
    );
    assert_eq!(problems.len(), 5, "{problems:#?}");
    for (problem, start) in problems.iter().zip([
            "pod team-a/kube-apiserver-cp-1: labelled component=kube-apiserver, but not the kube-system mirror pod",
            "pod kube-system/decoy: labelled component=kube-apiserver, but not the kube-system mirror pod of cp-2's",
            "pod kube-system/kube-apiserver-cp-2: labelled component=kube-apiserver, but not the kube-system mirror pod",
            "pod kube-system/kube-apiserver-w-1: labelled component=kube-apiserver on w-1, which is not a control plane",
            "cp-3: its kube-apiserver pod kube-system/kube-apiserver-cp-3 names 10.9.9.9:6443, not an address of cp-3",
        ]) {
            assert!(problem.starts_with(start), "{problem}");
            assert!(problem.ends_with("not asked for /metrics"), "{problem}");
        }
    let control_plane = serde_json::json!({"node-role.kubernetes.io/control-plane": ""});
    let nodes = serde_json::json!({"items": [
        {"metadata": {"name": "cp-1", "labels": control_plane}, "status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "Hostname", "address": "cp-1"},
            {"type": "InternalIP", "address": "fd00::1"}]}},
        {"metadata": {"name": "cp-2", "labels": control_plane}, "status": {}},
        // Every node's list (the cluster facts' read): a worker's
        // addresses, or a node whose label was taken off, never count.
        {"metadata": {"name": "w-1", "labels": {"kubernetes.io/os": "linux"}}, "status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.9"}]}},
        {"metadata": {"name": "cp-9"}, "status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.8"}]}},
    ]});
    let ips = parse_internal_ips(&nodes.to_string()).unwrap();
    assert_eq!(ips.keys().collect::<Vec<_>>(), ["cp-1", "cp-2"]);
    assert_eq!(
        ips["cp-1"],
        [
            "10.0.0.1".parse::<IpAddr>().unwrap(),
            "fd00::1".parse().unwrap()
        ]
    );
    assert!(ips["cp-2"].is_empty());
}

#[test]
fn instances_come_from_the_mirror_pods_advertise_address() {
    let list = serde_json::json!({"kind": "PodList", "items": [
        mirror_pod("cp-2", &["kube-apiserver", "--advertise-address=10.0.0.2", "--secure-port=6443"], None),
        mirror_pod("cp-1", &["kube-apiserver", "--advertise-address=10.0.0.1"], Some("10.0.0.1:6443")),
        // No flag: kubeadm's annotation (IPv6, bracketed as JoinHostPort writes it).
        mirror_pod("cp-3", &["kube-apiserver"], Some("[fd00::3]:8443")),
        // Something that would become an argument: refused, named.
        mirror_pod("cp-4", &["kube-apiserver", "--advertise-address=10.0.0.4;reboot"], None),
        mirror_pod("Bad;Name", &["kube-apiserver", "--advertise-address=10.0.0.5"], None),
        {"metadata": {"name": "etcd-cp-1", "labels": {"component": "etcd"}}, "spec": {"nodeName": "cp-1"}},
    ]});
    let (found, problems) =
        parse_apiserver_instances(&list.to_string(), &control_planes()).unwrap();
    let shown: Vec<String> = found
        .iter()
        .map(|i| format!("{} {}", i.node, i.endpoint))
        .collect();
    assert_eq!(
        shown,
        [
            "cp-1 10.0.0.1:6443",
            "cp-2 10.0.0.2:6443",
            "cp-3 [fd00::3]:8443"
        ]
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("cp-4: its kube-apiserver pod names no usable --advertise-address")
    );
    assert!(problems[1].contains("no valid node name"), "{problems:?}");
    assert!(parse_apiserver_instances("<html>", &control_planes()).is_err());
}

fn instance(node: &str, apis: Result<Vec<DeprecatedApi>, &str>) -> InstanceMetrics {
    InstanceMetrics {
        instance: format!("{node} (10.0.0.9:6443)"),
        node: node.into(),
        apis: apis.map_err(String::from),
    }
}

#[test]
fn an_api_only_the_second_instance_served_blocks_and_names_it() {
    let served = api("batch", "v1beta1", "cronjobs", "1.35");
    let check = check_removed_apis_across(
        &[
            instance("cp-1", Ok(vec![])),
            instance("cp-2", Ok(vec![served.clone()])),
            instance("cp-3", Ok(vec![])),
        ],
        m("v1.35"),
        m("v1.35"),
    );
    assert_eq!(check.verdict, Verdict::Block);
    assert_eq!(
        check.details,
        ["batch/v1beta1 cronjobs (removed in v1.35), requested at cp-2"]
    );
}

#[test]
fn an_unreadable_instance_is_a_warning_naming_it_never_a_pass() {
    let check = check_removed_apis_across(
        &[
            instance("cp-1", Ok(vec![])),
            instance("cp-2", Err("connection refused")),
        ],
        m("v1.35"),
        m("v1.35"),
    );
    assert_eq!(check.verdict, Verdict::Warn);
    assert!(
        check
            .summary
            .contains("1 of 2 kube-apiserver instance(s) could not be read"),
        "{}",
        check.summary
    );
    assert_eq!(
        check.details,
        [
            "cp-2 (10.0.0.9:6443): its kube-apiserver's /metrics could not be read, so the deprecated \
              requests it served are unknown: connection refused"
        ]
    );
    // A block stays a block, with the unread instance listed under it.
    let block = check_removed_apis_across(
        &[
            instance(
                "cp-1",
                Ok(vec![api("batch", "v1beta1", "cronjobs", "1.35")]),
            ),
            instance("cp-2", Err("connection refused")),
        ],
        m("v1.35"),
        m("v1.35"),
    );
    assert_eq!(block.verdict, Verdict::Block);
    assert_eq!(block.details.len(), 2);
    // None readable: unchecked, a warning.
    let none = check_removed_apis_across(&[instance("cp-1", Err("x"))], m("v1.35"), m("v1.35"));
    assert_eq!(none.verdict, Verdict::Warn);
    assert!(none.summary.contains("unchecked"));
}

#[test]
fn the_per_instance_script_quotes_nothing_it_cannot_and_parses_back() {
    let a: SocketAddr = "10.0.0.2:6443".parse().unwrap();
    let b: SocketAddr = "[fd00::3]:6443".parse().unwrap();
    let script = crate::remote::instance_metrics_script(&[
        ("cp-2".into(), a),
        ("cp-3".into(), b),
        ("bad'name".into(), a),
    ]);
    assert!(!script.contains('\''), "sudo sh -c '…' would break");
    assert!(script.contains("probe \"metrics cp-2\" fleetctl_metrics_at \"10.0.0.2:6443\"\n"));
    assert!(script.contains("probe \"metrics cp-3\" fleetctl_metrics_at \"[fd00::3]:6443\"\n"));
    assert!(!script.contains("bad"), "an unvalidated name is left out");
    let sh = std::process::Command::new("sh")
        .args(["-n", "-c", &script])
        .output()
        .unwrap();
    assert!(
        sh.status.success(),
        "{}",
        String::from_utf8_lossy(&sh.stderr)
    );
    let output = "@@fleetctl:metrics 1@@\n\
            @@fleetctl:begin metrics cp-2@@\nprocess_start_time_seconds 1.7e+09\n\n@@fleetctl:stderr@@\n@@fleetctl:end 0@@\n\
            @@fleetctl:begin metrics cp-3@@\n\n@@fleetctl:stderr@@\nThe connection to the server [fd00::3]:6443 was refused - did you specify the right host or port?\n@@fleetctl:end 1@@\n\
            @@fleetctl:done@@\n";
    let read =
        crate::node::parse_instance_metrics(output, &["cp-2".into(), "cp-3".into(), "cp-4".into()])
            .unwrap();
    assert_eq!(
        read[0].1.as_deref(),
        Ok("process_start_time_seconds 1.7e+09\n")
    );
    let e = read[1].1.as_ref().unwrap_err();
    assert!(
        e.contains("exit status 1: The connection to the server [fd00::3]:6443 was refused"),
        "{e}"
    );
    assert!(
        read[2]
            .1
            .as_ref()
            .unwrap_err()
            .contains("no section for cp-4")
    );
}

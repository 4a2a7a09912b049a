//! What the checks' probes print: kubelet files, the cgroup
//! hierarchy, the kubelet and instance configs, the configmaps.

use super::*;

#[test]
fn a_kubelet_file_that_vanished_before_cat_is_left_out() {
    let output = format!(
        "{}{}",
        section("arch", "aarch64", "", 0),
        section(
            "kubelet-file /etc/sysconfig/kubelet",
            "",
            "cat: /etc/sysconfig/kubelet: No such file or directory",
            1
        ),
    );
    let facts = parse_facts(&output).unwrap();
    assert_eq!(facts.arch.as_deref(), Some("aarch64"));
    assert!(facts.kubelet_files.is_empty());
}

#[test]
fn the_cgroup_hierarchy_and_the_kubelet_config_as_the_probes_saw_them() {
    let config = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n";
    let v1 = format!(
        "{}{}",
        section("cgroup-v2", "", "", 1),
        section("kubelet-config", config, "", 0)
    );
    let facts = parse_facts(&v1).unwrap();
    assert_eq!(facts.cgroup.v2, Some(false));
    assert_eq!(facts.cgroup.kubelet_config.as_deref(), Some(config));
    let v2 = parse_facts(&section("cgroup-v2", "", "", 0)).unwrap();
    assert_eq!(v2.cgroup.v2, Some(true));
    assert_eq!(v2.cgroup.kubelet_config, None);
    // No answer (an older script, a cut-off output): unknown, not v1.
    let cut = parse_facts(&section("arch", "x86_64", "", 0)).unwrap();
    assert_eq!(cut.cgroup, crate::node::CgroupFacts::default());
}

#[test]
fn the_configmaps_of_the_checks_script_are_found_missing_or_failed() {
    let kubelet = r#"{"kind":"ConfigMap","metadata":{"name":"kubelet-config"},"data":{}}"#;
    let list = format!(r#"{{"apiVersion":"v1","kind":"List","items":[{kubelet}]}}"#);
    let out = format!(
        "@@fleetctl:checks 1@@\n{}",
        section("configmaps", &list, "", 0)
    );
    let outputs = parse_check_outputs(&out).unwrap();
    let found: serde_json::Value =
        serde_json::from_str(&outputs.kubelet_configmap.unwrap().unwrap()).unwrap();
    assert_eq!(
        found,
        serde_json::from_str::<serde_json::Value>(kubelet).unwrap()
    );
    assert_eq!(
        outputs.kubeadm_configmap,
        Ok(None),
        "left out of the List: NotFound"
    );

    // Neither exists: kubectl prints nothing.
    let none = parse_check_outputs(&section("configmaps", "", "", 0)).unwrap();
    assert_eq!(
        (none.kubelet_configmap, none.kubeadm_configmap),
        (Ok(None), Ok(None))
    );

    let failed = section("configmaps", "", "Unable to connect", 1);
    let outputs = parse_check_outputs(&failed).unwrap();
    assert!(
        outputs
            .kubelet_configmap
            .unwrap_err()
            .contains("Unable to connect")
    );
    assert!(
        outputs
            .kubeadm_configmap
            .unwrap_err()
            .contains("Unable to connect")
    );
    let outputs = parse_check_outputs(&section("metrics", "", "", 0)).unwrap();
    assert!(outputs.kubelet_configmap.unwrap_err().contains("never ran"));
}

#[test]
fn the_instance_config_is_read_when_the_node_has_one() {
    let text = "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n";
    let facts = parse_facts(&section("instance-config", text, "", 0)).unwrap();
    assert_eq!(facts.cgroup.instance_config.as_deref(), Some(text));
    let facts = parse_facts(&section("hostname", "x", "", 0)).unwrap();
    assert_eq!(facts.cgroup.instance_config, None);
}

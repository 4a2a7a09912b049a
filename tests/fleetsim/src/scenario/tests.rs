use super::*;

#[test]
fn builder_names_nodes_and_defaults_versions() {
    let s = Scenario::new()
        .control_planes(1)
        .workers(3)
        .kubernetes("v1.34.2");
    let names: Vec<_> = s.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "w-1", "w-2", "w-3"]);
    s.validate().unwrap();
    assert_eq!(s.running(&s.nodes[2]).unwrap().to_string(), "v1.34.2");
    assert_eq!(s.cluster_version().unwrap().to_string(), "v1.34.2");
}

#[test]
fn etcd_image_and_cgroup_v1_from_yaml_and_a_bad_tag_refused() {
    let s = Scenario::from_yaml(
            "kubernetes: v1.34.2\netcd: 3.6.4-0\nnodes:\n  - {name: cp-1, role: control-plane}\n  - {name: w-1, role: worker, cgroup_v1: true}\n",
        )
        .unwrap();
    s.validate().unwrap();
    assert_eq!(s.etcd.as_deref(), Some("3.6.4-0"));
    assert!(s.nodes[1].cgroup_v1 && !s.nodes[0].cgroup_v1);
    let mut bad = s.clone();
    bad.etcd = Some("v3.6.4".into());
    assert!(bad.validate().is_err());
    let mut external = s;
    external.external_etcd = vec!["https://10.0.0.5:2379".into()];
    assert!(
        external.validate().is_err(),
        "an external etcd has no image here"
    );
}

#[test]
fn with_node_changes_one_node() {
    let s = Scenario::new()
        .control_planes(1)
        .workers(2)
        .kubernetes("v1.34.2")
        .with_node("w-2", |n| {
            n.user = Some("core".into());
            n.staged = Some("v1.34.3".into());
        });
    assert_eq!(s.nodes[2].user.as_deref(), Some("core"));
    assert_eq!(
        s.staged(&s.nodes[2]).unwrap().unwrap().to_string(),
        "v1.34.3"
    );
    assert_eq!(s.nodes[1].staged, None);
}

#[test]
fn yaml_with_every_field() {
    let text = r#"
kubernetes: v1.34.2
os_version: 4081.2.0
boot_delay: 1.5
kubelet_restart: 2
port: 2200
kured: true
hub:
  patches: 2
  patches_for: {v1.35: 5}
  missing: [v1.36]
  extra: [v1.38.9]
nodes:
  - {name: cp-1, role: control-plane}
  - name: w-1
    role: worker
    user: core
    running: v1.33.1
    staged: v1.34.0
    pin: floating
    extra_configs: [v1.32]
    os_update: 4081.3.0
    wrong_host_key: true
faults:
  hang_on_reboot: [w-1]
"#;
    let s = Scenario::from_yaml(text).unwrap();
    assert_eq!(s.boot_delay, 1.5);
    assert_eq!(s.kubelet_restart, 2.0);
    assert_eq!(s.kubelet_delay, 0.3, "unset fields keep their defaults");
    assert_eq!(s.nodes[1].pin, Pin::Floating);
    assert!(s.nodes[1].wrong_host_key);
    assert_eq!(s.faults.hang_on_reboot, ["w-1"]);
    let versions: Vec<String> = s
        .hub
        .versions()
        .unwrap()
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert!(versions.contains(&"v1.35.4".to_string()));
    assert!(!versions.contains(&"v1.34.2".to_string()));
    assert!(!versions.iter().any(|v| v.starts_with("v1.36.")));
    assert!(versions.contains(&"v1.38.9".to_string()));
}

#[test]
fn builder_round_trips_through_yaml() {
    let s = Scenario::new()
        .control_planes(2)
        .workers(1)
        .kubernetes("v1.35.1")
        .with_node("w-1", |n| n.pin = Pin::Floating)
        .faults(|f| f.hub_down = true);
    let back = Scenario::from_yaml(&s.to_yaml().unwrap()).unwrap();
    assert_eq!(back, s);
}

#[test]
fn kured_as_a_switch_or_a_mapping() {
    let on = Scenario::from_yaml(
        "kubernetes: v1.34.2\nkured: true\nnodes: [{name: cp-1, role: control-plane}]",
    )
    .unwrap();
    assert_eq!(on.kured.spec().unwrap().daemonset().name, "kured");
    let helm = Scenario::from_yaml(
        "kubernetes: v1.34.2\nkured: {helm: ops/reboots, run: true, period: 0.5, lock_ttl: 30}\n\
             nodes: [{name: cp-1, role: control-plane}]",
    )
    .unwrap();
    let ds = helm.kured.spec().unwrap().daemonset();
    assert_eq!(
        (ds.namespace.as_str(), ds.name.as_str()),
        ("ops", "reboots-kured")
    );
    assert!(ds.active);
    assert!(ds.args.contains(&"--lock-ttl=30s".to_string()));
    let back = Scenario::from_yaml(&helm.to_yaml().unwrap()).unwrap();
    assert_eq!(back, helm);
    for bad in ["{helm: kured}", "{period: 0}", "{colour: red}"] {
        let yaml = format!(
            "kubernetes: v1.34.2\nkured: {bad}\nnodes: [{{name: cp-1, role: control-plane}}]"
        );
        assert!(Scenario::from_yaml(&yaml).is_err(), "{bad}");
    }
}

#[test]
fn refuses_what_would_misbehave() {
    let cases = [
        ("nodes: []", "no nodes"),
        (
            "kubernetes: v1.34.2\nnodes: [{name: w-1, role: worker}]",
            "no control-plane",
        ),
        (
            "nodes: [{name: cp-1, role: control-plane}]",
            "no running version",
        ),
        (
            "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane}, {name: cp-1, role: worker}]",
            "appears twice",
        ),
        (
            "kubernetes: v1.34.2\nnodes: [{name: CP_1, role: control-plane}]",
            "not a valid hostname",
        ),
        (
            "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane, user: admin}]",
            "user `admin`",
        ),
        (
            "kubernetes: v1.34\nnodes: [{name: cp-1, role: control-plane}]",
            "not a Kubernetes version",
        ),
        (
            "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane}]\nfaults: {pdb_block: [w-9]}",
            "names node w-9",
        ),
        (
            "kubernetes: v1.34.2\nboot_delay: -1\nnodes: [{name: cp-1, role: control-plane}]",
            "boot_delay",
        ),
        (
            "kubernetes: v1.34.2\nkubelet_restart: 0\nnodes: [{name: cp-1, role: control-plane}]",
            "kubelet_restart",
        ),
        (
            "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane, colour: red}]",
            "colour",
        ),
    ];
    for (yaml, expected) in cases {
        let err = format!("{:#}", Scenario::from_yaml(yaml).unwrap_err());
        assert!(
            err.contains(expected),
            "{yaml}\n→ {err}\n(expected `{expected}`)"
        );
    }
}

#[test]
fn the_emulated_kubectl_is_refused_by_name_and_the_real_one_read() {
    let nodes = "nodes:\n  - {name: cp-1, role: control-plane}\n";
    let real =
        Scenario::from_yaml(&format!("kubernetes: v1.34.2\nkubectl: real\n{nodes}")).unwrap();
    assert_eq!(real.kubectl, KubectlKind::Real);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.yaml");
    std::fs::write(
        &path,
        format!("kubernetes: v1.34.2\nkubectl: emulated\n{nodes}"),
    )
    .unwrap();
    let err = format!("{:#}", Scenario::load(&path).unwrap_err());
    assert!(
        err.contains(&format!("in scenario {}", path.display())),
        "{err}"
    );
    assert!(
        err.contains("`kubectl: emulated`: fleetsim's emulated kubectl was removed"),
        "{err}"
    );
    assert!(err.contains("line 2"), "where: {err}");
}

use super::super::testutil::Node;
use super::*;
use crate::kubelet_files::{CONFIG_FILE, config_yaml};

fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

const UNIT_ARGS: &str = "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
                         --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml \
                         --container-runtime-endpoint=unix:///run/containerd/containerd.sock";
const POD_INFRA: &str = " --pod-infra-container-image=registry.k8s.io/pause:3.10";

#[test]
fn reports_the_version_of_its_image() {
    let node = Node::worker("w1", "v1.34.2");
    let r = node.run("kubelet", &["--version"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.34.2\n"));
    // A staged image's kubelet, run from where it is mounted.
    let r = node.run_image("v1.35.1", "kubelet", &["--version"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.35.1\n"));
    assert_eq!(node.run("kubelet", &["--config=/x"]).code, 1, "not by hand");
}

#[test]
fn only_1_35_and_later_refuse_the_pod_infra_flag() {
    let v = |s| KubeVersion::parse(s).unwrap();
    let with = args(&format!("{UNIT_ARGS}{POD_INFRA}"));
    assert!(parse_flags(v("v1.34.2"), &with).is_ok());
    assert_eq!(
        parse_flags(v("v1.35.0"), &with),
        Err("failed to parse kubelet flag: unknown flag: --pod-infra-container-image".into())
    );
    assert_eq!(
        parse_flags(v("v1.36.1"), &args(UNIT_ARGS))
            .unwrap()
            .config
            .as_deref(),
        Some("/var/lib/kubelet/config.yaml")
    );
    assert!(parse_flags(v("v1.34.2"), &args("--config")).is_err());
}

#[test]
fn removed_flags_are_refused_from_their_minor_on() {
    let v = |s| KubeVersion::parse(s).unwrap();
    let with = args(&format!("{UNIT_ARGS} --register-schedulable=false"));
    assert!(parse_flags(v("v1.33.5"), &with).is_ok());
    assert_eq!(
        parse_flags(v("v1.34.0"), &with),
        Err("failed to parse kubelet flag: unknown flag: --register-schedulable".into())
    );
    // A bool flag does not eat the next word.
    let bare = args("--register-schedulable --config=/var/lib/kubelet/config.yaml");
    let flags = parse_flags(v("v1.33.5"), &bare).unwrap();
    assert_eq!(
        flags.config.as_deref(),
        Some("/var/lib/kubelet/config.yaml")
    );
    let kept = args(&format!("{UNIT_ARGS} --keep-terminated-pod-volumes"));
    assert!(parse_flags(v("v1.30.2"), &kept).is_ok());
    assert!(parse_flags(v("v1.31.0"), &kept).is_err());
}

#[test]
fn a_1_35_kubelet_with_the_old_flags_fails_like_the_real_one() {
    let node = Node::worker("w1", "v1.35.0");
    node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
    node.write(CONFIG_FILE, &config_yaml("v1.34.2"));
    let a = args(&format!("{UNIT_ARGS}{POD_INFRA}"));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = node.run_service("kubelet", &a);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.trim_end().ends_with(
            "run.go:72] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image\""
        ),
        "{}",
        r.stderr
    );
    assert!(r.stderr.starts_with('E'), "{}", r.stderr);
    let events = node.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].argv, ["(kubelet)"]);
    assert_eq!(
        events[0].result,
        "failed: failed to parse kubelet flag: unknown flag: --pod-infra-container-image"
    );
    assert_eq!(events[0].version.as_deref(), Some("v1.35.0"));
    assert!(node.cluster().nodes["w1"].kubelet.is_none(), "not running");
    let journal = journal::read(&node.path(journal::JOURNAL_FILE)).unwrap();
    assert_eq!(journal.len(), 1);
    assert!(
        journal[0]
            .message
            .contains("unknown flag: --pod-infra-container-image")
    );
}

#[test]
fn a_kubelet_refuses_a_feature_gate_its_minor_removed_in_its_config_or_flags() {
    let refused = "failed to set feature gates from initial flags-based config: \
                   unrecognized feature gate: SizeMemoryBackedVolumes";
    let with_gate = format!(
        "{}featureGates:\n  SizeMemoryBackedVolumes: true\n",
        config_yaml("v1.34.2")
    );
    // In its config (what kubeadm writes from the kubelet-config ConfigMap).
    for (kubelet, code) in [("v1.34.2", 0), ("v1.35.0", 1)] {
        let node = Node::worker("w1", kubelet);
        node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
        node.write(CONFIG_FILE, &with_gate);
        let a = args(UNIT_ARGS);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = node.run_service("kubelet", &a);
        assert_eq!(r.code, code, "{kubelet}: {}", r.stderr);
        if code == 1 {
            assert!(
                r.stderr
                    .trim_end()
                    .ends_with(&format!("run.go:72] \"command failed\" err=\"{refused}\"")),
                "{}",
                r.stderr
            );
            assert_eq!(node.events()[0].result, format!("failed: {refused}"));
            assert!(node.cluster().nodes["w1"].kubelet.is_none(), "NotReady");
        }
    }
    // In --feature-gates (KUBELET_EXTRA_ARGS or a drop-in).
    let node = Node::worker("w1", "v1.35.0");
    node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
    node.write(CONFIG_FILE, &config_yaml("v1.34.2"));
    let a = args(&format!(
        "{UNIT_ARGS} --feature-gates=NodeSwap=true,SizeMemoryBackedVolumes=true"
    ));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = node.run_service("kubelet", &a);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains(refused), "{}", r.stderr);
    let known = args(&format!("{UNIT_ARGS} --feature-gates NodeSwap=true"));
    let flags = parse_flags(KubeVersion::parse("v1.35.0").unwrap(), &known).unwrap();
    assert_eq!(flags.feature_gates, [("NodeSwap".to_string(), Some(true))]);
}

#[test]
fn a_start_posts_status_and_a_control_plane_starts_its_static_pods() {
    let node = Node::control_plane("cp1", "v1.35.1");
    node.update_cluster(|c| {
        let n = c.nodes.get_mut("cp1").unwrap();
        n.kubelet = None;
        n.kubelet_version = "v1.34.2".into();
    });
    node.write(CONFIG_FILE, &config_yaml("v1.35.1"));
    let a = args(UNIT_ARGS);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = node.run_service("kubelet", &a);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = node.cluster();
    let n = &c.nodes["cp1"];
    assert_eq!(n.kubelet_version, "v1.35.1");
    assert!(n.kubelet_running().is_some());
    let events = node.events();
    let seen: Vec<(&str, Option<&str>, Option<&str>)> = events
        .iter()
        .map(|e| {
            (
                e.argv[0].as_str(),
                e.version.as_deref(),
                e.config.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("(kubelet)", Some("v1.35.1"), Some("v1.35.1")),
            ("(static-pods)", Some("v1.35.1"), None)
        ]
    );
}

#[test]
fn a_1_35_kubelet_refuses_cgroup_v1_unless_its_config_allows_it() {
    let node = Node::worker("w1", "v1.35.0");
    node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
    std::fs::remove_dir_all(node.path(crate::cgroup::CGROUP_ROOT)).unwrap();
    crate::cgroup::populate(&node.root, true).unwrap();
    node.write(CONFIG_FILE, &config_yaml("v1.35.0"));
    let a = args(UNIT_ARGS);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = node.run_service("kubelet", &a);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.trim_end().ends_with(
            "run.go:72] \"command failed\" err=\"failed to validate kubelet configuration, error: \
             kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is \
             unsupported and will be removed in a future release, path: &TypeMeta{Kind:,APIVersion:,}\""
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        node.events()[0].result,
        format!("failed: {CGROUP_V1_REFUSED}")
    );
    assert!(node.cluster().nodes["w1"].kubelet.is_none(), "not running");
    // `failCgroupV1: false` lets it start.
    node.write(
        CONFIG_FILE,
        &format!("{}failCgroupV1: false\n", config_yaml("v1.35.0")),
    );
    let r = node.run_service("kubelet", &a);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(node.cluster().nodes["w1"].kubelet.is_some());
    let v = |s| KubeVersion::parse(s).unwrap();
    assert!(
        !refuses_cgroup_v1(v("v1.34.9"), None, false),
        "v1.34 only warns"
    );
    assert!(refuses_cgroup_v1(
        v("v1.36.0"),
        Some("failCgroupV1: true\n"),
        false
    ));
    assert!(!refuses_cgroup_v1(v("v1.36.0"), None, true), "cgroup v2");
}

#[test]
fn a_missing_config_fails_the_start() {
    let node = Node::worker("w1", "v1.34.2");
    std::fs::remove_file(node.path(CONFIG_FILE)).unwrap();
    let a = args(UNIT_ARGS);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let r = node.run_service("kubelet", &a);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("open /var/lib/kubelet/config.yaml: no such file or directory"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_kubelet_crash_fault_fails_its_version_on_its_node_and_nothing_else() {
    let start = |node: &Node| {
        node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
        let a = args(UNIT_ARGS);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        node.run_service("kubelet", &a)
    };
    for (fault, kubelet, code) in [
        ("v1.35", "v1.35.1", 1),
        ("v1.35.1", "v1.35.1", 1),
        ("v1.35.2", "v1.35.1", 0),
        ("v1.35", "v1.34.2", 0),
        // A minor is not a prefix of another: v1.3 is not v1.35.
        ("v1.3", "v1.35.1", 0),
    ] {
        let node = Node::worker("w1", kubelet);
        node.write(CONFIG_FILE, &config_yaml(kubelet));
        node.shared()
            .update_faults(|f| f.kubelet_crash = [("w1".to_string(), fault.to_string())].into())
            .unwrap();
        let r = start(&node);
        assert_eq!(r.code, code, "{fault} on a {kubelet} kubelet: {}", r.stderr);
        if code == 0 {
            assert!(node.cluster().nodes["w1"].kubelet.is_some());
            continue;
        }
        assert!(
            r.stderr
                .trim_end()
                .ends_with(&format!("run.go:72] \"command failed\" err=\"{CRASH}\"")),
            "{}",
            r.stderr
        );
        assert_eq!(node.events()[0].result, format!("failed: {CRASH}"));
        assert!(node.cluster().nodes["w1"].kubelet.is_none(), "NotReady");
        // Another node's fault does not touch this one.
        node.shared()
            .update_faults(|f| f.kubelet_crash = [("w2".to_string(), fault.to_string())].into())
            .unwrap();
        assert_eq!(start(&node).code, 0);
    }
}

#[test]
fn a_containerd_that_serves_no_cri_fails_every_kubelet_booted_with_it() {
    for (fault, containerd, code) in [
        ("2.2", "2.2.0", 1),
        ("2.2.0", "2.2.0", 1),
        ("2.2", "2.1.4", 0),
        // The OS's own containerd (no sysext) is never the faulty one.
        ("2.2", "", 0),
    ] {
        let node = Node::worker("w1", "v1.34.2");
        node.write(CONFIG_FILE, &config_yaml("v1.34.2"));
        let mut boot: crate::state::NodeBoot =
            serde_json::from_str(&node.read(crate::state::NODE_FILE)).unwrap();
        boot.containerd = containerd.to_string();
        node.write(
            crate::state::NODE_FILE,
            &serde_json::to_string(&boot).unwrap(),
        );
        node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
        node.shared()
            .update_faults(|f| f.containerd_no_cri = [("w1".to_string(), fault.to_string())].into())
            .unwrap();
        let a = args(UNIT_ARGS);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = node.run_service("kubelet", &a);
        assert_eq!(
            r.code, code,
            "{fault} under containerd {containerd:?}: {}",
            r.stderr
        );
        if code == 1 {
            assert!(
                r.stderr
                    .contains("unknown service runtime.v1.RuntimeService")
            );
            assert!(node.cluster().nodes["w1"].kubelet.is_none(), "NotReady");
        }
    }
}

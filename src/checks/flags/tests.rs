use super::*;

fn fixture(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
    std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
}

fn m(s: &str) -> Minor {
    s.parse().unwrap()
}

fn names(flags: &[KubeletFlag]) -> Vec<(&str, Option<&str>, &str)> {
    flags
        .iter()
        .map(|f| {
            (
                f.flag.as_str(),
                f.value.as_deref(),
                f.origin.variable.as_str(),
            )
        })
        .collect()
}

fn node(name: &str, files: &[(&str, &str)]) -> NodeKubeletFiles {
    NodeKubeletFiles {
        node: name.into(),
        files: files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect(),
        stripped_earlier: BTreeSet::new(),
    }
}

#[test]
fn the_table_is_ordered_and_each_entry_cites_its_source() {
    for pair in REMOVED_KUBELET_FLAGS.windows(2) {
        assert!(pair[0].removed_in <= pair[1].removed_in);
    }
    for r in REMOVED_KUBELET_FLAGS {
        assert!(r.flag.starts_with("--"));
        assert!(r.source.contains("kubernetes/kubernetes#"), "{}", r.flag);
        assert!(
            r.stripped_by.iter().all(|m| *m <= r.removed_in),
            "{}",
            r.flag
        );
    }
    let pause = REMOVED_KUBELET_FLAGS
        .iter()
        .find(|r| r.flag == "--pod-infra-container-image")
        .unwrap();
    assert!(pause.stripped_by(m("v1.35")));
    assert!(
        !pause.stripped_by(m("v1.36")),
        "kubernetes/kubernetes#135807"
    );
}

#[test]
fn reads_kubeadm_flags_env_as_kubeadm_writes_it() {
    let flags = kubelet_flags(KUBEADM_FLAGS_ENV, &fixture("kubeadm-flags.env"));
    assert_eq!(
        names(&flags),
        [
            (
                "--container-runtime-endpoint",
                Some("unix:///var/run/containerd/containerd.sock"),
                "KUBELET_KUBEADM_ARGS"
            ),
            ("--node-ip", Some("10.0.0.11"), "KUBELET_KUBEADM_ARGS"),
            (
                "--pod-infra-container-image",
                Some("registry.k8s.io/pause:3.10"),
                "KUBELET_KUBEADM_ARGS"
            ),
        ]
    );
    assert!(flags.iter().all(|f| f.origin.kubeadm_owned()));
}

#[test]
fn reads_extra_args_in_both_flag_forms() {
    let flags = kubelet_flags("/etc/sysconfig/kubelet", &fixture("sysconfig-kubelet"));
    assert_eq!(
        names(&flags),
        [
            ("--cgroup-driver", Some("systemd"), "KUBELET_CGROUP_ARGS"),
            (
                "--pod-infra-container-image",
                Some("registry.cn-hangzhou.aliyuncs.com/google_containers/pause-amd64:3.1"),
                "KUBELET_EXTRA_ARGS"
            ),
        ]
    );
    assert!(!flags[1].origin.kubeadm_owned());
    let spaced = "KUBELET_EXTRA_ARGS='--max-pods 250 --keep-terminated-pod-volumes --v=2'\nNOT_KUBELET=--x\n";
    assert_eq!(
        names(&kubelet_flags("/etc/default/kubelet", spaced)),
        [
            ("--max-pods", Some("250"), "KUBELET_EXTRA_ARGS"),
            ("--keep-terminated-pod-volumes", None, "KUBELET_EXTRA_ARGS"),
            ("--v", Some("2"), "KUBELET_EXTRA_ARGS"),
        ]
    );
}

#[test]
fn reads_drop_ins_environment_and_exec_start() {
    let sysext = kubelet_flags(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        &fixture("10-kubeadm.conf"),
    );
    assert_eq!(
        names(&sysext),
        [
            (
                "--bootstrap-kubeconfig",
                Some("/etc/kubernetes/bootstrap-kubelet.conf"),
                "KUBELET_KUBECONFIG_ARGS"
            ),
            (
                "--kubeconfig",
                Some("/etc/kubernetes/kubelet.conf"),
                "KUBELET_KUBECONFIG_ARGS"
            ),
            (
                "--config",
                Some("/var/lib/kubelet/config.yaml"),
                "KUBELET_CONFIG_ARGS"
            ),
        ],
        "the ExecStart only expands variables; other ExecStartPre lines are not the kubelet"
    );
    let custom = "[Service]\n# Environment=\"KUBELET_EXTRA_ARGS=--commented-out\"\n\
        Environment=\"KUBELET_EXTRA_ARGS=--v=2 --pod-infra-container-image=pause:3.9\" OTHER=--not-kubelet\n\
        ExecStart=\nExecStart=/opt/bin/kubelet $KUBELET_KUBEADM_ARGS \\\n  --pod-infra-container-image registry.k8s.io/pause:3.9\n";
    assert_eq!(
        names(&kubelet_flags(
            "/etc/systemd/system/kubelet.service.d/20-extra.conf",
            custom
        )),
        [
            ("--v", Some("2"), "KUBELET_EXTRA_ARGS"),
            (
                "--pod-infra-container-image",
                Some("pause:3.9"),
                "KUBELET_EXTRA_ARGS"
            ),
            (
                "--pod-infra-container-image",
                Some("registry.k8s.io/pause:3.9"),
                "ExecStart"
            ),
        ]
    );
}

#[test]
fn a_flag_kubeadm_strips_warns() {
    let nodes = [node(
        "cp-1",
        &[(KUBEADM_FLAGS_ENV, &fixture("kubeadm-flags.env"))],
    )];
    let check = check_kubelet_flags(&nodes, m("v1.35"), true);
    assert_eq!(check.verdict, Verdict::Warn);
    assert_eq!(
        check.details,
        [
            "cp-1: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env \
          (KUBELET_KUBEADM_ARGS), removed in v1.35; kubeadm v1.35 removes it during the upgrade"
        ]
    );
}

#[test]
fn the_same_flag_blocks_where_kubeadm_does_not_look_or_run() {
    let env = fixture("kubeadm-flags.env");
    let extra = fixture("sysconfig-kubelet");
    let nodes = [
        node("cp-1", &[(KUBEADM_FLAGS_ENV, &env)]),
        node(
            "w-1",
            &[
                (
                    KUBEADM_FLAGS_ENV,
                    "KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.21\"\n",
                ),
                ("/etc/sysconfig/kubelet", &extra),
            ],
        ),
    ];
    let check = check_kubelet_flags(&nodes, m("v1.35"), true);
    assert_eq!(check.verdict, Verdict::Block);
    assert_eq!(
        check.details,
        [
            "w-1: --pod-infra-container-image in /etc/sysconfig/kubelet (KUBELET_EXTRA_ARGS), \
             removed in v1.35; nothing removes it before the kubelet restarts",
            "cp-1: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env \
             (KUBELET_KUBEADM_ARGS), removed in v1.35; kubeadm v1.35 removes it during the upgrade",
        ],
        "the block comes first; cp-1's stripped flag stays a note"
    );

    let no_kubeadm = check_kubelet_flags(&nodes[..1], m("v1.35"), false);
    assert_eq!(
        no_kubeadm.verdict,
        Verdict::Block,
        "a hop without kubeadm strips nothing"
    );
    let next = check_kubelet_flags(&nodes[..1], m("v1.36"), true);
    assert_eq!(
        next.verdict,
        Verdict::Block,
        "kubeadm v1.36 dropped the cleanup"
    );
}

#[test]
fn flags_removed_after_the_hop_pass() {
    let extra = "KUBELET_EXTRA_ARGS=\"--keep-terminated-pod-volumes=false\"\n";
    let nodes = [node("w-1", &[("/etc/sysconfig/kubelet", extra)])];
    assert_eq!(
        check_kubelet_flags(&nodes, m("v1.30"), true).verdict,
        Verdict::Pass
    );
    assert_eq!(
        check_kubelet_flags(&nodes, m("v1.31"), true).verdict,
        Verdict::Block,
        "--keep-terminated-pod-volumes goes in v1.31"
    );
    assert_eq!(
        check_kubelet_flags(&[], m("v1.35"), true).verdict,
        Verdict::Pass
    );
}

#[test]
fn register_schedulable_blocks_from_1_34_wherever_it_is() {
    let drop_in = "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--register-schedulable=false\"\n";
    let nodes = [node(
        "w-1",
        &[("/etc/systemd/system/kubelet.service.d/30-old.conf", drop_in)],
    )];
    assert_eq!(
        check_kubelet_flags(&nodes, m("v1.33"), true).verdict,
        Verdict::Pass
    );
    let check = check_kubelet_flags(&nodes, m("v1.34"), true);
    assert_eq!(check.verdict, Verdict::Block);
    assert!(
        check
            .details
            .iter()
            .any(|d| d.contains("--register-schedulable")),
        "{check:?}"
    );
    // kubeadm never wrote it, so none strips it from kubeadm-flags.env.
    let env = "KUBELET_KUBEADM_ARGS=\"--register-schedulable\"\n";
    let nodes = [node("w-1", &[(KUBEADM_FLAGS_ENV, env)])];
    assert_eq!(
        check_kubelet_flags(&nodes, m("v1.34"), true).verdict,
        Verdict::Block
    );
}

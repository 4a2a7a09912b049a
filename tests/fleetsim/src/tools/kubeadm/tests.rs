//! kubeadm's refusals and the kube-proxy trap, against a shared cluster state.

use super::super::testutil::{Fleet, Node};
use crate::state::Role;

/// A control-plane node of a v1.34.2 cluster, rebooted into `binary`.
fn cp_running(binary: &str) -> Node {
    let node = Node::control_plane("cp1", "v1.34.2");
    node.reboot_into(binary);
    node
}

fn apply(node: &Node, args: &[&str]) -> super::super::testutil::Output {
    let mut argv = vec!["upgrade", "apply"];
    argv.extend_from_slice(args);
    node.run("kubeadm", &argv)
}

#[test]
fn refuses_to_skip_a_minor() {
    let node = cp_running("v1.36.0");
    let r = apply(&node, &["v1.36.0", "--yes"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains(
        "[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\n\
         \t- Specified version to upgrade to \"v1.36.0\" is too high; kubeadm can upgrade only 1 minor version at a time\n"
    ), "{}", r.stderr);
    assert!(
        r.stderr
            .ends_with("To see the stack trace of this error execute with --v=5 or higher\n")
    );
    let c = node.cluster();
    assert_eq!(c.version, "v1.34.2");
    assert!(!c.kube_proxy);
    let events = node.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].argv,
        ["kubeadm", "upgrade", "apply", "v1.36.0", "--yes"]
    );
    assert!(events[0].result.starts_with("[upgrade/version] FATAL"));
}

#[test]
fn refuses_a_target_newer_than_its_own_binary() {
    let node = cp_running("v1.35.1");
    let r = apply(&node, &["v1.35.3", "-y"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains(
        "Specified version to upgrade to \"v1.35.3\" is higher than the kubeadm version \"v1.35.1\". \
         Upgrade kubeadm first using the tool you used to install kubeadm"
    ));
    assert!(
        r.stderr
            .contains("Can be bypassed if you pass the --force flag")
    );

    // The sysext that is staged but not booted does not count: v1.34 binary, v1.35 target.
    let node = cp_running("v1.34.2");
    let r = apply(&node, &["v1.35.0", "-y"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "is at least one minor release higher than the kubeadm minor release (35 > 34)"
        )
    );
    assert_eq!(node.cluster().version, "v1.34.2");
}

#[test]
fn refuses_a_minor_downgrade() {
    let node = Node::control_plane("cp1", "v1.35.2");
    let r = apply(&node, &["v1.34.5", "--yes"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "Kubeadm version v1.35.2 can only be used to upgrade to Kubernetes version 1.35"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(node.cluster().version, "v1.35.2");
}

#[test]
fn refuses_to_run_on_a_worker() {
    let node = Node::worker("w1", "v1.35.0");
    let r = apply(&node, &["v1.35.0", "--yes"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.starts_with(
        "couldn't create a Kubernetes client from file \"/etc/kubernetes/admin.conf\": failed to load admin \
         kubeconfig: open /etc/kubernetes/admin.conf: no such file or directory\n"
    ));
}

#[test]
fn without_yes_it_asks_and_end_of_input_aborts() {
    let node = cp_running("v1.35.1");
    let r = apply(&node, &["v1.35.1", "--skip-phases", "addon/kube-proxy"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stdout
            .ends_with("[upgrade/confirm] Are you sure you want to proceed? [y/N]: ")
    );
    assert!(
        r.stderr
            .starts_with("won't proceed; the user didn't answer (Y|y) in order to continue\n")
    );
    assert_eq!(node.cluster().version, "v1.34.2");

    let r = node.run_with_stdin(
        "kubeadm",
        &[
            "upgrade",
            "apply",
            "v1.35.1",
            "--skip-phases=addon/kube-proxy",
        ],
        "y\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(node.cluster().version, "v1.35.1");
}

#[test]
fn apply_without_the_flag_redeploys_kube_proxy() {
    let node = cp_running("v1.35.1");
    let r = apply(&node, &["v1.35.1", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("[addons] Applied essential addon: kube-proxy")
    );
    assert!(r.stdout.contains(
        "[upgrade] SUCCESS! A control plane node of your cluster was upgraded to \"v1.35.1\"."
    ));
    let c = node.cluster();
    assert!(c.kube_proxy);
    assert_eq!(c.version, "v1.35.1");
    assert_eq!(
        c.nodes["cp1"].control_plane_version.as_deref(),
        Some("v1.35.1")
    );
    assert_eq!(node.events()[0].result, "ok");
}

#[test]
fn apply_with_the_flag_leaves_kube_proxy_out() {
    let node = cp_running("v1.35.1");
    let r = apply(
        &node,
        &["v1.35.1", "--yes", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stdout.contains("kube-proxy"));
    assert!(
        r.stdout
            .contains("[addons] Applied essential addon: CoreDNS")
    );
    assert!(!node.cluster().kube_proxy);
}

#[test]
fn a_misspelt_phase_is_refused_before_anything_happens() {
    let node = cp_running("v1.35.1");
    let r = apply(
        &node,
        &["v1.35.1", "--yes", "--skip-phases=addon/kube-prox"],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("invalid phase name: addon/kube-prox\n")
    );
    assert!(r.stdout.is_empty());
    assert_eq!(node.cluster().version, "v1.34.2");
}

#[test]
fn an_injected_failure_fails_once() {
    let node = cp_running("v1.35.1");
    node.shared()
        .update_faults(|f| f.fail_upgrade_apply = 1)
        .unwrap();
    let r = apply(
        &node,
        &["v1.35.1", "--yes", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("injected fault fail_upgrade_apply"));
    assert_eq!(node.cluster().version, "v1.34.2");
    assert_eq!(node.shared().faults().unwrap().fail_upgrade_apply, 0);
    let r = apply(
        &node,
        &["v1.35.1", "--yes", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn a_down_api_is_a_connection_error() {
    let node = cp_running("v1.35.1");
    node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.up = false));
    let r = apply(&node, &["v1.35.1", "--yes"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("dial tcp cp1:6443: connect: connection refused"),
        "{}",
        r.stderr
    );
}

#[test]
fn upgrade_node_on_the_last_control_plane_redeploys_kube_proxy() {
    let fleet = Fleet::new();
    let cps: Vec<Node> = ["cp1", "cp2", "cp3"]
        .iter()
        .map(|n| fleet.node(n, Role::ControlPlane, "v1.34.2"))
        .collect();
    for cp in &cps {
        cp.reboot_into("v1.35.1");
    }
    let skip = ["--skip-phases", "addon/kube-proxy"];
    let r = cps[0].run(
        "kubeadm",
        &["upgrade", "apply", "v1.35.1", "--yes", skip[0], skip[1]],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);

    let r = cps[1].run("kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(
        "[upgrade/addon] Skipping the addon/kube-proxy phase. Not all control plane instances have been upgraded"
    ));
    assert!(!cps[0].cluster().kube_proxy, "not the last one yet");

    let r = cps[2].run("kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("[addons] Applied essential addon: kube-proxy")
    );
    assert!(cps[0].cluster().kube_proxy);
    let kubeadm_calls: Vec<String> = cps[0]
        .events()
        .iter()
        .filter(|e| e.argv[0] == "kubeadm")
        .map(|e| format!("{} {}", e.node, e.argv[2]))
        .collect();
    assert_eq!(kubeadm_calls, ["cp1 apply", "cp2 node", "cp3 node"]);
}

#[test]
fn upgrade_node_with_the_flag_on_the_last_control_plane_keeps_kube_proxy_out() {
    let fleet = Fleet::new();
    let cp1 = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    let cp2 = fleet.node("cp2", Role::ControlPlane, "v1.34.2");
    cp1.reboot_into("v1.35.1");
    cp2.reboot_into("v1.35.1");
    assert_eq!(
        cp1.run(
            "kubeadm",
            &[
                "upgrade",
                "apply",
                "v1.35.1",
                "-y",
                "--skip-phases=addon/kube-proxy"
            ]
        )
        .code,
        0
    );
    let r = cp2.run(
        "kubeadm",
        &["upgrade", "node", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!cp2.cluster().kube_proxy);
}

#[test]
fn upgrade_node_needs_a_kubeadm_at_least_the_cluster_version() {
    let fleet = Fleet::new();
    let cp1 = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    let cp2 = fleet.node("cp2", Role::ControlPlane, "v1.34.2");
    cp1.reboot_into("v1.35.1");
    assert_eq!(
        cp1.run(
            "kubeadm",
            &[
                "upgrade",
                "apply",
                "v1.35.1",
                "-y",
                "--skip-phases=addon/kube-proxy"
            ]
        )
        .code,
        0
    );
    let r = cp2.run("kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "the kubeadm version \"v1.34.2\" is lower than the cluster version \"v1.35.1\""
        )
    );
    assert_eq!(
        cp2.cluster().nodes["cp2"].control_plane_version.as_deref(),
        Some("v1.34.2")
    );
}

#[test]
fn upgrade_node_on_workers_and_old_kubeadms() {
    let fleet = Fleet::new();
    let _cp = fleet.node("cp1", Role::ControlPlane, "v1.31.4");
    let w1 = fleet.node("w1", Role::Worker, "v1.31.4");
    let r = w1.run("kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("[upgrade/control-plane] Skipping phase. Not a control plane node.")
    );
    assert!(
        !r.stdout.contains("addon"),
        "kubeadm < 1.32 has no addon phase in upgrade node"
    );
    let r = w1.run(
        "kubeadm",
        &["upgrade", "node", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("invalid phase name: addon/kube-proxy\n")
    );
}

#[test]
fn version_and_plan() {
    let node = cp_running("v1.35.1");
    let r = node.run("kubeadm", &["version", "-o", "short"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "v1.35.1\n"));
    let r = node.run("kubeadm", &["version", "-o=json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["clientVersion"]["gitVersion"], "v1.35.1");
    assert_eq!(v["clientVersion"]["minor"], "35");
    let r = node.run("kubeadm", &["upgrade", "plan"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("[upgrade/versions] Target version: v1.35.1")
    );
    assert!(r.stdout.contains("\tkubeadm upgrade apply v1.35.1\n"));
    assert!(node.events().is_empty(), "plan and version do not mutate");
}

// ------------------------------------------------- the v1.35 kubelet flags

use crate::kubelet_files::{CONFIG_FILE, FLAGS_FILE, config_stamp};

/// What kubeadm v1.34's init/join wrote (the endpoint is in instance-config.yaml).
const OLD_FLAGS: &str =
    "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";
const NEW_FLAGS: &str = "KUBELET_KUBEADM_ARGS=\"\"\n";

#[test]
fn the_staged_kubeadm_upgrades_before_the_reboot() {
    // Booted v1.34.2; the v1.35.1 image mounted by hand brings its kubeadm.
    let node = Node::control_plane("cp1", "v1.34.2");
    assert_eq!(node.read(FLAGS_FILE), OLD_FLAGS);
    let r = node.run_image(
        "v1.35.1",
        "kubeadm",
        &[
            "upgrade",
            "apply",
            "v1.35.1",
            "--skip-phases",
            "addon/kube-proxy",
            "--yes",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("[upgrade/versions] kubeadm version: v1.35.1\n")
    );
    let c = node.cluster();
    assert_eq!(c.version, "v1.35.1");
    assert_eq!(
        c.nodes["cp1"].control_plane_version.as_deref(),
        Some("v1.35.1")
    );
    // Its post-upgrade phase removed the flag kubelet v1.35 refuses, and its
    // kubelet-config phase wrote the config the next kubelet will load.
    assert_eq!(node.read(FLAGS_FILE), NEW_FLAGS);
    assert_eq!(
        config_stamp(&node.read(CONFIG_FILE)).as_deref(),
        Some("v1.35.1")
    );
    let events = node.events();
    let seen: Vec<(String, Option<String>)> = events
        .iter()
        .map(|e| (e.argv[..e.argv.len().min(3)].join(" "), e.version.clone()))
        .collect();
    assert_eq!(
        seen,
        [
            ("(static-pods)".to_string(), Some("v1.35.1".to_string())),
            (
                "kubeadm upgrade apply".to_string(),
                Some("v1.35.1".to_string())
            ),
        ]
    );
    assert_eq!(
        events[1].argv,
        [
            "kubeadm",
            "upgrade",
            "apply",
            "v1.35.1",
            "--skip-phases",
            "addon/kube-proxy",
            "--yes"
        ],
        "argv as typed, no internal version argument"
    );
}

#[test]
fn upgrade_node_runs_with_a_kubeadm_newer_than_the_kubelet() {
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.35.1");
    let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
    cp.update_cluster(|c| c.version = "v1.35.1".into());
    let r = w1.run_image(
        "v1.35.1",
        "kubeadm",
        &["upgrade", "node", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(
        "[kubelet-start] Writing kubelet configuration to file \"/var/lib/kubelet/config.yaml\"\n"
    ));
    assert_eq!(w1.read(FLAGS_FILE), NEW_FLAGS);
    assert_eq!(
        config_stamp(&w1.read(CONFIG_FILE)).as_deref(),
        Some("v1.35.1")
    );
    let e = w1.events().pop().unwrap();
    assert_eq!(
        (e.node.as_str(), e.version.as_deref()),
        ("w1", Some("v1.35.1"))
    );
}

#[test]
fn only_kubeadm_1_35_removes_the_flag() {
    // A patch upgrade by v1.34 and a v1.36 kubeadm leave the file alone.
    for kubeadm in ["v1.34.3", "v1.36.0"] {
        let fleet = Fleet::new();
        let _cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
        let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
        let r = w1.run_image(kubeadm, "kubeadm", &["upgrade", "node"]);
        assert_eq!(r.code, 0, "{kubeadm}: {}", r.stderr);
        assert_eq!(w1.read(FLAGS_FILE), OLD_FLAGS, "{kubeadm}");
        assert_eq!(
            config_stamp(&w1.read(CONFIG_FILE)).as_deref(),
            Some(kubeadm)
        );
    }
    // Nor does v1.35 when told to skip the phase that does it.
    let fleet = Fleet::new();
    let _cp = fleet.node("cp1", Role::ControlPlane, "v1.35.0");
    let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
    let r = w1.run_image(
        "v1.35.0",
        "kubeadm",
        &["upgrade", "node", "--skip-phases", "post-upgrade"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(w1.read(FLAGS_FILE), OLD_FLAGS);
}

#[test]
fn a_v1_37_upgrade_node_on_a_kubelet_up_to_three_minors_behind_rewrites_the_config_only() {
    // A worker that jumped: the cluster is at v1.37, the worker still runs
    // v1.34 (three behind) or v1.35; the target's kubeadm writes the
    // kubelet config and leaves kubeadm-flags.env alone, flag included.
    for (kubelet, flags) in [("v1.34.2", OLD_FLAGS), ("v1.35.0", NEW_FLAGS)] {
        let fleet = Fleet::new();
        let cp = fleet.node("cp1", Role::ControlPlane, "v1.37.0");
        let w1 = fleet.node("w1", Role::Worker, kubelet);
        cp.update_cluster(|c| c.version = "v1.37.0".into());
        let before = w1.read(FLAGS_FILE);
        assert_eq!(before, flags, "{kubelet}");
        let r = w1.run_image(
            "v1.37.0",
            "kubeadm",
            &["upgrade", "node", "--skip-phases", "addon/kube-proxy"],
        );
        assert_eq!(r.code, 0, "{kubelet}: {}", r.stderr);
        assert_eq!(w1.read(FLAGS_FILE), before, "{kubelet}");
        assert_eq!(
            config_stamp(&w1.read(CONFIG_FILE)).as_deref(),
            Some("v1.37.0"),
            "{kubelet}"
        );
    }
}

#[test]
fn apply_refuses_while_a_control_plane_is_not_ready() {
    let fleet = Fleet::new();
    let cp1 = fleet.node("cp-1", Role::ControlPlane, "v1.34.2");
    let _cp2 = fleet.node("cp-2", Role::ControlPlane, "v1.34.2");
    // cp-2 rebooted into a kubelet that cannot start.
    cp1.update_cluster(|c| c.nodes.get_mut("cp-2").unwrap().kubelet = None);
    let r = cp1.run_image(
        "v1.35.1",
        "kubeadm",
        &["upgrade", "apply", "v1.35.1", "--yes"],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "[upgrade/health] FATAL: [preflight] Some fatal errors occurred:\n\
         \t[ERROR ControlPlaneNodesReady]: there are NotReady control-planes in the cluster: [cp-2]\n\
         [preflight] If you know what you are doing, you can make a check non-fatal with `--ignore-preflight-errors=...`\n\
         To see the stack trace of this error execute with --v=5 or higher\n"
    );
    assert_eq!(cp1.cluster().version, "v1.34.2");
    assert_eq!(cp1.read(FLAGS_FILE), OLD_FLAGS, "nothing ran");
    let r = cp1.run_image(
        "v1.35.1",
        "kubeadm",
        &[
            "upgrade",
            "apply",
            "v1.35.1",
            "--yes",
            "--ignore-preflight-errors=ControlPlaneNodesReady",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(
        "\t[WARNING ControlPlaneNodesReady]: there are NotReady control-planes in the cluster: [cp-2]\n"
    ));
}

#[test]
fn static_pods_move_only_with_a_running_kubelet() {
    let fleet = Fleet::new();
    let cp1 = fleet.node("cp-1", Role::ControlPlane, "v1.35.1");
    let cp2 = fleet.node("cp-2", Role::ControlPlane, "v1.34.2");
    cp1.update_cluster(|c| {
        c.version = "v1.35.1".into();
        c.nodes.get_mut("cp-2").unwrap().kubelet = None;
    });
    let r = cp2.run_image("v1.35.1", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains(
            "static Pod hash for component kube-apiserver on Node cp-2 did not change after 5m0s: timed out waiting for the condition"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(
        cp2.cluster().nodes["cp-2"].control_plane_version.as_deref(),
        Some("v1.34.2")
    );
    assert!(cp2.events().iter().all(|e| e.argv[0] != "(static-pods)"));
}

#[test]
fn the_internal_entry_point_needs_an_image_version() {
    let node = Node::control_plane("cp1", "v1.34.2");
    std::fs::write(node.path(crate::state::NODE_FILE), "{\"name\":\"cp1\",\"role\":\"control-plane\",\"boot_id\":\"b\",\"kubernetes\":\"\",\"os\":\"4081.2.0\",\"booted_at\":0}").unwrap();
    // What running /usr/lib/fleetsim/kubeadm directly amounts to.
    let r = node.run("kubeadm", &["version"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("run the one a kubernetes sysext image provides (/usr/bin/kubeadm)"),
        "{}",
        r.stderr
    );
}

#[test]
fn an_injected_upgrade_node_failure_fails_once_and_changes_nothing() {
    let fleet = Fleet::new();
    let _cp = fleet.node("cp1", Role::ControlPlane, "v1.35.1");
    let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
    w1.update_cluster(|c| c.version = "v1.35.1".into());
    w1.shared()
        .update_faults(|f| f.fail_upgrade_node = vec!["w1".into()])
        .unwrap();
    let before = w1.read(CONFIG_FILE);
    let r = w1.run_image("v1.35.1", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.starts_with(
            "error execution phase kubelet-config: failed to download the kubelet configuration: "
        ),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("(fleetsim: injected fault fail_upgrade_node)")
    );
    assert_eq!(w1.read(FLAGS_FILE), OLD_FLAGS);
    assert_eq!(w1.read(CONFIG_FILE), before);
    assert!(w1.shared().faults().unwrap().fail_upgrade_node.is_empty());
    let e = w1.events().pop().unwrap();
    assert!(
        e.result.starts_with("error execution phase kubelet-config"),
        "{}",
        e.result
    );
    let r = w1.run_image("v1.35.1", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "consumed once: {}", r.stderr);
    assert_eq!(w1.read(FLAGS_FILE), NEW_FLAGS);
}

#[test]
fn certs_check_expiration_prints_kubeadms_tables_and_upgrades_renew() {
    let node = cp_running("v1.34.2");
    let now = crate::state::now();
    node.update_cluster(|c| {
        c.certs_expire
            .insert(node.name.clone(), now + 30.0 * 86_400.0 + 600.0);
    });
    let r = node.run("kubeadm", &["certs", "check-expiration"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "[check-expiration] Reading configuration from the cluster..."
    );
    assert_eq!(lines[2], "");
    assert_eq!(
        lines[3],
        "CERTIFICATE                EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY   EXTERNALLY MANAGED"
    );
    let names: Vec<&str> = lines[4..]
        .iter()
        .take_while(|l| !l.is_empty())
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "admin.conf",
            "apiserver",
            "apiserver-etcd-client",
            "apiserver-kubelet-client",
            "controller-manager.conf",
            "etcd-healthcheck-client",
            "etcd-peer",
            "etcd-server",
            "front-proxy-client",
            "scheduler.conf",
            "super-admin.conf"
        ]
    );
    let etcd_peer = lines.iter().find(|l| l.starts_with("etcd-peer")).unwrap();
    assert!(
        etcd_peer.ends_with("   30d             etcd-ca                 no      "),
        "{etcd_peer:?}"
    );
    assert!(lines.contains(
        &"CERTIFICATE AUTHORITY   EXPIRES                  RESIDUAL TIME   EXTERNALLY MANAGED"
    ));
    let ca = lines.iter().find(|l| l.starts_with("ca ")).unwrap();
    assert!(ca.ends_with("   9y              no      "), "{ca:?}");
    // An upgrade renews the node's certificates for a year.
    let r = node.run("kubeadm", &["upgrade", "apply", "v1.34.2", "--yes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = node.run("kubeadm", &["certs", "check-expiration"]);
    let apiserver = r
        .stdout
        .lines()
        .find(|l| l.starts_with("apiserver "))
        .unwrap()
        .to_string();
    assert!(
        apiserver.contains("   364d            ca "),
        "{apiserver:?}"
    );
}

// ------------------------------------------- issue 23: cgroup v1, config.yaml

use crate::kubelet_files::{INSTANCE_FILE, cluster_config, endpoint_of};

fn on_cgroup_v1(node: &Node) {
    std::fs::remove_dir_all(node.path(crate::cgroup::CGROUP_ROOT)).unwrap();
    crate::cgroup::populate(&node.root, true).unwrap();
}

#[test]
fn from_v1_35_system_verification_refuses_cgroup_v1_unless_ignored() {
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.35.1");
    let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
    cp.update_cluster(|c| c.version = "v1.35.1".into());
    on_cgroup_v1(&w1);
    let before = w1.read(CONFIG_FILE);
    let r = w1.run_image("v1.35.1", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr.starts_with(
            "[preflight] Some fatal errors occurred:\n\t[ERROR SystemVerification]: cgroups v1"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(w1.read(CONFIG_FILE), before, "nothing written");
    for ignore in ["SystemVerification", "all", "systemverification"] {
        let r = w1.run_image(
            "v1.35.1",
            "kubeadm",
            &[
                "upgrade",
                "node",
                &format!("--ignore-preflight-errors={ignore}"),
            ],
        );
        assert_eq!(r.code, 0, "{ignore}: {}", r.stderr);
        assert!(
            r.stdout
                .contains("\t[WARNING SystemVerification]: cgroups v1")
        );
    }
    // A v1.34 kubeadm only warns (system-validators before v1.12.1).
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    on_cgroup_v1(&cp);
    let r = cp.run_image(
        "v1.34.3",
        "kubeadm",
        &["upgrade", "apply", "v1.34.3", "--yes"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // upgrade apply of v1.35 refuses the same way.
    let r = cp.run_image(
        "v1.35.1",
        "kubeadm",
        &["upgrade", "apply", "v1.35.1", "--yes"],
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("[ERROR SystemVerification]"),
        "{}",
        r.stderr
    );
    assert_eq!(cp.cluster().version, "v1.34.3", "v1.35 did not start");
}

#[test]
fn the_kubelet_config_phase_writes_the_configmap_with_instance_config_over_it() {
    let fleet = Fleet::new();
    let _cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
    // An operator's own edit of the node's file, and one in the ConfigMap.
    w1.write(
        CONFIG_FILE,
        &format!("{}failCgroupV1: false\n", w1.read(CONFIG_FILE)),
    );
    w1.update_cluster(|c| {
        c.configmaps
            .get_mut(crate::kubelet_files::CONFIGMAP)
            .unwrap()
            .data
            .insert("kubelet".into(), cluster_config("maxPods: 200\n"));
    });
    let r = w1.run_image("v1.34.3", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let written = w1.read(CONFIG_FILE);
    assert!(written.contains("\nmaxPods: 200\n"), "{written}");
    assert!(
        !written.contains("failCgroupV1"),
        "the node's own edit is gone"
    );
    assert_eq!(
        endpoint_of(&written).as_deref(),
        Some("unix:///run/containerd/containerd.sock")
    );
}

#[test]
fn kubeadm_1_34_to_1_36_move_the_endpoint_into_instance_config_and_1_37_requires_it() {
    // A node kubeadm v1.33 joined: the endpoint is a flag, no instance-config.
    let fleet = Fleet::new();
    let _cp = fleet.node("cp1", Role::ControlPlane, "v1.33.4");
    let w1 = fleet.node("w1", Role::Worker, "v1.33.4");
    assert!(!w1.path(INSTANCE_FILE).exists());
    let r = w1.run_image("v1.34.2", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        w1.read(FLAGS_FILE),
        OLD_FLAGS,
        "the endpoint left the flags"
    );
    assert_eq!(
        endpoint_of(&w1.read(INSTANCE_FILE)).as_deref(),
        Some("unix:///run/containerd/containerd.sock")
    );
    assert_eq!(
        endpoint_of(&w1.read(CONFIG_FILE)).as_deref(),
        Some("unix:///run/containerd/containerd.sock")
    );
    // v1.37 without instance-config.yaml fails, changing nothing.
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.37.0");
    let w1 = fleet.node("w1", Role::Worker, "v1.36.1");
    cp.update_cluster(|c| c.version = "v1.37.0".into());
    std::fs::remove_file(w1.path(INSTANCE_FILE)).unwrap();
    let before = w1.read(CONFIG_FILE);
    let r = w1.run_image("v1.37.0", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains(INSTANCE_FILE), "{}", r.stderr);
    assert_eq!(w1.read(CONFIG_FILE), before);
    // v1.37's post-upgrade strips a flag the file still has.
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.37.0");
    let w1 = fleet.node("w1", Role::Worker, "v1.36.1");
    cp.update_cluster(|c| c.version = "v1.37.0".into());
    w1.write(
        FLAGS_FILE,
        "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-ip=10.0.0.9\"\n",
    );
    let r = w1.run_image("v1.37.0", "kubeadm", &["upgrade", "node"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        w1.read(FLAGS_FILE),
        "KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.9\"\n"
    );
}

// ------------------------------------------- issue 23: removed feature gates

#[test]
fn a_control_plane_gate_the_target_removed_fails_apply_and_restores_the_old_manifests() {
    let node = cp_running("v1.35.1");
    node.update_cluster(|c| {
        c.control_plane_args.insert(
            "apiServer".into(),
            [(
                "feature-gates".to_string(),
                "LoadBalancerIPMode=true".to_string(),
            )]
            .into(),
        );
    });
    let r = apply(
        &node,
        &["v1.35.1", "--yes", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr.contains(
            "couldn't upgrade control plane. kubeadm has tried to recover everything into the earlier state. \
             Errors faced: static Pod hash for component kube-apiserver on Node cp1 did not change after 5m0s"
        ),
        "{}",
        r.stderr
    );
    let c = node.cluster();
    assert_eq!(c.version, "v1.34.2", "kubeadm-config is not uploaded");
    assert_eq!(
        c.nodes["cp1"].control_plane_version.as_deref(),
        Some("v1.34.2"),
        "the old static pods are back"
    );
    assert!(node.events().iter().all(|e| e.argv[0] != "(static-pods)"));
    let last = node.events().pop().unwrap();
    assert_eq!(last.argv[0], "kubeadm");
    assert_ne!(last.result, "ok");

    // The same gate is known to v1.34: a patch upgrade goes through.
    let node = cp_running("v1.34.3");
    node.update_cluster(|c| {
        c.control_plane_args.insert(
            "scheduler".into(),
            [(
                "feature-gates".to_string(),
                "ComponentSLIs=true".to_string(),
            )]
            .into(),
        );
    });
    let r = apply(
        &node,
        &["v1.34.3", "--yes", "--skip-phases", "addon/kube-proxy"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
}

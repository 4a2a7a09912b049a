use super::super::testutil::{Hub, Node, image_body, image_name};

const LINK: &str = "/etc/extensions/kubernetes.raw";

fn node_with(hub: &Hub, pattern: &str) -> Node {
    let node = Node::worker("w1", "v1.37.1");
    node.write(
        &format!("/opt/extensions/kubernetes/{}", image_name("v1.37.1")),
        &String::from_utf8(image_body("v1.37.1")).unwrap(),
    );
    std::fs::create_dir_all(node.path("/etc/extensions")).unwrap();
    std::os::unix::fs::symlink(
        format!("../../opt/extensions/kubernetes/{}", image_name("v1.37.1")),
        node.path(LINK),
    )
    .unwrap();
    node.write(
        "/etc/sysupdate.kubernetes.d/kubernetes.conf",
        &format!(
            "[Transfer]\nVerify=false\n[Source]\nType=url-file\nPath={}kubernetes/\n\
             MatchPattern={pattern}\n[Target]\nInstancesMax=3\nType=regular-file\n\
             Path=/opt/extensions/kubernetes\nCurrentSymlink={LINK}\n",
            hub.url()
        ),
    );
    node
}

#[test]
fn start_marks_reboot_required_only_when_the_symlink_moved() {
    let hub = Hub::start();
    hub.publish(&["v1.37.1"]);
    let node = node_with(&hub, "kubernetes-v1.37.@v-%a.raw");

    let r = node.run("systemctl", &["start", "systemd-sysupdate"]);
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
    assert!(
        !node.exists("/run/reboot-required"),
        "nothing new: no marker"
    );

    hub.publish(&["v1.37.1", "v1.37.2"]);
    let r = node.run("systemctl", &["start", "systemd-sysupdate.service"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(node.exists("/run/reboot-required"));
    assert!(
        std::fs::read_link(node.path(LINK))
            .unwrap()
            .ends_with(image_name("v1.37.2"))
    );
    let events = node.events();
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[1].argv,
        ["systemctl", "start", "systemd-sysupdate.service"]
    );
    assert_eq!(events[1].result, "ok");
    assert_eq!(events[1].pins, ["kubernetes-v1.37.@v-%a.raw"]);
}

#[test]
fn a_failing_update_fails_the_unit_without_a_marker() {
    let hub = Hub::start();
    hub.publish(&["v1.37.1", "v1.37.2"]);
    hub.corrupt("v1.37.2");
    let node = node_with(&hub, "kubernetes-v1.37.@v-%a.raw");
    let r = node.run("systemctl", &["start", "systemd-sysupdate"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .starts_with("Job for systemd-sysupdate.service failed because the control process exited with error code.")
    );
    assert!(!node.exists("/run/reboot-required"));
    assert_eq!(
        node.events()[0].result,
        "systemd-sysupdate.service failed: (sd-pull-raw) failed with exit status 1: Bad message"
    );
}

#[test]
fn is_active_and_unknown_verbs() {
    let node = Node::worker("w1", "v1.37.1");
    let r = node.run("systemctl", &["is-active", "kubelet", "locksmithd"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "active\ninactive\n"));
    let r = node.run("systemctl", &["is-active", "locksmithd"]);
    assert_eq!((r.code, r.stdout.as_str()), (3, "inactive\n"));
    let r = node.run("systemctl", &["is-active", "--quiet", "update-engine"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert!(node.events().is_empty(), "queries are not events");
    let r = node.run("systemctl", &["restart", "kubelet"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim(),
        "fleetsim: unsupported: systemctl restart kubelet"
    );
}

#[test]
fn transient_units_in_is_active_and_show() {
    let node = Node::worker("w1", "v1.35.3");
    let show = |node: &Node, unit: &str| {
        node.run(
            "systemctl",
            &[
                "show",
                "-p",
                "ActiveState",
                "-p",
                "SubState",
                "-p",
                "Result",
                "-p",
                "ExecMainStatus",
                "--value",
                unit,
            ],
        )
    };
    let r = node.run("systemctl", &["is-active", "fleetctl-x.service"]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (4, "inactive\n"),
        "not loaded: inactive, 4 (systemd ≥ 253)"
    );
    let r = show(&node, "fleetctl-x.service");
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "success\n0\ninactive\ndead\n")
    );
    crate::unit::write_state(
        &node.root,
        "fleetctl-x.service",
        &crate::unit::UnitState {
            active: "failed".into(),
            sub: "failed".into(),
            since: crate::state::now(),
            main_pid: 77,
            command: vec!["sh".into()],
            exit: Some("2/INVALIDARGUMENT".into()),
            result: Some("exit-code".into()),
            restarts: 0,
            description: Some("fleetctl: drain".into()),
        },
    )
    .unwrap();
    let r = node.run("systemctl", &["is-active", "fleetctl-x"]);
    assert_eq!((r.code, r.stdout.as_str()), (3, "failed\n"));
    let r = show(&node, "fleetctl-x.service");
    assert_eq!(
        r.stdout, "exit-code\n2\nfailed\nfailed\n",
        "systemd's order, not -p's"
    );
    let r = node.run(
        "systemctl",
        &[
            "show",
            "-p",
            "Result,ExecMainCode,Description",
            "fleetctl-x.service",
        ],
    );
    assert_eq!(
        r.stdout,
        "Result=exit-code\nExecMainCode=1\nDescription=fleetctl: drain\n"
    );
    let r = node.run(
        "systemctl",
        &["show", "-p", "CPUWeight", "fleetctl-x.service"],
    );
    assert!(r.stderr.starts_with("fleetsim: unsupported:"));
}

#[test]
fn status_kubelet_waiting_to_restart_after_a_failure() {
    let node = Node::worker("w1", "v1.35.0");
    crate::unit::write_state(
        &node.root,
        "kubelet.service",
        &crate::unit::UnitState {
            active: "activating".into(),
            sub: "auto-restart".into(),
            since: crate::state::now() - 3.0,
            main_pid: 42,
            command: vec!["/usr/bin/kubelet".into()],
            exit: Some("1/FAILURE".into()),
            result: Some("exit-code".into()),
            restarts: 2,
            description: None,
        },
    )
    .unwrap();
    let r = node.run("systemctl", &["is-active", "kubelet"]);
    assert_eq!((r.code, r.stdout.as_str()), (3, "activating\n"));
    let r = node.run("systemctl", &["status", "kubelet", "--no-pager"]);
    assert_eq!(r.code, 3);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "* kubelet.service - kubelet: The Kubernetes Node Agent"
    );
    assert_eq!(
        lines[1],
        "     Loaded: loaded (/usr/lib/systemd/system/kubelet.service; enabled; preset: enabled)"
    );
    assert_eq!(
        lines[2],
        "    Drop-In: /usr/lib/systemd/system/kubelet.service.d"
    );
    assert_eq!(lines[3], "             `-10-kubeadm.conf");
    assert!(
        lines[4].starts_with("     Active: activating (auto-restart) (Result: exit-code) since "),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("   Main PID: 42 (code=exited, status=1/FAILURE)\n")
    );
}

#[test]
fn without_a_sysext_there_is_no_kubelet_unit() {
    let node = Node::worker("w1", "v1.35.0");
    std::fs::remove_dir_all(node.path("/usr/lib/systemd")).unwrap();
    std::fs::remove_dir_all(node.path("/run/fleetsim")).unwrap();
    let r = node.run("systemctl", &["status", "kubelet"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (4, "Unit kubelet.service could not be found.\n")
    );
    let r = node.run("systemctl", &["is-active", "kubelet"]);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (4, "inactive\n"),
        "no unit file: status unknown (systemd ≥ 253)"
    );
}

#[test]
fn reboot_without_the_supervisor_tool_fails_loudly() {
    let node = Node::worker("w1", "v1.37.1");
    let r = node.run("systemctl", &["reboot"]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("fleetsim: systemctl reboot: cannot run"),
        "{}",
        r.stderr
    );
    assert_eq!(node.events().len(), 1);
}

#[test]
fn status_update_engine_shows_a_staged_update() {
    let node = Node::worker("w1", "v1.37.1");
    let idle = node.run("systemctl", &["status", "update-engine", "--no-pager"]);
    assert_eq!(idle.code, 0);
    assert!(
        idle.stdout
            .starts_with("● update-engine.service - Update Engine\n")
    );
    assert!(idle.stdout.contains("Active: active (running) since "));
    assert!(!idle.stdout.contains("waiting to reboot"));
    node.write(super::OS_UPDATE_FILE, r#"{"new_version": "4081.3.0"}"#);
    let staged = node.run("systemctl", &["status", "update-engine"]);
    assert!(
        staged
            .stdout
            .contains("Update to version 4081.3.0 is available")
    );
    assert!(
        staged
            .stdout
            .contains("Update successfully applied, waiting to reboot.")
    );
}

//! The kubelet as the service it is: started at every boot from the merged
//! sysext's unit, reading kubeadm's flags file and config, refusing flags
//! its version no longer has, restarted after a failure until the flags are
//! fixed, and seen through systemctl, journalctl and the Node's readiness.

use std::time::{Duration, Instant};

use crate::common::{boot_id, run, small, start, stdout};
use fleetsim::Fleet;

fn kubelet_events(fleet: &Fleet, node: &str) -> Vec<(String, Option<String>, Option<String>)> {
    fleet
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| e.node == node && e.argv == ["(kubelet)"])
        .map(|e| (e.result, e.version, e.config))
        .collect()
}

/// Polls `cmd` on `node` until its stdout is `want` (10 s).
fn wait_output(fleet: &Fleet, node: &str, cmd: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = fleet.ssh(node, "root", cmd).unwrap();
        if stdout(&out) == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{cmd}` on {node} kept printing {:?}, not {want:?}",
            stdout(&out)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_kubelet_runs_as_a_service_and_says_so() {
    let fleet = start(small(1));
    fleet.wait_ready("w-1").unwrap();
    fleet.wait_ready("cp-1").unwrap();
    assert_eq!(
        run(&fleet, "w-1", "root", "systemctl is-active kubelet"),
        "active\n"
    );
    let status = run(&fleet, "w-1", "root", "systemctl status kubelet --no-pager");
    assert!(
        status.starts_with("* kubelet.service - kubelet: The Kubernetes Node Agent\n"),
        "{status}"
    );
    assert!(
        status.contains("     Active: active (running) since "),
        "{status}"
    );
    assert!(
        status.contains(
            "/usr/bin/kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf"
        ),
        "{status}"
    );
    let journal = run(&fleet, "w-1", "root", "journalctl -u kubelet -b --no-pager");
    assert!(
        journal.contains(
            " w-1 systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent.\n"
        ),
        "{journal}"
    );
    assert!(
        journal.contains("\"Kubelet version\" kubeletVersion=\"v1.34.2\""),
        "{journal}"
    );
    // No /etc/sysconfig/kubelet: systemd says what it expanded to nothing.
    assert!(
        journal.contains(
            "]: kubelet.service: Referenced but unset environment variable evaluates to an empty string: KUBELET_EXTRA_ARGS\n"
        ) && journal.contains(" w-1 (kubelet)["),
        "{journal}"
    );
    assert_eq!(
        kubelet_events(&fleet, "w-1"),
        [("ok".into(), Some("v1.34.2".into()), Some("v1.34.2".into()))]
    );
    // A control plane's kubelet starts its static pods.
    let pods: Vec<Option<String>> = fleet
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| e.argv == ["(static-pods)"])
        .map(|e| (e.node == "cp-1").then_some(e.version).flatten())
        .collect();
    assert_eq!(pods, [Some("v1.34.2".to_string())]);
}

#[test]
fn a_1_35_kubelet_refuses_the_old_flags_and_restarts_until_they_are_fixed() {
    let fleet = start(
        small(1)
            .kubelet_restart(0.3)
            .with_node("w-1", |n| n.staged = Some("v1.35.0".into())),
    );
    fleet.wait_ready("w-1").unwrap();
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    fleet.wait_rebooted("w-1", &id).unwrap();
    // Restart=always: failing, waiting, failing again.
    fleet
        .wait_for("w-1's kubelet failed twice", |_| {
            kubelet_events(&fleet, "w-1")
                .iter()
                .filter(|(r, _, _)| r.starts_with("failed"))
                .count()
                >= 2
        })
        .unwrap();
    let failed = kubelet_events(&fleet, "w-1").pop().unwrap();
    assert_eq!(
        failed,
        (
            "failed: failed to parse kubelet flag: unknown flag: --pod-infra-container-image"
                .into(),
            Some("v1.35.0".into()),
            None
        )
    );
    // Between restarts; its exit code read in the same breath (a restart
    // makes it `active` for a moment).
    wait_output(
        &fleet,
        "w-1",
        "systemctl is-active kubelet; echo \"exit $?\"",
        "activating\nexit 3\n",
    );
    let journal = run(&fleet, "w-1", "root", "journalctl -u kubelet -b --no-pager");
    assert!(
        journal.contains(
            "run.go:72] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image\"\n"
        ),
        "{journal}"
    );
    assert!(
        journal.contains(
            "systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE\n"
        ),
        "{journal}"
    );
    assert!(
        journal.contains(
            "systemd[1]: kubelet.service: Scheduled restart job, restart counter is at 1.\n"
        ),
        "{journal}"
    );
    // The API sees a node that posts no status.
    let nodes = run(
        &fleet,
        "cp-1",
        "root",
        "kubectl --kubeconfig=/etc/kubernetes/admin.conf get nodes",
    );
    assert!(nodes.contains("\nw-1    NotReady "), "{nodes}");
    assert!(
        !fleet
            .cluster()
            .unwrap()
            .node_ready("w-1", fleetsim::state::now())
    );

    // What kubeadm v1.35's upgrade would do: the next start reads it.
    run(
        &fleet,
        "w-1",
        "root",
        "sed -i 's/ *--pod-infra-container-image=[^ \"]*//' /var/lib/kubelet/kubeadm-flags.env",
    );
    fleet.wait_ready("w-1").unwrap();
    assert_eq!(
        run(&fleet, "w-1", "root", "systemctl is-active kubelet"),
        "active\n"
    );
    let last = kubelet_events(&fleet, "w-1").pop().unwrap();
    assert_eq!(last.0, "ok");
    assert_eq!(last.1.as_deref(), Some("v1.35.0"));
    assert_eq!(
        fleet.cluster().unwrap().nodes["w-1"].kubelet_version,
        "v1.35.0"
    );
}

#[test]
fn a_control_plane_whose_kubelet_cannot_start_takes_the_api_down() {
    let fleet = start(
        small(0)
            .kubelet_restart(0.3)
            .with_node("cp-1", |n| n.staged = Some("v1.35.0".into())),
    );
    fleet
        .wait_for("the API answers", |c| c.api_up(fleetsim::state::now()))
        .unwrap();
    run(
        &fleet,
        "cp-1",
        "root",
        "kubectl --kubeconfig=/etc/kubernetes/admin.conf get --raw /readyz",
    );
    let id = boot_id(&fleet, "cp-1");
    let _ = fleet.ssh("cp-1", "root", "reboot");
    fleet.wait_rebooted("cp-1", &id).unwrap();
    fleet
        .wait_for("cp-1's kubelet failed", |_| {
            kubelet_events(&fleet, "cp-1")
                .iter()
                .any(|(r, _, _)| r.starts_with("failed"))
        })
        .unwrap();
    let out = fleet
        .ssh(
            "cp-1",
            "root",
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf get nodes",
        )
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        crate::common::stderr(&out)
            .contains(":6443 was refused - did you specify the right host or port?"),
        "{}",
        crate::common::stderr(&out)
    );
    assert!(
        !fleet
            .cluster()
            .unwrap()
            .api_up(fleetsim::state::now() + 3600.0)
    );
}

#[test]
fn a_killed_kubelet_is_restarted_and_the_api_notices_in_between() {
    let fleet = start(small(1).kubelet_restart(0.5));
    fleet.wait_ready("w-1").unwrap();
    run(
        &fleet,
        "w-1",
        "root",
        "kill -9 $(sed -n 's/.*\"main_pid\": \\([0-9]*\\).*/\\1/p' /run/fleetsim/units/kubelet.service.json)",
    );
    fleet
        .wait_for("w-1's kubelet is gone", |c| {
            c.nodes["w-1"].kubelet_running().is_none()
        })
        .unwrap();
    let events = kubelet_events(&fleet, "w-1");
    assert!(
        events
            .iter()
            .any(|e| e.0 == "failed: main process exited, code=killed, status=9/KILL"),
        "{events:?}"
    );
    // Restart=always brings it back; the node is Ready again.
    fleet.wait_ready("w-1").unwrap();
    assert_eq!(kubelet_events(&fleet, "w-1").last().unwrap().0, "ok");
    let journal = run(&fleet, "w-1", "root", "journalctl -u kubelet -b --no-pager");
    assert!(
        journal.contains("kubelet.service: Main process exited, code=killed, status=9/KILL\n"),
        "{journal}"
    );
}

//! Steps that survive a lost connection: a kubeadm run through
//! `systemd-run` finishes when the node's SSH connections are cut, one run
//! in the SSH session dies with it and leaves the cluster as it was.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use crate::common::{run, start, stderr, stdout, wait_child};
use fleetsim::{Fleet, Scenario};

const APPLY: &str = "kubeadm upgrade apply v1.34.2 --skip-phases addon/kube-proxy --yes";

/// cp-1 runs v1.34.2, the cluster is still v1.34.1: an apply moves it.
fn fleet(seconds: f64) -> Fleet {
    start(
        Scenario::new()
            .kubernetes("v1.34.1")
            .control_planes(1)
            .with_node("cp-1", |n| n.running = Some("v1.34.2".into()))
            .kubeadm_duration(seconds)
            .api_latency(0.01),
    )
}

fn kubeadm_results(fleet: &Fleet) -> Vec<String> {
    fleet
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.argv.first().is_some_and(|a| a == "kubeadm"))
        .map(|e| e.result.clone())
        .collect()
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_kubeadm_in_the_ssh_session_dies_with_it_and_changes_nothing() {
    let fleet = fleet(2.0);
    fleet.wait_ready("cp-1").unwrap();
    let mut ssh = fleet
        .ssh_command("cp-1", "root")
        .unwrap()
        .arg("--")
        .arg(APPLY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Cut the connection once kubeadm is at work (its progress lines).
    let mut lines = BufReader::new(ssh.stdout.take().unwrap()).lines();
    let working = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.starts_with("[upgrade/staticpods]"));
    assert!(working, "kubeadm never got to work");
    fleet.drop_ssh("cp-1").unwrap();
    let status = wait_child(&mut ssh, Duration::from_secs(10)).expect("ssh ended");
    assert_eq!(
        status.code(),
        Some(255),
        "the client sees its connection drop"
    );
    wait_until("kubeadm died", || !kubeadm_results(&fleet).is_empty());
    assert_eq!(kubeadm_results(&fleet), ["killed: SIGPIPE"]);
    assert_eq!(
        fleet.cluster().unwrap().version,
        "v1.34.1",
        "kubeadm's rollback"
    );
    // The node itself is fine: new connections work, sshd still listens.
    assert_eq!(run(&fleet, "cp-1", "root", "hostname").trim(), "cp-1");
}

#[test]
fn a_detached_kubeadm_finishes_and_its_unit_is_collected() {
    // Long enough to be seen running after two SSH logins on a busy machine.
    let fleet = fleet(3.0);
    fleet.wait_ready("cp-1").unwrap();
    let script = format!(
        "mkdir -p /var/lib/fleetctl/steps; {APPLY} >/var/lib/fleetctl/steps/t1.log 2>&1; \
         echo $? >/var/lib/fleetctl/steps/t1.exit"
    );
    let start_it = format!(
        "systemd-run --unit=fleetctl-t1 --description='fleetctl: kubeadm upgrade apply' --collect --quiet \
         -- sh -c '{script}'"
    );
    let t = Instant::now();
    let out = fleet.ssh("cp-1", "root", &start_it).unwrap();
    assert_eq!(
        (
            out.status.code(),
            stdout(&out).as_str(),
            stderr(&out).as_str()
        ),
        (Some(0), "", "")
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "systemd-run returns at once"
    );
    let again = fleet.ssh("cp-1", "root", &start_it).unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        stderr(&again),
        "Failed to start transient service unit: Unit fleetctl-t1.service was already loaded or has a fragment file.\n"
    );
    let state = |fleet: &Fleet| {
        let out = fleet
            .ssh(
                "cp-1",
                "root",
                "systemctl is-active fleetctl-t1.service; echo \"is-active: $?\"; \
                 systemctl show -p ActiveState -p SubState -p Result -p ExecMainStatus --value fleetctl-t1.service",
            )
            .unwrap();
        stdout(&out)
    };
    let running = state(&fleet);
    assert!(
        running.starts_with("active\nis-active: 0\nsuccess\n0\nactive\nrunning\n"),
        "{running}"
    );
    fleet.drop_ssh("cp-1").unwrap();
    wait_until("the detached kubeadm finished", || {
        fleet
            .ssh("cp-1", "root", "cat /var/lib/fleetctl/steps/t1.exit")
            .is_ok_and(|o| stdout(&o) == "0\n")
    });
    assert_eq!(kubeadm_results(&fleet), ["ok"]);
    assert_eq!(fleet.cluster().unwrap().version, "v1.34.2");
    wait_until("the unit is collected", || {
        state(&fleet) == "inactive\nis-active: 4\nsuccess\n0\ninactive\ndead\n"
    });
    let log = run(&fleet, "cp-1", "root", "cat /var/lib/fleetctl/steps/t1.log");
    assert!(
        log.contains("[upgrade] SUCCESS!") || log.contains("successfully"),
        "{log}"
    );
}

#[test]
fn the_fault_cuts_the_connection_while_upgrade_apply_works() {
    let fleet = fleet(0.3);
    fleet
        .faults(|f| f.drop_ssh_during_upgrade_apply = vec!["cp-1".into()])
        .unwrap();
    fleet.wait_ready("cp-1").unwrap();
    let out = fleet.ssh("cp-1", "root", APPLY).unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", stderr(&out));
    wait_until("kubeadm died", || !kubeadm_results(&fleet).is_empty());
    assert_eq!(kubeadm_results(&fleet), ["killed: SIGPIPE"]);
    assert!(
        fleet
            .shared()
            .faults()
            .unwrap()
            .drop_ssh_during_upgrade_apply
            .is_empty(),
        "consumed"
    );
    // The second try goes through.
    run(&fleet, "cp-1", "root", APPLY);
    assert_eq!(fleet.cluster().unwrap().version, "v1.34.2");
}

//! Fault injection: hung reboots, slow boots, and `fleetsim ctl` flipping
//! faults on a running fleet.

use std::process::Command;
use std::thread;
use std::time::Duration;

use crate::common::{boot_id, run, small, start, stderr, stdout};

#[test]
fn a_hung_node_stays_down_until_released() {
    let fleet = start(small(1).faults(|f| f.hang_on_reboot = vec!["w-1".into()]));
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    fleet.wait_down("w-1").unwrap();
    // Several boot delays (0.3 s each) later it is still down and unreachable.
    thread::sleep(Duration::from_millis(1500));
    assert!(!fleet.cluster().unwrap().nodes["w-1"].up);
    let out = fleet.ssh("w-1", "root", "true").unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", stderr(&out));

    fleet.release("w-1").unwrap();
    fleet.wait_rebooted("w-1", &id).unwrap();
    run(&fleet, "w-1", "root", "true");
}

#[test]
fn a_slow_boot_takes_at_least_its_extra_delay() {
    let fleet = start(small(1).faults(|f| {
        f.slow_boot.insert("w-1".into(), 1.0);
    }));
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    fleet.wait_rebooted("w-1", &id).unwrap();
    let events = fleet.events().unwrap();
    let at = |what: &str| {
        events
            .iter()
            .rfind(|e| e.node == "w-1" && e.argv == [what])
            .map(|e| e.t)
            .unwrap()
    };
    // The supervisor sleeps boot_delay + slow_boot between the two: a lower bound.
    assert!(at("(boot)") - at("(shutdown)") >= 1.3, "{events:#?}");
}

fn ctl(fleet: &fleetsim::Fleet, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fleetsim"))
        .arg("ctl")
        .arg("--dir")
        .arg(fleet.dir())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn ctl_flips_faults_and_records_them() {
    let fleet = start(small(1));
    for args in [
        &["hang", "w-1"][..],
        &["pdb-block", "w-1"],
        &["fail-upgrade-apply", "2"],
        &["fail-upgrade-node", "w-1"],
        &["slow-boot", "cp-1", "2.5"],
        &["hub-down"],
    ] {
        let out = ctl(&fleet, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let f = fleet.shared().faults().unwrap();
    assert_eq!(f.hang_on_reboot, ["w-1"]);
    assert_eq!(f.pdb_block, ["w-1"]);
    assert_eq!(f.fail_upgrade_apply, 2);
    assert_eq!(f.fail_upgrade_node, ["w-1"]);
    assert_eq!(f.slow_boot.get("cp-1"), Some(&2.5));
    assert!(f.hub_down);

    for args in [
        &["release", "w-1"][..],
        &["pdb-unblock", "w-1"],
        &["hub-up"],
    ] {
        assert!(ctl(&fleet, args).status.success());
    }
    let f = fleet.shared().faults().unwrap();
    assert!(f.hang_on_reboot.is_empty() && f.pdb_block.is_empty() && !f.hub_down);

    let out = ctl(&fleet, &["hang", "w-9"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no node w-9 in this fleet (nodes: cp-1, w-1)"),
        "{}",
        stderr(&out)
    );
    let out = ctl(&fleet, &["explode"]);
    assert_eq!(out.status.code(), Some(2));

    let events = Command::new(env!("CARGO_BIN_EXE_fleetsim"))
        .args(["events", "--dir"])
        .arg(fleet.dir())
        .output()
        .unwrap();
    let text = stdout(&events);
    assert!(
        text.contains("(fleetsim)   fleetsim ctl hang w-1"),
        "{text}"
    );
    assert!(text.contains("cp-1         (boot)  → ok"), "{text}");
}

#[test]
fn a_power_cycle_kills_the_node_and_boots_what_is_staged() {
    let fleet = start(small(1).with_node("w-1", |n| n.staged = Some("v1.34.3".into())));
    fleet.wait_ready("w-1").unwrap();
    let id = boot_id(&fleet, "w-1");
    let mut idle = fleet
        .ssh_command("w-1", "root")
        .unwrap()
        .arg("sleep 600")
        .spawn()
        .unwrap();
    let out = ctl(&fleet, &["power-cycle", "w-1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let boot = fleet.wait_rebooted("w-1", &id).unwrap();
    assert_eq!(boot.kubernetes, "v1.34.3", "what was staged runs now");
    let dropped = crate::common::wait_child(&mut idle, Duration::from_secs(20));
    assert_eq!(
        dropped.and_then(|s| s.code()),
        Some(255),
        "the session died with the node"
    );
    fleet.wait_ready("w-1").unwrap();
    let events = crate::common::node_events(&fleet, "w-1");
    assert_eq!(
        events,
        ["(boot)", "(kubelet)", "(shutdown)", "(boot)", "(kubelet)"],
        "no reboot command, no clean shutdown"
    );
    let shutdown = fleet
        .events()
        .unwrap()
        .into_iter()
        .find(|e| e.node == "w-1" && e.argv == ["(shutdown)"])
        .unwrap();
    assert_eq!(
        shutdown.result,
        "power cycle: node-init killed, no clean shutdown"
    );
    let text = stdout(
        &Command::new(env!("CARGO_BIN_EXE_fleetsim"))
            .args(["events", "--dir"])
            .arg(fleet.dir())
            .output()
            .unwrap(),
    );
    assert!(text.contains("fleetsim ctl power-cycle w-1"), "{text}");

    // The harness does the same.
    let id = boot_id(&fleet, "w-1");
    fleet.power_cycle("w-1").unwrap();
    fleet.wait_rebooted("w-1", &id).unwrap();
}

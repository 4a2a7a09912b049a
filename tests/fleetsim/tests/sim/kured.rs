//! Kured's pods at work: they reboot a node whose sentinel exists, under
//! the DaemonSet lock, and stay away while someone else (fleetctl) holds it.

use std::thread;
use std::time::{Duration, Instant};

use crate::common::{boot_id, node_events, run, small, start};

const KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s";

fn kured_events(fleet: &fleetsim::Fleet, node: &str) -> Vec<String> {
    node_events(fleet, node)
        .into_iter()
        .filter(|e| e.starts_with("(kured)") || e == "(boot)")
        .collect()
}

#[test]
fn kured_waits_while_fleetctl_holds_its_lock_then_reboots_the_node() {
    let fleet = start(small(1).kured_with(|k| {
        k.helm = Some("kured/kured".into());
        k.run = true;
        k.period = 0.2;
    }));
    let value = r#"{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false},"created":"2099-01-01T00:00:00Z","TTL":900000000000}"#;
    run(
        &fleet,
        "cp-1",
        "root",
        &format!(
            "{KUBECTL} -n kured annotate daemonset kured 'weave.works/kured-node-lock={value}'"
        ),
    );
    let id = boot_id(&fleet, "w-1");
    run(&fleet, "w-1", "root", "touch /run/reboot-required");
    // Several periods pass: Kured sees the lock held and does nothing else.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !kured_events(&fleet, "w-1")
        .iter()
        .any(|e| e.contains("acquire"))
    {
        assert!(Instant::now() < deadline, "Kured never tried the lock");
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(800));
    assert_eq!(
        boot_id(&fleet, "w-1"),
        id,
        "Kured rebooted under fleetctl's lock"
    );
    let held = fleet
        .events()
        .unwrap()
        .into_iter()
        .find(|e| e.node == "w-1" && e.argv == ["(kured)", "acquire"])
        .unwrap();
    assert_eq!(held.result, "held by fleetctl/me@lap");
    assert!(!fleet.cluster().unwrap().nodes["w-1"].unschedulable);

    run(
        &fleet,
        "cp-1",
        "root",
        &format!("{KUBECTL} -n kured annotate daemonset kured weave.works/kured-node-lock-"),
    );
    fleet.wait_rebooted("w-1", &id).unwrap();
    fleet
        .wait_for("Kured uncordoned w-1 and gave its lock back", |c| {
            let k = c.kured.as_ref().unwrap();
            !c.nodes["w-1"].unschedulable && k.annotations.is_empty()
        })
        .unwrap();
    // Kured writes its release to the log right after the state: wait for
    // the record too, boundedly.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !kured_events(&fleet, "w-1")
        .iter()
        .any(|e| e == "(kured) release")
    {
        assert!(
            Instant::now() < deadline,
            "Kured's release was never recorded"
        );
        thread::sleep(Duration::from_millis(50));
    }
    let events = kured_events(&fleet, "w-1");
    // After the refused attempt(s), Kured's own reboot, in this order.
    let after = events
        .iter()
        .position(|e| e == "(kured) cordon")
        .expect("Kured cordoned w-1");
    let tail: Vec<&str> = events[after - 1..].iter().map(String::as_str).collect();
    assert_eq!(
        tail,
        [
            "(kured) acquire",
            "(kured) cordon",
            "(kured) drain",
            "(kured) reboot",
            "(boot)",
            "(kured) uncordon",
            "(kured) release"
        ],
        "{events:#?}"
    );
    assert!(
        !kured_events(&fleet, "cp-1")
            .iter()
            .any(|e| e.contains("reboot")),
        "cp-1 had no sentinel"
    );
}

//! Fleets of benchmark size. Timing is printed, never asserted
//! (tests/fleetsim/bench-up.sh measures start-up on purpose).

use std::time::Instant;

use crate::common::{boot_id, node_events, run, start};
use fleetsim::Scenario;

#[test]
fn fifty_nodes_boot_and_answer() {
    let t = Instant::now();
    let fleet = start(
        Scenario::new()
            .control_planes(3)
            .workers(47)
            .kubernetes("v1.34.2"),
    );
    eprintln!("50 nodes ready in {:.2} s", t.elapsed().as_secs_f64());
    let cluster = fleet.cluster().unwrap();
    assert_eq!(cluster.nodes.len(), 50);
    assert!(cluster.nodes.values().all(|n| n.up));
    for node in ["cp-1", "w-23", "w-47"] {
        assert_eq!(run(&fleet, node, "root", "hostname").trim(), node);
    }
    let addresses: std::collections::BTreeSet<String> = fleet
        .info()
        .nodes
        .iter()
        .map(|n| n.address.clone())
        .collect();
    assert_eq!(addresses.len(), 50);
}

#[test]
fn a_light_fleet_merges_without_loop_devices_and_its_kubelets_report() {
    let fleet = start(
        Scenario::new()
            .control_planes(1)
            .workers(20)
            .kubernetes("v1.34.2")
            .light(true),
    );
    let out = run(
        &fleet,
        "w-7",
        "root",
        "kubelet --version; systemctl is-active kubelet; grep -o 'lowerdir=[^:]*/usr:' /proc/self/mountinfo",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["Kubernetes v1.34.2", "active"]);
    assert!(
        lines[2].ends_with("/light/v1.34.2/usr:"),
        "an unpacked tree, no loop device, under /usr: {out}"
    );
    fleet.wait_ready("w-7").unwrap();
    let cp = run(
        &fleet,
        "cp-1",
        "root",
        "grep -o 'lowerdir=[^:]*/usr:' /proc/self/mountinfo",
    );
    assert!(
        cp.trim().ends_with("/sysext/usr:"),
        "control planes boot fully: {cp}"
    );
    // A reboot merges what is staged, as on a full node.
    let id = boot_id(&fleet, "w-7");
    let _ = fleet.ssh("w-7", "root", "reboot");
    fleet.wait_rebooted("w-7", &id).unwrap();
    fleet.wait_ready("w-7").unwrap();
    let kubelets = node_events(&fleet, "w-7")
        .iter()
        .filter(|e| *e == "(kubelet)")
        .count();
    assert_eq!(kubelets, 2);
}

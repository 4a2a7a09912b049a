//! The node's own sysupdate timer, as the bakery's Butane enables it
//! (scenario node `sysupdate_timer`, real-OS nodes only): a patch of the
//! pinned minor staged while nobody was looking is what `status` must show
//! and `reboot` must roll.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fleetsim::scenario::Os;

use super::support::{self, describe};

/// Whether `FLEETSIM_OS_LAYER=emulated` runs these tests, which only real-OS
/// nodes can hold; says so when it does.
fn emulated(why: &str) -> bool {
    let emulated = support::os_layer_or(Os::Systemd) == Os::Emulated;
    if emulated {
        eprintln!("skipped: FLEETSIM_OS_LAYER=emulated, and {why}");
    }
    emulated
}

/// Waits until `node` has flagged a reboot by itself.
fn wait_flagged(fleet: &fleetsim::Fleet, node: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        if fleet
            .ssh_ok(node, "root", "test -e /run/reboot-required")
            .is_ok()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{node}'s sysupdate timer never flagged a reboot within 90 s");
}

#[test]
fn a_patch_the_nodes_own_timer_staged_over_its_running_image_is_shown_and_rolled_by_reboot() {
    if emulated("it has no timers") {
        return;
    }
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2")
            .with_node("w-1", |n| n.sysupdate_timer = true),
    );
    wait_flagged(&fleet, "w-1");

    let status = support::run(&fleet.inventory(), &["status", "-o", "json"]).expect_code(0);
    let report = support::status_report(&status);
    let node = |name: &str| support::status_node(&report, name);
    let w1 = node("w-1");
    assert_eq!(w1["facts"]["kubernetes"]["running"], "v1.34.2", "{w1:#}");
    assert_eq!(w1["facts"]["kubernetes"]["staged"], "v1.34.3", "{w1:#}");
    assert_eq!(w1["reboot_pending"], true, "{w1:#}");
    for other in ["cp-1", "w-2"] {
        let n = node(other);
        assert_eq!(n["reboot_pending"], false, "{other}: {n:#}");
        assert_eq!(
            n["facts"]["kubernetes"]["staged"], "v1.34.2",
            "{other} stages what it runs: {n:#}"
        );
    }

    let start = fleet.events().unwrap().len();
    let out = support::run(&fleet.inventory(), &["reboot", "--yes"]).expect_code(0);
    let events = fleet.events().unwrap();
    let log = &events[start..];
    let rebooted = support::rebooted_nodes(log);
    assert_eq!(
        rebooted,
        BTreeSet::from(["w-1"]),
        "only the node whose timer staged a patch:\n{}\n{}",
        out.stderr,
        describe(log)
    );
    support::assert_invariants_hold(&events);
    let boot = fleet.boot("w-1").expect("w-1's boot record");
    assert_eq!(boot.kubernetes, "v1.34.3", "w-1 runs what its timer staged");
}

/// Mid-hop, the hub publishes a newer patch of the hop's minor and w-2's own
/// systemd-sysupdate.service (the unit its timer starts, started here at a
/// chosen moment instead of waiting for the timer) stages it under the pin
/// fleetctl wrote. apply reads w-2's link again right before its reboot,
/// stops there with w-2 uncordoned and not rebooted, and the next plan
/// converges every node onto the new patch.
#[test]
fn a_patch_the_nodes_own_sysupdate_stages_mid_hop_stops_apply_before_that_node_reboots() {
    if emulated("it has no systemd-sysupdate.service") {
        return;
    }
    let nodes = ["cp-1", "w-1", "w-2"];
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2"),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let planned = support::newest_on_hub(&fleet, "v1.35");
    let newer = format!("v1.35.{}", planned.patch() + 1);
    // w-1's reboot is slow, so w-2's sysupdate finishes long before apply
    // looks at w-2's link.
    fleet
        .faults(|f| {
            f.slow_boot.insert("w-1".into(), 10.0);
        })
        .unwrap();
    let mut running = support::Running::spawn(&fleet.inventory(), &["apply", "--yes"]);
    running.wait_for("w-1: rebooting");
    fleet.publish(&newer).unwrap();
    fleet
        .ssh_ok("w-2", "root", "systemctl start systemd-sysupdate.service")
        .unwrap();
    let link = fleet
        .ssh_ok("w-2", "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap();
    assert!(
        link.contains(&format!("kubernetes-{newer}-")),
        "w-2's own sysupdate staged {newer} under fleetctl's pin: {link}"
    );

    let run = running.finish().expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            &format!("w-2: staged kubernetes {newer}, but the plan expected {planned}"),
            "Nothing was rebooted",
            "Run `fleetctl plan` again",
        ],
    );
    let events = fleet.events().unwrap();
    let rebooted = support::rebooted_nodes(&events);
    assert_eq!(
        rebooted,
        BTreeSet::from(["cp-1", "w-1"]),
        "w-2 is not rebooted onto a patch nobody planned:\n{}",
        describe(&events)
    );
    let cluster = fleet.cluster().unwrap();
    assert!(
        !cluster.nodes["w-2"].unschedulable,
        "w-2 is uncordoned again"
    );
    assert_eq!(cluster.nodes["w-2"].kubelet_version, "v1.34.2");
    fleet
        .faults(|f| {
            f.slow_boot.clear();
        })
        .unwrap();

    // The next plan sees the patch and converges every node onto it.
    let plan = support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    assert!(plan.stdout.contains(&newer), "{}", plan.stdout);
    support::apply(&fleet, &["--yes"]).expect_code(0);
    let cluster = support::assert_consistent(&fleet, &nodes, None);
    for n in nodes {
        assert_eq!(cluster.nodes[n].kubelet_version, newer, "{n}");
        assert_eq!(fleet.boot(n).unwrap().kubernetes, newer, "{n}'s sysext");
    }
    support::assert_invariants_hold(&fleet.events().unwrap());
}

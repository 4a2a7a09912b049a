//! The node's own sysupdate timer, as the bakery's Butane enables it
//! (scenario node `sysupdate_timer`, real-OS nodes only): a patch of the
//! pinned minor staged while nobody was looking is what `status` must show
//! and `reboot` must roll.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fleetsim::scenario::Os;

use super::support::{self, describe};

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
    if support::os_layer_or(Os::Systemd) == Os::Emulated {
        eprintln!("skipped: FLEETSIM_OS_LAYER=emulated has no timers");
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

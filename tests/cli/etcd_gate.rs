//! Issue 36, etcd as a gate: in an HA control plane the next control plane
//! is not drained until the previous one's etcd member is back and caught
//! up. The member that lags is the real etcd, started late by its kubelet
//! after the reboot (`faults.etcd_late`): meanwhile its peers see it
//! unreachable, as etcd's own `endpoint status --cluster` says.

use super::support::{self, Event, assert_has};

/// How late cp-1's kubelet starts its member after the reboot: well past
/// what cp-1's reboot, kubelet and static pods take, so that a run that
/// does not wait for etcd drains cp-2 while cp-1's member is still down.
const LATE: f64 = 45.0;

fn boots_of<'a>(events: &'a [Event], node: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.node == node && support::is_boot(e))
        .collect()
}

#[test]
fn the_next_control_plane_waits_for_the_previous_ones_etcd_member_to_catch_up() {
    let fleet = support::start(
        support::scenario()
            .control_planes(3)
            .workers(0)
            .kubernetes("v1.34.2"),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    // Armed now, so the start it delays is cp-1's after its reboot.
    fleet
        .faults(|f| {
            f.etcd_late.insert("cp-1".into(), LATE);
        })
        .unwrap();
    let run = support::apply(&fleet, &["--yes"]).expect_code(0);
    let events = fleet.events().unwrap();
    let boot = *boots_of(&events, "cp-1")
        .last()
        .expect("cp-1 rebooted during apply");
    let drained_cp2 = events
        .iter()
        .find(|e| support::schedulability(e) == Some(("drain", "cp-2")))
        .unwrap_or_else(|| panic!("cp-2 was drained:\n{}", support::describe(&events)));
    assert!(
        drained_cp2.t - boot.t >= LATE,
        "cp-2 was drained {:.1} s after cp-1 booted, while cp-1's etcd member was still held \
         back for {LATE} s:\n{}",
        drained_cp2.t - boot.t,
        support::describe(&events)
    );
    // The wait is in the journal: the member named while it lagged, then
    // caught up, before cp-2 went.
    let records = support::journal_records(&fleet);
    let kinds: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["node"] == "cp-1")
        .map(|r| {
            (
                r["kind"].as_str().unwrap_or("").to_string(),
                r["detail"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let lagging = kinds
        .iter()
        .find(|(k, _)| k == "etcd-catching-up")
        .unwrap_or_else(|| panic!("the journal shows the wait for cp-1's member: {kinds:?}"));
    assert_has(&lagging.1, &["etcd member cp-1"]);
    assert!(
        kinds.iter().any(|(k, _)| k == "etcd-caught-up"),
        "the journal says cp-1's member caught up: {kinds:?}"
    );
    for n in ["cp-2", "cp-3"] {
        assert!(
            records
                .iter()
                .any(|r| r["kind"] == "etcd-caught-up" && r["node"] == n),
            "{n}'s member was waited for too:\n{}",
            run.stderr
        );
    }
    support::assert_invariants_hold(&events);
}

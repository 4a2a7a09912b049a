//! The Ceph gate's two readings of a real Rook-Ceph layout (fleetsim
//! `ceph`) through the real kubectl: Rook's toolbox (`kubectl exec` of
//! `ceph health detail`, `pg stat`, `osd tree`) and, without it, the
//! CephCluster's `.status.ceph`. What the gate decides from them (holds,
//! releases, timeouts, the wait for recovery after each node) is tested on
//! the fake world (`src/steps/gate_hold_tests.rs`, docs/rules-on-the-fake.md);
//! these only read, so no node is rebooted.

use fleetsim::state::Event;

use crate::support::{self, Fleet};

/// One control plane and one worker with one OSD, a pool of one copy (so
/// every PG is active+clean), a benign HEALTH_WARN that never goes away.
/// `toolbox`: Rook's toolbox pod runs (else fleetctl reads the
/// CephCluster's status alone).
fn storage_fleet(toolbox: bool, f: impl FnOnce(&mut fleetsim::state::Faults)) -> Fleet {
    support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .ceph(|c| {
                c.size = 1;
                c.toolbox = toolbox;
                c.warnings = vec!["AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED".into()];
            })
            .faults(f),
    )
}

/// The upgrades, cordons, drains and reboots of the event log from `from` on.
fn changes_since(fleet: &Fleet, from: usize) -> Vec<Event> {
    fleet.events().unwrap()[from..]
        .iter()
        .filter(|e| {
            support::schedulability(e).is_some()
                || support::is_reboot(e)
                || support::kubeadm_upgrade(e).is_some()
        })
        .cloned()
        .collect()
}

#[test]
fn the_toolbox_is_read_for_status_and_a_health_err_stops_apply_changing_nothing() {
    let fleet = storage_fleet(true, |_| {});
    // `status` shows Ceph's health and PGs, from the toolbox.
    let table = support::run(&fleet.inventory(), &["status"]).expect_code(0);
    support::assert_has(
        &table.stdout,
        &[
            "ceph rook-ceph/rook-ceph HEALTH_WARN",
            "32 PGs",
            "(from the toolbox)",
            "HEALTH_WARN AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED: mons are allowing insecure global_id reclaim",
        ],
    );
    let json = support::status_report(
        &support::run(&fleet.inventory(), &["status", "--output", "json"]).expect_code(0),
    );
    let ceph = &json["ceph"][0];
    assert_eq!(ceph["cluster"], "rook-ceph/rook-ceph", "{json:#}");
    assert_eq!(ceph["health"], "HEALTH_WARN");
    assert_eq!(ceph["source"], "toolbox");
    assert_eq!(
        ceph["checks"][0]["code"],
        "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED"
    );

    // The gate reads the same toolbox: a HEALTH_ERR holds the first
    // change, and past --ceph-timeout the run stops with nothing changed.
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    fleet
        .faults(|f| f.ceph_health_err = Some("PG_DAMAGED".into()))
        .unwrap();
    let before = fleet.events().unwrap().len();
    let run = support::apply(&fleet, &["--yes", "--ceph-timeout", "6s"]).expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            "not upgrading cp-1's control plane: Ceph still holds after 6s",
            "PG_DAMAGED (Possible data damage: 1 pg inconsistent: every HEALTH_ERR holds)",
            "Nothing was changed (nothing was upgraded or drained)",
        ],
    );
    let changed = changes_since(&fleet, before);
    assert!(changed.is_empty(), "nothing changed: {changed:?}");
    support::assert_consistent(&fleet, &["cp-1", "w-1"], None);
}

#[test]
fn a_ceph_whose_health_rook_never_reported_holds_and_stops_naming_it_with_nothing_changed() {
    // No toolbox, and Rook's operator stopped before its first health
    // check: the CephCluster has no .status.ceph. Unknown holds.
    let fleet = storage_fleet(false, |f| f.ceph_operator_stopped = Some(0.0));
    let json = support::status_report(
        &support::run(&fleet.inventory(), &["status", "--output", "json"]).expect_code(0),
    );
    assert_eq!(json["ceph"][0]["source"], "status", "{json:#}");
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let before = fleet.events().unwrap().len();
    let run = support::apply(&fleet, &["--yes", "--ceph-timeout", "6s"]).expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            "Ceph holds cp-1's control-plane upgrade",
            "rook-ceph/rook-ceph has no .status.ceph: Rook has not reported Ceph's health",
            "not upgrading cp-1's control plane: Ceph still holds after 6s",
        ],
    );
    let changed = changes_since(&fleet, before);
    assert!(changed.is_empty(), "nothing changed: {changed:?}");
    support::assert_consistent(&fleet, &["cp-1", "w-1"], None);
}

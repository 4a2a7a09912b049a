//! The Ceph gate on a fleet with Rook-Ceph (fleetsim `ceph`): one OSD per
//! worker, a pool of three copies, PGs degraded while a worker is down and
//! recovering for a while after it returns, a benign HEALTH_WARN that
//! never goes away. Plain `apply --yes`: the gate is on by default.

use fleetsim::state::Event;

use crate::support::{self, Fleet, Running, schedulability};

/// Seconds a worker's PGs recover after its OSD is back: far longer than
/// apply takes from one worker's uncordon to the next one's drain, so a
/// run that does not wait drains the next worker while PGs are degraded.
const RECOVERY: f64 = 15.0;

fn storage_fleet(f: impl FnOnce(&mut fleetsim::state::Faults)) -> Fleet {
    storage_fleet_with(true, f)
}

/// `toolbox`: Rook's toolbox pod runs (else fleetctl reads the
/// CephCluster's status alone).
fn storage_fleet_with(toolbox: bool, f: impl FnOnce(&mut fleetsim::state::Faults)) -> Fleet {
    support::start(
        support::scenario()
            .control_planes(1)
            .workers(3)
            .kubernetes("v1.34.2")
            .ceph(|c| {
                c.recovery = RECOVERY;
                c.toolbox = toolbox;
                c.warnings = vec!["AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED".into()];
            })
            .faults(f),
    )
}

fn drains(events: &[Event]) -> Vec<(String, f64)> {
    events
        .iter()
        .filter_map(|e| match schedulability(e) {
            Some(("drain", node)) => Some((node.to_string(), e.t)),
            _ => None,
        })
        .collect()
}

/// The upgrades, cordons, drains and reboots of the event log from `from` on.
fn changes_since(fleet: &Fleet, from: usize) -> Vec<Event> {
    fleet.events().unwrap()[from..]
        .iter()
        .filter(|e| {
            schedulability(e).is_some()
                || support::is_reboot(e)
                || support::kubeadm_upgrade(e).is_some()
        })
        .cloned()
        .collect()
}

fn journal_kinds(fleet: &Fleet, kind: &str) -> Vec<String> {
    support::journal_records(fleet)
        .iter()
        .filter(|r| r["kind"] == kind)
        .map(|r| r["detail"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// No worker is drained before the previous one's OSD is up and its PGs
/// recovered (each node rebooted once, so its kubelet now is the one it
/// came back with).
fn assert_each_worker_waited(fleet: &Fleet, drains: &[(String, f64)]) {
    let c = fleet.cluster().unwrap();
    let spec = c.ceph.clone().unwrap();
    let events = fleet.events().unwrap();
    for pair in ["w-1", "w-2", "w-3"].windows(2) {
        let (prev, next) = (pair[0], pair[1]);
        let back = c.nodes[prev].kubelet.as_ref().unwrap().started_at;
        let clean_at = back + spec.osd_start + spec.recovery;
        let (_, drained) = drains
            .iter()
            .find(|(n, _)| n == next)
            .unwrap_or_else(|| panic!("{next} was not drained: {drains:?}"));
        assert!(
            *drained >= clean_at,
            "{next} was drained {:.1} s after {prev}'s kubelet came back, while its PGs were \
             still degraded (clean {:.1} s after it):\n{}",
            drained - back,
            clean_at - back,
            support::describe(&events)
        );
    }
}

#[test]
fn each_worker_waits_for_the_previous_ones_pgs_to_recover_under_a_benign_warning() {
    let fleet = storage_fleet(|_| {});
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let run = support::apply(&fleet, &["--yes"]).expect_code(0);

    let c = fleet.cluster().unwrap();
    let spec = c.ceph.clone().unwrap();
    let events = fleet.events().unwrap();
    let drains = drains(&events);
    let workers = ["w-1", "w-2", "w-3"];
    for w in workers {
        assert!(
            drains.iter().any(|(n, _)| n == w),
            "{w} was drained: {drains:?}"
        );
    }
    assert_each_worker_waited(&fleet, &drains);
    let now = fleetsim::state::now();
    let state = fleetsim::ceph::state(&c, &fleet.shared().faults().unwrap(), &spec, now);
    assert_eq!(
        state.pgs.keys().collect::<Vec<_>>(),
        ["active+clean"],
        "Ceph is clean at the end"
    );

    // The journal and the terminal show the waits, one per worker.
    let waits = journal_kinds(&fleet, "ceph-recovery");
    for w in workers {
        assert!(
            waits
                .iter()
                .any(|d| d.contains(&format!("after {w}")) && d.contains("degraded")),
            "the journal shows the wait after {w}: {waits:#?}"
        );
    }
    assert!(journal_kinds(&fleet, "ceph-recovery-released").len() >= 3);
    support::assert_has(
        &run.stderr,
        &[
            "Ceph holds the node after w-1",
            "active+recovering+degraded",
        ],
    );
    // The benign warning held nothing.
    assert!(
        !run.stderr
            .contains("AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED ("),
        "{}",
        run.stderr
    );

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
    let pgs: u64 = ceph["pgs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(pgs, 32);
}

#[test]
fn health_err_at_the_start_holds_until_it_clears_and_stops_at_the_timeout_changing_nothing() {
    let fleet = storage_fleet(|f| f.ceph_health_err = Some("OSD_FULL".into()));
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let before = fleet.events().unwrap().len();
    let changes = |from: usize| changes_since(&fleet, from);

    // Plain `apply --yes`: it holds while the error lasts, changing
    // nothing, and goes on once it clears.
    // Heartbeats every second (a test build's FLEETCTL_TEST_HEARTBEAT): the
    // lock is renewed while Ceph holds.
    let mut cmd = support::fleetctl(&fleet.inventory(), &["apply", "--yes"]);
    cmd.env("FLEETCTL_TEST_HEARTBEAT", "1s");
    let mut running = Running::spawn_command(cmd);
    running.wait_for("Ceph holds cp-1's control-plane upgrade");
    let lock_version =
        || fleet.cluster().unwrap().configmaps[support::LOCK_CONFIGMAP].resource_version;
    let renewed_from = lock_version();
    std::thread::sleep(std::time::Duration::from_secs(6));
    assert!(
        lock_version() > renewed_from,
        "the lock's heartbeat goes on while Ceph holds"
    );
    let held = changes(before);
    assert!(
        held.is_empty(),
        "nothing is upgraded, cordoned, drained or rebooted while HEALTH_ERR lasts: {held:?}"
    );
    fleet.faults(|f| f.ceph_health_err = None).unwrap();
    let run = running.finish();
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    support::assert_has(
        &run.stderr,
        &[
            "OSD_FULL (1 full osd(s): every HEALTH_ERR holds)",
            "Ceph released cp-1's control-plane upgrade after",
        ],
    );
    let drained = drains(&fleet.events().unwrap()[before..]);
    assert_eq!(drained.len(), 4, "every node was drained once: {drained:?}");
    assert!(
        journal_kinds(&fleet, "ceph-hold")
            .iter()
            .any(|d| d.contains("OSD_FULL")),
        "the journal names what held"
    );

    // The next hop, the error back: past --ceph-timeout the run stops
    // naming Ceph, and nothing was changed.
    support::run(&fleet.inventory(), &["plan", "v1.36"]).expect_code(0);
    fleet
        .faults(|f| f.ceph_health_err = Some("PG_DAMAGED".into()))
        .unwrap();
    let before = fleet.events().unwrap().len();
    let run = support::apply(&fleet, &["--yes", "--ceph-timeout", "12s"]).expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            "not upgrading cp-1's control plane: Ceph still holds after 12s",
            "PG_DAMAGED (Possible data damage: 1 pg inconsistent: every HEALTH_ERR holds)",
            "Nothing was changed (nothing was upgraded or drained)",
        ],
    );
    let changed = changes(before);
    assert!(
        changed.is_empty(),
        "nothing was upgraded, cordoned, drained or rebooted: {changed:?}"
    );
    support::assert_consistent(&fleet, &["cp-1", "w-1", "w-2", "w-3"], None);
}

#[test]
fn without_the_toolbox_the_cephclusters_status_paces_the_workers() {
    let fleet = storage_fleet_with(false, |_| {});
    let json = support::status_report(
        &support::run(&fleet.inventory(), &["status", "--output", "json"]).expect_code(0),
    );
    assert_eq!(json["ceph"][0]["source"], "status", "{json:#}");
    assert_eq!(json["ceph"][0]["health"], "HEALTH_WARN");
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let run = support::apply(&fleet, &["--yes"]).expect_code(0);
    assert_each_worker_waited(&fleet, &drains(&fleet.events().unwrap()));
    // The operator's status lags by up to its refresh: each wait saw
    // the PGs degraded, or a status not yet checked since the return.
    let waits = journal_kinds(&fleet, "ceph-recovery");
    for w in ["w-1", "w-2", "w-3"] {
        assert!(
            waits.iter().any(|d| d.contains(&format!("after {w}"))),
            "the journal shows the wait after {w}: {waits:#?}"
        );
    }
    assert!(
        !run.stderr.contains("ok-to-stop"),
        "no toolbox, no ok-to-stop:\n{}",
        run.stderr
    );
}

#[test]
fn a_ceph_whose_health_rook_never_reported_holds_and_stops_naming_it_with_nothing_changed() {
    // No toolbox, and Rook's operator stopped before its first health
    // check: the CephCluster has no .status.ceph. Unknown holds.
    let fleet = storage_fleet_with(false, |f| f.ceph_operator_stopped = Some(0.0));
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let before = fleet.events().unwrap().len();
    let run = support::apply(&fleet, &["--yes", "--ceph-timeout", "8s"]).expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            "Ceph holds cp-1's control-plane upgrade",
            "rook-ceph/rook-ceph has no .status.ceph: Rook has not reported Ceph's health",
            "not upgrading cp-1's control plane: Ceph still holds after 8s",
        ],
    );
    let changed = changes_since(&fleet, before);
    assert!(changed.is_empty(), "nothing changed: {changed:?}");
    support::assert_consistent(&fleet, &["cp-1", "w-1", "w-2", "w-3"], None);
}

//! Ceph's and etcd's gates, tested with their own code
//! (`super::storage_gate`, `super::etcd_gate`) on the fake world
//! (`super::fake_holds`): readings scripted over a virtual clock, each
//! test in milliseconds where tests/cli held Rook-Ceph and HA fleets for
//! minutes. The readings themselves are parsed from what Ceph and etcdctl
//! print in `crate::checks`' own tests.

use std::time::Duration;

use futures_util::FutureExt;

use super::fake_holds::FakeHolds;
use super::storage_gate::{Spared, recovery, spare_batch, spare_upgrade};
use super::{Interrupted, Rerun, etcd_gate};
use crate::checks::ceph::{CephCheck, CephClusterStatus, Health, PgStates, Reading};
use crate::checks::{EtcdMembers, parse_etcd_members};
use crate::pacing::CephGate;

const S: fn(u64) -> Duration = Duration::from_secs;

/// Runs a gate to its end on the fake (it never waits).
fn run<T>(f: impl Future<Output = T>) -> T {
    f.now_or_never().expect("the fake world never waits")
}

fn gate(timeout: u64) -> CephGate {
    CephGate {
        timeout: S(timeout),
        recovery_timeout: S(timeout),
        ..CephGate::default()
    }
}

fn health(status: &str, codes: &[(&str, &str)]) -> Health {
    Health {
        status: status.into(),
        checks: codes
            .iter()
            .map(|(code, message)| CephCheck {
                code: code.to_string(),
                // The benign warning stays a warning under any status.
                severity: match *code == BENIGN.0 {
                    true => "HEALTH_WARN".into(),
                    false => status.into(),
                },
                message: message.to_string(),
            })
            .collect(),
    }
}

const BENIGN: (&str, &str) = (
    "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED",
    "mons are allowing insecure global_id reclaim",
);

/// One CephCluster read through its toolbox: `health`, 32 PGs in `pgs`.
fn toolbox(health: Health, pgs: &[(&str, u64)]) -> Option<Vec<(String, Reading)>> {
    let pgs = PgStates {
        by_state: pgs.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
    };
    let reading = Reading::Toolbox {
        health,
        pgs,
        stop: None,
    };
    Some(vec![("rook-ceph/rook-ceph".into(), reading)])
}

fn benign() -> Option<Vec<(String, Reading)>> {
    toolbox(health("HEALTH_WARN", &[BENIGN]), &[("active+clean", 32)])
}

/// One CephCluster read from its `.status.ceph` (no toolbox), checked at
/// `checked`, the cluster's clock at `now`.
fn status(health: Option<Health>, checked: i64, now: i64) -> Option<Vec<(String, Reading)>> {
    let status = CephClusterStatus {
        name: "rook-ceph/rook-ceph".into(),
        namespace: "rook-ceph".into(),
        health,
        last_checked: Some(checked),
        last_checked_text: format!("@{checked}"),
    };
    Some(vec![(
        "rook-ceph/rook-ceph".into(),
        Reading::Status { status, now },
    )])
}

#[test]
fn health_err_at_the_start_holds_the_control_planes_upgrade_until_it_clears() {
    let osd_full = toolbox(
        health("HEALTH_ERR", &[BENIGN, ("OSD_FULL", "1 full osd(s)")]),
        &[("active+clean", 32)],
    );
    let mut w = FakeHolds {
        ceph: vec![(0, osd_full), (30, benign())],
        ..FakeHolds::default()
    };
    run(spare_upgrade(&mut w, &gate(1800), Rerun::Apply, "cp-1")).unwrap();
    assert_eq!(w.t, S(30));
    assert_eq!(w.said.len(), 2, "{:#?}", w.said);
    for part in [
        "  Ceph holds cp-1's control-plane upgrade (held 0s so far, waiting up to 30m): ",
        "rook-ceph/rook-ceph: OSD_FULL (1 full osd(s): every HEALTH_ERR holds)",
    ] {
        assert!(w.said[0].contains(part), "{part:?} in {}", w.said[0]);
    }
    // The benign warning never held, or was even named.
    assert!(!w.said[0].contains("AUTH_INSECURE"), "{}", w.said[0]);
    assert_eq!(
        w.said[1],
        "  Ceph released cp-1's control-plane upgrade after 30s"
    );
    assert_eq!(w.kinds(), ["ceph-hold", "ceph-hold-released"]);
    assert!(w.event("ceph-hold").contains("OSD_FULL"));
}

#[test]
fn past_the_ceph_timeout_the_run_stops_naming_ceph_with_nothing_changed() {
    let damaged = toolbox(
        health(
            "HEALTH_ERR",
            &[("PG_DAMAGED", "Possible data damage: 1 pg inconsistent")],
        ),
        &[("active+clean", 32)],
    );
    let mut w = FakeHolds {
        ceph: vec![(0, damaged)],
        ..FakeHolds::default()
    };
    let e = run(spare_upgrade(&mut w, &gate(12), Rerun::Apply, "cp-1")).unwrap_err();
    let text = format!("{e:#}");
    for part in [
        "not upgrading cp-1's control plane: Ceph still holds after 12s",
        "PG_DAMAGED (Possible data damage: 1 pg inconsistent: every HEALTH_ERR holds)",
        "Nothing was changed (nothing was upgraded or drained)",
        "--ceph-timeout waits longer",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
    assert!(w.t <= S(12), "never waits past the timeout: {:?}", w.t);
    assert_eq!(w.said.len(), 1, "said once while it held: {:#?}", w.said);
    assert_eq!(w.kinds(), ["ceph-hold", "ceph-hold-timeout"]);
}

#[test]
fn a_benign_warning_spares_the_node_at_once_and_no_cephcluster_is_no_ceph() {
    let mut w = FakeHolds {
        ceph: vec![(0, benign())],
        ..FakeHolds::default()
    };
    let spared = run(spare_batch(
        &mut w,
        &gate(60),
        Rerun::Apply,
        &["w-1".into()],
    ));
    assert_eq!(spared.unwrap(), Spared::Clear);
    assert!(w.said.is_empty() && w.journaled.is_empty());
    // ok-to-stop is asked about the batch's OSDs.
    assert_eq!(w.reads, [(0, "ceph w-1".to_string())]);

    let mut w = FakeHolds {
        ceph: vec![(0, None)],
        ..FakeHolds::default()
    };
    let spared = run(spare_batch(
        &mut w,
        &gate(60),
        Rerun::Apply,
        &["w-1".into()],
    ));
    assert_eq!(spared.unwrap(), Spared::NoCeph);
    assert!(w.said.is_empty());
    // And no recovery to wait for: the clock says there is no CephCluster.
    run(recovery(&mut w, &gate(60), Rerun::Apply, &["w-1".into()])).unwrap();
    assert_eq!(w.reads.last().unwrap().1, "ceph clock");
}

#[test]
fn a_stop_ends_cephs_hold_at_once() {
    let mut w = FakeHolds {
        ceph: vec![(0, toolbox(health("HEALTH_ERR", &[]), &[]))],
        stop_at: Some(S(7)),
        ..FakeHolds::default()
    };
    let e = run(spare_upgrade(&mut w, &gate(1800), Rerun::Apply, "cp-1")).unwrap_err();
    assert!(e.is::<Interrupted>(), "{e:#}");
    assert_eq!(w.t, S(7));
}

#[test]
fn each_node_waits_for_the_previous_ones_pgs_to_recover() {
    let recovering = toolbox(
        health("HEALTH_WARN", &[BENIGN]),
        &[("active+clean", 22), ("active+recovering+degraded", 10)],
    );
    let mut w = FakeHolds {
        ceph: vec![(0, recovering), (15, benign())],
        ceph_clock: Some(1_000),
        ..FakeHolds::default()
    };
    run(recovery(&mut w, &gate(1800), Rerun::Apply, &["w-1".into()])).unwrap();
    assert_eq!(w.t, S(15));
    assert!(
        w.said[0].starts_with("  Ceph holds the node after w-1 (held 0s so far")
            && w.said[0].contains("active+recovering+degraded")
            && w.said[0].ends_with("released when every placement group is active+clean"),
        "{:#?}",
        w.said
    );
    assert_eq!(w.kinds(), ["ceph-recovery", "ceph-recovery-released"]);
    assert!(w.event("ceph-recovery").contains("after w-1"));
    // No ok-to-stop after a return: nothing is about to stop.
    assert!(
        w.reads.iter().skip(1).all(|(_, r)| r == "ceph "),
        "{:?}",
        w.reads
    );
}

#[test]
fn without_the_toolbox_a_status_checked_before_the_return_does_not_count() {
    // The operator refreshes `.status.ceph` every minute: the one checked
    // before the node returned (at 990, the wait began at 1000) may
    // predate the reboot, and holds until a newer one says all is well.
    let ok = Some(health("HEALTH_WARN", &[BENIGN]));
    let degraded = Some(health(
        "HEALTH_WARN",
        &[("PG_DEGRADED", "Degraded data redundancy")],
    ));
    let mut w = FakeHolds {
        ceph: vec![
            (0, status(ok.clone(), 990, 1_000)),
            (5, status(degraded, 1_004, 1_005)),
            (60, status(ok, 1_060, 1_060)),
        ],
        ceph_clock: Some(1_000),
        ..FakeHolds::default()
    };
    run(recovery(&mut w, &gate(1800), Rerun::Apply, &["w-1".into()])).unwrap();
    assert_eq!(w.t, S(60));
    assert!(
        w.said[0].contains("last checked before the node returned"),
        "{:#?}",
        w.said
    );
    assert!(w.said[1].contains("PG_DEGRADED"), "{:#?}", w.said);
}

#[test]
fn a_ceph_whose_health_rook_never_reported_holds_and_stops_naming_it() {
    let mut w = FakeHolds {
        ceph: vec![(0, status(None, 0, 1_000))],
        ..FakeHolds::default()
    };
    let e = run(spare_upgrade(&mut w, &gate(8), Rerun::Apply, "cp-1")).unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("not upgrading cp-1's control plane: Ceph still holds after 8s")
            && text.contains(
                "rook-ceph/rook-ceph has no .status.ceph: Rook has not reported Ceph's health"
            ),
        "{text}"
    );
    // Recovery that never comes stops before the next node, too.
    let mut w = FakeHolds {
        ceph: vec![(0, status(None, 0, 1_000))],
        ceph_clock: Some(1_000),
        ..FakeHolds::default()
    };
    let e = run(recovery(&mut w, &gate(8), Rerun::Apply, &["w-1".into()])).unwrap_err();
    assert!(
        format!("{e:#}")
            .contains("w-1 returned and is uncordoned, but Ceph has not recovered within 8s"),
        "{e:#}"
    );
}

const MEMBERS: &str = r#"{"members":[{"ID":1,"name":"cp-1","clientURLs":["https://10.0.0.11:2379"]},{"ID":2,"name":"cp-2","clientURLs":["https://10.0.0.12:2379"]},{"ID":3,"name":"cp-3","clientURLs":["https://10.0.0.13:2379"]}]}"#;

fn member(n: u64, applied: u64) -> String {
    format!(
        r#"{{"Endpoint":"https://10.0.0.1{n}:2379","Status":{{"header":{{"member_id":{n}}},"leader":2,"raftIndex":900,"raftTerm":2,"raftAppliedIndex":{applied}}}}}"#
    )
}

/// The members as etcd-cp-2 sees them: cp-1 not answering, or at raft
/// index `cp1` (the leader, cp-2, at 900).
fn etcd(cp1: Option<u64>) -> Result<EtcdMembers, String> {
    let (statuses, stderr) = match cp1 {
        Some(i) => (
            format!("[{},{},{}]", member(1, i), member(2, 900), member(3, 900)),
            "",
        ),
        None => (
            format!("[{},{}]", member(2, 900), member(3, 900)),
            "Failed to get the status of endpoint https://10.0.0.11:2379 (context deadline exceeded)\n",
        ),
    };
    Ok(parse_etcd_members(MEMBERS, &statuses, stderr).expect("etcdctl's output"))
}

#[test]
fn after_its_reboot_a_control_planes_member_is_waited_for_until_it_caught_up() {
    let mut w = FakeHolds {
        etcd: vec![
            (0, etcd(None)),
            (46, etcd(Some(100))),
            (48, etcd(Some(900))),
        ],
        ..FakeHolds::default()
    };
    run(etcd_gate::wait_caught_up(
        &mut w,
        "cp-1",
        "cp-2",
        S(600),
        Rerun::Apply,
    ))
    .unwrap();
    assert_eq!(w.t, S(48));
    assert_eq!(
        w.kinds(),
        ["etcd-catching-up", "etcd-catching-up", "etcd-caught-up"]
    );
    assert!(
        w.event("etcd-catching-up")
            .contains("etcd member cp-1 does not answer")
    );
    assert!(w.journaled[1].3.contains("800 behind the leader cp-2"));
    assert_eq!(
        w.journaled[2].3,
        "healthy and caught up with the leader after 48s"
    );
    assert!(
        w.journaled
            .iter()
            .all(|(_, _, n, _)| n.as_deref() == Some("cp-1"))
    );
    assert!(
        w.reads.iter().all(|(_, r)| r == "etcd cp-2"),
        "read from a peer"
    );

    // A member that never catches up stops the run, the node cordoned.
    let mut w = FakeHolds {
        etcd: vec![(0, etcd(None))],
        ..FakeHolds::default()
    };
    let e = run(etcd_gate::wait_caught_up(
        &mut w,
        "cp-1",
        "cp-2",
        S(30),
        Rerun::Apply,
    ))
    .unwrap_err();
    assert!(
        format!("{e:#}")
            .contains("cp-1: its etcd member did not catch up with the leader after its reboot"),
        "{e:#}"
    );
    assert!(w.t <= S(30));
}

#[test]
fn etcd_holds_a_control_planes_drain_while_another_member_does_not_answer() {
    let cps = ["cp-3".to_string()];
    let mut w = FakeHolds {
        etcd: vec![(0, etcd(None)), (10, etcd(Some(900)))],
        ..FakeHolds::default()
    };
    let held = run(etcd_gate::spare(
        &mut w,
        &cps,
        "cp-1",
        false,
        S(600),
        Rerun::Apply,
    ));
    assert!(held.unwrap(), "it held, then released");
    assert_eq!(w.t, S(10));
    assert!(w.said[0].starts_with("  etcd gate holds cp-3: etcd member cp-1 does not answer"));
    assert_eq!(w.said[1], "  etcd gate: etcd can spare cp-3 now (held 10s)");
    assert_eq!(w.kinds(), ["etcd-gate", "etcd-gate-released"]);

    // Unreadable holds; past the timeout the drain is refused.
    let mut w = FakeHolds {
        etcd: vec![(
            0,
            Err("etcdctl member list in etcd-cp-1 failed: EOF".into()),
        )],
        ..FakeHolds::default()
    };
    let e = run(etcd_gate::spare(
        &mut w,
        &cps,
        "cp-1",
        false,
        S(20),
        Rerun::Apply,
    ))
    .unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains(
            "not taking cp-3 down: the etcd gate still holds after 20s: etcd could not be read"
        ),
        "{text}"
    );
}

//! `apply --on-failure rollback` on a cluster of one control plane whose
//! new kubelet crash-loops: its API server went down with it, so the
//! rollback runs offline (no gates, no drain), and ends with the control
//! plane on its previous kubelet and the API answering.

use crate::support;

#[test]
fn a_lone_control_plane_whose_new_kubelet_crash_loops_is_rolled_back_offline() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kubelet_restart(1.0)
            .faults(|f| {
                f.kubelet_crash = [("cp-1".to_string(), "v1.35".to_string())].into();
            }),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let w1_before = fleet.boot("w-1").unwrap().boot_id;

    let run = crate::on_failure::apply_rolling_back(&fleet);
    let all = format!("{}\n{}", run.stdout, run.stderr);
    support::assert_has(
        &all,
        &[
            "apply stopped: cp-1: its new kubelet is crash-looping",
            "NO DRAIN POSSIBLE",
            "rolled back to v1.34.2",
        ],
    );
    assert!(!all.contains("ROLLBACK FAILED"), "{all}");

    let now = fleetsim::state::now();
    let c = fleet.cluster().unwrap();
    assert!(c.api_up(now), "the API answers again");
    assert_eq!(c.nodes["cp-1"].kubelet_version, "v1.34.2");
    assert!(
        c.node_ready("cp-1", now) && !c.nodes["cp-1"].unschedulable,
        "cp-1 is Ready and schedulable"
    );
    assert_eq!(fleet.boot("cp-1").unwrap().kubernetes, "v1.34.2");
    // The worker was never taken down.
    assert_eq!(fleet.boot("w-1").unwrap().boot_id, w1_before);
    let records = support::journal_records(&fleet);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "rollback-offline" && r["node"] == "cp-1"),
        "the journal records the offline rollback, without a drain"
    );
}

/// `fleetctl rollback` on the same fleet after `apply --on-failure stop`
/// left the lone control plane on a crash-looping new kubelet (so the API
/// is down): a worker is refused, clearly and untouched; the control plane
/// is rolled back offline with `--yes`, back on its previous kubelet with
/// the API answering, and the journal says there was no drain.
#[test]
fn rollback_of_a_lone_control_plane_whose_api_is_down_runs_offline_and_a_worker_is_refused() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kubelet_restart(1.0)
            .faults(|f| {
                f.kubelet_crash = [("cp-1".to_string(), "v1.35".to_string())].into();
            }),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let w1_before = fleet.boot("w-1").unwrap().boot_id;
    support::apply(&fleet, &["--yes", "--node-timeout", "20s"]).expect_code(1);
    assert!(
        !fleet.cluster().unwrap().api_up(fleetsim::state::now()),
        "the API went down with cp-1's kubelet"
    );

    let worker = support::run(&fleet.inventory(), &["rollback", "w-1", "--yes"]).expect_code(2);
    support::assert_has(
        &worker.stderr,
        &[
            "not rolling back w-1: the API server answers through no control plane",
            "A worker is rolled back only through the API",
            "Nothing was changed",
        ],
    );
    assert_eq!(fleet.boot("w-1").unwrap().boot_id, w1_before);

    let run = support::run(&fleet.inventory(), &["rollback", "cp-1", "--yes"]).expect_code(0);
    let all = format!("{}\n{}", run.stdout, run.stderr);
    support::assert_has(
        &all,
        &[
            "cp-1 can only be rolled back OFFLINE",
            "NO DRAIN POSSIBLE",
            "take the lock (fleetctl's or Kured's)",
            "cp-1 rolled back offline to v1.34.2",
        ],
    );
    let now = fleetsim::state::now();
    let c = fleet.cluster().unwrap();
    assert!(c.api_up(now), "the API answers again");
    assert_eq!(c.nodes["cp-1"].kubelet_version, "v1.34.2");
    assert!(
        c.node_ready("cp-1", now) && !c.nodes["cp-1"].unschedulable,
        "cp-1 is Ready and schedulable"
    );
    assert_eq!(fleet.boot("cp-1").unwrap().kubernetes, "v1.34.2");
    assert_eq!(fleet.boot("w-1").unwrap().boot_id, w1_before);
    let records = support::journal_records(&fleet);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "rollback-offline" && r["node"] == "cp-1"),
        "the journal records the offline rollback, without a drain"
    );
}

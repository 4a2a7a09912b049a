//! `apply --on-failure rollback` on a cluster of one control plane whose
//! new kubelet crash-loops: its API server went down with it, so the
//! rollback runs offline (no gates, no drain), and ends with the control
//! plane on its previous kubelet and the API answering. The one test of the
//! offline rollback on real-OS nodes: `fleetctl rollback CONTROL_PLANE`
//! runs the same tasks and the same offline roll; its refusals (a worker,
//! two nodes) and its warning are proven on pure code
//! (`commands::rollback::without_api`, docs/rules-on-the-fake.md).

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

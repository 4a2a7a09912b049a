//! `apply --on-failure rollback`, once on real-OS nodes: a worker whose new
//! kubelet really crash-loops (systemd restarting it) is rolled back to the
//! image it kept through the real sysext switch and reboot, Ready and
//! schedulable again, and apply stops naming it and why; the other nodes
//! are not touched by it. The rules around it (two crash loops of a batch,
//! `--on-failure stop`, a kubelet that recovers by itself, the planning of
//! the rerun) are tested on the fakes: docs/rules-on-the-fake.md.

use crate::support::{self, Fleet};

const CONFIG: &str = "/etc/sysupdate.kubernetes.d/kubernetes.conf";

fn fleetctl(fleet: &Fleet, args: &[&str]) -> support::Run {
    support::run(&fleet.inventory(), args)
}

/// `apply --yes --on-failure rollback` with a node timeout far above a
/// crash loop's few seconds (a rollback then comes from the loop seen, not
/// from a wait run out), expected to stop (exit 1).
pub fn apply_rolling_back(fleet: &Fleet) -> support::Run {
    support::apply(
        fleet,
        &[
            "--yes",
            "--on-failure",
            "rollback",
            "--node-timeout",
            "120s",
        ],
    )
    .expect_code(1)
}

#[test]
fn a_worker_whose_new_kubelet_crash_loops_is_rolled_back_and_apply_stops_naming_it() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2")
            // systemd restarts the failed kubelet after 1 s, not 10: the
            // crash loop shows sooner, nothing else changes.
            .kubelet_restart(1.0)
            .faults(|f| {
                f.kubelet_crash = [("w-1".to_string(), "v1.35".to_string())].into();
            }),
    );
    fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    let dry = support::apply(&fleet, &["--dry-run", "--on-failure", "rollback"]).expect_code(0);
    assert!(
        dry.stdout
            .contains("(on failure: kubelet restarted 3 times at v1.35."),
        "the dry run says what a failure leads to:\n{}",
        dry.stdout
    );
    let w2_before = fleet.boot("w-2").unwrap().boot_id;

    // A node timeout far above the crash loop's few seconds: the rollback
    // comes from the loop seen, not from a wait run out.
    let run = apply_rolling_back(&fleet);
    support::assert_has(
        &run.stderr,
        &[
            "apply stopped: w-1: its new kubelet is crash-looping",
            "validate CRI v1 runtime API",
            "rolled back to v1.34.2",
            "Fix the cause, then run `fleetctl plan` and `fleetctl apply` again",
        ],
    );

    let c = fleet.cluster().unwrap();
    let w1 = &c.nodes["w-1"];
    assert_eq!(w1.kubelet_version, "v1.34.2", "w-1 runs its kept kubelet");
    assert!(
        c.node_ready("w-1", fleetsim::state::now()) && !w1.unschedulable,
        "w-1 is Ready and schedulable"
    );
    assert_eq!(fleet.boot("w-1").unwrap().kubernetes, "v1.34.2");
    let link = fleet
        .ssh_ok("w-1", "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap();
    assert!(link.contains("kubernetes-v1.34.2-"), "{link}");
    let config = fleet
        .ssh_ok("w-1", "root", &format!("cat {CONFIG}"))
        .unwrap();
    assert!(
        config.contains(&format!(
            "MatchPattern={}\n",
            support::pinned_pattern("v1.34")
        )),
        "w-1's sysupdate config is pinned back to v1.34:\n{config}"
    );
    // Only w-1: w-2 was never taken down, cp-1 keeps its hop.
    assert_eq!(fleet.boot("w-2").unwrap().boot_id, w2_before);
    assert_eq!(c.nodes["w-2"].kubelet_version, "v1.34.2");
    assert!(c.nodes["cp-1"].kubelet_version.starts_with("v1.35."));
    let rolled: Vec<String> = support::journal_records(&fleet)
        .iter()
        .filter(|r| r["kind"] == "rollback")
        .map(|r| r["node"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(rolled, ["w-1"], "the journal records the one rollback");
}

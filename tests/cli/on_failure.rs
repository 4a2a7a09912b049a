//! `apply --on-failure rollback`: a worker whose new kubelet crash-loops is
//! rolled back to the image it kept, Ready and schedulable again, and apply
//! stops naming it and why; the other nodes are not touched by it, and once
//! the fault is gone a new plan and apply finish the hop. Two nodes of one
//! batch are both rolled back, one at a time; and without `--on-failure
//! rollback` the node is left as it is, cordoned, for the operator. A new
//! kubelet that fails its first starts and then runs is not rolled back.

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

    // The fault fixed, a new plan and apply finish the hop.
    fleet.faults(|f| f.kubelet_crash.clear()).unwrap();
    fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    support::apply(&fleet, &["--yes", "--on-failure", "rollback"]).expect_code(0);
    let c = fleet.cluster().unwrap();
    for n in ["cp-1", "w-1", "w-2"] {
        assert!(
            c.nodes[n].kubelet_version.starts_with("v1.35."),
            "{n}: {}",
            c.nodes[n].kubelet_version
        );
        assert!(!c.nodes[n].unschedulable, "{n} is schedulable");
    }
}

#[test]
fn a_new_kubelet_that_fails_its_first_starts_and_then_runs_is_not_rolled_back() {
    // The bakery's kubelet.service is not ordered after containerd: a
    // kubelet may fail its first starts after the reboot, then run. systemd's
    // NRestarts stays at 3 for the rest of the boot; the node recovered by
    // itself and must not be rolled back.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kubelet_restart(1.0)
            .faults(|f| {
                f.kubelet_slow_start = [(
                    "w-1".to_string(),
                    fleetsim::state::SlowStart {
                        version: "v1.35".into(),
                        starts: 3,
                    },
                )]
                .into();
            }),
    );
    fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    let run = support::apply(
        &fleet,
        &[
            "--yes",
            "--on-failure",
            "rollback",
            "--node-timeout",
            "120s",
        ],
    )
    .expect_code(0);
    assert!(!run.stderr.contains("crash-looping"), "{}", run.stderr);
    let c = fleet.cluster().unwrap();
    for n in ["cp-1", "w-1"] {
        assert!(
            c.nodes[n].kubelet_version.starts_with("v1.35."),
            "{n}: {}",
            c.nodes[n].kubelet_version
        );
        assert!(!c.nodes[n].unschedulable, "{n} is schedulable");
    }
    assert!(
        !support::journal_records(&fleet)
            .iter()
            .any(|r| r["kind"] == "rollback"),
        "nothing rolled back"
    );
    // The fault did fire: three failed starts of w-1's new kubelet, then one
    // that ran, and systemd counted the restarts.
    let starts: Vec<String> = fleet
        .events()
        .unwrap()
        .iter()
        .filter(|e| {
            e.node == "w-1"
                && e.argv.first().is_some_and(|a| a == "(kubelet)")
                && e.version
                    .as_deref()
                    .is_some_and(|v| v.starts_with("v1.35."))
        })
        .map(|e| e.result.split(':').next().unwrap_or("").to_string())
        .collect();
    assert_eq!(starts, ["failed", "failed", "failed", "ok"], "{starts:?}");
    let restarts = fleet
        .ssh_ok(
            "w-1",
            "root",
            "systemctl show -p NRestarts --value kubelet.service",
        )
        .unwrap();
    assert_eq!(restarts.trim(), "3");
}

#[test]
fn two_workers_of_one_batch_that_crash_loop_are_both_rolled_back_one_at_a_time() {
    // Two workers down at once (`--max-unavailable 2`), and both new
    // kubelets crash-loop: each is rolled back, one after the other, and
    // the batch after them (w-3) is never started.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(3)
            .kubernetes("v1.34.2")
            .kubelet_restart(1.0)
            .faults(|f| {
                f.kubelet_crash = [
                    ("w-1".to_string(), "v1.35".to_string()),
                    ("w-2".to_string(), "v1.35".to_string()),
                ]
                .into();
            }),
    );
    fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    let w3_before = fleet.boot("w-3").unwrap().boot_id;
    let run = support::apply(
        &fleet,
        &[
            "--yes",
            "--on-failure",
            "rollback",
            "--max-unavailable",
            "2",
            "--node-timeout",
            "120s",
        ],
    )
    .expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            "w-1: its new kubelet is crash-looping",
            "w-2: its new kubelet is crash-looping",
        ],
    );
    assert_eq!(
        run.stderr.matches("rolled back to v1.34.2").count(),
        2,
        "each of the two is rolled back:\n{}",
        run.stderr
    );
    assert!(!run.stderr.contains("ROLLBACK FAILED"), "{}", run.stderr);
    let c = fleet.cluster().unwrap();
    for n in ["w-1", "w-2"] {
        assert_eq!(
            c.nodes[n].kubelet_version, "v1.34.2",
            "{n} runs its kept kubelet"
        );
        assert!(
            c.node_ready(n, fleetsim::state::now()) && !c.nodes[n].unschedulable,
            "{n} is Ready and schedulable"
        );
        assert_eq!(fleet.boot(n).unwrap().kubernetes, "v1.34.2");
    }
    // The next batch was never begun: w-3 still runs its first boot.
    assert_eq!(fleet.boot("w-3").unwrap().boot_id, w3_before);
    assert!(!c.nodes["w-3"].unschedulable, "w-3 was never cordoned");
    let rolled: Vec<String> = support::journal_records(&fleet)
        .iter()
        .filter(|r| r["kind"] == "rollback")
        .map(|r| r["node"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(rolled, ["w-1", "w-2"], "one rollback each, in turn");
    // One at a time: w-2's rollback reboot began after w-1 was back.
    let events = fleet.events().unwrap();
    let reboot_of = |node: &str| {
        events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.node == node && e.argv.first().is_some_and(|a| a == "(boot)"))
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    let (w1, w2) = (reboot_of("w-1"), reboot_of("w-2"));
    // Each booted three times: first boot, onto v1.35, back onto v1.34.
    assert_eq!((w1.len(), w2.len()), (3, 3), "{w1:?} {w2:?}");
    let w2_down = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.node == "w-2" && e.argv.first().is_some_and(|a| a == "(shutdown)"))
        .map(|(i, _)| i)
        .nth(1)
        .expect("w-2 went down for its rollback");
    assert!(
        w1[2] < w2_down,
        "w-2 went down for its rollback only once w-1 was back"
    );
}

#[test]
fn without_on_failure_rollback_a_crash_looping_kubelet_stops_apply_and_is_left_as_it_is() {
    // `--on-failure stop`, the default: the same crash loop ends the wait
    // for Ready at the node timeout, and apply stops there, the node left
    // on its new kubelet and cordoned for the operator; nothing is rolled
    // back and no other node is touched. The error names the crash loop,
    // not the "not Ready" the wait last saw, and the way back.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2")
            .kubelet_restart(1.0)
            .faults(|f| {
                f.kubelet_crash = [("w-1".to_string(), "v1.35".to_string())].into();
            }),
    );
    fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    let w2_before = fleet.boot("w-2").unwrap().boot_id;
    let run = support::apply(&fleet, &["--yes", "--node-timeout", "20s"]).expect_code(1);
    support::assert_has(
        &run.stderr,
        &[
            "stopped on w-1 during: reboot into the staged images",
            "w-1 IS STILL CORDONED",
            "fleetctl: error: w-1: after the reboot kubelet.service keeps failing: systemd restarted it",
            "It is cordoned. Its journal:",
            // The crashing kubelet's own words, from the unit's journal.
            "validate CRI v1 runtime API",
            "Fix the kubelet (`journalctl -u kubelet -b` on w-1), then run `fleetctl apply` again; \
             or take w-1 back to the kubelet it ran before with `fleetctl rollback w-1`",
        ],
    );
    assert!(!run.stderr.contains("is not Ready"), "{}", run.stderr);
    assert!(!run.stderr.contains("rolled back"), "{}", run.stderr);
    let c = fleet.cluster().unwrap();
    // w-1 booted its new image and stays on it; its Node still shows the
    // old kubelet's version, as the API server does when the new kubelet
    // never got as far as posting its status.
    assert!(fleet.boot("w-1").unwrap().kubernetes.starts_with("v1.35."));
    let link = fleet
        .ssh_ok("w-1", "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap();
    assert!(link.contains("kubernetes-v1.35."), "{link}");
    assert_eq!(c.nodes["w-1"].kubelet_version, "v1.34.2");
    assert!(
        !c.node_ready("w-1", fleetsim::state::now()),
        "w-1 is not Ready"
    );
    assert!(c.nodes["w-1"].unschedulable, "w-1 stays cordoned");
    assert_eq!(
        fleet.boot("w-2").unwrap().boot_id,
        w2_before,
        "w-2 untouched"
    );
    assert!(
        !support::journal_records(&fleet)
            .iter()
            .any(|r| r["kind"] == "rollback"),
        "nothing rolled back"
    );
}

//! The API refusing a cordon. The real kubectl does not fail on it:
//! `kubectl drain` prints `error: unable to cordon node …` and goes on
//! evicting (kubectl/pkg/cmd/drain/drain.go, RunCordonOrUncordon prints
//! the error and returns nil), and can exit 0 with the node drained but
//! still schedulable. The sim's `deny_node_updates` fault is a validating
//! admission webhook that freezes a Node; fleetctl must not reboot it.

use super::support::{self, assert_has, is_reboot, schedulability};

#[test]
fn a_cordon_the_api_refuses_stops_before_the_reboot_even_when_kubectl_drain_exits_0() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    fleet
        .faults(|f| f.deny_node_updates = vec!["w-1".into()])
        .unwrap();

    let run = support::apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "w-1: kubectl drain could not cordon w-1",
            "admission webhook \"freeze.policy.example.com\" denied the request",
            "run `fleetctl apply` again once the API server accepts the cordon",
        ],
    );
    let events = fleet.events().unwrap();
    assert!(
        !events.iter().any(|e| e.node == "w-1" && is_reboot(e)),
        "w-1 was rebooted although it was never cordoned:\n{}",
        support::describe(&events)
    );
    // The drain is on the record as what it was: the cordon refused.
    let drain = events
        .iter()
        .rev()
        .find(|e| e.argv.iter().any(|a| a == "drain"))
        .expect("a drain ran");
    assert!(
        drain.result.contains("unable to cordon node \"w-1\""),
        "{}",
        drain.result
    );
    assert_eq!(schedulability(drain), None);
    let c = fleet.cluster().unwrap();
    assert!(!c.nodes["w-1"].unschedulable);

    // Once the policy lets the Node change, a rerun finishes.
    fleet.faults(|f| f.deny_node_updates.clear()).unwrap();
    support::apply(&fleet, &["--yes"]).expect_code(0);
    let events = fleet.events().unwrap();
    support::assert_invariants_hold(&events);
    assert!(events.iter().any(|e| e.node == "w-1" && is_reboot(e)));
}

#[test]
fn an_uncordon_the_api_refuses_stops_the_run_and_names_the_cordoned_node() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2")
            .boot_delay(2.0),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let mut running = support::Running::spawn(&fleet.inventory(), &["apply", "--yes"]);
    // w-1 is cordoned and drained by now; the policy freezes it while it
    // reboots, so its uncordon is refused.
    running.wait_for("w-1: rebooting");
    fleet
        .faults(|f| f.deny_node_updates = vec!["w-1".into()])
        .unwrap();
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "w-1 is still cordoned: the API server refused the uncordon",
            "admission webhook \"freeze.policy.example.com\" denied the request",
            "Uncordon it yourself (`kubectl uncordon w-1`)",
        ],
    );
    let events = fleet.events().unwrap();
    let rebooted_w1 = events
        .iter()
        .filter(|e| e.node == "w-1" && is_reboot(e))
        .count();
    assert_eq!(rebooted_w1, 1, "{}", support::describe(&events));
    // Stopped at w-1: w-2 was not touched.
    assert!(
        !events.iter().any(|e| e.node == "w-2" && is_reboot(e)),
        "{}",
        support::describe(&events)
    );
    assert!(fleet.cluster().unwrap().nodes["w-1"].unschedulable);

    fleet.faults(|f| f.deny_node_updates.clear()).unwrap();
    support::apply(&fleet, &["--yes"]).expect_code(0);
    let c = fleet.cluster().unwrap();
    assert!(!c.nodes["w-1"].unschedulable && !c.nodes["w-2"].unschedulable);
    support::assert_invariants_hold(&fleet.events().unwrap());
}

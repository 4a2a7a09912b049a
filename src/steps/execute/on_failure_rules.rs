//! `--on-failure rollback` on the fake fleet (`super::fake_on_failure`):
//! the run's own `super::run_then_on_failure` and `super::after_failed_roll`
//! over the tasks `script::of_plan` builds for one hop of a 2 control
//! planes + 3 workers fleet, a worker left not up by its reboot.
//! Milliseconds each.

use futures_util::FutureExt;

use super::fake_on_failure::{FakeOnFailure, rollback};
use super::run_then_on_failure;
use crate::plan::Plan;
use crate::steps::context::OnFailure;
use crate::steps::script::tests::{inventory, plan, shape};
use crate::steps::script::{Task, of_plan};

fn tasks(plan: &Plan) -> Vec<Task> {
    of_plan(plan, &inventory(), shape("1", true, true))
}

/// The fake with w-1 not up after its reboot, its rollback to v1.34.2.
fn fake(plan: &Plan) -> FakeOnFailure<'_> {
    let mut fake = FakeOnFailure::new(plan, vec![rollback("w-1", "v1.35.3", "v1.34.2")]);
    fake.not_up = Some("w-1".into());
    fake
}

/// Runs the script on `fake` to its error.
fn fails(fake: &mut FakeOnFailure<'_>, tasks: &[Task]) -> String {
    let result = run_then_on_failure(fake, tasks)
        .now_or_never()
        .expect("nothing on the fake waits");
    format!("{:#}", result.expect_err("the run fails"))
}

/// The fleet's log from the upgrade's roll of w-1 on.
fn after_the_roll(fake: &FakeOnFailure<'_>) -> Vec<String> {
    let log = &fake.fleet.log;
    let at = log
        .iter()
        .position(|l| l == "roll w-1")
        .expect("w-1 rolled");
    log[at + 1..].to_vec()
}

#[test]
fn a_node_not_up_is_rolled_back_by_the_same_interpreter_then_apply_stops() {
    let plan = plan();
    let mut fake = fake(&plan);
    let error = fails(&mut fake, &tasks(&plan));
    assert!(
        error.starts_with(
            "apply stopped: w-1: it was not Ready on its new kubelet within 10m; rolled back to \
             v1.34.2. It runs its previous kubelet again"
        ),
        "{error}"
    );
    // Nothing more of the upgrade: the rollback's tasks, then the plan's
    // hops back and saved, and w-1 reported rolled back, not done.
    assert_eq!(
        after_the_roll(&fake),
        [
            "prepare-rollback w-1",
            "swap-hops 1",
            "kept-images w-1",
            "mark w-1",
            "pin w-1",
            "mark w-1",
            "stage w-1",
            "mark w-1",
            "roll w-1",
            "record w-1",
            "swap-hops 1",
            "save-plan",
            "rolled-back w-1",
        ]
    );
    assert_eq!(fake.plan.hops, plan.hops, "the plan's hops are back");
    assert!(
        fake.fleet.violations.is_empty(),
        "{:?}",
        fake.fleet.violations
    );
    assert!(
        fake.said.contains(
            &"journal rollback w-1: from v1.35.3 back to v1.34.2 (--on-failure rollback)".into()
        ),
        "{:?}",
        fake.said
    );
}

#[test]
fn a_rollback_refused_changes_nothing_more_and_says_why() {
    let plan = plan();
    let mut fake = fake(&plan);
    fake.rollbacks = Err("w-1 keeps no image of v1.34".into());
    let error = fails(&mut fake, &tasks(&plan));
    assert!(
        error.contains("--on-failure rollback did not roll it back: w-1 keeps no image of v1.34"),
        "{error}"
    );
    assert_eq!(after_the_roll(&fake), ["prepare-rollback w-1"]);
    let rollback: Vec<&String> = fake
        .said
        .iter()
        .filter(|s| s.contains("rollback"))
        .collect();
    assert_eq!(
        rollback,
        ["journal rollback-refused -: w-1 keeps no image of v1.34"]
    );
}

/// A failure outside a roll (a kubeadm step), a roll's that is not a node
/// not up (a drain), or `--on-failure stop`: nothing is rolled back,
/// nothing prepared.
#[test]
fn only_a_node_not_up_with_on_failure_rollback_is_rolled_back() {
    let plan = plan();
    let mut fake = fake(&plan);
    fake.fleet.fails = Some("kubeadm node w-1".into());
    let error = fails(&mut fake, &tasks(&plan));
    assert_eq!(
        error,
        "the phase stopped: kubeadm node w-1: failed (injected)"
    );
    assert!(!fake.fleet.log.iter().any(|l| l.starts_with("prepare-")));

    let mut fake = self::fake(&plan);
    fake.not_up = None;
    fake.fleet.fails = Some("roll w-2".into());
    let error = fails(&mut fake, &tasks(&plan));
    assert!(
        error.starts_with("apply stopped; --on-failure rollback rolled nothing back"),
        "{error}"
    );
    assert!(!fake.fleet.log.iter().any(|l| l.starts_with("prepare-")));

    let mut fake = self::fake(&plan);
    fake.on_failure = OnFailure::Stop;
    let error = fails(&mut fake, &tasks(&plan));
    assert!(
        error.contains("w-1: not Ready on its new kubelet (fake)"),
        "{error}"
    );
    assert!(!error.contains("rolled"), "{error}");
    assert!(after_the_roll(&fake).is_empty(), "{:?}", fake.fleet.log);
}

#[test]
fn a_rollback_that_fails_says_so_and_still_restores_and_saves_the_plan() {
    let plan = plan();
    let mut fake = fake(&plan);
    fake.fleet.fails = Some("kept-images w-1".into());
    let error = fails(&mut fake, &tasks(&plan));
    assert!(error.contains("BUT THE ROLLBACK FAILED"), "{error}");
    assert!(
        error.contains(
            "w-1: it was not Ready on its new kubelet within 10m; rolling back to v1.34.2"
        ),
        "{error}"
    );
    assert_eq!(
        after_the_roll(&fake),
        [
            "prepare-rollback w-1",
            "swap-hops 1",
            "kept-images w-1 FAILED",
            "swap-hops 1",
            "save-plan",
        ]
    );
    assert_eq!(fake.plan.hops, plan.hops);
    assert!(fake.rolled_back.is_empty());
}

/// The lone control plane's API down: its rollback's roll is the offline
/// one, and only the rollback's.
#[test]
fn a_rollback_without_the_api_rolls_offline_and_only_then() {
    let plan = plan();
    let mut fake = fake(&plan);
    fake.offline_api = true;
    fails(&mut fake, &tasks(&plan));
    let offline: Vec<&String> = fake
        .fleet
        .log
        .iter()
        .filter(|l| l.starts_with("offline roll"))
        .collect();
    assert_eq!(offline, ["offline roll w-1"]);
    let at = |what: &str| fake.fleet.log.iter().position(|l| l == what).unwrap();
    assert!(at("offline roll w-1") > at("prepare-rollback w-1"));
    assert!(!fake.offline, "offline after the rollback");
    assert!(
        fake.said
            .iter()
            .any(|s| s.starts_with("journal rollback-offline w-1:")),
        "{:?}",
        fake.said
    );
}

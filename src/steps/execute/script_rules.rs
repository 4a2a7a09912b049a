//! The rules of the whole script, on the fake fleet (`super::fake_script`):
//! the run's own loop and interpreter (`super::run_over`, `super::one`)
//! over the tasks `script::of_plan` builds for one hop of a 2 control
//! planes + 3 workers fleet. Milliseconds each.

use futures_util::FutureExt;

use super::fake_script::FakeScript;
use super::run_over;
use crate::plan::Plan;
use crate::steps::Interrupted;
use crate::steps::script::tests::{inventory, plan, shape};
use crate::steps::script::{Task, of_plan};

fn tasks(plan: &Plan) -> Vec<Task> {
    of_plan(plan, &inventory(), shape("1", true, true))
}

/// Runs the script on `fake`; which task failed, and why.
fn run(fake: &mut FakeScript<'_>, tasks: &[Task]) -> Result<(), (Option<usize>, anyhow::Error)> {
    run_over(fake, tasks)
        .now_or_never()
        .expect("nothing on the fake waits")
}

/// The log of the whole run, without faults.
fn whole(plan: &Plan) -> Vec<String> {
    let mut fake = FakeScript::new(plan, true);
    run(&mut fake, &tasks(plan)).expect("the run without faults");
    fake.log
}

/// Each node as a rerun finds it: whatever the plan fingerprints that was
/// changed was marked in
/// progress first (so the rerun is not refused as stale), nothing staged
/// before its kubeadm step, nothing rebooted that was not staged.
fn assert_resumable(fake: &FakeScript<'_>, case: &str) {
    assert!(fake.violations.is_empty(), "{case}: {:?}", fake.violations);
    for (name, n) in &fake.nodes {
        if n.staged || n.rolled {
            assert!(n.marked, "{case}: {name} changed but not marked: {n:?}");
        }
        if n.rolled {
            assert!(n.staged, "{case}: {name} rebooted with nothing staged");
        }
    }
}

#[test]
fn the_whole_script_runs_on_the_fake_keeping_every_rule() {
    let plan = plan();
    let mut fake = FakeScript::new(&plan, true);
    run(&mut fake, &tasks(&plan)).expect("the run");
    assert_resumable(&fake, "the whole run");
    for (name, n) in &fake.nodes {
        if name.starts_with("cp-") || name.starts_with("w-") {
            assert!(n.rolled && n.recorded, "{name} not through: {n:?}");
        }
    }
    let at = |what: &str| fake.log.iter().position(|l| l == what).unwrap();
    assert!(at("etcd-snapshot cp-1") < at("kubeadm apply cp-1"));
    assert!(at("kubeadm apply cp-1") < at("kubeadm node cp-2"));
    assert!(at("roll cp-2") < at("kubeadm node w-1"));
    assert!(at("stage w-3") < at("roll w-1"));
    assert!(at("roll w-3") < at("verify"));
    assert!(at("verify") < at("soak"));
}

#[test]
fn a_failed_kubeadm_step_stops_the_run_before_any_reboot_after_it() {
    let plan = plan();
    let tasks = tasks(&plan);
    let kubeadm: Vec<String> = whole(&plan)
        .into_iter()
        .filter(|l| l.starts_with("kubeadm "))
        .collect();
    assert_eq!(kubeadm.len(), 5, "{kubeadm:?}");
    for step in kubeadm {
        let mut fake = FakeScript::new(&plan, true);
        fake.fails = Some(step.clone());
        let (failed, e) = run(&mut fake, &tasks).expect_err(&step);
        assert!(failed.is_some(), "{step}: not a task's failure");
        let node = step.rsplit(' ').next().unwrap();
        assert!(format!("{e:#}").contains(node), "{step}: {e:#}");
        let at = fake.log.iter().position(|l| l.ends_with("FAILED")).unwrap();
        let after: Vec<&String> = fake.log[at..]
            .iter()
            .filter(|l| l.starts_with("roll ") || l.starts_with("stage ") && l.ends_with(node))
            .collect();
        assert!(after.is_empty(), "{step}: after the failure: {after:?}");
        assert!(!fake.nodes[node].staged, "{step}: {node} staged");
        assert_resumable(&fake, &step);
    }
}

/// A stop asked after any effect of the run (Ctrl-C, the lease lapsing):
/// the run stops at the next safe point, with `Interrupted`, having done
/// only a prefix of the whole run, and every node is left as a rerun can
/// resume it.
#[test]
fn a_stop_after_any_effect_of_the_script_leaves_a_safe_point() {
    let plan = plan();
    let tasks = tasks(&plan);
    let whole = whole(&plan);
    for k in 1..whole.len() {
        let case = format!("a stop after {k} ({})", whole[k - 1]);
        let mut fake = FakeScript::new(&plan, true);
        fake.stop_after = Some(k);
        let (_, e) = run(&mut fake, &tasks).expect_err(&case);
        assert!(e.downcast_ref::<Interrupted>().is_some(), "{case}: {e:#}");
        assert_eq!(fake.log[..], whole[..fake.log.len()], "{case}");
        assert_resumable(&fake, &case);
    }
}

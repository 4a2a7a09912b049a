//! Where the hold before the first change of a hop sits in the script:
//! Ceph's gate before a control plane's kubeadm step (in
//! `ScriptWorld::control_planes_ready`, `storage_gate::before_upgrade`) that
//! runs out of time stops the run before anything is changed. What the
//! gate decides is tested on its own fake (`crate::steps::gate_hold_tests`).

use futures_util::FutureExt;

use super::fake_script::FakeScript;
use super::run_over;
use crate::steps::script::of_plan;
use crate::steps::script::tests::{inventory, plan, shape};

#[test]
fn a_hold_before_the_first_control_planes_upgrade_that_times_out_changes_nothing() {
    let plan = plan();
    let tasks = of_plan(&plan, &inventory(), shape("1", true, true));
    let mut fake = FakeScript::new(&plan, true);
    fake.fails = Some("control-planes-ready cp-1".into());
    let (failed, e) = run_over(&mut fake, &tasks)
        .now_or_never()
        .expect("nothing on the fake waits")
        .unwrap_err();
    assert!(failed.is_some(), "{e:#}");
    let changed: Vec<&String> = fake
        .log
        .iter()
        .filter(|l| {
            ["mark ", "kubeadm ", "stage ", "roll ", "etcd-snapshot "]
                .iter()
                .any(|c| l.starts_with(c))
        })
        .collect();
    assert!(changed.is_empty(), "changed: {changed:?}\n{:#?}", fake.log);
    assert!(
        fake.nodes
            .values()
            .all(|n| !n.marked && !n.staged && !n.rolled)
    );
    assert_eq!(fake.violations, Vec::<String>::new());
}

//! The hub's faults on the script's fake (`super::fake_script`), beside
//! `super::script_rules`: what tests/cli/apply_faults.rs proved of the hub
//! on real-OS fleets (docs/rules-on-the-fake.md). Every node downloads the
//! hop's image first, at once; from then on the hop needs no hub.

use futures_util::FutureExt;

use super::fake_script::FakeScript;
use super::run_over;
use crate::plan::Plan;
use crate::steps::script::tests::{inventory, plan, shape};
use crate::steps::script::{Task, of_plan};

fn tasks(plan: &Plan) -> Vec<Task> {
    of_plan(plan, &inventory(), shape("1", true, true))
}

fn run(fake: &mut FakeScript<'_>, tasks: &[Task]) -> anyhow::Result<()> {
    run_over(fake, tasks)
        .now_or_never()
        .expect("nothing on the fake waits")
        .map_err(|(_, e)| e)
}

/// The whole run's log, without faults.
fn whole(plan: &Plan) -> Vec<String> {
    let mut fake = FakeScript::new(plan, true);
    run(&mut fake, &tasks(plan)).expect("the run without faults");
    fake.log
}

/// What changes a node or the cluster (after which a hub outage could
/// leave the hop half done).
fn changes(line: &str) -> bool {
    ["kubeadm ", "pin ", "stage ", "roll ", "etcd-snapshot "]
        .iter()
        .any(|w| line.starts_with(w))
}

#[test]
fn every_download_of_the_hop_comes_before_anything_changes() {
    // So a hub down once the images are downloaded changes nothing.
    let log = whole(&plan());
    let downloads: Vec<usize> = (0..log.len())
        .filter(|i| log[*i].starts_with("download "))
        .collect();
    assert_eq!(downloads.len(), 4, "{log:#?}");
    let first_change = log.iter().position(|l| changes(l)).unwrap();
    assert!(
        downloads.iter().all(|d| *d < first_change),
        "a download after `{}`: {log:#?}",
        log[first_change]
    );
}

#[test]
fn a_hub_down_after_planning_stops_at_the_downloads_with_nothing_changed() {
    let plan = plan();
    let tasks = tasks(&plan);
    let downloads: Vec<String> = whole(&plan)
        .into_iter()
        .filter(|l| l.starts_with("download "))
        .collect();
    for failing in &downloads {
        let mut fake = FakeScript::new(&plan, true);
        fake.fails = Some(failing.clone());
        let e = run(&mut fake, &tasks).expect_err(failing);
        let node = failing.rsplit(' ').next().unwrap();
        assert!(format!("{e:#}").contains(node), "{failing}: {e:#}");
        // Every node tried its download (the phase runs each to its end).
        for d in &downloads {
            assert!(
                fake.log.iter().any(|l| l.starts_with(d.as_str())),
                "{failing}: {d} not tried: {:#?}",
                fake.log
            );
        }
        let changed: Vec<&String> = fake.log.iter().filter(|l| changes(l)).collect();
        assert!(changed.is_empty(), "{failing}: {changed:?}");
        assert!(fake.violations.is_empty(), "{:?}", fake.violations);
        assert!(fake.nodes.values().all(|n| !n.staged && !n.rolled));
    }
}

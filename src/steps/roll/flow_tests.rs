//! The rules of the roll, tested on the fake fleet (`super::fake_fleet`):
//! the roll's own order (`super::flow`) over an in-memory world, each test
//! in milliseconds instead of a real-OS fleet booted for minutes.

use futures_util::FutureExt;
use proptest::prelude::*;

use super::fake_fleet::FakeFleet;
use super::flow;
use crate::steps::Interrupted;
use crate::steps::on_failure::not_up;
use crate::version::Version;

const FROM: &str = "v1.34.2";
const TO: &str = "v1.35.1";

/// The control planes one at a time, then the workers in batches of
/// `max_unavailable`, as the script orders them (`crate::plan::batches`).
fn batches(fleet: &FakeFleet, max_unavailable: usize) -> Vec<Vec<String>> {
    let (cps, workers): (Vec<&String>, Vec<&String>) = fleet
        .nodes
        .keys()
        .partition(|n| fleet.nodes[*n].control_plane);
    let workers: Vec<(&str, Option<&str>)> = workers.iter().map(|n| (n.as_str(), None)).collect();
    cps.iter()
        .map(|n| vec![n.to_string()])
        .chain(
            crate::plan::batches(&workers, max_unavailable)
                .into_iter()
                .map(|b| b.iter().map(|n| n.to_string()).collect()),
        )
        .collect()
}

/// Rolls every batch in turn, stopping at the first failure, as the
/// script does.
fn run(fleet: &mut FakeFleet, batches: &[Vec<String>]) -> anyhow::Result<()> {
    let to: Version = TO.parse().unwrap();
    for batch in batches {
        flow::roll_batch(fleet, batch, to.minor(), Some(&to), false)
            .now_or_never()
            .expect("the fake fleet never waits")?;
    }
    Ok(())
}

fn fleet(control_planes: usize, workers: usize) -> FakeFleet {
    FakeFleet::new(control_planes, workers, FROM, TO)
}

/// Where in the log `step` first appears.
fn at(fleet: &FakeFleet, step: &str) -> usize {
    fleet
        .log
        .iter()
        .position(|l| l == step)
        .unwrap_or_else(|| panic!("`{step}` never happened: {:#?}", fleet.log))
}

fn done(fleet: &FakeFleet, node: &str) -> bool {
    let n = &fleet.nodes[node];
    n.up && n.ready && !n.cordoned && n.kubelet.to_string() == TO
}

fn untouched(fleet: &FakeFleet, node: &str) -> bool {
    let n = &fleet.nodes[node];
    n.up && n.ready && !n.cordoned && n.kubelet.to_string() == FROM && n.boot == 1
}

#[test]
fn one_node_down_at_a_time_with_max_unavailable_one() {
    let mut f = fleet(3, 4);
    let b = batches(&f, 1);
    run(&mut f, &b).unwrap();
    assert_eq!(f.violations, Vec::<String>::new());
    assert_eq!(f.peak_down, 1);
    assert!(f.nodes.keys().all(|n| done(&f, n)), "{:#?}", f.nodes);
}

#[test]
fn exactly_n_down_with_max_unavailable_n() {
    let mut f = fleet(1, 6);
    f.max_down = 3;
    let b = batches(&f, 3);
    run(&mut f, &b).unwrap();
    assert_eq!(f.violations, Vec::<String>::new());
    assert_eq!(f.peak_down, 3);
    assert!(f.nodes.keys().all(|n| done(&f, n)));
}

#[test]
fn drain_before_reboot_and_uncordon_only_once_ready() {
    let mut f = fleet(1, 2);
    f.kured_labels = true;
    let b = batches(&f, 1);
    run(&mut f, &b).unwrap();
    for n in ["cp-1", "w-1", "w-2"] {
        assert!(at(&f, &format!("gates {n}")) < at(&f, &format!("label BeforeDrain {n}")));
        assert!(at(&f, &format!("label BeforeDrain {n}")) < at(&f, &format!("drain {n}")));
        assert!(at(&f, &format!("drain {n}")) < at(&f, &format!("reboot {n}")));
        assert!(at(&f, &format!("reboot {n}")) < at(&f, &format!("ready {n}")));
        assert!(at(&f, &format!("ready {n}")) < at(&f, &format!("uncordon {n}")));
        assert!(at(&f, &format!("uncordon {n}")) < at(&f, &format!("label AfterUncordon {n}")));
    }
    // One node back before the next one's holds.
    assert!(at(&f, "uncordon w-1") < at(&f, "hold w-2"));
}

#[test]
fn a_failed_drain_uncordons_what_was_cordoned_and_reboots_nothing() {
    // kubectl gave up on w-1 (it uncordoned it itself), w-2's drain was
    // lost (still cordoned): the roll uncordons it, and nothing reboots.
    let mut f = fleet(1, 3);
    f.max_down = 2;
    f.faults.drain_fails.insert("w-1".into());
    f.faults.drain_lost.insert("w-2".into());
    let e = run(
        &mut f,
        &[vec!["w-1".into(), "w-2".into()], vec!["w-3".into()]],
    )
    .unwrap_err();
    let text = format!("{e:#}");
    assert!(text.contains("2 nodes of the batch failed"), "{text}");
    assert!(
        !f.log.iter().any(|l| l.starts_with("reboot")),
        "{:#?}",
        f.log
    );
    assert!(f.ledger.is_empty(), "{:?}", f.ledger);
    assert!(f.nodes.keys().all(|n| untouched(&f, n)), "{:#?}", f.nodes);
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn a_drained_node_left_cordoned_alone_is_uncordoned_again() {
    let mut f = fleet(1, 2);
    f.faults.drain_lost.insert("w-1".into());
    run(&mut f, &[vec!["w-1".into()]]).unwrap_err();
    assert!(at(&f, "drain w-1") < at(&f, "uncordon w-1"));
    assert!(untouched(&f, "w-1"));
}

#[test]
fn a_node_that_does_not_come_back_stops_the_run_and_leaves_the_rest() {
    let mut f = fleet(1, 3);
    f.faults.not_back.insert("w-1".into());
    let b = batches(&f, 1);
    let e = run(&mut f, &b).unwrap_err();
    assert!(format!("{e:#}").contains("w-1 did not come back"), "{e:#}");
    let w1 = &f.nodes["w-1"];
    assert!(!w1.up && w1.cordoned, "{w1:?}");
    assert!(f.ledger.contains("w-1"));
    assert!(done(&f, "cp-1"));
    assert!(untouched(&f, "w-2") && untouched(&f, "w-3"));
    assert!(!f.log.iter().any(|l| l.ends_with("w-2")), "{:#?}", f.log);
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn a_batch_member_not_back_stops_after_its_batch_mate_is_back() {
    let mut f = fleet(1, 6);
    f.max_down = 2;
    f.faults.not_back.insert("w-3".into());
    let b = batches(&f, 2);
    let e = run(&mut f, &b).unwrap_err();
    assert!(format!("{e:#}").contains("w-3 did not come back"), "{e:#}");
    // Its batch mate came back and was put back in service.
    assert!(done(&f, "w-4"));
    assert!(f.nodes["w-3"].cordoned && f.ledger.contains("w-3"));
    assert!(untouched(&f, "w-5") && untouched(&f, "w-6"));
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn a_crash_looping_kubelet_with_on_failure_stop_is_left_cordoned() {
    let mut f = fleet(1, 2);
    f.faults.crash_loop.insert("w-1".into());
    let b = batches(&f, 1);
    let e = run(&mut f, &b).unwrap_err();
    // `--on-failure` finds the node not up in the error (execute's
    // `after_failed_roll`); with `stop` it is left as it is.
    assert_eq!(not_up(&e).len(), 1, "{e:#}");
    let w1 = &f.nodes["w-1"];
    assert!(w1.up && !w1.ready && w1.cordoned, "{w1:?}");
    assert!(!f.log.contains(&"uncordon w-1".to_string()));
    assert!(untouched(&f, "w-2"));
}

#[test]
fn a_gate_that_says_no_stops_before_the_drain() {
    for etcd in [false, true] {
        let mut f = fleet(3, 1);
        match etcd {
            true => f.faults.etcd_unhealthy = true,
            false => f.faults.ceph_degraded = true,
        }
        let b = batches(&f, 1);
        let e = run(&mut f, &b).unwrap_err();
        assert!(format!("{e:#}").contains("not taking cp-1 down"), "{e:#}");
        assert_eq!(f.log, ["hold cp-1", "gates cp-1"]);
        assert!(f.ledger.is_empty());
        assert!(f.nodes.keys().all(|n| untouched(&f, n)));
    }
}

#[test]
fn a_lease_too_short_for_the_reboot_uncordons_and_reboots_nothing() {
    let mut f = fleet(1, 1);
    f.faults.lease_left = Some(f.drain_timeout + super::DRAIN_GRACE);
    let e = run(&mut f, &[vec!["w-1".into()]]).unwrap_err();
    assert!(
        format!("{e:#}").contains("uncordoned again; nothing was rebooted"),
        "{e:#}"
    );
    assert!(at(&f, "drain w-1") < at(&f, "uncordon w-1"));
    assert!(!f.log.iter().any(|l| l.starts_with("reboot")));
    assert!(untouched(&f, "w-1") && f.ledger.is_empty());
}

/// The steps of a whole run of this fleet without a stop: how many, and
/// which one is the last drain (counted from 1).
fn steps_of(control_planes: usize, workers: usize, max: usize, kured: bool) -> (usize, usize) {
    let mut f = fleet(control_planes, workers);
    (f.max_down, f.kured_labels) = (max, kured);
    let b = batches(&f, max);
    run(&mut f, &b).unwrap();
    let last_drain = f.log.iter().rposition(|l| l.starts_with("drain ")).unwrap();
    (f.steps(), last_drain + 1)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A stop asked (or the lease lapsing) after any step of any run stops
    /// at a safe point: the invariants held after every step, and each node
    /// is either untouched or done, none cordoned, the batches done a prefix.
    #[test]
    fn a_stop_after_any_step_stops_at_a_safe_point(
        cps in 1usize..4,
        workers in 0usize..6,
        max in 1usize..4,
        kured in any::<bool>(),
        lapse in any::<bool>(),
        at_step in 0.0f64..1.0,
    ) {
        let (total, last_drain) = steps_of(cps, workers, max, kured);
        let stop = 1 + (at_step * total as f64) as usize;
        prop_assert!(stop <= total);
        let mut f = fleet(cps, workers);
        (f.max_down, f.kured_labels) = (max, kured);
        match lapse {
            true => f.faults.lease_lapses_after = Some(stop),
            false => f.faults.stop_after = Some(stop),
        }
        let b = batches(&f, max);
        let result = run(&mut f, &b);
        prop_assert_eq!(&f.violations, &Vec::<String>::new());
        // A stop asked once the last batch is drained lets it reboot and
        // come back (its labels set); asked before, it stops the run.
        prop_assert_eq!(result.is_err(), stop <= last_drain, "{:?}", result);
        if let Err(e) = result {
            prop_assert!(
                e.chain().any(|c| c.is::<Interrupted>()) || lapse,
                "{:#}", e
            );
        }
        prop_assert!(f.ledger.is_empty(), "{:?}", f.ledger);
        let mut finished = true;
        for batch in &b {
            let all_done = batch.iter().all(|n| done(&f, n));
            prop_assert!(
                all_done || batch.iter().all(|n| untouched(&f, n)),
                "{:?} half done: {:#?}", batch, f.nodes
            );
            prop_assert!(finished || !all_done, "{:?} done after one that was not", batch);
            finished &= all_done;
        }
    }
}

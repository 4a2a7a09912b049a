//! Where the holds and gates sit in the roll's order (`super::flow`), on
//! the fake fleet (`super::fake_fleet`): Ceph's recovery after each batch
//! before the next one's holds, and a hold that refuses a node (the
//! maintenance window closing) stopping the run between nodes, the next
//! run finishing. What each hold and gate decides is tested on its own
//! fake (`crate::steps::hold_tests`, `crate::steps::gate_hold_tests`).

use futures_util::FutureExt;

use super::fake_fleet::FakeFleet;
use super::flow;
use crate::error::OutsideWindow;
use crate::version::Version;

const TO: &str = "v1.35.1";

fn roll(fleet: &mut FakeFleet, batches: &[&str]) -> anyhow::Result<()> {
    let to: Version = TO.parse().unwrap();
    for node in batches {
        flow::roll_batch(fleet, &[node.to_string()], to.minor(), Some(&to), false)
            .now_or_never()
            .expect("the fake fleet never waits")?;
    }
    Ok(())
}

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

#[test]
fn each_batch_waits_for_cephs_recovery_once_back_before_the_next_ones_holds() {
    let mut f = FakeFleet::new(1, 3, "v1.34.2", TO);
    roll(&mut f, &["cp-1", "w-1", "w-2", "w-3"]).unwrap();
    for (prev, next) in [("cp-1", "w-1"), ("w-1", "w-2"), ("w-2", "w-3")] {
        let back = f.log.iter().rposition(|l| *l == format!("uncordon {prev}"));
        assert!(back.unwrap() < at(&f, &format!("ceph-recovered {prev}")));
        assert!(at(&f, &format!("ceph-recovered {prev}")) < at(&f, &format!("hold {next}")));
    }
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn ceph_not_recovering_stops_the_run_before_the_next_node() {
    let mut f = FakeFleet::new(1, 2, "v1.34.2", TO);
    f.faults.ceph_not_recovered = true;
    let e = roll(&mut f, &["w-1", "w-2"]).unwrap_err();
    assert!(format!("{e:#}").contains("Ceph has not recovered"), "{e:#}");
    assert!(done(&f, "w-1"), "w-1 is back and uncordoned");
    assert!(!f.log.iter().any(|l| l.ends_with("w-2")), "{:#?}", f.log);
}

#[test]
fn a_window_closing_between_nodes_stops_before_the_next_ones_gates_and_the_rerun_finishes() {
    let mut f = FakeFleet::new(1, 2, "v1.34.2", TO);
    f.faults.hold_refuses.insert("w-1".into());
    let e = roll(&mut f, &["cp-1", "w-1", "w-2"]).unwrap_err();
    assert!(e.is::<OutsideWindow>(), "exits 75: {e:#}");
    assert!(done(&f, "cp-1"));
    let after = &f.log[at(&f, "hold w-1")..];
    assert_eq!(after, ["hold w-1"], "nothing after the refusal");
    assert!(f.ledger.is_empty() && !f.nodes["w-1"].cordoned);

    // The next run, inside a window, finishes what is left.
    f.faults.hold_refuses.clear();
    roll(&mut f, &["w-1", "w-2"]).unwrap();
    assert!(["cp-1", "w-1", "w-2"].iter().all(|n| done(&f, n)));
    assert_eq!(f.violations, Vec::<String>::new());
}

//! The roll's failure paths and batches on the fake fleet
//! (`super::fake_fleet`), beside `super::flow_tests`: what the cli tests of
//! tests/cli/{batches,on_failure,cordon,apply_faults}.rs proved on
//! real-OS fleets in minutes, here in milliseconds (docs/rules-on-the-fake.md).

use futures_util::FutureExt;

use super::fake_fleet::FakeFleet;
use super::flow;
use crate::steps::Rerun;
use crate::steps::on_failure::{Cause, not_up};
use crate::version::Version;

const FROM: &str = "v1.34.2";
const TO: &str = "v1.35.1";

fn names(batch: &[&str]) -> Vec<String> {
    batch.iter().map(|n| n.to_string()).collect()
}

/// Rolls each batch in turn, stopping at the first failure, as the script
/// does.
fn roll(fleet: &mut FakeFleet, batches: &[&[&str]]) -> anyhow::Result<()> {
    let to: Version = TO.parse().unwrap();
    for batch in batches {
        flow::roll_batch(fleet, &names(batch), to.minor(), Some(&to), false)
            .now_or_never()
            .expect("the fake fleet never waits")?;
    }
    Ok(())
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

/// Nothing in the log names `node`.
fn never_touched(fleet: &FakeFleet, node: &str) -> bool {
    !fleet
        .log
        .iter()
        .any(|l| l.split([' ', ',']).any(|w| w == node))
}

#[test]
fn workers_go_down_in_pairs_the_next_pair_once_both_are_back_and_the_control_plane_alone() {
    let mut f = FakeFleet::new(1, 6, FROM, TO);
    f.max_down = 2;
    let pairs: [&[&str]; 3] = [&["w-1", "w-2"], &["w-3", "w-4"], &["w-5", "w-6"]];
    roll(&mut f, &[&["cp-1"], pairs[0], pairs[1], pairs[2]]).unwrap();
    assert_eq!(f.violations, Vec::<String>::new());
    assert_eq!(f.peak_down, 2);
    assert!(f.nodes.keys().all(|n| done(&f, n)), "{:#?}", f.nodes);
    // The control plane alone: back in service before any worker drains.
    assert!(at(&f, "uncordon cp-1") < at(&f, "drain w-1"));
    for pair in pairs {
        let (a, b) = (pair[0], pair[1]);
        // Both of a pair down before either comes back.
        let downs = at(&f, &format!("reboot {a}")).max(at(&f, &format!("reboot {b}")));
        let back = at(&f, &format!("ready {a}")).min(at(&f, &format!("ready {b}")));
        assert!(downs < back, "{a} and {b} not down together: {:#?}", f.log);
    }
    for w in pairs.windows(2) {
        let done =
            at(&f, &format!("uncordon {}", w[0][0])).max(at(&f, &format!("uncordon {}", w[0][1])));
        let next = at(&f, &format!("drain {}", w[1][0])).min(at(&f, &format!("drain {}", w[1][1])));
        assert!(
            done < next,
            "{:?} drained before {:?} was back: {:#?}",
            w[1],
            w[0],
            f.log
        );
    }
}

#[test]
fn two_crash_loops_in_one_batch_are_both_named_for_on_failure_and_the_next_batch_waits() {
    // `--on-failure rollback` rolls back the nodes the error names
    // (`execute::after_failed_roll` reads them with `not_up`): both, and
    // only once the batch's roll has ended.
    let mut f = FakeFleet::new(1, 3, FROM, TO);
    f.max_down = 2;
    f.faults.crash_loop = ["w-1".to_string(), "w-2".to_string()].into();
    let e = roll(&mut f, &[&["cp-1"], &["w-1", "w-2"], &["w-3"]]).unwrap_err();
    let failed: Vec<(String, Cause)> = not_up(&e).into_iter().map(|n| (n.node, n.cause)).collect();
    assert_eq!(
        failed,
        [
            ("w-1".to_string(), Cause::CrashLoop { restarts: 5 }),
            ("w-2".to_string(), Cause::CrashLoop { restarts: 5 })
        ],
        "{e:#}"
    );
    // Both left cordoned on their new kubelet for the rollback (or the
    // operator), the ledger says so; the next batch never begun.
    for n in ["w-1", "w-2"] {
        let node = &f.nodes[n];
        assert!(node.up && !node.ready && node.cordoned, "{n}: {node:?}");
        assert!(f.ledger.contains(n));
    }
    assert!(
        untouched(&f, "w-3") && never_touched(&f, "w-3"),
        "{:#?}",
        f.log
    );
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn each_node_an_on_failure_rollback_takes_back_rolls_alone_in_turn() {
    // The rollback's tasks (`script::of_rollbacks`, run by the same loop
    // as apply): one roll per node, each its own batch, so two nodes of a
    // batch that both crash-looped go back one at a time.
    let plan = crate::steps::script::tests::plan();
    let mut rb = plan.clone();
    rb.hops = vec![plan.hops[0].clone(), plan.hops[0].clone()];
    for (hop, node) in rb.hops.iter_mut().zip(["w-1", "w-2"]) {
        for phase in &mut hop.phases {
            phase.steps.retain(|s| s.node == node);
        }
        hop.phases.retain(|p| !p.steps.is_empty());
    }
    let rolls: Vec<Vec<String>> = crate::steps::script::of_rollbacks(&rb)
        .into_iter()
        .filter_map(|t| match t {
            crate::steps::script::Task::Roll {
                nodes, rollback, ..
            } => {
                assert!(rollback, "a rollback's roll is marked so");
                Some(nodes)
            }
            _ => None,
        })
        .collect();
    assert_eq!(rolls, [names(&["w-1"]), names(&["w-2"])]);
}

#[test]
fn an_uncordon_the_api_refuses_after_the_reboot_stops_the_run_with_the_node_cordoned() {
    let mut f = FakeFleet::new(1, 2, FROM, TO);
    f.faults.uncordon_refused.insert("w-1".into());
    let e = roll(&mut f, &[&["cp-1"], &["w-1"], &["w-2"]]).unwrap_err();
    assert!(
        format!("{e:#}").contains("w-1 is still cordoned: the API server refused the uncordon"),
        "{e:#}"
    );
    // Back on its new kubelet and Ready, but cordoned, and the ledger
    // (the report's `IS STILL CORDONED`) knows it.
    let w1 = &f.nodes["w-1"];
    assert!(w1.up && w1.ready && w1.cordoned, "{w1:?}");
    assert_eq!(w1.kubelet.to_string(), TO);
    assert!(f.ledger.contains("w-1"), "{:?}", f.ledger);
    assert!(
        untouched(&f, "w-2") && never_touched(&f, "w-2"),
        "{:#?}",
        f.log
    );
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn the_refused_uncordon_is_read_from_kubectls_words_not_its_exit() {
    // kubectl's RunCordonOrUncordon prints the error and returns nil: the
    // uncordon exits 0 (kubectl/pkg/cmd/drain/drain.go).
    let stderr = "error: unable to uncordon node \"w-1\": admission webhook \
         \"freeze.policy.example.com\" denied the request: node w-1 is frozen\n";
    let e = super::after_reboot::refused_uncordon("w-1", stderr).unwrap_err();
    assert_eq!(
        e.to_string(),
        "w-1 is still cordoned: the API server refused the uncordon (error: unable to \
         uncordon node \"w-1\": admission webhook \"freeze.policy.example.com\" denied the \
         request: node w-1 is frozen). Uncordon it yourself (`kubectl uncordon w-1`) once the \
         cause is fixed"
    );
    super::after_reboot::refused_uncordon("w-1", "node/w-1 uncordoned\n").unwrap();
}

#[test]
fn a_node_of_a_later_batch_power_cycled_mid_run_stops_the_roll_at_its_gates() {
    // w-2, staged, loses power while w-1 rolls: it boots what it staged
    // and is not Ready yet when its own batch comes. The gates see it: no
    // drain, nothing more down; once it is Ready a rerun goes on.
    let mut f = FakeFleet::new(1, 3, FROM, TO);
    roll(&mut f, &[&["cp-1"], &["w-1"]]).unwrap();
    {
        let w2 = f.nodes.get_mut("w-2").unwrap();
        (w2.boot, w2.kubelet, w2.ready) = (2, TO.parse().unwrap(), false);
    }
    let e = roll(&mut f, &[&["w-2"], &["w-3"]]).unwrap_err();
    assert!(format!("{e:#}").contains("w-2 is not Ready"), "{e:#}");
    assert!(!f.log.contains(&"drain w-2".to_string()), "{:#?}", f.log);
    assert!(never_touched(&f, "w-3"), "{:#?}", f.log);
    assert!(f.ledger.is_empty());
    f.nodes.get_mut("w-2").unwrap().ready = true;
    roll(&mut f, &[&["w-2"], &["w-3"]]).unwrap();
    assert!(f.nodes.keys().all(|n| done(&f, n)), "{:#?}", f.nodes);
    assert_eq!(f.violations, Vec::<String>::new());
}

#[test]
fn a_crash_loop_is_named_for_what_it_is_with_the_way_back() {
    // `--on-failure stop`: the wait ran out on "not Ready", but the error
    // names the crash loop (`crash_loop::name_crash_loop` puts this in its
    // place), the kubelet's own words and what to do next.
    let journal = vec![
        "Dec 07 13:00:01 w-1 kubelet[812]: E1207 run.go:72] \"command failed\" err=\"failed to \
         validate CRI v1 runtime API\""
            .to_string(),
    ];
    let mut n = super::crash_loop::looping_not_up("w-1", "activating", 3, 4, journal);
    n.message = format!(
        "{}\n{}",
        n.message,
        super::after_reboot::after_crash_loop("w-1", Rerun::Apply, false)
    );
    assert_eq!(n.cause, Cause::CrashLoop { restarts: 3 });
    let text = n.to_string();
    for words in [
        "w-1: after the reboot kubelet.service keeps failing: systemd restarted it 3 times",
        "It is cordoned. Its journal:",
        "validate CRI v1 runtime API",
        "Fix the kubelet (`journalctl -u kubelet -b` on w-1), then run `fleetctl apply` again; \
         or take w-1 back to the kubelet it ran before with `fleetctl rollback w-1`",
    ] {
        assert!(text.contains(words), "no `{words}` in {text}");
    }
    assert!(!text.contains("not Ready"), "{text}");
    // A rollback's own roll offers no rollback of the rollback.
    let own = super::after_reboot::after_crash_loop("w-1", Rerun::Rollback, true);
    assert!(!own.contains("fleetctl rollback w-1"), "{own}");
}

//! `fleetctl apply` when things go wrong, where the real thing is the
//! subject (issue 5's failure bullets, in issue 8's kubeadm-first order): a
//! worker that never comes back (real dropped connections), a drain blocked
//! by a PodDisruptionBudget (the real `kubectl drain`), and Ctrl-C between
//! the kubeadm step and the reboot (a real signal, and the detached step's
//! record across a real reboot). Each must end with exit 1 and a message
//! that names the node and the next action, touch no node after the failing
//! one, leave the fleet consistent (nothing cordoned unless the message says
//! so, the lock released), and be finished by a plain `fleetctl apply --yes`
//! rerun from the saved plan that repeats nothing already done. The other
//! failure paths (kubeadm failing, the hub down, a stale plan, a second
//! Ctrl-C, a power cycle) are rules tested on the fakes:
//! docs/rules-on-the-fake.md.
//!
//! Everything is checked on the fleet itself (its event log and the API
//! server's state), not only on what fleetctl prints.

use std::path::PathBuf;

use fleetctl::plan::Plan;
use fleetctl::version::Version;
use fleetsim::state::{Cluster, Event};

use super::support::{
    self, Fleet, Run, Running, Scenario, assert_consistent, assert_has, assert_on_target,
};

const NODES: [&str; 3] = ["cp-1", "w-1", "w-2"];
const FROM: &str = "v1.34.2";
/// Where a node is held down on purpose: short, so the run fails quickly
/// (on real-OS nodes `support::node_timeout` makes it 30 s: every reboot of
/// the run must fit in it).
const HANG_TIMEOUT: &str = "8s";
/// Everywhere else: generous, so a machine busy with parallel fleets does
/// not turn a slow boot into a failure the test did not ask for.
const NODE_TIMEOUT: &str = "90s";

/// One control plane and two workers at v1.34.2, w-2 reached as `core`
/// (sudo), with the simulator's short default delays.
fn scenario() -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(2)
        .kubernetes(FROM)
        .with_node("w-2", |n| n.user = Some("core".into()))
}

fn plan_path(fleet: &Fleet) -> PathBuf {
    fleet.dir().join(".fleetctl/plan.yaml")
}

/// `fleetctl plan TARGET`, which must succeed; returns the saved plan.
fn plan(fleet: &Fleet, target: &str) -> Plan {
    support::run(&fleet.inventory(), &["plan", target]).expect_code(0);
    fleetctl::plan::load(&plan_path(fleet)).unwrap()
}

/// The patch each hop of the saved plan stages.
fn patches(plan: &Plan) -> Vec<Version> {
    plan.hops
        .iter()
        .map(|h| {
            h.version
                .clone()
                .expect("the hub was readable: every hop has its patch")
        })
        .collect()
}

/// `apply --yes [--node-timeout 90s] EXTRA` (EXTRA may set its own timeout).
fn apply_args(extra: &[&str]) -> Vec<String> {
    let mut args = vec!["apply", "--yes"];
    if !extra.contains(&"--node-timeout") {
        args.extend_from_slice(&["--node-timeout", NODE_TIMEOUT]);
    }
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

/// `fleetctl apply --yes` ([`apply_args`]) with its output read as it
/// comes, so a test can wait for a step to start and interrupt it.
fn spawn_apply(fleet: &Fleet, extra: &[&str]) -> Running {
    let args = apply_args(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Running::spawn(&fleet.inventory(), &args)
}

fn apply(fleet: &Fleet, extra: &[&str]) -> Run {
    spawn_apply(fleet, extra).finish()
}

/// The node an event acted on: kubectl's cordon/drain/uncordon act on the
/// node they name (they run on cp-1), everything else on the node it ran
/// on. The lock's configmap and `fleetsim ctl` act on no node.
fn subject(e: &Event) -> Option<&str> {
    // The supervisor, the lock, and systemd-run starting a detached step
    // (its command is recorded on its own when the unit runs it).
    if e.node == "(fleetsim)" || support::is_lock(e) || support::is_unit_start(e) {
        return None;
    }
    if e.argv.first().is_some_and(|a| a == "kubectl") {
        let at = e
            .argv
            .iter()
            .position(|a| matches!(a.as_str(), "cordon" | "drain" | "uncordon"))?;
        return e.argv.get(at + 1).map(String::as_str);
    }
    Some(&e.node)
}

/// What an event did, in a few words: `reboot`, `sysupdate`, `drain`,
/// `upgrade apply v1.35.3`, `upgrade node`, `(boot)`, …
fn what(e: &Event) -> String {
    // A real-OS node's reboot is recorded by the supervisor, not the tool.
    if support::is_reboot(e) {
        return "reboot".into();
    }
    let argv: Vec<&str> = e.argv.iter().map(String::as_str).collect();
    match argv.as_slice() {
        ["kubeadm", "upgrade", "apply", v, ..] => format!("upgrade apply {v}"),
        ["kubeadm", "upgrade", "node", ..] => "upgrade node".into(),
        ["systemd-sysupdate", ..] => "sysupdate".into(),
        ["kubectl", rest @ ..] => rest
            .iter()
            .find(|a| matches!(**a, "cordon" | "drain" | "uncordon"))
            .map_or_else(|| "kubectl".into(), |a| a.to_string()),
        [first, ..] => first.to_string(),
        [] => String::new(),
    }
}

/// The log for a failure message, in seconds from its first event.
fn show(events: &[Event]) -> String {
    let start = events.first().map_or(0.0, |e| e.t);
    events
        .iter()
        .map(|e| {
            format!(
                "{:8.3} {:10} {} → {}",
                e.t - start,
                e.node,
                e.argv.join(" "),
                e.result
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn events(fleet: &Fleet) -> Vec<Event> {
    fleet.events().unwrap()
}

/// How many of `events` did `action` to `node`.
fn count(events: &[Event], node: &str, action: &str) -> usize {
    events
        .iter()
        .filter(|e| subject(e) == Some(node) && what(e) == action)
        .count()
}

/// How many of `events` did `action` to `node` and succeeded.
fn count_ok(events: &[Event], node: &str, action: &str) -> usize {
    events
        .iter()
        .filter(|e| subject(e) == Some(node) && what(e) == action && e.result == "ok")
        .count()
}

/// Index of the last event matching `pred`.
fn last(events: &[Event], pred: impl Fn(&Event) -> bool) -> usize {
    events
        .iter()
        .rposition(pred)
        .unwrap_or_else(|| panic!("no such event in\n{}", show(events)))
}

/// Nothing after `events[from]` acted on any node other than `failing`.
fn untouched_after(events: &[Event], from: usize, failing: &str) {
    let strays: Vec<Event> = events[from + 1..]
        .iter()
        .filter(|e| subject(e).is_some_and(|n| n != failing))
        .cloned()
        .collect();
    assert!(
        strays.is_empty(),
        "after the failure on {failing}, other nodes were touched:\n{}\n--- whole log\n{}",
        show(&strays),
        show(events)
    );
}

/// Events after the first `n` (what a later run did).
fn since(events: &[Event], n: usize) -> Vec<Event> {
    events[n..].to_vec()
}

fn kubelet(c: &Cluster, node: &str) -> String {
    c.nodes[node].kubelet_version.clone()
}

/// The second run: exit 0 from the saved plan, without `plan` in between.
fn rerun(fleet: &Fleet) -> Vec<Event> {
    let before = events(fleet).len();
    let run = apply(fleet, &[]).expect_code(0);
    assert_has(&run.stderr, &["done: 3 nodes upgraded"]);
    since(&events(fleet), before)
}

/// Across both runs each node went through the hop's steps once: one
/// sysupdate that worked, one reboot, one successful kubeadm.
fn done_once(all: &[Event], patch: &Version) {
    let apply_v = format!("upgrade apply {patch}");
    assert_eq!(count_ok(all, "cp-1", &apply_v), 1, "\n{}", show(all));
    for n in NODES {
        assert_eq!(count_ok(all, n, "sysupdate"), 1, "{n}\n{}", show(all));
        assert_eq!(count(all, n, "reboot"), 1, "{n}\n{}", show(all));
    }
    for w in ["w-1", "w-2"] {
        assert_eq!(count_ok(all, w, "upgrade node"), 1, "{w}\n{}", show(all));
    }
}

#[test]
fn a_worker_that_never_comes_back_stops_the_run_and_a_rerun_finishes_it() {
    let scenario = scenario();
    let hang_timeout = support::node_timeout(scenario.os_layer, HANG_TIMEOUT);
    let fleet = support::start(scenario);
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];
    fleet
        .faults(|f| f.hang_on_reboot = vec!["w-1".into()])
        .unwrap();

    let run = apply(&fleet, &["--node-timeout", hang_timeout]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            &format!("w-1 did not come back from its reboot within {hang_timeout}"),
            "It is cordoned",
            "w-1 IS STILL CORDONED",
            "run `fleetctl apply` again",
            "stopped on w-1 during: reboot into the staged images",
        ],
    );
    let first = events(&fleet);
    let reboot = last(&first, |e| subject(e) == Some("w-1") && what(e) == "reboot");
    untouched_after(&first, reboot, "w-1");
    assert_eq!(count(&first, "w-2", "reboot"), 0, "\n{}", show(&first));
    let c = assert_consistent(&fleet, &NODES, Some("w-1"));
    assert!(!c.nodes["w-1"].up, "w-1 was held down by the fault");
    assert_eq!(kubelet(&c, "cp-1"), patch.to_string());
    assert_eq!(kubelet(&c, "w-2"), FROM);

    // Its kubeadm step ran before the reboot, in kubeadm's order.
    assert_eq!(
        count_ok(&first, "w-1", "upgrade node"),
        1,
        "\n{}",
        show(&first)
    );

    fleet.release("w-1").unwrap();
    fleet.wait_up("w-1").unwrap();
    let second = rerun(&fleet);
    assert_eq!(
        count(&second, "w-1", "reboot"),
        0,
        "w-1 already rebooted\n{}",
        show(&second)
    );
    assert_eq!(
        count(&second, "w-1", "upgrade node"),
        0,
        "w-1's kubeadm step is done (its marker says so)\n{}",
        show(&second)
    );
    assert_eq!(count(&second, "w-1", "uncordon"), 1, "\n{}", show(&second));
    assert_eq!(
        count(&second, "w-1", "drain"),
        0,
        "w-1 was drained already\n{}",
        show(&second)
    );
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

#[test]
fn a_drain_blocked_by_a_budget_is_undone_and_resumed_once_the_budget_allows() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];
    fleet.faults(|f| f.pdb_block = vec!["w-1".into()]).unwrap();

    let run = apply(&fleet, &["--drain-timeout", "2s"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "w-1: drain did not finish within 2s",
            "a PodDisruptionBudget blocks evicting default/",
            "w-1 was uncordoned again; nothing was rebooted",
            "run `fleetctl apply` again",
        ],
    );
    assert!(!run.stderr.contains("STILL CORDONED"), "{}", run.stderr);
    let first = events(&fleet);
    let drain = last(&first, |e| subject(e) == Some("w-1") && what(e) == "drain");
    assert_ne!(first[drain].result, "ok");
    untouched_after(&first, drain, "w-1");
    assert_eq!(count(&first, "w-1", "reboot"), 0);
    let c = assert_consistent(&fleet, &NODES, None);
    assert_eq!(kubelet(&c, "cp-1"), patch.to_string());
    assert_eq!(kubelet(&c, "w-1"), FROM);
    assert_eq!(kubelet(&c, "w-2"), FROM);

    fleet.faults(|f| f.pdb_block.clear()).unwrap();
    let second = rerun(&fleet);
    assert_eq!(count(&second, "cp-1", "reboot"), 0, "\n{}", show(&second));
    assert_eq!(count(&second, "cp-1", &format!("upgrade apply {patch}")), 0);
    assert_eq!(
        count(&second, "w-1", "sysupdate"),
        0,
        "w-1 was staged\n{}",
        show(&second)
    );
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

#[test]
fn ctrl_c_between_the_kubeadm_step_and_the_reboot_resumes_without_a_second_upgrade_apply() {
    // A detached step's record across a real reboot.
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];

    let mut running = spawn_apply(&fleet, &[]);
    running.wait_for("control planes: reboot onto the new kubelet");
    running.signal("INT");
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &["at a safe point", "Run `fleetctl apply` again"],
    );
    let first = events(&fleet);
    assert_eq!(
        count_ok(&first, "cp-1", &format!("upgrade apply {patch}")),
        1,
        "\n{}",
        show(&first)
    );
    assert_consistent(&fleet, &NODES, None);

    let second = rerun(&fleet);
    assert_eq!(
        count(&second, "cp-1", &format!("upgrade apply {patch}")),
        0,
        "the cluster is at {patch} already: no second upgrade apply\n{}",
        show(&second)
    );
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

/// `readlink` of the node's kubernetes symlink and its config's MatchPattern.
fn staged_and_pin(fleet: &Fleet, node: &str) -> String {
    fleet
        .ssh_ok(
            node,
            "root",
            "readlink /etc/extensions/kubernetes.raw; grep MatchPattern /etc/sysupdate.kubernetes.d/kubernetes.conf",
        )
        .unwrap()
}

/// Kept on real-OS nodes (docs/rules-on-the-fake.md): the one test of a
/// failed kubeadm step's recovery, `steps::kubeadm::undo` on a real node
/// (its symlink and pin as they were), and the rerun that runs it again.
#[test]
fn a_failed_upgrade_node_on_a_worker_leaves_it_unstaged_touches_nothing_further_and_a_rerun_finishes()
 {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];
    let before = staged_and_pin(&fleet, "w-1");
    fleet
        .faults(|f| f.fail_upgrade_node = vec!["w-1".into()])
        .unwrap();

    let run = apply(&fleet, &[]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            &format!("w-1: kubeadm upgrade node with the {patch} image's kubeadm failed"),
            "run `fleetctl apply` again",
        ],
    );
    let first = events(&fleet);
    let failed = last(&first, |e| {
        subject(e) == Some("w-1") && what(e) == "upgrade node" && e.result != "ok"
    });
    // Nothing after it but the other worker's own preparation, which runs
    // beside it: no drain, no reboot anywhere.
    for e in &first[failed + 1..] {
        let w = what(e);
        assert!(
            !matches!(w.as_str(), "drain" | "reboot" | "cordon"),
            "{w} after the failure\n{}",
            show(&first)
        );
    }
    for w in ["w-1", "w-2"] {
        assert_eq!(count(&first, w, "reboot"), 0, "{w}\n{}", show(&first));
    }
    // w-1 boots what it runs, pinned as it was.
    assert_eq!(staged_and_pin(&fleet, "w-1"), before);
    let c = assert_consistent(&fleet, &NODES, None);
    assert_eq!(kubelet(&c, "cp-1"), patch.to_string());
    assert_eq!(kubelet(&c, "w-1"), FROM);

    fleet.faults(|f| f.fail_upgrade_node.clear()).unwrap();
    let second = rerun(&fleet);
    assert_eq!(
        count_ok(&second, "w-1", "upgrade node"),
        1,
        "\n{}",
        show(&second)
    );
    assert_eq!(
        count(&second, "cp-1", &format!("upgrade apply {patch}")),
        0,
        "\n{}",
        show(&second)
    );
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

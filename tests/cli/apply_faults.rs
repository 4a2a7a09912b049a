//! `fleetctl apply` when things go wrong (issue 5's failure bullets, in
//! issue 8's kubeadm-first order): a worker that never comes back,
//! `kubeadm upgrade apply` failing, a drain blocked by a PodDisruptionBudget,
//! the hub down, a newer patch on the hub, and Ctrl-C (once, and twice). Each must end with exit 1 and a message
//! that names the node and the next action, touch no node after the failing
//! one, leave the fleet consistent (nothing cordoned unless the message says
//! so, the lock released), and be finished by a plain `fleetctl apply --yes`
//! rerun from the saved plan that repeats nothing already done. A plan made
//! stale by a newer patch is refused up front (exit 2, nothing touched) and
//! needs a new `plan`.
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

/// How many events acted on a node (the lock, taken and given back by
/// every apply, acts on none).
fn acted(events: &[Event]) -> usize {
    events.iter().filter(|e| subject(e).is_some()).count()
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
fn a_failed_upgrade_apply_is_retried_alone_and_earlier_hops_are_not_repeated() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.36");
    let [first_patch, second_patch] = patches(&planned).try_into().unwrap();

    // The fault is switched on once hop 2 starts, so hop 1's upgrade apply
    // succeeds and hop 2's (seconds later, after a pin, stage, drain and
    // reboot) fails.
    let mut running = spawn_apply(&fleet, &[]);
    running.wait_for("hop 2/2");
    fleet.faults(|f| f.fail_upgrade_apply = 1).unwrap();
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &[
            &format!("cp-1: kubeadm upgrade apply with the {second_patch} image's kubeadm failed"),
            "injected fault fail_upgrade_apply",
            "run `fleetctl apply` again",
        ],
    );
    // kubeadm runs before the drain and the reboot: nothing is cordoned.
    assert!(!run.stderr.contains("STILL CORDONED"), "{}", run.stderr);
    let first = events(&fleet);
    let failed = last(&first, |e| {
        what(e) == format!("upgrade apply {second_patch}") && e.result != "ok"
    });
    untouched_after(&first, failed, "cp-1");
    let c = assert_consistent(&fleet, &NODES, None);
    assert_eq!(
        c.version,
        first_patch.to_string(),
        "the API server stays on hop 1"
    );
    for n in NODES {
        assert_eq!(kubelet(&c, n), first_patch.to_string(), "{n}");
    }

    let second = rerun(&fleet);
    assert_eq!(
        count(&second, "cp-1", &format!("upgrade apply {first_patch}")),
        0,
        "hop 1 is done\n{}",
        show(&second)
    );
    assert_eq!(
        count_ok(&second, "cp-1", &format!("upgrade apply {second_patch}")),
        1
    );
    assert_on_target(&fleet, &NODES, &second_patch);
    let all = events(&fleet);
    for n in NODES {
        assert_eq!(
            count(&all, n, "reboot"),
            2,
            "{n}: one per hop\n{}",
            show(&all)
        );
    }
    assert_eq!(
        count(&all, "cp-1", &format!("upgrade apply {first_patch}")),
        1
    );
    assert_eq!(
        count(&all, "cp-1", &format!("upgrade apply {second_patch}")),
        2
    );
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
fn the_hub_down_after_planning_stops_apply_at_the_downloads_before_any_kubeadm() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];
    fleet.faults(|f| f.hub_down = true).unwrap();

    let run = apply(&fleet, &[]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "could not read the hub's image list",
            "going on with the patches the plan stages",
            "systemd-sysupdate could not download kubernetes v1.35",
            "Nothing was staged or rebooted",
            "run `fleetctl apply` again",
        ],
    );
    let first = events(&fleet);
    // Every node tried its download, at once; none got further.
    for n in NODES {
        assert_eq!(count(&first, n, "sysupdate"), 1, "{n}\n{}", show(&first));
        assert_eq!(count_ok(&first, n, "sysupdate"), 0, "{n}\n{}", show(&first));
        for step in ["cordon", "drain", "reboot", "upgrade node"] {
            assert_eq!(count(&first, n, step), 0, "{n} {step}\n{}", show(&first));
        }
    }
    assert_eq!(
        count(&first, "cp-1", &format!("upgrade apply {patch}")),
        0,
        "no kubeadm without the image\n{}",
        show(&first)
    );
    let c = assert_consistent(&fleet, &NODES, None);
    for n in NODES {
        assert_eq!(kubelet(&c, n), FROM);
    }

    fleet.faults(|f| f.hub_down = false).unwrap();
    rerun(&fleet);
    assert_on_target(&fleet, &NODES, patch);
    let all = events(&fleet);
    for n in NODES {
        assert_eq!(count(&all, n, "reboot"), 1, "{n}\n{}", show(&all));
    }
}

#[test]
fn the_hub_down_once_the_images_are_downloaded_changes_nothing() {
    // Every node downloads the hop's image first, in parallel: from then on
    // the hop needs no hub, and a hub outage mid-hop costs nothing.
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];

    let mut running = spawn_apply(&fleet, &[]);
    running.wait_for("first control plane: kubeadm upgrade");
    fleet.faults(|f| f.hub_down = true).unwrap();
    let run = running.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 3 nodes upgraded"]);
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

#[test]
fn ctrl_c_during_a_drain_stops_at_a_safe_point_and_a_rerun_finishes() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];

    let mut running = spawn_apply(&fleet, &[]);
    running.wait_for("w-1: gates, then drain");
    let at = events(&fleet).len();
    running.signal("INT");
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "Ctrl-C: finishing the step in progress",
            "stopped by Ctrl-C at a safe point",
            "Run `fleetctl apply` again to continue",
        ],
    );
    assert!(!run.stderr.contains("STILL CORDONED"), "{}", run.stderr);
    assert!(!run.stderr.contains("fix the cause"), "{}", run.stderr);
    let first = events(&fleet);
    untouched_after(&first, at - 1, "w-1");
    // The signal lands while w-1 is checked or drained: either the reboot
    // had already begun and w-1 was taken all the way through, or it was
    // drained and uncordoned again without a reboot (or, had the signal
    // beaten the drain, not touched at all).
    let c = assert_consistent(&fleet, &NODES, None);
    if count(&first, "w-1", "reboot") > 0 {
        assert_eq!(kubelet(&c, "w-1"), patch.to_string());
        assert_eq!(count_ok(&first, "w-1", "upgrade node"), 1);
    } else {
        assert_eq!(kubelet(&c, "w-1"), FROM);
        if count_ok(&first, "w-1", "drain") > 0 {
            assert_has(
                &run.stderr,
                &["w-1 was drained but not rebooted, and was uncordoned again"],
            );
        }
    }
    assert_eq!(kubelet(&c, "w-2"), FROM);

    rerun(&fleet);
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

#[test]
fn a_second_ctrl_c_while_a_node_reboots_stops_at_once_and_names_the_node() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];
    fleet
        .faults(|f| f.hang_on_reboot = vec!["w-1".into()])
        .unwrap();

    // A long node timeout: only the second Ctrl-C can end this wait.
    let mut running = spawn_apply(&fleet, &["--node-timeout", "30m"]);
    running.wait_for("w-1: rebooting");
    running.signal("INT");
    running.wait_for("Ctrl-C: finishing the step in progress");
    running.signal("INT");
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "stopped at once by a second Ctrl-C: w-1 was left half-way through `reboot into the staged images`",
            "wait until it is back), then run `fleetctl apply` again",
            "stopped on w-1 during: reboot into the staged images",
            "w-1 IS STILL CORDONED",
        ],
    );
    // Ended by the operator, not by the node timeout; nothing to fix.
    assert!(!run.stderr.contains("did not come back"), "{}", run.stderr);
    assert!(!run.stderr.contains("fix the cause"), "{}", run.stderr);
    let first = events(&fleet);
    let reboot = last(&first, |e| subject(e) == Some("w-1") && what(e) == "reboot");
    untouched_after(&first, reboot, "w-1");
    let c = assert_consistent(&fleet, &NODES, Some("w-1"));
    assert_eq!(kubelet(&c, "w-2"), FROM);

    // fleetctl stopped right after asking for the reboot: a real systemd
    // may still be shutting w-1 down (an emulated node is down at once).
    fleet.wait_down("w-1").unwrap();
    fleet.release("w-1").unwrap();
    fleet.wait_up("w-1").unwrap();
    let second = rerun(&fleet);
    assert_eq!(count(&second, "w-1", "reboot"), 0, "\n{}", show(&second));
    assert_on_target(&fleet, &NODES, patch);
    done_once(&events(&fleet), patch);
}

#[test]
fn a_newer_patch_on_the_hub_makes_the_plan_stale_until_planned_again() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let old = &patches(&planned)[0];
    fleet.publish("v1.35.9").unwrap();
    let before = acted(&events(&fleet));

    let run = apply(&fleet, &[]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "the plan is stale",
            &format!("the newest v1.35 patch is now v1.35.9, the plan stages {old}"),
            "Run `fleetctl plan` again",
        ],
    );
    assert_eq!(
        acted(&events(&fleet)),
        before,
        "a refused plan touches nothing but the lock"
    );
    assert_consistent(&fleet, &NODES, None);

    let replanned = plan(&fleet, "v1.35");
    let new = &patches(&replanned)[0];
    assert_eq!(new.to_string(), "v1.35.9");
    rerun(&fleet);
    assert_on_target(&fleet, &NODES, new);
    done_once(&events(&fleet), new);
}

#[test]
fn a_patch_published_after_the_downloads_leaves_the_hop_on_its_plan_and_the_next_plan_converges() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let old = &patches(&planned)[0];

    // The hop's images are on every node before cp-1's kubeadm runs; a
    // patch the hub publishes after that does not reach this hop.
    let mut running = spawn_apply(&fleet, &[]);
    running.wait_for("first control plane: kubeadm upgrade");
    fleet.publish("v1.35.9").unwrap();
    let run = running.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 3 nodes upgraded"]);
    assert_on_target(&fleet, &NODES, old);
    done_once(&events(&fleet), old);

    // The next plan sees the new patch: a converge (no kubeadm, one
    // reboot each); the control plane stays on the patch it was upgraded
    // to, as docs/upgrade-path.md decides.
    let replanned = plan(&fleet, "v1.35");
    let new = &patches(&replanned)[0];
    assert_eq!(new.to_string(), "v1.35.9");
    let second = rerun(&fleet);
    for n in NODES {
        assert_eq!(count(&second, n, "reboot"), 1, "{n}\n{}", show(&second));
        assert_eq!(
            count(&second, n, "upgrade node"),
            0,
            "{n}\n{}",
            show(&second)
        );
    }
    let c = assert_consistent(&fleet, &NODES, None);
    for n in NODES {
        assert_eq!(kubelet(&c, n), new.to_string(), "{n}");
    }
    assert_eq!(c.version, old.to_string());
    let all = events(&fleet);
    assert_eq!(count(&all, "cp-1", &format!("upgrade apply {old}")), 1);
    assert_eq!(count(&all, "cp-1", &format!("upgrade apply {new}")), 0);
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

#[test]
fn a_staged_worker_power_cycled_mid_hop_breaks_no_invariant() {
    let fleet = support::start(scenario());
    let planned = plan(&fleet, "v1.35");
    let patch = &patches(&planned)[0];

    // Once the workers are prepared (their kubeadm step done, staged), w-2
    // loses power while apply rolls w-1: it boots the staged kubelet, whose
    // config its own kubeadm step already wrote.
    let mut running = spawn_apply(&fleet, &[]);
    running.wait_for("workers: reboot onto the new kubelet");
    fleet.power_cycle("w-2").unwrap();
    let run = running.finish();
    let all = events(&fleet);
    support::assert_invariants_hold(&all);
    // apply either rode it out or stopped (a gate saw w-2 down); either way
    // a rerun ends on the target with nothing repeated that was done.
    if run.code != Some(0) {
        eprintln!("the first apply stopped:\n{}", run.stderr);
        fleet.wait_ready("w-2").unwrap();
        // w-2 may well have nothing left to do: its power cycle booted
        // what its kubeadm step had prepared.
        let again = apply(&fleet, &[]).expect_code(0);
        assert!(
            again.stderr.contains("done: 3 nodes upgraded")
                || again.stderr.contains("nothing to do"),
            "{}",
            again.stderr
        );
    }
    assert_on_target(&fleet, &NODES, patch);
    let all = events(&fleet);
    support::assert_invariants_hold(&all);
    assert_eq!(count_ok(&all, "cp-1", &format!("upgrade apply {patch}")), 1);
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

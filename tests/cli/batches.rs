//! Issue 10 against the simulated fleet: workers in batches
//! (`--max-unavailable`), a batch member that never returns, zones that
//! keep batches apart, and `fleetctl reboot`.

use std::collections::BTreeSet;
use std::fs;

use fleetsim::state::Event;

use super::support::{
    self, Fleet, Scenario, describe, is_boot, is_ok, is_reboot, out_of_service, schedulability,
};

use super::support::run_on as run;

/// One control plane and `workers` workers at v1.34.2.
fn fleet_of(workers: usize) -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(workers)
        .kubernetes("v1.34.2")
}

fn workers(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("w-{i}")).collect()
}

/// Adds `zone: Z` to each named node's line of the fleet's inventory.
fn set_zones(fleet: &Fleet, zones: &[(&str, &str)]) {
    let path = fleet.inventory();
    let mut text = fs::read_to_string(&path).unwrap();
    for (node, zone) in zones {
        let from = format!("{{name: {node}, ");
        assert!(text.contains(&from), "{node} not in\n{text}");
        text = text.replace(&from, &format!("{{name: {node}, zone: {zone}, "));
    }
    fs::write(&path, text).unwrap();
}

/// The index of `node`'s (first) successful reboot after `from`.
fn reboot_of(events: &[Event], node: &str) -> Option<usize> {
    events
        .iter()
        .position(|e| is_reboot(e) && is_ok(e) && e.node == node)
}

/// The index of `node`'s first boot after event `from`.
fn boot_after(events: &[Event], node: &str, from: usize) -> Option<usize> {
    events[from..]
        .iter()
        .position(|e| is_boot(e) && e.node == node)
        .map(|p| p + from)
}

/// The sets of workers that were out of service together, each time the
/// set changed, and the largest number of nodes out at once.
fn out_sets(events: &[Event]) -> (Vec<BTreeSet<String>>, usize) {
    let mut sets: Vec<BTreeSet<String>> = Vec::new();
    let mut most = 0;
    for out in out_of_service(events) {
        most = most.max(out.len());
        if sets.last() != Some(&out) {
            sets.push(out);
        }
    }
    (sets, most)
}

#[test]
fn two_workers_at_a_time_with_the_control_plane_alone() {
    let fleet = support::start(fleet_of(6));
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let out = run(&fleet, &["apply", "--yes", "--max-unavailable", "2"]).expect_code(0);
    assert!(
        out.stderr.contains("done: 7 nodes upgraded"),
        "{}",
        out.stderr
    );

    let events = fleet.events().unwrap();
    let (sets, most) = out_sets(&events);
    assert!(
        most <= 2,
        "more than two nodes out at once:\n{}",
        describe(&events)
    );
    for set in &sets {
        assert!(
            !(set.contains("cp-1") && set.len() > 1),
            "the control plane was out together with {set:?}:\n{}",
            describe(&events)
        );
    }
    // The workers went in pairs, in inventory order: both of a pair down
    // (rebooted) before either came back, and the next pair only after.
    let w = workers(6);
    for pair in w.chunks(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (ra, rb) = (
            reboot_of(&events, a).unwrap(),
            reboot_of(&events, b).unwrap(),
        );
        let back = boot_after(&events, a, ra)
            .unwrap()
            .min(boot_after(&events, b, rb).unwrap());
        assert!(
            ra.max(rb) < back,
            "{a} and {b} were not down together:\n{}",
            describe(&events)
        );
    }
    for later in w.chunks(2).collect::<Vec<_>>().windows(2) {
        let uncordoned = |n: &str| {
            events
                .iter()
                .rposition(|e| schedulability(e) == Some(("uncordon", n)))
                .unwrap()
        };
        let drained = |n: &str| {
            events
                .iter()
                .position(|e| schedulability(e) == Some(("drain", n)))
                .unwrap()
        };
        let done = uncordoned(&later[0][0]).max(uncordoned(&later[0][1]));
        let next = drained(&later[1][0]).min(drained(&later[1][1]));
        assert!(
            done < next,
            "{:?} was drained before {:?} was back in service:\n{}",
            later[1],
            later[0],
            describe(&events)
        );
    }
    support::assert_reboots_drained_then_uncordoned(&events);
    support::assert_invariants_hold(&events);
    let c = fleet.cluster().unwrap();
    for (name, node) in &c.nodes {
        assert_eq!(node.kubelet_version, "v1.35.3", "{name}");
        assert!(!node.unschedulable, "{name} is still cordoned");
    }
}

#[test]
fn a_batch_member_that_never_returns_stops_after_its_batch_and_touches_nothing_later() {
    let scenario = fleet_of(6);
    let timeout = support::node_timeout(scenario.os_layer, "8s");
    let fleet = support::start(scenario);
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    fleet
        .faults(|f| f.hang_on_reboot = vec!["w-3".into()])
        .unwrap();
    let out = run(
        &fleet,
        &[
            "apply",
            "--yes",
            "--max-unavailable",
            "2",
            "--node-timeout",
            timeout,
        ],
    )
    .expect_code(1);
    assert!(
        out.stderr.contains(&format!(
            "w-3 did not come back from its reboot within {timeout}"
        )),
        "{}",
        out.stderr
    );
    let events = fleet.events().unwrap();
    // Its batch mate came back and was put back in service.
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-4"].kubelet_version, "v1.35.3");
    assert!(!c.nodes["w-4"].unschedulable, "w-4 was not uncordoned");
    assert!(
        c.nodes["w-3"].unschedulable,
        "w-3 stays cordoned, as the report says"
    );
    assert!(
        out.stderr.contains("w-3 IS STILL CORDONED"),
        "{}",
        out.stderr
    );
    // The next batch was never touched.
    for n in ["w-5", "w-6"] {
        assert!(
            !events
                .iter()
                .any(|e| schedulability(e).is_some_and(|(_, x)| x == n)
                    || (is_reboot(e) && e.node == n)),
            "{n} was touched after the failing batch:\n{}",
            describe(&events)
        );
        assert_eq!(c.nodes[n].kubelet_version, "v1.34.2");
    }
}

#[test]
fn zones_keep_batches_apart() {
    let fleet = support::start(fleet_of(4));
    set_zones(
        &fleet,
        &[("w-1", "a"), ("w-2", "b"), ("w-3", "a"), ("w-4", "b")],
    );
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let dry = run(&fleet, &["apply", "--dry-run", "--max-unavailable", "2"]).expect_code(0);
    for batch in ["# batch: w-1, w-3", "# batch: w-2, w-4"] {
        assert!(
            dry.stdout.contains(batch),
            "no `{batch}` in\n{}",
            dry.stdout
        );
    }
    run(&fleet, &["apply", "--yes", "--max-unavailable", "2"]).expect_code(0);
    let events = fleet.events().unwrap();
    let zone = |n: &str| match n {
        "w-1" | "w-3" => "a",
        "w-2" | "w-4" => "b",
        _ => "cp",
    };
    let (sets, most) = out_sets(&events);
    assert_eq!(
        most,
        2,
        "the batches of two really ran:\n{}",
        describe(&events)
    );
    for set in sets {
        let zones: BTreeSet<&str> = set.iter().map(|n| zone(n)).collect();
        assert!(
            zones.len() <= 1,
            "{set:?} were out at once across zones:\n{}",
            describe(&events)
        );
    }
    support::assert_invariants_hold(&events);
}

#[test]
fn reboot_rolls_only_pending_nodes_in_batches_refuses_a_new_minor_and_holds_kureds_lock() {
    // The real `systemctl reboot`, and Kured's pods as units.
    let fleet = support::start(
        fleet_of(4)
            .kured(true)
            .with_node("w-1", |n| n.staged = Some("v1.34.3".into()))
            .with_node("w-2", |n| n.os_update = Some("4081.3.0".into()))
            .with_node("w-4", |n| n.staged = Some("v1.35.3".into())),
    );

    // w-4 would boot a new minor without its kubeadm step: refused.
    let before = fleet.events().unwrap().len();
    let refused = run(&fleet, &["reboot", "--yes"]).expect_code(2);
    assert!(
        refused
            .stderr
            .contains("w-4 has kubernetes v1.35.3 staged while it runs v1.34.2"),
        "{}",
        refused.stderr
    );
    let after = fleet.events().unwrap();
    assert!(
        after[before..].iter().all(support::is_lock),
        "a refused reboot touches nothing but its lock:\n{}",
        describe(&after[before..])
    );

    // Unstaged by hand, as an operator would before rebooting.
    fleet
        .ssh_ok(
            "w-4",
            "root",
            "ln -sfn ../../opt/extensions/kubernetes/kubernetes-v1.34.2-x86-64.raw /etc/extensions/kubernetes.raw && rm -f /run/reboot-required",
        )
        .unwrap();
    let start = fleet.events().unwrap().len();
    let out = run(&fleet, &["reboot", "--yes", "--max-unavailable", "2"]).expect_code(0);
    let events = fleet.events().unwrap();
    let log = &events[start..];
    let rebooted = support::rebooted_nodes(log);
    assert_eq!(
        rebooted,
        BTreeSet::from(["w-1", "w-2"]),
        "only the nodes with a pending reboot:\n{}\n{}",
        out.stderr,
        describe(log)
    );
    // Together, as one batch of two.
    let (ra, rb) = (
        reboot_of(log, "w-1").unwrap(),
        reboot_of(log, "w-2").unwrap(),
    );
    let back = boot_after(log, "w-1", ra)
        .unwrap()
        .min(boot_after(log, "w-2", rb).unwrap());
    assert!(ra.max(rb) < back, "{}", describe(log));
    // Kured's lock, the annotation on its DaemonSet, held around both.
    let annotate = |e: &Event| {
        support::kubectl_words(e).is_some_and(|w| w.first() == Some(&"annotate"))
            && e.argv.iter().any(|a| a.contains("kured-node-lock"))
            && is_ok(e)
    };
    let taken = log.iter().position(annotate).unwrap();
    let released = log.iter().rposition(annotate).unwrap();
    assert!(taken < ra.min(rb) && released > back, "{}", describe(log));
    assert!(
        !log.iter()
            .any(|e| e.argv.first().is_some_and(|a| a == "(kured)")
                && e.argv.get(1).is_some_and(|a| a == "reboot")),
        "Kured rebooted a node while fleetctl held its lock:\n{}",
        describe(log)
    );
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-1"].kubelet_version, "v1.34.3");
    for (name, node) in &c.nodes {
        assert!(!node.unschedulable, "{name} is still cordoned");
    }
    assert!(
        c.kured
            .as_ref()
            .is_some_and(|k| !k.annotations.keys().any(|a| a.contains("kured-node-lock"))),
        "Kured's lock was not given back: {:?}",
        c.kured
    );
}

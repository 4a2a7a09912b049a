//! Issue 17, part 1: workers jump once. The control planes take every
//! minor; each worker keeps its kubelet (within the skew policy) and, once
//! the last control plane runs the target, runs the target's `kubeadm
//! upgrade node` and reboots once. Judged on the fleet's event log: who
//! rebooted how often, whose kubeadm ran at which version, and the
//! simulator's invariants (no kubelet ahead of an API server or more than
//! three minors behind one, kubeadm before kubelet, no kubelet crash).
//!
//! The one whole upgrade of the jump strategy on real-OS nodes; its rules
//! (every-hop, the pod-infra stop, the last look before a reboot, a stop
//! and a rerun) are proven on the fakes (docs/rules-on-the-fake.md).

use fleetctl::plan::{Plan, WorkerStrategy};
use fleetctl::version::{Minor, Version};
use fleetsim::state::Event;

use super::support::{
    self, Fleet, Run, Scenario, assert_has, assert_invariants_hold, assert_on_target, is_ok,
    is_reboot, kubeadm_upgrade, m,
};

/// How long a node may take, generous for a machine busy with other fleets.
const NODE_TIMEOUT: &str = "90s";

fn fleet_of(workers: usize, kubernetes: &str) -> Fleet {
    support::start(scenario(workers, kubernetes))
}

fn scenario(workers: usize, kubernetes: &str) -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(workers)
        .kubernetes(kubernetes)
}

fn workers(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("w-{i}")).collect()
}

/// `fleetctl plan TARGET EXTRA…`, which must succeed; the saved plan.
fn plan(fleet: &Fleet, target: &str, extra: &[&str]) -> Plan {
    let mut args = vec!["plan", target];
    args.extend_from_slice(extra);
    support::run(&fleet.inventory(), &args).expect_code(0);
    fleetctl::plan::load(&fleet.dir().join(".fleetctl/plan.yaml")).unwrap()
}

fn apply_args(extra: &[&str]) -> Vec<String> {
    let mut args = vec!["apply", "--yes", "--node-timeout", NODE_TIMEOUT];
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

fn apply(fleet: &Fleet, extra: &[&str]) -> Run {
    let args = apply_args(extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    support::apply(fleet, &args[1..])
}

fn events(fleet: &Fleet) -> Vec<Event> {
    fleet.events().unwrap()
}

/// How many times `node` was rebooted (a successful `reboot`).
fn reboots(events: &[Event], node: &str) -> usize {
    events
        .iter()
        .filter(|e| e.node == node && is_reboot(e) && is_ok(e))
        .count()
}

/// The minors of the successful `kubeadm upgrade node` runs on `node`, in order.
fn upgrade_nodes(events: &[Event], node: &str) -> Vec<Minor> {
    events
        .iter()
        .filter(|e| e.node == node && is_ok(e))
        .filter(|e| matches!(kubeadm_upgrade(e), Some(support::KubeadmUpgrade::Node)))
        .map(|e| {
            e.version
                .as_deref()
                .and_then(|v| v.parse::<Version>().ok())
                .map(|v| v.minor())
                .expect("a kubeadm event carries its binary's version")
        })
        .collect()
}

/// The kubernetes images in `node`'s /opt/extensions/kubernetes/.
fn images(fleet: &Fleet, node: &str) -> Vec<String> {
    fleet
        .ssh_ok(node, "root", "ls -1 /opt/extensions/kubernetes/")
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn image(version: &str) -> String {
    format!("kubernetes-{version}-x86-64.raw")
}

fn last_hop_version(plan: &Plan) -> Version {
    plan.hops.last().unwrap().version.clone().unwrap()
}

#[test]
fn v1_35_to_v1_37_every_worker_runs_one_upgrade_node_and_reboots_once() {
    let fleet = fleet_of(2, "v1.35.1");
    let saved = plan(&fleet, "v1.37", &[]);
    assert_eq!(saved.workers.strategy, WorkerStrategy::Jump);
    assert!(saved.workers.stops.is_empty(), "{:?}", saved.workers.stops);
    assert_eq!(saved.hops.len(), 2);
    assert_eq!(
        (saved.workers.reboots, saved.workers.every_hop_reboots),
        (4, 6)
    );
    let target = last_hop_version(&saved);
    let start = events(&fleet).len();

    let run = apply(&fleet, &[]).expect_code(0);
    assert_has(&run.stderr, &["done: 3 nodes upgraded"]);

    let log = &events(&fleet)[start..];
    assert_invariants_hold(log);
    assert_eq!(reboots(log, "cp-1"), 2, "{}", support::describe(log));
    let cp_last_boot = log
        .iter()
        .rposition(|e| e.node == "cp-1" && support::is_boot(e))
        .unwrap();
    for w in workers(2) {
        assert_eq!(reboots(log, &w), 1, "{w}\n{}", support::describe(log));
        assert_eq!(
            upgrade_nodes(log, &w),
            vec![m("v1.37")],
            "{w}\n{}",
            support::describe(log)
        );
        // Its kubeadm step waited for the control plane on the target.
        let step = log
            .iter()
            .position(|e| e.node == w && kubeadm_upgrade(e).is_some())
            .unwrap();
        assert!(step > cp_last_boot, "{w}\n{}", support::describe(log));
    }
    let mut all = vec!["cp-1".to_string()];
    all.extend(workers(2));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    assert_on_target(&fleet, &all, &target);

    // The clean-up ran (the control plane's v1.35 image is gone, its v1.36
    // one kept to roll back to) and kept each worker's pre-jump image.
    let v136 = support::newest_on_hub(&fleet, "v1.36").to_string();
    let target = target.to_string();
    assert_eq!(images(&fleet, "cp-1"), [image(&v136), image(&target)]);
    for w in workers(2) {
        assert_eq!(
            images(&fleet, &w),
            [image("v1.35.1"), image(&target)],
            "{w}"
        );
    }
}

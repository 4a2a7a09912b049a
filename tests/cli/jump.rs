//! Issue 17, part 1: workers jump once. The control planes take every
//! minor; each worker keeps its kubelet (within the skew policy) and, once
//! the last control plane runs the target, runs the target's `kubeadm
//! upgrade node` and reboots once. Judged on the fleet's event log: who
//! rebooted how often, whose kubeadm ran at which version, and the
//! simulator's invariants (no kubelet ahead of an API server or more than
//! three minors behind one, kubeadm before kubelet, no kubelet crash).

use fleetctl::plan::{Plan, WorkerStrategy};
use fleetctl::version::{Minor, Version};
use fleetsim::state::Event;

use super::support::{
    self, Fleet, Run, Running, Scenario, assert_has, assert_invariants_hold, assert_on_target,
    is_ok, is_reboot, kubeadm_upgrade, m,
};

/// How long a node may take, generous for a machine busy with other fleets.
const NODE_TIMEOUT: &str = "90s";
const FLAGS_FILE: &str = "/var/lib/kubelet/kubeadm-flags.env";
const POD_INFRA: &str = "--pod-infra-container-image";

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

fn spawn_apply(fleet: &Fleet) -> Running {
    let args = apply_args(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Running::spawn(&fleet.inventory(), &args)
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
    let fleet = fleet_of(3, "v1.35.1");
    let saved = plan(&fleet, "v1.37", &[]);
    assert_eq!(saved.workers.strategy, WorkerStrategy::Jump);
    assert!(saved.workers.stops.is_empty(), "{:?}", saved.workers.stops);
    assert_eq!(saved.hops.len(), 2);
    assert_eq!(
        (saved.workers.reboots, saved.workers.every_hop_reboots),
        (5, 8)
    );
    let target = last_hop_version(&saved);
    let start = events(&fleet).len();

    let run = apply(&fleet, &[]).expect_code(0);
    assert_has(&run.stderr, &["done: 4 nodes upgraded"]);

    let log = &events(&fleet)[start..];
    assert_invariants_hold(log);
    assert_eq!(reboots(log, "cp-1"), 2, "{}", support::describe(log));
    let cp_last_boot = log
        .iter()
        .rposition(|e| e.node == "cp-1" && support::is_boot(e))
        .unwrap();
    for w in workers(3) {
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
    all.extend(workers(3));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    assert_on_target(&fleet, &all, &target);

    // The clean-up ran (the control plane's v1.35 image is gone, its v1.36
    // one kept to roll back to) and kept each worker's pre-jump image.
    let v136 = support::newest_on_hub(&fleet, "v1.36").to_string();
    let target = target.to_string();
    assert_eq!(images(&fleet, "cp-1"), [image(&v136), image(&target)]);
    for w in workers(3) {
        assert_eq!(
            images(&fleet, &w),
            [image("v1.35.1"), image(&target)],
            "{w}"
        );
    }
}

#[test]
fn from_v1_34_a_worker_holding_pod_infra_takes_v1_35_and_one_without_it_jumps() {
    // Every node of a v1.34 cluster has the flag (kubeadm v1.34 wrote it at
    // join); w-1's was removed by hand. Only kubeadm v1.35 strips it, so w-2
    // takes v1.35 before it jumps; w-1 jumps straight to the target.
    let fleet = fleet_of(2, "v1.34.2");
    fleet
        .ssh_ok(
            "w-1",
            "root",
            // The flag may come first: kubeadm v1.34 wrote the runtime endpoint
            // into instance-config.yaml, not here.
            &format!("sed -i 's/ *{POD_INFRA}=[^ \"]*//' {FLAGS_FILE} && cat {FLAGS_FILE}"),
        )
        .unwrap();
    let flags = fleet
        .ssh_ok("w-1", "root", &format!("cat {FLAGS_FILE}"))
        .unwrap();
    assert!(!flags.contains(POD_INFRA), "{flags}");

    let text = support::run(&fleet.inventory(), &["plan", "v1.37"]).expect_code(0);
    assert_has(
        &text.stdout,
        &[
            "workers: jump",
            "reboots: 6, 3 saved against --workers every-hop (9)",
            "w-2 also takes v1.35: --pod-infra-container-image is in its /var/lib/kubelet/kubeadm-flags.env",
        ],
    );
    assert!(!text.stdout.contains("w-1 also takes"), "{}", text.stdout);
    let saved = fleetctl::plan::load(&fleet.dir().join(".fleetctl/plan.yaml")).unwrap();
    let target = last_hop_version(&saved);
    let start = events(&fleet).len();

    let run = apply(&fleet, &[]).expect_code(0);
    assert_has(&run.stderr, &["done: 3 nodes upgraded"]);
    let log = &events(&fleet)[start..];
    // No kubelet crashed (the flag), none too old, none early.
    assert_invariants_hold(log);
    assert_eq!(reboots(log, "cp-1"), 3);
    assert_eq!(upgrade_nodes(log, "w-1"), vec![m("v1.37")]);
    assert_eq!(reboots(log, "w-1"), 1, "{}", support::describe(log));
    assert_eq!(upgrade_nodes(log, "w-2"), vec![m("v1.35"), m("v1.37")]);
    assert_eq!(reboots(log, "w-2"), 2, "{}", support::describe(log));
    let flags = fleet
        .ssh_ok("w-2", "root", &format!("cat {FLAGS_FILE}"))
        .unwrap();
    assert!(!flags.contains(POD_INFRA), "{flags}");
    assert_on_target(&fleet, &["cp-1", "w-1", "w-2"], &target);
}

#[test]
fn a_worker_where_kubeadm_v1_37_leaves_a_refused_flag_is_not_rebooted() {
    // After the hop's checks passed, something puts the flag back into
    // w-2's kubeadm-flags.env (config management, a hand edit). kubeadm
    // v1.37 leaves it there; the v1.37 kubelet would refuse it.
    let fleet = fleet_of(2, "v1.35.1");
    let saved = plan(&fleet, "v1.37", &[]);
    let target = last_hop_version(&saved);
    let mut running = spawn_apply(&fleet);
    // w-1's batch started: the last look at w-1 is done, w-2's is to come.
    running.wait_for("w-1: gates, then drain");
    fleet
        .ssh_ok(
            "w-2",
            "root",
            &format!(
                "sed -i 's|^KUBELET_KUBEADM_ARGS=\"|&{POD_INFRA}=registry.k8s.io/pause:3.10 |' {FLAGS_FILE}"
            ),
        )
        .unwrap();
    let before_end = events(&fleet).len();
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "not rebooting w-2: the",
            "kubelet would refuse to start",
            "w-2: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env",
            "w-2 was staged with",
            "has been unstaged: it boots v1.35.1 again",
            "Nothing was rebooted",
        ],
    );
    // Unstaged: a power cut (or Kured, once the lock is back) boots the
    // kubelet that runs, not the one that refuses the file.
    let link = fleet
        .ssh_ok("w-2", "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap();
    assert!(
        link.trim().ends_with("kubernetes-v1.35.1-x86-64.raw"),
        "{link}"
    );
    let log = events(&fleet);
    assert!(before_end <= log.len());
    assert_eq!(reboots(&log, "w-2"), 0, "{}", support::describe(&log));
    assert_eq!(reboots(&log, "w-1"), 1, "{}", support::describe(&log));
    assert_eq!(upgrade_nodes(&log, "w-2"), vec![m("v1.37")]);
    assert_invariants_hold(&log);
    let c = support::assert_consistent(&fleet, &["cp-1", "w-1", "w-2"], None);
    assert_eq!(c.nodes["w-2"].kubelet_version, "v1.35.1");

    // The operator removes the flag; a rerun reboots w-2 alone, once.
    fleet
        .ssh_ok(
            "w-2",
            "root",
            &format!("sed -i 's/{POD_INFRA}=[^ \"]* //' {FLAGS_FILE}"),
        )
        .unwrap();
    let start = events(&fleet).len();
    apply(&fleet, &[]).expect_code(0);
    let rest = &events(&fleet)[start..];
    assert_eq!(reboots(rest, "w-2"), 1, "{}", support::describe(rest));
    assert_eq!(reboots(rest, "w-1") + reboots(rest, "cp-1"), 0);
    assert!(
        upgrade_nodes(rest, "w-2").is_empty(),
        "its kubeadm step ran"
    );
    assert_invariants_hold(&events(&fleet));
    assert_on_target(&fleet, &["cp-1", "w-1", "w-2"], &target);
}

#[test]
fn a_control_plane_where_kubeadm_leaves_a_refused_flag_is_not_rebooted() {
    // Two control planes, v1.35 to v1.36: both run their kubeadm step, then
    // they reboot one at a time. While cp-1 reboots, the flag comes back
    // into cp-2's kubeadm-flags.env (after the hop's checks and its kubeadm
    // step); kubeadm v1.36 does not strip it and the v1.36 kubelet refuses it.
    let fleet = support::start(
        support::scenario()
            .control_planes(2)
            .workers(1)
            .kubernetes("v1.35.1"),
    );
    let saved = plan(&fleet, "v1.36", &[]);
    let target = last_hop_version(&saved);
    let mut running = spawn_apply(&fleet);
    running.wait_for("cp-1: gates, then drain");
    fleet
        .ssh_ok(
            "cp-2",
            "root",
            &format!(
                "sed -i 's|^KUBELET_KUBEADM_ARGS=\"|&{POD_INFRA}=registry.k8s.io/pause:3.10 |' {FLAGS_FILE}"
            ),
        )
        .unwrap();
    let run = running.finish().expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "not rebooting cp-2: the",
            "kubelet would refuse to start",
            "cp-2: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env",
            "Nothing was rebooted in this step",
        ],
    );
    let log = events(&fleet);
    assert_eq!(reboots(&log, "cp-1"), 1, "{}", support::describe(&log));
    assert_eq!(reboots(&log, "cp-2"), 0, "{}", support::describe(&log));
    assert_eq!(reboots(&log, "w-1"), 0, "{}", support::describe(&log));
    assert_eq!(upgrade_nodes(&log, "cp-2"), vec![m("v1.36")]);
    assert_invariants_hold(&log);
    let c = support::assert_consistent(&fleet, &["cp-1", "cp-2", "w-1"], None);
    assert_eq!(c.nodes["cp-2"].kubelet_version, "v1.35.1");
    // Looked at before its pin and stage: not armed for a power cut.
    let link = fleet
        .ssh_ok("cp-2", "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap();
    assert!(link.trim().ends_with(&image("v1.35.1")), "{link}");

    // The operator removes the flag; a rerun reboots cp-2 without running
    // its kubeadm step again, then the worker.
    fleet
        .ssh_ok(
            "cp-2",
            "root",
            &format!("sed -i 's/{POD_INFRA}=[^ \"]* //' {FLAGS_FILE}"),
        )
        .unwrap();
    let start = events(&fleet).len();
    apply(&fleet, &[]).expect_code(0);
    let rest = &events(&fleet)[start..];
    assert_eq!(reboots(rest, "cp-2"), 1, "{}", support::describe(rest));
    assert_eq!(reboots(rest, "cp-1"), 0, "{}", support::describe(rest));
    assert!(
        upgrade_nodes(rest, "cp-2").is_empty(),
        "its kubeadm step ran"
    );
    assert_invariants_hold(&events(&fleet));
    assert_on_target(&fleet, &["cp-1", "cp-2", "w-1"], &target);
}

#[test]
fn a_cgroup_v1_control_plane_whose_kubeadm_dropped_fail_cgroup_v1_is_not_rebooted() {
    // cp-1 runs on cgroup v1 and its config.yaml allows it; the plan to
    // v1.35 says that is lost at the kubeadm step, and the operator goes
    // past both blocks anyway. `upgrade apply` (let past SystemVerification)
    // rewrites config.yaml from the cluster's kubelet-config, which does not
    // allow it: the v1.35 kubelet would not start, and cp-1 is the only API
    // server, so the last look before its reboot still stops it.
    const CONFIG: &str = "/var/lib/kubelet/config.yaml";
    // Real-OS nodes boot on cgroup v2 only (docs/simulator.md).
    let fleet = support::start(
        support::on_emulated_os(scenario(1, "v1.34.2")).with_node("cp-1", |n| n.cgroup_v1 = true),
    );
    let allow = format!("printf 'failCgroupV1: false\\n' >> {CONFIG}");
    fleet.ssh_ok("cp-1", "root", &allow).unwrap();
    let saved = plan(
        &fleet,
        "v1.35",
        &[
            "--ignore-check",
            "cgroup",
            "--ignore-check",
            "kubelet-config",
        ],
    );
    let target = last_hop_version(&saved);
    let start = events(&fleet).len();
    let run = apply(&fleet, &[]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "not rebooting cp-1: the",
            "cp-1: cgroup v1",
            "Nothing was rebooted in this step",
        ],
    );
    let log = &events(&fleet)[start..];
    assert_eq!(reboots(log, "cp-1"), 0, "{}", support::describe(log));
    assert_eq!(reboots(log, "w-1"), 0, "{}", support::describe(log));
    assert_invariants_hold(log);
    let link = fleet
        .ssh_ok("cp-1", "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap();
    assert!(link.trim().ends_with(&image("v1.34.2")), "{link}");

    // Allowed again where kubeadm left it, a rerun finishes.
    fleet.ssh_ok("cp-1", "root", &allow).unwrap();
    apply(&fleet, &[]).expect_code(0);
    assert_invariants_hold(&events(&fleet));
    assert_on_target(&fleet, &["cp-1", "w-1"], &target);
}

#[test]
fn every_hop_plans_todays_order_and_apply_follows_the_saved_strategy() {
    let fleet = fleet_of(2, "v1.35.1");
    let every = plan(&fleet, "v1.37", &["--workers", "every-hop"]);
    assert_eq!(every.workers.strategy, WorkerStrategy::EveryHop);
    for hop in &every.hops {
        for w in workers(2) {
            assert!(
                hop.steps()
                    .any(|s| s.node == w && s.action == fleetctl::plan::Action::Roll),
                "{w} in hop {}",
                hop.minor
            );
        }
    }
    let jump = plan(&fleet, "v1.37", &[]);
    assert!(
        jump.hops[0].steps().all(|s| s.node == "cp-1"),
        "{:?}",
        jump.hops[0]
    );
    assert_eq!(jump.workers.saved(), 2);

    // The saved plan says every-hop; apply follows it.
    plan(&fleet, "v1.37", &["--workers", "every-hop"]);
    let target = last_hop_version(&every);
    let start = events(&fleet).len();
    apply(&fleet, &[]).expect_code(0);
    let log = &events(&fleet)[start..];
    assert_invariants_hold(log);
    for w in workers(2) {
        assert_eq!(reboots(log, &w), 2, "{w}\n{}", support::describe(log));
        assert_eq!(upgrade_nodes(log, &w), vec![m("v1.36"), m("v1.37")]);
    }
    assert_on_target(&fleet, &["cp-1", "w-1", "w-2"], &target);
}

#[test]
fn a_run_stopped_after_some_workers_jumped_is_finished_by_a_rerun() {
    let fleet = fleet_of(3, "v1.35.1");
    let saved = plan(&fleet, "v1.37", &[]);
    let target = last_hop_version(&saved);
    let start = events(&fleet).len();
    let mut running = spawn_apply(&fleet);
    // The control plane is on the target, w-1 has jumped, w-2 is next.
    running.wait_for("w-2: gates, then drain");
    running.signal("INT");
    let run = running.finish().expect_code(1);
    assert_has(&run.stderr, &["Run `fleetctl apply` again to continue"]);
    let first = events(&fleet)[start..].to_vec();
    assert_eq!(reboots(&first, "w-1"), 1);
    assert_eq!(reboots(&first, "w-3"), 0);

    let again = apply(&fleet, &[]).expect_code(0);
    assert_has(&again.stderr, &["done:"]);
    let all = &events(&fleet)[start..];
    assert_invariants_hold(all);
    assert_eq!(reboots(all, "cp-1"), 2, "{}", support::describe(all));
    for w in workers(3) {
        assert_eq!(reboots(all, &w), 1, "{w}\n{}", support::describe(all));
        assert_eq!(upgrade_nodes(all, &w), vec![m("v1.37")], "{w}");
    }
    let mut nodes = vec!["cp-1".to_string()];
    nodes.extend(workers(3));
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    assert_on_target(&fleet, &nodes, &target);
}

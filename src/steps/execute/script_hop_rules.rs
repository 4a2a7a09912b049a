//! The rules of kubeadm's steps in the script, on the fake fleet
//! (`super::fake_script`), which tests/cli/jump.rs, checks.rs and
//! etcd_cgroup.rs proved on real-OS fleets (docs/rules-on-the-fake.md):
//! a refused last look or a failed etcd snapshot stops the run before
//! anything after it, and apply follows the plan's worker strategy — each
//! worker gets the kubeadm steps and reboots the planner gave it, after the
//! control plane is on the target.

use futures_util::FutureExt;

use super::fake_script::FakeScript;
use super::run_over;
use crate::plan::testkit::{self, hub};
use crate::plan::{Plan, WorkerStrategy, plan_with};
use crate::steps::script::tests::{inventory, plan, shape};
use crate::steps::script::{Task, of_plan};

/// The run of `plan`'s script on a fresh fake, with `fails` injected.
fn fake_run<'a>(plan: &'a Plan, fails: Option<&str>) -> (FakeScript<'a>, anyhow::Result<()>) {
    let tasks: Vec<Task> = of_plan(plan, &inventory(), shape("1", true, true));
    let mut fake = FakeScript::new(plan, true);
    fake.fails = fails.map(String::from);
    let result = run_over(&mut fake, &tasks)
        .now_or_never()
        .expect("nothing on the fake waits")
        .map_err(|(_, e)| e);
    (fake, result)
}

/// The effects after the injected failure.
fn after_failure(fake: &FakeScript<'_>) -> Vec<String> {
    let at = fake
        .log
        .iter()
        .position(|l| l.ends_with("FAILED"))
        .expect("the fault was hit");
    fake.log[at + 1..].to_vec()
}

/// A last look that finds a flag or a cgroup the new kubelet refuses
/// (`crate::steps::last_look`) stops the run: its batch is not rebooted,
/// nor anything after it.
#[test]
fn a_refused_last_look_stops_the_run_before_its_batch_reboots() {
    let plan = plan();
    let (whole, done) = fake_run(&plan, None);
    done.expect("the run without faults");
    let looks: Vec<String> = whole
        .log
        .iter()
        .filter(|l| l.starts_with("last-look "))
        .cloned()
        .collect();
    assert!(looks.len() >= 3, "{:?}", whole.log);
    for look in looks {
        let (fake, result) = fake_run(&plan, Some(&look));
        let e = result.expect_err(&look);
        assert!(format!("{e:#}").contains(&look), "{look}: {e:#}");
        let after = after_failure(&fake);
        assert!(after.is_empty(), "{look}: after it: {after:?}");
        for node in look["last-look ".len()..].split(',') {
            assert!(!fake.nodes[node].rolled, "{look}: {node} rebooted");
        }
        assert!(fake.violations.is_empty(), "{look}: {:?}", fake.violations);
    }
}

/// A snapshot that fails (etcdctl's error, a copy whose sha256 or etcd's
/// own integrity hash does not match: `crate::steps::etcd`) stops the hop
/// before `upgrade apply`, and nothing of it ran.
#[test]
fn a_failed_etcd_snapshot_stops_the_hop_before_upgrade_apply() {
    let plan = plan();
    let (fake, result) = fake_run(&plan, Some("etcd-snapshot cp-1"));
    let e = result.expect_err("the snapshot failed");
    assert!(format!("{e:#}").contains("etcd-snapshot cp-1"), "{e:#}");
    assert!(after_failure(&fake).is_empty(), "{:?}", fake.log);
    assert!(
        !fake.log.iter().any(|l| l.starts_with("kubeadm ")),
        "{:?}",
        fake.log
    );
    assert!(fake.violations.is_empty(), "{:?}", fake.violations);
}

/// 1 control plane and 2 workers at `version`, planned to v1.37 with
/// `strategy` against a hub with every minor from v1.34; `w-2` may hold the
/// pod-infra flag in its kubeadm-flags.env.
fn planned(version: &str, strategy: WorkerStrategy, w2_pod_infra: bool) -> Plan {
    let mut fleet = testkit::fleet(version)
        .cp("cp-1", version)
        .worker("w-1", version)
        .worker("w-2", version);
    if w2_pod_infra {
        fleet = fleet.with("w-2", |f| {
            f.kubelet_files.insert(
                crate::checks::KUBEADM_FLAGS_ENV.to_string(),
                "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
                    .to_string(),
            );
        });
    }
    let hub = hub(&[(34, 0), (35, 0), (36, 0), (37, 0)]);
    plan_with(&fleet.build(), &"v1.37".parse().unwrap(), &hub, strategy).unwrap()
}

fn count(log: &[String], line: &str) -> usize {
    log.iter().filter(|l| *l == line).count()
}

/// The whole run of `plan` on the fake: every rule kept; each node's
/// kubeadm steps and reboots counted.
fn ran(plan: &Plan) -> Vec<String> {
    let (fake, result) = fake_run(plan, None);
    result.expect("the run without faults");
    assert!(fake.violations.is_empty(), "{:?}", fake.violations);
    fake.log
}

#[test]
fn jumping_workers_take_one_kubeadm_step_and_one_reboot_after_the_control_plane_is_on_the_target() {
    let plan = planned("v1.35.0", WorkerStrategy::Jump, false);
    let log = ran(&plan);
    assert_eq!(count(&log, "kubeadm apply cp-1"), 2, "{log:?}");
    assert_eq!(count(&log, "roll cp-1"), 2, "{log:?}");
    let cp_last_roll = log.iter().rposition(|l| l == "roll cp-1").unwrap();
    for w in ["w-1", "w-2"] {
        assert_eq!(count(&log, &format!("kubeadm node {w}")), 1, "{w}: {log:?}");
        assert_eq!(count(&log, &format!("roll {w}")), 1, "{w}: {log:?}");
        let step = log
            .iter()
            .position(|l| *l == format!("kubeadm node {w}"))
            .unwrap();
        assert!(step > cp_last_roll, "{w} before the target: {log:?}");
    }
}

#[test]
fn every_hop_workers_take_each_minor_after_the_control_plane() {
    let plan = planned("v1.35.0", WorkerStrategy::EveryHop, false);
    let log = ran(&plan);
    let cp_rolls: Vec<usize> = (0..log.len()).filter(|&i| log[i] == "roll cp-1").collect();
    assert_eq!(cp_rolls.len(), 2, "{log:?}");
    for w in ["w-1", "w-2"] {
        let steps: Vec<usize> = (0..log.len())
            .filter(|&i| log[i] == format!("kubeadm node {w}"))
            .collect();
        assert_eq!(steps.len(), 2, "{w}: {log:?}");
        assert_eq!(count(&log, &format!("roll {w}")), 2, "{w}: {log:?}");
        // One per hop, each after the control plane's reboot of that hop.
        assert!(cp_rolls[0] < steps[0] && steps[0] < cp_rolls[1], "{log:?}");
        assert!(cp_rolls[1] < steps[1], "{log:?}");
    }
}

/// The worker whose kubeadm-flags.env holds the flag only kubeadm v1.35
/// strips takes the v1.35 hop on its way; the other jumps.
#[test]
fn a_worker_holding_pod_infra_takes_v1_35_on_its_jump_and_the_other_jumps_straight() {
    let plan = planned("v1.34.0", WorkerStrategy::Jump, true);
    let log = ran(&plan);
    assert_eq!(count(&log, "roll cp-1"), 3, "{log:?}");
    assert_eq!(count(&log, "kubeadm node w-1"), 1, "{log:?}");
    assert_eq!(count(&log, "roll w-1"), 1, "{log:?}");
    assert_eq!(count(&log, "kubeadm node w-2"), 2, "{log:?}");
    assert_eq!(count(&log, "roll w-2"), 2, "{log:?}");
    // w-2's v1.35 step comes after the control plane's first reboot, before
    // its second.
    let cp: Vec<usize> = (0..log.len()).filter(|&i| log[i] == "roll cp-1").collect();
    let w2 = log.iter().position(|l| l == "kubeadm node w-2").unwrap();
    assert!(cp[0] < w2 && w2 < cp[1], "{log:?}");
}

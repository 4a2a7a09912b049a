//! Property tests of whole runs: random plans and random fault points
//! (issue 39). A random fleet (1–3 control planes, 0–6 workers in up to
//! two zones, every node on some patch of one minor) is planned to a
//! target 1–3 minors above by the real pure planner (`crate::plan::plan_with`,
//! every-hop or jump), its tasks built as apply builds them
//! (`script::of_plan`, with `--max-unavailable`), and run by the run's own
//! loop and interpreter (`super::run_over`) over the model of
//! `model_world`, whose rolls take the roll's own order over its fake
//! fleet. The rules of `skew_invariants` are checked after every effect of
//! the script and every step of a roll.
//!
//! Each case runs three times: once clean (it must reach the target), once
//! with one fault at a random point (a drain that fails, a node not back, a
//! crash-looping kubelet, a kubeadm step that fails, a stop or the lease
//! lapsing after any effect, a lease too short for a reboot), which must
//! leave a safe point — and, with `--on-failure rollback`, the crash-looping
//! node goes back as `super::after_failed_roll` decides it
//! (`plan::rollbacks`, `script::of_rollbacks`) — and then, once the
//! operator fixed the cause, a rerun planned from what the fault left,
//! which must reach the target without a second `upgrade apply` of any
//! minor.

use futures_util::FutureExt;
use proptest::prelude::*;

use super::run_over;
use crate::hub::HubVersions;
use crate::inventory::{Inventory, Role};
use crate::plan::testkit::{fleet, hub};
use crate::plan::{FleetState, MaxUnavailable, Plan, WorkerStrategy};
use crate::steps::Interrupted;
use crate::steps::on_failure::not_up;
use crate::steps::script::{Shape, Task, of_plan, of_rollbacks};
use crate::version::{Minor, TargetVersion, Version};

mod model_world;
mod skew_invariants;
use model_world::{ModelFleet, ModelScript};

/// The fault injected in the second run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    DrainFails,
    DrainLost,
    NotBack,
    CrashLoop,
    KubeadmFails,
    Stop,
    LeaseLapses,
    LeaseTooShort,
}

#[derive(Debug, Clone)]
struct Case {
    cps: usize,
    /// Each worker's zone: none, `a` or `b`.
    zones: Vec<u8>,
    minor: u64,
    /// The newest patch the hub publishes of each minor from `minor` on.
    newest: [u64; 4],
    /// Each node's patch (modulo what the hub has).
    patches: [u64; 9],
    hops: u64,
    /// `fleetctl plan v1.X.Y` with this patch (modulo what the hub has of
    /// the target minor: any published one, the newest or older); else
    /// `v1.X`.
    exact: Option<u64>,
    jump: bool,
    max_unavailable: usize,
    rollback: bool,
    kured: bool,
    soak: bool,
    fault: Fault,
    /// Which node the fault hits, which kubeadm step, after which effect.
    fault_node: usize,
    fault_at: f64,
}

fn case() -> impl Strategy<Value = Case> {
    let fault = prop_oneof![
        Just(Fault::DrainFails),
        Just(Fault::DrainLost),
        Just(Fault::NotBack),
        Just(Fault::CrashLoop),
        Just(Fault::KubeadmFails),
        Just(Fault::Stop),
        Just(Fault::LeaseLapses),
        Just(Fault::LeaseTooShort),
    ];
    (
        (1usize..=3, prop::collection::vec(0u8..3, 0..=6), 31u64..=35),
        (
            prop::array::uniform4(0u64..=3),
            prop::array::uniform9(0u64..=3),
        ),
        (
            1u64..=3,
            prop::option::of(0u64..=3),
            any::<bool>(),
            1usize..=3,
        ),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (fault, any::<usize>(), 0.0f64..1.0),
    )
        .prop_map(
            |(
                (cps, zones, minor),
                (newest, patches),
                (hops, exact, jump, max_unavailable),
                (rollback, kured, soak),
                (fault, fault_node, fault_at),
            )| Case {
                cps,
                zones,
                minor,
                newest,
                patches,
                hops,
                exact,
                jump,
                max_unavailable,
                rollback,
                kured,
                soak,
                fault,
                fault_node,
                fault_at,
            },
        )
}

impl Case {
    fn names(&self) -> Vec<(String, Role)> {
        (1..=self.cps)
            .map(|i| (format!("cp-{i}"), Role::ControlPlane))
            .chain((1..=self.zones.len()).map(|i| (format!("w-{i}"), Role::Worker)))
            .collect()
    }

    fn hub(&self) -> HubVersions {
        let series: Vec<(u64, u64)> = (0..4)
            .map(|i| (self.minor + i, self.newest[i as usize]))
            .collect();
        hub(&series)
    }

    fn target(&self) -> TargetVersion {
        let minor = Minor::new(1, self.minor + self.hops);
        match self.exact {
            Some(p) => {
                TargetVersion::Exact(minor.with_patch(p % (self.newest[self.hops as usize] + 1)))
            }
            None => TargetVersion::Minor(minor),
        }
    }

    /// The patch every node must end on: the hub's newest of the target
    /// minor.
    fn target_version(&self) -> Option<Version> {
        self.hub().newest(self.target().minor()).cloned()
    }

    /// Every node on some patch of `minor`, settled; the cluster on the first's.
    fn state(&self) -> FleetState {
        let patch = |i: usize| Version::new(1, self.minor, self.patches[i] % (self.newest[0] + 1));
        let mut f = fleet(&patch(0).to_string());
        for (i, (name, role)) in self.names().into_iter().enumerate() {
            f = f.node(&name, role, &patch(i).to_string());
        }
        f.build()
    }

    fn inventory(&self) -> Inventory {
        let mut text = format!(
            "kubernetes_version: v1.{}\nsysupdate:\n  hub: https://hub.example/ext\nssh:\n  user: core\n  \
             identity_file: /nonexistent/id\n  host_key_checking: strict\nnodes:\n",
            self.minor + self.hops
        );
        for (i, (name, role)) in self.names().into_iter().enumerate() {
            let (role, zone) = match role {
                Role::ControlPlane => ("control-plane", 0),
                Role::Worker => ("worker", self.zones[i - self.cps]),
            };
            let zone = ["", ", zone: a", ", zone: b"][usize::from(zone)];
            text.push_str(&format!(
                "  - {{name: {name}, address: 10.0.0.{}, role: {role}{zone}}}\n",
                i + 1
            ));
        }
        crate::inventory::parse(&text, std::path::Path::new("/tmp/inventory.yaml"))
            .expect("a valid inventory")
    }

    fn plan(&self, state: &FleetState) -> Result<Plan, TestCaseError> {
        let strategy = match self.jump {
            true => WorkerStrategy::Jump,
            false => WorkerStrategy::EveryHop,
        };
        crate::plan::plan_with(state, &self.target(), &self.hub(), strategy)
            .map_err(|r| TestCaseError::fail(format!("the planner refused: {r:?}")))
    }

    fn tasks(&self, plan: &Plan) -> Vec<Task> {
        let shape = Shape {
            max_unavailable: MaxUnavailable::Count(self.max_unavailable),
            soak: self.soak,
            etcd_snapshot: true,
        };
        of_plan(plan, &self.inventory(), shape)
    }

    fn model(&self) -> ModelFleet {
        let max_out = MaxUnavailable::Count(self.max_unavailable).of(self.zones.len());
        ModelFleet::new(self.state(), self.hub(), max_out, self.kured)
    }
}

type RunResult = Result<(), (Option<usize>, anyhow::Error)>;

fn run(m: &mut ModelFleet, plan: &Plan, tasks: &[Task]) -> RunResult {
    run_over(&mut ModelScript { plan, m }, tasks)
        .now_or_never()
        .expect("nothing in the model waits")
}

/// No rule was broken, the roll's own included.
fn kept_the_rules(m: &ModelFleet, when: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        m.violations.is_empty(),
        "{}: {:#?}\nscript: {:#?}\nroll: {:#?}",
        when,
        m.violations,
        m.log,
        m.roll.log
    );
    Ok(())
}

/// The fleet at the target: every node on the hub's newest patch of the
/// target minor, staged nothing else, Ready and uncordoned; kubeadm-config
/// there; each minor on the way applied exactly once; nothing left to plan.
fn at_target(c: &Case, m: &ModelFleet, when: &str) -> Result<(), TestCaseError> {
    let target = c.target().minor();
    let want = c.target_version();
    for n in &m.state.nodes {
        let k = &n.facts.kubernetes;
        prop_assert_eq!(&k.running, &want, "{}: {} not at the target", when, &n.name);
        prop_assert_eq!(
            &k.staged,
            &k.running,
            "{}: {} left something staged",
            when,
            &n.name
        );
        let fake = &m.roll.nodes[&n.name];
        prop_assert!(
            fake.up && fake.ready && !fake.cordoned,
            "{}: {} {:?}",
            when,
            &n.name,
            fake
        );
    }
    prop_assert!(
        m.roll.ledger.is_empty(),
        "{}: ledger {:?}",
        when,
        m.roll.ledger
    );
    let cluster = m.state.cluster.version.as_ref().map(|v| v.minor());
    prop_assert_eq!(cluster, Some(target), "{}", when);
    let mut applies = m.applies.clone();
    applies.sort();
    let once: Vec<Minor> = (c.minor + 1..=target.minor)
        .map(|i| Minor::new(1, i))
        .collect();
    prop_assert_eq!(applies, once, "{}: each minor applied exactly once", when);
    let again = c.plan(&m.state)?;
    prop_assert!(again.is_noop(), "{}: not converged", when);
    Ok(())
}

/// Where a faulted run stopped: nothing cordoned the ledger does not
/// know, and nothing out of service but the node the fault left so (not
/// back, or crash-looping with `--on-failure stop`).
fn safe_point(c: &Case, m: &ModelFleet, result: &RunResult) -> Result<(), TestCaseError> {
    let cordoned: Vec<&String> = m
        .roll
        .nodes
        .iter()
        .filter(|(_, n)| n.cordoned)
        .map(|(k, _)| k)
        .collect();
    let ledger: Vec<&String> = m.roll.ledger.iter().collect();
    prop_assert_eq!(
        &cordoned,
        &ledger,
        "cordoned but not in the ledger, or the reverse"
    );
    let left_out = matches!(c.fault, Fault::NotBack | Fault::CrashLoop);
    for (name, n) in &m.roll.nodes {
        let out = !n.up || !n.ready || n.cordoned;
        prop_assert!(
            !out || left_out,
            "{} left out of service: {:?}, {:?}",
            name,
            n,
            result
        );
    }
    prop_assert!(cordoned.len() <= 1, "{:?} left cordoned", cordoned);
    if let (Fault::Stop, Err((_, e))) = (c.fault, result) {
        prop_assert!(e.chain().any(|x| x.is::<Interrupted>()), "{:#}", e);
    }
    Ok(())
}

/// `--on-failure rollback` after a roll whose node is not up on its new
/// kubelet, as `super::after_failed_roll` decides it; the crash loop was
/// the new kubelet's, so the kept one runs.
fn rolled_back(
    m: &mut ModelFleet,
    plan: &Plan,
    tasks: &[Task],
    result: &RunResult,
) -> Result<(), TestCaseError> {
    let Err((Some(i), e)) = result else {
        return Ok(());
    };
    if !matches!(
        tasks[*i],
        Task::Roll {
            rollback: false,
            ..
        }
    ) {
        return Ok(());
    }
    let names: Vec<String> = not_up(e).into_iter().map(|n| n.node).collect();
    if names.is_empty() {
        return Ok(());
    }
    m.rollback_starts();
    let Ok(rollbacks) = crate::plan::rollbacks(&m.state, &names) else {
        // Refused: nothing is changed, the run stops as it is.
        return Ok(());
    };
    let mut back = plan.clone();
    back.hops = rollbacks.iter().map(crate::plan::rollback_hop).collect();
    let tasks = of_rollbacks(&back);
    let result = run(m, &back, &tasks);
    prop_assert!(
        result.is_ok(),
        "the rollback of {:?} failed: {:?}",
        names,
        result.err()
    );
    kept_the_rules(m, "the rollback")?;
    for name in &names {
        let n = &m.roll.nodes[name];
        prop_assert!(
            n.up && n.ready && !n.cordoned,
            "{} after its rollback: {:?}",
            name,
            n
        );
    }
    Ok(())
}

fn inject(c: &Case, m: &mut ModelFleet, total: usize) {
    let names: Vec<String> = m.roll.nodes.keys().cloned().collect();
    let node = names[c.fault_node % names.len()].clone();
    let at = 1 + (c.fault_at * total as f64) as usize;
    // The drain fits, the reboot and its wait do not.
    let too_short = m.roll.node_timeout - std::time::Duration::from_secs(1);
    let kubeadm_steps = c.hops as usize * names.len();
    let f = &mut m.roll.faults;
    match c.fault {
        Fault::DrainFails => _ = f.drain_fails.insert(node),
        Fault::DrainLost => _ = f.drain_lost.insert(node),
        Fault::NotBack => _ = f.not_back.insert(node),
        Fault::CrashLoop => _ = f.crash_loop.insert(node),
        Fault::LeaseTooShort => f.lease_left = Some(too_short),
        Fault::KubeadmFails => m.kubeadm_fails = Some(1 + c.fault_node % kubeadm_steps),
        Fault::Stop => m.stop_at = Some((at, false)),
        Fault::LeaseLapses => m.stop_at = Some((at, true)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_plans_keep_every_rule_through_a_fault_and_a_rerun(c in case()) {
        let state = c.state();
        let plan = c.plan(&state)?;
        let tasks = c.tasks(&plan);

        let mut clean = c.model();
        let result = run(&mut clean, &plan, &tasks);
        prop_assert!(result.is_ok(), "the clean run: {:?}", result.err());
        kept_the_rules(&clean, "the clean run")?;
        at_target(&c, &clean, "the clean run")?;

        let mut m = c.model();
        inject(&c, &mut m, clean.effects());
        let result = run(&mut m, &plan, &tasks);
        kept_the_rules(&m, "the run with a fault")?;
        if c.rollback {
            rolled_back(&mut m, &plan, &tasks, &result)?;
        }
        safe_point(&c, &m, &result)?;

        m.fixed_by_the_operator();
        let again = c.plan(&m.state)?;
        let tasks = c.tasks(&again);
        let result = run(&mut m, &again, &tasks);
        prop_assert!(result.is_ok(), "the rerun: {:?}", result.err());
        kept_the_rules(&m, "the rerun")?;
        at_target(&c, &m, "the rerun")?;
    }
}

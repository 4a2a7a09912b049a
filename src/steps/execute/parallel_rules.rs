//! The rules of a parallel phase (`super::parallel_phase::phase`, the
//! run's own) on a fake world: which nodes run at once (never more than
//! `--parallel`, and as many as it allows), each node's steps in its own
//! order, every node marked in progress before any step, and what a
//! failure of one does to the rest (they run to their end and are
//! recorded; the failed node's later steps never run; the phase fails
//! naming it). The jobs run as tokio tasks, as in the run, on a runtime of
//! one thread: milliseconds.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::anyhow;

use super::parallel_phase::{PhaseJob, PhaseWorld, phase};
use crate::plan::{Action, Hop, PhaseKind, Plan};
use crate::steps::script::At;
use crate::steps::script::tests::plan;

/// What the jobs share: the log, how many run now, the most at once.
#[derive(Default)]
struct Running {
    log: Vec<String>,
    now: usize,
    most: usize,
}

#[derive(Default)]
struct FakePhase {
    limit: usize,
    running: Arc<Mutex<Running>>,
    /// The node whose `n`th step (from 0) fails.
    fails: Option<(String, usize)>,
    marked: Vec<String>,
}

struct FakeJob {
    node: String,
    running: Arc<Mutex<Running>>,
    fails_at: Option<usize>,
    steps: usize,
}

fn log(running: &Mutex<Running>, what: String) {
    running.lock().unwrap().log.push(what);
}

/// A step's name in the log: `w-1 stage`.
fn named(node: &str, action: &Action) -> String {
    let what = match action {
        Action::Download { .. } => "download",
        Action::UpgradeNode { .. } => "kubeadm",
        Action::Stage { .. } => "stage",
        Action::Pin { .. } => "pin",
        _ => "other",
    };
    format!("{node} {what}")
}

impl PhaseJob for FakeJob {
    type Facts = String;

    /// Counted as running from its start to its end, handing the thread to
    /// the other tasks in between, as a step waiting on its node does.
    async fn step(&mut self, action: Action) -> anyhow::Result<()> {
        let name = named(&self.node, &action);
        {
            let mut r = self.running.lock().unwrap();
            r.now += 1;
            r.most = r.most.max(r.now);
            r.log.push(format!("start {name}"));
        }
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        self.running.lock().unwrap().now -= 1;
        let n = self.steps;
        self.steps += 1;
        if self.fails_at == Some(n) {
            log(&self.running, format!("FAILED {name}"));
            return Err(anyhow!("{name}: failed (injected)"));
        }
        log(&self.running, format!("end {name}"));
        Ok(())
    }

    async fn settled(&self) -> anyhow::Result<String> {
        Ok(format!("{} settled", self.node))
    }
}

impl PhaseWorld for FakePhase {
    type Job = FakeJob;

    fn limit(&self) -> usize {
        self.limit
    }

    fn in_progress(&self, node: &str) -> bool {
        self.marked.iter().any(|m| m == node)
    }

    fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        log(&self.running, format!("mark {node}"));
        self.marked.push(node.to_string());
        Ok(())
    }

    fn begin(&mut self, _: &str, _: &str) {}

    fn say_step(&mut self, _: &str) {}

    fn job(&mut self, node: &str, _: &Hop) -> anyhow::Result<FakeJob> {
        let fails_at = match &self.fails {
            Some((n, at)) if n == node => Some(*at),
            _ => None,
        };
        Ok(FakeJob {
            node: node.to_string(),
            running: self.running.clone(),
            fails_at,
            steps: 0,
        })
    }

    fn job_done(&mut self, node: &str, _: FakeJob) {
        log(&self.running, format!("done {node}"));
    }

    fn advance(&mut self) {}

    async fn finish_node(&mut self, node: &str, facts: Option<String>) -> anyhow::Result<()> {
        log(&self.running, format!("record {node} ({facts:?})"));
        Ok(())
    }
}

/// The plan's workers' phase (each worker: kubeadm, then stage), each
/// worker's stage its last step of the hop; run on `fake`.
fn run_workers(fake: &mut FakePhase) -> (anyhow::Result<()>, Vec<String>) {
    let plan: Plan = plan();
    let hop = &plan.hops[0];
    let p = hop
        .phases
        .iter()
        .position(|ph| ph.kind == PhaseKind::WorkerPreparation)
        .expect("a workers' phase");
    let last: BTreeMap<String, At> = hop.phases[p]
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.node.clone(), (p, i)))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let result = rt.block_on(phase(fake, hop, p, &hop.phases[p], &last));
    let log = fake.running.lock().unwrap().log.clone();
    (result, log)
}

fn position(log: &[String], what: &str) -> usize {
    log.iter()
        .position(|l| l == what)
        .unwrap_or_else(|| panic!("no `{what}` in {log:#?}"))
}

#[test]
fn at_most_parallel_nodes_run_at_once_each_in_its_own_order() {
    for limit in [1, 2, 3, 5] {
        let mut fake = FakePhase {
            limit,
            ..FakePhase::default()
        };
        let (result, log) = run_workers(&mut fake);
        result.expect("the phase");
        let most = fake.running.lock().unwrap().most;
        assert_eq!(most, limit.min(3), "--parallel {limit}: {log:#?}");
        let first_step = log.iter().position(|l| l.starts_with("start ")).unwrap();
        for w in ["w-1", "w-2", "w-3"] {
            // Marked in progress before any node's first step.
            assert!(
                position(&log, &format!("mark {w}")) < first_step,
                "{log:#?}"
            );
            assert!(
                position(&log, &format!("end {w} kubeadm"))
                    < position(&log, &format!("start {w} stage")),
                "{w}: staged before its kubeadm step ended: {log:#?}"
            );
            assert!(log.contains(&format!("record {w} (Some(\"{w} settled\"))")));
        }
    }
}

#[test]
fn a_failed_node_lets_the_others_run_to_their_end_and_be_recorded() {
    for limit in [1, 3] {
        let mut fake = FakePhase {
            limit,
            fails: Some(("w-2".into(), 0)),
            ..FakePhase::default()
        };
        let (result, log) = run_workers(&mut fake);
        let error = format!("{:#}", result.expect_err("the phase fails"));
        assert!(
            error.starts_with(
                "workers' kubeadm step and staging stopped; no worker was rebooted (hop v1.35.3):"
            ) && error.contains("w-2 kubeadm: failed (injected)"),
            "{error}"
        );
        // w-2 stops at its failure: never staged, not recorded.
        assert!(!log.iter().any(|l| l.contains("w-2 stage")), "{log:#?}");
        assert!(!log.iter().any(|l| l.starts_with("record w-2")), "{log:#?}");
        // The others go on to their end, are handed back and recorded.
        for w in ["w-1", "w-3"] {
            position(&log, &format!("end {w} stage"));
            position(&log, &format!("done {w}"));
            position(&log, &format!("record {w} (Some(\"{w} settled\"))"));
        }
    }
}

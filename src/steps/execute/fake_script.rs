//! An in-memory fleet the script's interpreter (`super::one`, through the
//! run's own loop `super::run_over`) runs against in the rules' tests
//! (`super::script_rules`): what each node has had done to it in the hop
//! (marked in progress, downloaded, its kubeadm step, staged, rolled,
//! recorded), with faults to inject: a change that fails, a stop asked
//! after any effect. A roll is one step here: its own rules are tested on
//! the roll's fake fleet (`crate::steps::roll`'s `flow_tests`); like the
//! real one (`roll::flow::roll_batch`), it starts at a safe point.
//!
//! After every effect the fake checks the rules the script must keep and
//! records each breach in `violations`: nothing the saved plan
//! fingerprints changed on a node before it is marked in progress; no node staged before its kubeadm step; no
//! kubeadm on a control plane before every control plane was seen Ready
//! (nor `upgrade apply` before the etcd snapshot); nothing rebooted that is
//! not staged; no task started once a stop was asked or a task failed.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::anyhow;

use super::script_world::ScriptWorld;
use crate::plan::{Action, Hop, Plan};
use crate::steps::Interrupted;
use crate::version::{Minor, Version};

#[derive(Debug, Default, Clone)]
pub(super) struct FakeNode {
    pub(super) marked: bool,
    pub(super) kubeadm: bool,
    pub(super) staged: bool,
    pub(super) rolled: bool,
    pub(super) recorded: bool,
    control_planes_ready: bool,
    snapshot: bool,
}

pub(super) struct FakeScript<'a> {
    plan: &'a Plan,
    /// Whether the script snapshots etcd before `upgrade apply`.
    etcd_snapshot: bool,
    pub(super) nodes: BTreeMap<String, FakeNode>,
    /// Every effect, in order: `"stage w-1"`, `"roll w-1"`, `"verify"`.
    pub(super) log: Vec<String>,
    pub(super) violations: Vec<String>,
    /// A stop (Ctrl-C, the lease lapsing) asked right after this many effects.
    pub(super) stop_after: Option<usize>,
    /// The effect that fails, as the log writes it.
    pub(super) fails: Option<String>,
    stopped: bool,
    failed: bool,
}

impl<'a> FakeScript<'a> {
    pub(super) fn new(plan: &'a Plan, etcd_snapshot: bool) -> Self {
        FakeScript {
            plan,
            etcd_snapshot,
            nodes: BTreeMap::new(),
            log: Vec::new(),
            violations: Vec::new(),
            stop_after: None,
            fails: None,
            stopped: false,
            failed: false,
        }
    }

    fn node(&mut self, n: &str) -> &mut FakeNode {
        self.nodes.entry(n.to_string()).or_default()
    }

    /// One effect on the world: logged, failed if it is the fault, the
    /// stop asked after it if it is the stop's.
    fn effect(&mut self, what: String) -> anyhow::Result<()> {
        if self.fails.as_deref() == Some(what.as_str()) {
            self.failed = true;
            self.log.push(format!("{what} FAILED"));
            return Err(anyhow!("{what}: failed (injected)"));
        }
        self.log.push(what);
        if self.stop_after == Some(self.log.len()) {
            self.stopped = true;
        }
        Ok(())
    }

    /// A change to what the saved plan fingerprints on `node` (its
    /// sysupdate configs, its symlink, its boot, the cluster's version:
    /// `super::changes_fingerprint`), which must be marked in progress
    /// first, or a rerun would be refused as stale.
    fn change(&mut self, what: &str, node: &str) -> anyhow::Result<()> {
        let text = format!("{what} {node}");
        if !self.node(node).marked {
            self.violations
                .push(format!("{text}: changed before it was marked in progress"));
        }
        self.effect(text)
    }

    /// Whether `hop` has a kubeadm step on `node`.
    fn has_kubeadm(hop: &Hop, node: &str) -> bool {
        hop.phases.iter().flat_map(|p| &p.steps).any(|s| {
            s.node == node
                && matches!(
                    s.action,
                    Action::UpgradeApply { .. } | Action::UpgradeNode { .. }
                )
        })
    }

    fn control_plane(&self, node: &str) -> bool {
        self.plan
            .nodes
            .iter()
            .any(|n| n.name == node && n.role == crate::inventory::Role::ControlPlane)
    }

    fn kubeadm(&mut self, kind: &str, node: &str, apply: bool) -> anyhow::Result<()> {
        let state = self.node(node).clone();
        if self.control_plane(node) && !state.control_planes_ready {
            self.violations.push(format!(
                "kubeadm {kind} {node}: before every control plane was seen Ready"
            ));
        }
        if apply && self.etcd_snapshot && !state.snapshot {
            self.violations
                .push(format!("kubeadm {kind} {node}: before the etcd snapshot"));
        }
        // `upgrade node` changes nothing the plan fingerprints; `upgrade
        // apply` changes the cluster's version.
        match apply {
            true => self.change(&format!("kubeadm {kind}"), node)?,
            false => self.effect(format!("kubeadm {kind} {node}"))?,
        }
        self.node(node).kubeadm = true;
        Ok(())
    }
}

impl ScriptWorld for FakeScript<'_> {
    fn plan(&self) -> &Plan {
        self.plan
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        match self.stopped {
            true => Err(anyhow::Error::new(Interrupted("stopped (fake)".into()))),
            false => Ok(()),
        }
    }

    /// No task starts once a stop was asked or a task failed: a stop is
    /// honoured at the next safe point, a failure stops the run.
    fn task_starts(&mut self, n: usize, _: usize, title: &str, _: Option<&str>) {
        if self.stopped || self.failed {
            self.violations.push(format!(
                "task {n} ({title}) started after a stop or a failure"
            ));
        }
    }

    fn say(&mut self, _: &str) {}

    fn say_step(&mut self, _: &str) {}

    fn advance(&mut self) {}

    fn journal(&mut self, _: &str, _: Option<&str>, _: &str) {}

    fn begin(&mut self, _: &str, _: &str) {}

    fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        self.effect(format!("mark {node}"))?;
        self.node(node).marked = true;
        Ok(())
    }

    fn in_window(&mut self, _: usize) -> anyhow::Result<()> {
        Ok(())
    }

    async fn checks(&mut self, _: usize, _: &Hop) -> anyhow::Result<()> {
        self.effect("checks".into())
    }

    async fn present_images(&mut self, _: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.effect(format!("present-images {}", nodes.join(",")))
    }

    async fn control_planes_ready(&mut self, node: &str) -> anyhow::Result<()> {
        self.effect(format!("control-planes-ready {node}"))?;
        self.node(node).control_planes_ready = true;
        Ok(())
    }

    async fn etcd_snapshot(&mut self, node: &str, _: Minor) -> anyhow::Result<()> {
        self.effect(format!("etcd-snapshot {node}"))?;
        self.node(node).snapshot = true;
        Ok(())
    }

    async fn action(&mut self, hop: &Hop, node: &str, action: &Action) -> anyhow::Result<()> {
        match action {
            Action::Download { .. } => self.effect(format!("download {node}")),
            Action::UpgradeApply { .. } => self.kubeadm("apply", node, true),
            Action::UpgradeNode { .. } => self.kubeadm("node", node, false),
            Action::Pin { .. } => self.change("pin", node),
            Action::Stage { .. } => {
                if Self::has_kubeadm(hop, node) && !self.node(node).kubeadm {
                    self.violations
                        .push(format!("stage {node}: before its kubeadm step"));
                }
                self.change("stage", node)?;
                self.node(node).staged = true;
                Ok(())
            }
            Action::Roll => self.change("roll-as-a-step", node),
            Action::Uncordon => self.effect(format!("uncordon {node}")),
            Action::RemoveImages { .. } => self.effect(format!("remove-images {node}")),
        }
    }

    /// As the real phase (`super::parallel_phase::parallel`): each node's
    /// steps in its order, every node to its end or its failure, then the
    /// phase fails if any did; marked in progress first.
    async fn parallel(&mut self, hop: &Hop, phase: usize) -> anyhow::Result<()> {
        let steps = &hop.phases[phase].steps;
        let nodes: BTreeSet<&str> = steps.iter().map(|s| s.node.as_str()).collect();
        for n in &nodes {
            if steps
                .iter()
                .any(|s| s.node == *n && super::changes_fingerprint(&s.action))
            {
                self.mark(n)?;
            }
        }
        let mut failures = Vec::new();
        for n in nodes {
            for step in steps.iter().filter(|s| s.node == n) {
                if let Err(e) = self.action(hop, n, &step.action).await {
                    failures.push(format!("{e:#}"));
                    break;
                }
            }
        }
        match failures.is_empty() {
            true => Ok(()),
            false => Err(anyhow!("the phase stopped: {}", failures.join("; "))),
        }
    }

    async fn last_look(&mut self, _: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.effect(format!("last-look {}", nodes.join(",")))
    }

    async fn roll(
        &mut self,
        nodes: &[String],
        _: Minor,
        _: Option<&Version>,
        _: bool,
    ) -> anyhow::Result<()> {
        // The real roll's first step is a safe point.
        self.check_stop()?;
        for node in nodes {
            if !self.node(node).staged {
                self.violations
                    .push(format!("roll {node}: rebooted with nothing staged"));
            }
            // The real roll marks each node before its drain.
            self.mark(node)?;
            self.change("roll", node)?;
            self.node(node).rolled = true;
        }
        Ok(())
    }

    async fn finish_node(&mut self, node: &str) -> anyhow::Result<()> {
        self.effect(format!("record {node}"))?;
        self.node(node).recorded = true;
        Ok(())
    }

    async fn verify(&mut self, _: &Hop) -> anyhow::Result<()> {
        self.effect("verify".into())
    }

    async fn soak(&mut self, _: usize) -> anyhow::Result<()> {
        self.effect("soak".into())
    }

    async fn kept_images(&mut self, _: &Hop, node: &str) -> anyhow::Result<()> {
        self.effect(format!("kept-images {node}"))
    }

    async fn ceph_before_upgrade(&mut self, node: &str) -> anyhow::Result<()> {
        self.effect(format!("ceph-before-upgrade {node}"))
    }
}

//! The world the random runs of `super` act on: the run's own loop and
//! interpreter (`crate::steps::execute::run_over`) over [`ModelScript`],
//! whose rolls go through the roll's own order (`roll::flow`, via
//! `FakeFleet::roll`) over the roll's fake fleet. What the planner reads
//! (`FleetState`) moves as the planner assumes each step moves it
//! (`crate::plan::testkit::apply_step`), so a rerun plans from exactly what
//! the stopped run left. After every effect of the script and every step
//! of a roll, the rules of `super::skew_invariants` are checked and each
//! breach recorded in `violations`.
//!
//! Faults: a stop (Ctrl-C) or the lease lapsing after any effect, counted
//! over the script's and the roll's; a kubeadm step that fails; and the
//! roll's own (`FakeFleet::faults`: a drain that fails, a node not back, a
//! kubelet that crash-loops, a lease too short for the reboot).

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::skew_invariants::{FleetNow, NodeNow, check, check_reboot};
use crate::hub::HubVersions;
use crate::inventory::Role;
use crate::plan::testkit::apply_step;
use crate::plan::{Action, FleetState, Hop, Plan, Step};
use crate::steps::Interrupted;
use crate::steps::execute::script_world::ScriptWorld;
use crate::steps::roll::fake_fleet::{FakeFleet, FakeNode};
use crate::version::{Minor, Version};

/// The fleet across runs: the facts, the nodes' service, the faults.
pub(super) struct ModelFleet {
    pub(super) state: FleetState,
    hub: HubVersions,
    pub(super) roll: FakeFleet,
    apiservers: BTreeMap<String, Minor>,
    max_out: usize,
    /// Every `upgrade apply` that completed, across runs.
    pub(super) applies: Vec<Minor>,
    pub(super) violations: Vec<String>,
    /// The script's effects, in order (the roll's are in `roll.log`).
    pub(super) log: Vec<String>,
    /// A stop asked after this many effects (script's and roll's);
    /// `true`: the lease lapses then (the keeper asks the stop).
    pub(super) stop_at: Option<(usize, bool)>,
    /// The kubeadm step that fails, counted from 1.
    pub(super) kubeadm_fails: Option<usize>,
    kubeadm_seen: usize,
    script_effects: usize,
    stopped: bool,
    failed: bool,
}

/// What a roll does not change, for the checks after its steps.
#[derive(Clone)]
struct Fixed {
    kubeadm: BTreeMap<String, Option<Minor>>,
    apiservers: BTreeMap<String, Minor>,
    cluster: Minor,
    max_out: usize,
}

fn view(fixed: &Fixed, nodes: &BTreeMap<String, FakeNode>) -> FleetNow {
    FleetNow {
        nodes: nodes
            .iter()
            .map(|(name, n)| NodeNow {
                name: name.clone(),
                control_plane: n.control_plane,
                up: n.up,
                ready: n.ready,
                cordoned: n.cordoned,
                kubelet: n.kubelet.clone(),
                staged: n.staged.clone(),
                kubeadm: fixed.kubeadm.get(name).copied().flatten(),
            })
            .collect(),
        apiservers: fixed.apiservers.clone(),
        cluster: fixed.cluster,
        max_out: fixed.max_out,
    }
}

impl ModelFleet {
    /// `state` as the planner read it; `max_out` nodes may be out at once.
    pub(super) fn new(state: FleetState, hub: HubVersions, max_out: usize, kured: bool) -> Self {
        let cluster = state.cluster.version.as_ref().map(|v| v.minor());
        let mut nodes = BTreeMap::new();
        let mut apiservers = BTreeMap::new();
        for n in &state.nodes {
            let control_plane = n.role == Role::ControlPlane;
            let running = n.facts.kubernetes.running.clone().expect("a booted node");
            if let (true, Some(c)) = (control_plane, cluster) {
                apiservers.insert(n.name.clone(), c);
            }
            nodes.insert(
                n.name.clone(),
                FakeNode {
                    control_plane,
                    up: true,
                    ready: true,
                    cordoned: state.cordoned(&n.name),
                    staged: n.facts.kubernetes.staged.clone().unwrap_or(running.clone()),
                    kubelet: running,
                    boot: 1,
                },
            );
        }
        let mut roll = FakeFleet::new(0, 0, "v1.0.0", "v1.0.0");
        (roll.nodes, roll.max_down, roll.kured_labels) = (nodes, max_out, kured);
        ModelFleet {
            state,
            hub,
            roll,
            apiservers,
            max_out,
            applies: Vec::new(),
            violations: Vec::new(),
            log: Vec::new(),
            stop_at: None,
            kubeadm_fails: None,
            kubeadm_seen: 0,
            script_effects: 0,
            stopped: false,
            failed: false,
        }
    }

    /// Every effect so far, the script's and the roll's.
    pub(super) fn effects(&self) -> usize {
        self.script_effects + self.roll.steps()
    }

    fn stop_asked(&self) -> bool {
        self.stopped || self.roll.stop_asked()
    }

    fn fixed(&self) -> Fixed {
        Fixed {
            kubeadm: (self.state.nodes.iter())
                .map(|n| {
                    (
                        n.name.clone(),
                        n.facts.kubeadm_step.as_ref().map(|v| v.minor()),
                    )
                })
                .collect(),
            apiservers: self.apiservers.clone(),
            cluster: (self.state.cluster.version.as_ref()).map_or(Minor::new(1, 0), |v| v.minor()),
            max_out: self.max_out,
        }
    }

    /// One effect of the script done: logged, the rules checked, a stop
    /// asked after it if it is the fault's.
    fn after(&mut self, what: String) {
        for n in &self.state.nodes {
            if let (Some(fake), Some(staged)) =
                (self.roll.nodes.get_mut(&n.name), &n.facts.kubernetes.staged)
            {
                fake.staged = staged.clone();
            }
        }
        self.script_effects += 1;
        self.violations
            .extend(check(&view(&self.fixed(), &self.roll.nodes), &what));
        self.log.push(what);
        if let Some((k, lapse)) = self.stop_at
            && k == self.effects()
        {
            self.stopped = true;
            if lapse {
                self.roll.faults.lease_left = Some(Duration::ZERO);
            }
        }
    }

    /// The node booted what it had staged: its facts say so.
    fn booted(&mut self, node: &str) {
        apply_step(&mut self.state, &Step::new(node, Action::Roll), &self.hub);
    }

    /// What the API says of each node, from the fake's nodes.
    fn sync_cluster(&mut self) {
        for cn in &mut self.state.cluster.nodes {
            if let Some(n) = self.roll.nodes.get(&cn.name) {
                (cn.ready, cn.cordoned) = (n.up && n.ready, n.cordoned);
            }
        }
    }

    /// A roll of `batch` by the roll's own order, each of its steps checked.
    fn roll_batch(
        &mut self,
        batch: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()> {
        if let Some((k, lapse)) = self.stop_at
            && k > self.effects()
        {
            let at = Some(self.roll.steps() + k - self.effects());
            match lapse {
                true => self.roll.faults.lease_lapses_after = at,
                false => self.roll.faults.stop_after = at,
            }
        }
        let boots: Vec<u32> = batch.iter().map(|n| self.roll.nodes[n].boot).collect();
        let fixed = self.fixed();
        self.roll.observe = Some(Box::new(move |what, nodes| {
            let now = view(&fixed, nodes);
            let mut breaches = check(&now, what);
            if let Some(node) = what.strip_prefix("reboot ") {
                breaches.extend(check_reboot(&now, node, what));
            }
            breaches
        }));
        let result = self.roll.roll(batch, minor, expect, rollback);
        self.roll.observe = None;
        self.violations.append(&mut self.roll.violations);
        for (node, boot) in batch.iter().zip(boots) {
            let n = &self.roll.nodes[node];
            if n.boot > boot && n.up {
                self.booted(node);
            }
        }
        self.sync_cluster();
        result
    }

    /// `--on-failure rollback` takes over after a failed roll: a run of its
    /// own, and the crash loop was the new kubelet's (the kept one runs).
    pub(super) fn rollback_starts(&mut self) {
        self.roll.faults.crash_loop.clear();
        self.failed = false;
    }

    /// The operator fixed what failed before the rerun: a node not back is
    /// booted (on what it had staged), a crash-looping kubelet runs; what
    /// fleetctl left cordoned stays so (its ledger knows). No fault is left.
    pub(super) fn fixed_by_the_operator(&mut self) {
        let names: Vec<String> = self.roll.nodes.keys().cloned().collect();
        for name in names {
            let n = self.roll.nodes.get_mut(&name).expect("a node");
            if !n.up {
                (n.up, n.kubelet) = (true, n.staged.clone());
                self.booted(&name);
            }
            self.roll.nodes.get_mut(&name).expect("a node").ready = true;
        }
        let mut roll = FakeFleet::new(0, 0, "v1.0.0", "v1.0.0");
        roll.nodes = std::mem::take(&mut self.roll.nodes);
        roll.ledger = std::mem::take(&mut self.roll.ledger);
        (roll.max_down, roll.kured_labels) = (self.roll.max_down, self.roll.kured_labels);
        self.roll = roll;
        self.sync_cluster();
        (self.stop_at, self.kubeadm_fails, self.stopped, self.failed) = (None, None, false, false);
    }
}

/// The script's world: one run of `plan` over the model.
pub(super) struct ModelScript<'a> {
    pub(super) plan: &'a Plan,
    pub(super) m: &'a mut ModelFleet,
}

impl ModelScript<'_> {
    fn fail(&mut self, what: String) -> anyhow::Error {
        self.m.failed = true;
        self.m.log.push(format!("{what} FAILED"));
        anyhow!("{what}: failed (injected); nothing of it was changed")
    }
}

impl ScriptWorld for ModelScript<'_> {
    fn plan(&self) -> &Plan {
        self.plan
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        match self.m.stop_asked() {
            true => Err(anyhow::Error::new(Interrupted("stopped (model)".into()))),
            false => Ok(()),
        }
    }

    fn task_starts(&mut self, n: usize, _: usize, title: &str, _: Option<&str>) {
        if self.m.stop_asked() || self.m.failed {
            (self.m.violations).push(format!(
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
        self.m.after(format!("mark {node}"));
        Ok(())
    }

    fn in_window(&mut self, _: usize) -> anyhow::Result<()> {
        Ok(())
    }

    async fn checks(&mut self, h: usize, _: &Hop) -> anyhow::Result<()> {
        self.m.after(format!("checks {h}"));
        Ok(())
    }

    async fn present_images(&mut self, _: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.m.after(format!("present-images {}", nodes.join(",")));
        Ok(())
    }

    /// No Ceph in the model: the gate before a control plane's kubeadm
    /// step passes, as the real one does without a CephCluster.
    async fn ceph_before_upgrade(&mut self, node: &str) -> anyhow::Result<()> {
        self.m.after(format!("ceph-before-upgrade {node}"));
        Ok(())
    }

    /// As `super::super::wait_control_planes_ready`: kubeadm on a control
    /// plane only once every control plane is Ready.
    async fn control_planes_ready(&mut self, node: &str) -> anyhow::Result<()> {
        let not_ready: Vec<&String> = (self.m.roll.nodes.iter())
            .filter(|(_, n)| n.control_plane && !(n.up && n.ready))
            .map(|(name, _)| name)
            .collect();
        if !not_ready.is_empty() {
            let e = anyhow!("{node}: not running kubeadm: {not_ready:?} not Ready");
            self.m.failed = true;
            return Err(e);
        }
        self.m.after(format!("control-planes-ready {node}"));
        Ok(())
    }

    async fn etcd_snapshot(&mut self, node: &str, _: Minor) -> anyhow::Result<()> {
        self.m.after(format!("etcd-snapshot {node}"));
        Ok(())
    }

    async fn action(&mut self, _: &Hop, node: &str, action: &Action) -> anyhow::Result<()> {
        let what = format!("{node}: {}", action.describe());
        match action {
            Action::Roll => bail!("{node}: a roll reached the one-step runner"),
            Action::UpgradeApply { .. } | Action::UpgradeNode { .. } => {
                self.m.kubeadm_seen += 1;
                if self.m.kubeadm_fails == Some(self.m.kubeadm_seen) {
                    return Err(self.fail(what));
                }
            }
            _ => {}
        }
        apply_step(
            &mut self.m.state,
            &Step::new(node, action.clone()),
            &self.m.hub,
        );
        match action {
            Action::UpgradeApply { minor, .. } => {
                self.m.applies.push(*minor);
                self.m.apiservers.insert(node.to_string(), *minor);
            }
            Action::UpgradeNode { minor, .. } if self.m.apiservers.contains_key(node) => {
                self.m.apiservers.insert(node.to_string(), *minor);
            }
            Action::Uncordon => {
                if let Some(n) = self.m.roll.nodes.get_mut(node) {
                    n.cordoned = false;
                }
                self.m.roll.ledger.remove(node);
            }
            _ => {}
        }
        self.m.after(what);
        Ok(())
    }

    /// As `super::super::fake_script`'s (the real `parallel_phase`): each
    /// node's steps in its order, every node to its end or its failure;
    /// marked in progress first.
    async fn parallel(&mut self, hop: &Hop, phase: usize) -> anyhow::Result<()> {
        let steps = &hop.phases[phase].steps;
        let mut nodes: Vec<&str> = steps.iter().map(|s| s.node.as_str()).collect();
        nodes.sort();
        nodes.dedup();
        for n in &nodes {
            let changes = steps.iter().filter(|s| s.node == *n);
            if changes
                .into_iter()
                .any(|s| super::super::changes_fingerprint(&s.action))
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
        self.m.after(format!("last-look {}", nodes.join(",")));
        Ok(())
    }

    async fn roll(
        &mut self,
        nodes: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()> {
        // The real roll's first step is a safe point.
        self.check_stop()?;
        let result = self.m.roll_batch(nodes, minor, expect, rollback);
        self.m.failed |= result.is_err();
        result
    }

    async fn finish_node(&mut self, node: &str) -> anyhow::Result<()> {
        self.m.after(format!("record {node}"));
        Ok(())
    }

    async fn verify(&mut self, hop: &Hop) -> anyhow::Result<()> {
        self.m.after(format!("verify {}", hop.minor));
        Ok(())
    }

    async fn soak(&mut self, h: usize) -> anyhow::Result<()> {
        self.m.after(format!("soak {h}"));
        Ok(())
    }

    async fn kept_images(&mut self, _: &Hop, node: &str) -> anyhow::Result<()> {
        self.m.after(format!("kept-images {node}"));
        Ok(())
    }
}

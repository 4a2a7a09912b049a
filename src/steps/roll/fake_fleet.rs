//! An in-memory fleet the roll's order (`super::flow`) runs against in the
//! rules' tests (`super::flow_tests`): nodes up or down, cordoned or not,
//! Ready or not, their kubelet's version and boot; the API, Ceph and etcd
//! healthy or not; with faults to inject (a drain that fails or times out,
//! a node that does not come back, a kubelet that crash-loops, a stop asked
//! or the lease lapsing after a given step). It answers as the real steps
//! do: a drain kubectl gave up on is uncordoned by the drain itself
//! (`super::drain`), one whose wait was lost is left cordoned; a node is
//! uncordoned only once it is back and Ready (`after_reboot`).
//!
//! After every step the fleet checks the invariants the roll must keep and
//! records each breach in `violations`: never more nodes out of service
//! than allowed, never a node down that is schedulable, never a node
//! cordoned that fleetctl's ledger does not know about.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::world::RollWorld;
use super::{BeforeReboot, DrainFailed};
use crate::steps::Interrupted;
use crate::steps::kured_labels::When;
use crate::steps::on_failure::{Cause, NotUp};
use crate::version::{Minor, Version};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::steps) struct FakeNode {
    pub(in crate::steps) control_plane: bool,
    pub(in crate::steps) up: bool,
    pub(in crate::steps) ready: bool,
    pub(in crate::steps) cordoned: bool,
    pub(in crate::steps) kubelet: Version,
    pub(in crate::steps) staged: Version,
    pub(in crate::steps) boot: u32,
}

#[derive(Debug, Clone, Default)]
pub(in crate::steps) struct Faults {
    /// kubectl drain fails (a budget blocks an eviction): the drain
    /// uncordons the node itself.
    pub(in crate::steps) drain_fails: BTreeSet<String>,
    /// The wait for the drain is lost: the node stays cordoned.
    pub(in crate::steps) drain_lost: BTreeSet<String>,
    pub(in crate::steps) not_back: BTreeSet<String>,
    pub(in crate::steps) crash_loop: BTreeSet<String>,
    pub(in crate::steps) ceph_degraded: bool,
    pub(in crate::steps) etcd_unhealthy: bool,
    /// A stop (Ctrl-C) asked right after this step.
    pub(in crate::steps) stop_after: Option<usize>,
    /// The lease lapses right after this step (the keeper then asks a stop).
    pub(in crate::steps) lease_lapses_after: Option<usize>,
    /// What is left of the lease; `None`: plenty.
    pub(in crate::steps) lease_left: Option<Duration>,
    /// The API refuses the uncordon once the node is back and Ready (a
    /// policy froze the Node): it stays cordoned (`after_reboot`'s
    /// `refused_uncordon`).
    pub(in crate::steps) uncordon_refused: BTreeSet<String>,
    /// The holds before a batch with one of these refuse it (a maintenance
    /// window too short for it now: `crate::steps::hold`).
    pub(in crate::steps) hold_refuses: BTreeSet<String>,
    /// Ceph does not recover once the batch is back.
    pub(in crate::steps) ceph_not_recovered: bool,
}

pub(in crate::steps) struct FakeFleet {
    pub(in crate::steps) nodes: BTreeMap<String, FakeNode>,
    pub(in crate::steps) faults: Faults,
    /// Kured's lock is held and it sets pre- and post-reboot labels.
    pub(in crate::steps) kured_labels: bool,
    /// How many nodes may be out of service at once (`--max-unavailable`).
    pub(in crate::steps) max_down: usize,
    pub(in crate::steps) drain_timeout: Duration,
    pub(in crate::steps) node_timeout: Duration,
    /// Every step taken, `what node`, in order.
    pub(in crate::steps) log: Vec<String>,
    pub(in crate::steps) violations: Vec<String>,
    pub(in crate::steps) peak_down: usize,
    pub(in crate::steps) ledger: BTreeSet<String>,
    steps: usize,
    stop: bool,
    /// Rules a caller checks after every step besides the fleet's own (the
    /// property tests' skew rules, `crate::steps::execute`'s
    /// `random_runs`): given the step and the nodes, the breaches.
    pub(in crate::steps) observe: Option<Observer>,
}

/// See [`FakeFleet::observe`].
pub(in crate::steps) type Observer =
    Box<dyn FnMut(&str, &BTreeMap<String, FakeNode>) -> Vec<String>>;

impl FakeFleet {
    /// `control_planes` then `workers`, all at `from`, `to` staged.
    pub(in crate::steps) fn new(
        control_planes: usize,
        workers: usize,
        from: &str,
        to: &str,
    ) -> FakeFleet {
        let node = |control_plane| FakeNode {
            control_plane,
            up: true,
            ready: true,
            cordoned: false,
            kubelet: from.parse().unwrap(),
            staged: to.parse().unwrap(),
            boot: 1,
        };
        let mut nodes = BTreeMap::new();
        for i in 1..=control_planes {
            nodes.insert(format!("cp-{i}"), node(true));
        }
        for i in 1..=workers {
            nodes.insert(format!("w-{i}"), node(false));
        }
        FakeFleet {
            nodes,
            faults: Faults::default(),
            kured_labels: false,
            max_down: 1,
            drain_timeout: Duration::from_secs(300),
            node_timeout: Duration::from_secs(900),
            log: Vec::new(),
            violations: Vec::new(),
            peak_down: 0,
            ledger: BTreeSet::new(),
            steps: 0,
            stop: false,
            observe: None,
        }
    }

    /// How many steps were taken.
    pub(in crate::steps) fn steps(&self) -> usize {
        self.steps
    }

    /// Whether a stop was asked (injected, or the lease lapsed).
    pub(in crate::steps) fn stop_asked(&self) -> bool {
        self.stop
    }

    /// The roll's own order (`super::flow::roll_batch`) over this fleet.
    pub(in crate::steps) fn roll(
        &mut self,
        batch: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()> {
        use futures_util::FutureExt;
        super::flow::roll_batch(self, batch, minor, expect, rollback)
            .now_or_never()
            .expect("the fake fleet never waits")
    }

    fn node(&mut self, name: &str) -> &mut FakeNode {
        self.nodes.get_mut(name).expect("a node of the fake fleet")
    }

    /// One step taken: logged, the invariants checked, then a stop or a
    /// lapse injected after it.
    fn step(&mut self, what: &str, node: &str) {
        self.steps += 1;
        self.log.push(format!("{what} {node}"));
        let down: Vec<&String> = self
            .nodes
            .iter()
            .filter(|(_, n)| !n.up || !n.ready)
            .map(|(name, _)| name)
            .collect();
        self.peak_down = self.peak_down.max(down.len());
        let mut breaches = Vec::new();
        if down.len() > self.max_down {
            breaches.push(format!(
                "after `{what} {node}`: {down:?} out of service at once"
            ));
        }
        for (name, n) in &self.nodes {
            if !n.up && !n.cordoned {
                breaches.push(format!(
                    "after `{what} {node}`: {name} down and schedulable"
                ));
            }
            if n.cordoned && !self.ledger.contains(name) {
                breaches.push(format!(
                    "after `{what} {node}`: {name} cordoned unknown to the ledger"
                ));
            }
        }
        self.violations.extend(breaches);
        if let Some(observe) = &mut self.observe {
            self.violations
                .extend(observe(&format!("{what} {node}"), &self.nodes));
        }
        if self.faults.stop_after == Some(self.steps) {
            self.stop = true;
        }
        if self.faults.lease_lapses_after == Some(self.steps) {
            self.faults.lease_left = Some(Duration::ZERO);
            self.stop = true;
        }
    }
}

impl RollWorld for FakeFleet {
    fn drain_timeout(&self) -> Duration {
        self.drain_timeout
    }

    fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    fn stop_requested(&self) -> bool {
        self.stop
    }

    fn check_stop(&self, drained: Option<&str>) -> anyhow::Result<()> {
        match self.stop {
            true => Err(anyhow::Error::new(Interrupted(format!(
                "stopped at a safe point (drained and uncordoned again: {drained:?})"
            )))),
            false => Ok(()),
        }
    }

    fn ensure_lease(&self, step: &str, bound: Duration) -> anyhow::Result<()> {
        match self.faults.lease_left {
            Some(left) if left < bound => anyhow::bail!("{step}: the lease has {left:?} left"),
            _ => Ok(()),
        }
    }

    fn say(&mut self, _: &str) {}

    fn begin(&mut self, _: &str, _: &str) {}

    fn mark(&mut self, _: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn note_cordoned(&mut self, nodes: &[String], cordoned: bool) {
        for n in nodes {
            match cordoned {
                true => self.ledger.insert(n.clone()),
                false => self.ledger.remove(n),
            };
        }
    }

    fn still_cordoned(&self, batch: &[String]) -> Vec<String> {
        batch
            .iter()
            .filter(|n| self.ledger.contains(*n))
            .cloned()
            .collect()
    }

    async fn hold(&mut self, batch: &[String]) -> anyhow::Result<()> {
        self.step("hold", &batch.join(","));
        // The soak and the alert gate's waits end at once on a stop.
        self.check_stop(None)?;
        match batch.iter().find(|n| self.faults.hold_refuses.contains(*n)) {
            Some(n) => Err(anyhow::Error::new(crate::error::OutsideWindow(format!(
                "not starting {n}: the maintenance window closes too soon"
            )))),
            None => Ok(()),
        }
    }

    async fn gates(&mut self, batch: &[String], rollback: bool) -> anyhow::Result<bool> {
        let names = batch.join(",");
        self.step("gates", &names);
        let mut problems = Vec::new();
        if self.faults.ceph_degraded {
            problems.push("Ceph cannot spare it: PGs degraded".to_string());
        }
        let control_plane = batch.iter().any(|n| self.nodes[n].control_plane);
        if control_plane && self.faults.etcd_unhealthy {
            problems.push("etcd would lose quorum".to_string());
        }
        for (name, n) in &self.nodes {
            // As `crate::steps::gates::before_drain`: a rollback may take
            // down a batch that is not Ready (already out of service, often
            // for the very kubelet it goes back from).
            let tolerated = rollback && batch.contains(name);
            if (!n.up || !n.ready) && !tolerated {
                problems.push(format!("{name} is not Ready"));
            } else if n.cordoned && !batch.contains(name) {
                problems.push(format!("{name} is cordoned"));
            }
        }
        match problems.is_empty() {
            true => Ok(true),
            false => anyhow::bail!("not taking {names} down: {}", problems.join("; ")),
        }
    }

    async fn kured_labels(&mut self, nodes: &[String], when: When) -> anyhow::Result<()> {
        if !self.kured_labels {
            return Ok(());
        }
        for node in nodes {
            // As `crate::steps::kured_labels::set`: a safe point only
            // before the drain.
            if when == When::BeforeDrain {
                self.check_stop(None)?;
            }
            self.step(&format!("label {when:?}"), node);
        }
        Ok(())
    }

    async fn drain(&mut self, batch: &[String]) -> Vec<(String, Result<(), DrainFailed>)> {
        let mut results = Vec::new();
        for name in batch {
            self.node(name).cordoned = true;
            self.step("drain", name);
            let result = if self.faults.drain_fails.contains(name) {
                self.node(name).cordoned = false;
                Err(DrainFailed {
                    error: anyhow::anyhow!("{name}: drain did not finish; uncordoned again"),
                    uncordoned: true,
                })
            } else if self.faults.drain_lost.contains(name) {
                Err(DrainFailed {
                    error: anyhow::anyhow!("{name}: the drain's wait was lost"),
                    uncordoned: false,
                })
            } else {
                Ok(())
            };
            results.push((name.clone(), result));
        }
        results
    }

    async fn uncordon(&mut self, node: &str) -> anyhow::Result<()> {
        self.node(node).cordoned = false;
        self.step("uncordon", node);
        Ok(())
    }

    async fn before_reboot(
        &mut self,
        node: &str,
        _: Minor,
        _: Option<&Version>,
    ) -> anyhow::Result<BeforeReboot> {
        self.step("before-reboot", node);
        let n = &self.nodes[node];
        Ok(BeforeReboot {
            staged: n.staged.clone(),
            boot_id: n.boot.to_string(),
        })
    }

    async fn reboot(&mut self, befores: &[(String, BeforeReboot)]) -> anyhow::Result<()> {
        for (name, _) in befores {
            let n = self.node(name);
            n.up = false;
            n.ready = false;
            n.boot += 1;
            self.step("reboot", name);
        }
        Ok(())
    }

    async fn wait_back(
        &mut self,
        befores: Vec<(String, BeforeReboot)>,
        _: Minor,
        _: bool,
        _: bool,
    ) -> anyhow::Result<(Vec<String>, Vec<anyhow::Error>)> {
        let (mut back, mut failures) = (Vec::new(), Vec::new());
        for (name, before) in befores {
            if self.faults.not_back.contains(&name) {
                self.step("not-back", &name);
                failures.push(anyhow::anyhow!(
                    "{name} did not come back from its reboot. It is cordoned"
                ));
                continue;
            }
            let n = self.node(&name);
            n.up = true;
            n.kubelet = before.staged.clone();
            if self.faults.crash_loop.contains(&name) {
                self.step("crash-loop", &name);
                failures.push(anyhow::Error::new(NotUp {
                    node: name.clone(),
                    cause: Cause::CrashLoop { restarts: 5 },
                    last_log: None,
                    message: format!("{name}: kubelet crash-loops. It is cordoned"),
                }));
                continue;
            }
            self.node(&name).ready = true;
            self.step("ready", &name);
            if self.faults.uncordon_refused.contains(&name) {
                self.step("uncordon-refused", &name);
                failures.push(anyhow::anyhow!(
                    "{name} is still cordoned: the API server refused the uncordon"
                ));
                continue;
            }
            self.node(&name).cordoned = false;
            self.step("uncordon", &name);
            back.push(name);
        }
        Ok((back, failures))
    }

    async fn ceph_after(&mut self, batch: &[String]) -> anyhow::Result<()> {
        match self.faults.ceph_not_recovered {
            true => anyhow::bail!("{}: Ceph has not recovered", batch.join(", ")),
            false => {
                self.step("ceph-recovered", &batch.join(","));
                Ok(())
            }
        }
    }

    fn came_back(&mut self) {}
}

//! The fake fleet of the script (`super::fake_script`) with what
//! `--on-failure rollback` (`super::after_failed_roll`) needs of a world
//! (`OnFailureWorld`): a node whose roll leaves it not up on its new
//! kubelet (the `NotUp` error the real wait returns), the rollback prepared
//! from rollbacks the test gives (or refused), the plan's hops swapped, the
//! plan saved, the ledger told, each logged in the fleet's own log. Every
//! step of the script goes to the fake fleet, which keeps checking its
//! rules, through the rollback too.

use std::time::Duration;

use anyhow::anyhow;

use super::fake_script::FakeScript;
use super::script_world::{OnFailureWorld, ScriptWorld};
use crate::plan::{self, Action, Hop, Plan, Rollback};
use crate::steps::context::OnFailure;
use crate::steps::on_failure::{Cause, NotUp, Prepared};
use crate::steps::script;
use crate::version::{Minor, Version};

pub(super) struct FakeOnFailure<'a> {
    pub(super) fleet: FakeScript<'a>,
    /// The plan whose hops the rollback swaps.
    pub(super) plan: Plan,
    pub(super) on_failure: OnFailure,
    /// The node whose upgrade's roll leaves it not up on its new kubelet.
    pub(super) not_up: Option<String>,
    /// What `prepare_rollback` decides: the rollbacks, or why not.
    pub(super) rollbacks: Result<Vec<Rollback>, String>,
    /// The lone control plane's API is down: rolled back offline.
    pub(super) offline_api: bool,
    /// Whether a roll is the offline one now.
    pub(super) offline: bool,
    /// The progress lines and journal events, in order.
    pub(super) said: Vec<String>,
    pub(super) saves: usize,
    pub(super) rolled_back: Vec<String>,
}

impl<'a> FakeOnFailure<'a> {
    pub(super) fn new(plan: &'a Plan, rollbacks: Vec<Rollback>) -> Self {
        FakeOnFailure {
            fleet: FakeScript::new(plan, true),
            plan: plan.clone(),
            on_failure: OnFailure::Rollback,
            not_up: None,
            rollbacks: Ok(rollbacks),
            offline_api: false,
            offline: false,
            said: Vec::new(),
            saves: 0,
            rolled_back: Vec::new(),
        }
    }

    fn log(&mut self, what: String) {
        self.fleet.log.push(what);
    }
}

/// The rollback of `node` (a worker) from `from` back to `to`, as
/// `plan::rollbacks` decides it: its config pinned to `to`'s minor.
pub(super) fn rollback(node: &str, from: &str, to: &str) -> Rollback {
    let to: Version = to.parse().expect("a version");
    Rollback {
        node: node.into(),
        role: crate::inventory::Role::Worker,
        from: from.parse().expect("a version"),
        pin: Action::Pin {
            component: plan::Component::Kubernetes,
            minor: to.minor(),
            path: "/etc/sysupdate.kubernetes.d/kubernetes.conf".into(),
            config: format!("[Transfer]\n# {}\n", to.minor()),
            previous: None,
            replaces: Vec::new(),
        },
        to,
        containerd: None,
    }
}

impl ScriptWorld for FakeOnFailure<'_> {
    fn plan(&self) -> &Plan {
        &self.plan
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        self.fleet.check_stop()
    }

    fn task_starts(&mut self, n: usize, total: usize, title: &str, node: Option<&str>) {
        self.fleet.task_starts(n, total, title, node);
    }

    fn say(&mut self, text: &str) {
        self.said.push(format!("say: {text}"));
    }

    fn say_step(&mut self, text: &str) {
        self.fleet.say_step(text);
    }

    fn advance(&mut self) {
        self.fleet.advance();
    }

    fn journal(&mut self, kind: &str, node: Option<&str>, what: &str) {
        self.said
            .push(format!("journal {kind} {}: {what}", node.unwrap_or("-")));
    }

    fn begin(&mut self, names: &str, what: &str) {
        self.fleet.begin(names, what);
    }

    fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        self.fleet.mark(node)
    }

    fn in_window(&mut self, h: usize) -> anyhow::Result<()> {
        self.fleet.in_window(h)
    }

    async fn checks(&mut self, h: usize, hop: &Hop) -> anyhow::Result<()> {
        self.fleet.checks(h, hop).await
    }

    async fn present_images(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.fleet.present_images(hop, nodes).await
    }

    async fn control_planes_ready(&mut self, node: &str) -> anyhow::Result<()> {
        self.fleet.control_planes_ready(node).await
    }

    async fn etcd_snapshot(&mut self, node: &str, minor: Minor) -> anyhow::Result<()> {
        self.fleet.etcd_snapshot(node, minor).await
    }

    async fn action(&mut self, hop: &Hop, node: &str, action: &Action) -> anyhow::Result<()> {
        self.fleet.action(hop, node, action).await
    }

    async fn parallel(&mut self, hop: &Hop, phase: usize) -> anyhow::Result<()> {
        self.fleet.parallel(hop, phase).await
    }

    async fn last_look(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.fleet.last_look(hop, nodes).await
    }

    /// The fleet's roll; then, for the node set not to come up (the
    /// upgrade's roll only), the error the real wait returns: it rebooted,
    /// and its new kubelet never became Ready.
    async fn roll(
        &mut self,
        nodes: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()> {
        if self.offline {
            self.log(format!("offline roll {}", nodes.join(",")));
        }
        self.fleet.roll(nodes, minor, expect, rollback).await?;
        match &self.not_up {
            Some(n) if !rollback && nodes.contains(n) => Err(anyhow::Error::new(NotUp {
                node: n.clone(),
                cause: Cause::NotReady,
                last_log: None,
                message: format!("{n}: not Ready on its new kubelet (fake)"),
            })
            .context(format!("rolling {}", nodes.join(", ")))),
            _ => Ok(()),
        }
    }

    async fn finish_node(&mut self, node: &str) -> anyhow::Result<()> {
        self.fleet.finish_node(node).await
    }

    async fn verify(&mut self, hop: &Hop) -> anyhow::Result<()> {
        self.fleet.verify(hop).await
    }

    async fn soak(&mut self, h: usize) -> anyhow::Result<()> {
        self.fleet.soak(h).await
    }

    async fn kept_images(&mut self, hop: &Hop, node: &str) -> anyhow::Result<()> {
        self.fleet.kept_images(hop, node).await
    }

    async fn ceph_before_upgrade(&mut self, node: &str) -> anyhow::Result<()> {
        self.fleet.ceph_before_upgrade(node).await
    }
}

impl OnFailureWorld for FakeOnFailure<'_> {
    fn on_failure(&self) -> OnFailure {
        self.on_failure
    }

    fn node_timeout(&self) -> Duration {
        Duration::from_secs(600)
    }

    /// As `on_failure::prepare` builds it from the rollbacks it decided:
    /// one hop per node, its tasks `script::of_rollbacks`'.
    async fn prepare_rollback(&mut self, failed: Vec<NotUp>) -> anyhow::Result<Prepared> {
        let names: Vec<&str> = failed.iter().map(|n| n.node.as_str()).collect();
        self.log(format!("prepare-rollback {}", names.join(",")));
        let rollbacks = self.rollbacks.clone().map_err(|why| anyhow!("{why}"))?;
        let mut rb_plan = self.plan.clone();
        rb_plan.hops = rollbacks.iter().map(plan::rollback_hop).collect();
        Ok(Prepared {
            failed,
            tasks: script::of_rollbacks(&rb_plan),
            hops: rb_plan.hops,
            rollbacks,
            offline: self.offline_api,
        })
    }

    fn swap_hops(&mut self, hops: Vec<Hop>) -> Vec<Hop> {
        self.log(format!("swap-hops {}", hops.len()));
        std::mem::replace(&mut self.plan.hops, hops)
    }

    fn set_offline(&mut self, offline: bool) -> bool {
        std::mem::replace(&mut self.offline, offline)
    }

    fn save_plan(&mut self) -> anyhow::Result<()> {
        self.log("save-plan".into());
        self.saves += 1;
        Ok(())
    }

    fn rolled_back(&mut self, names: &[String]) {
        self.log(format!("rolled-back {}", names.join(",")));
        self.rolled_back.extend(names.iter().cloned());
    }
}

//! What every phase of apply shares: the inventory and settings, one
//! journaled session per node (replaced after the node's reboot), the run's
//! ledger for the closing report, Ctrl-C, and the saved plan, kept up to
//! date as nodes change so a rerun after a failure is not refused as stale.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::journal::Journal;
use super::runner::Remote;
pub use super::safe_point::{Interrupted, Lease, LeaseLapsing, Rerun, Stop};
use crate::inventory::{Inventory, Role};
use crate::node::{self, NodeFacts};
use crate::plan::{self, FleetNode, NodeFingerprint, Plan};
use crate::remote;
use crate::ssh;
use crate::ui::Progress;

/// The steps' view of the run: built in one place, from the run
/// configuration the command resolved once (`commands/run_config.rs`).
#[derive(Clone)]
pub struct Settings {
    pub node_timeout: Duration,
    pub drain_timeout: Duration,
    pub ssh: ssh::Options,
    /// For reconnecting after a reboot.
    pub targets: BTreeMap<String, ssh::Target>,
    /// How many nodes a parallel phase works on at once.
    pub parallel: usize,
    /// How many workers may be down at once.
    pub max_unavailable: crate::plan::MaxUnavailable,
    /// Checks whose blocks the operator goes past.
    pub ignored_checks: Vec<crate::checks::CheckName>,
    /// The hub's images, every architecture, for the hub check before each
    /// hop; `None` when the hub's list could not be read.
    pub hub_images: Option<Vec<crate::checks::HubImage>>,
    /// Where etcd snapshots go before each `upgrade apply`; `None` with
    /// `--skip-etcd-snapshot`.
    pub etcd_backups: Option<PathBuf>,
    /// The largest snapshot copied (`--etcd-snapshot-max`).
    pub etcd_snapshot_max: u64,
    /// When the plan's checks were last judged on the live fleet (apply's
    /// re-check): the first hop need not read it all again right away.
    pub checks_judged: Option<Instant>,
    /// Soak, maintenance window, alert gate (`steps::hold`).
    pub pace: crate::pacing::Pace,
    /// What a node not up on its new kubelet leads to (`--on-failure`).
    pub on_failure: OnFailure,
    /// The command that resumes after a failure.
    pub rerun: Rerun,
    /// Kured's gates are kept while its lock is held (not
    /// `--no-kured-gates`): what the dry run says will be judged.
    pub kured_gates: bool,
}

/// What apply does when a node comes back from its reboot but not up on
/// its new kubelet (`--on-failure`, whose clap conversion is `crate::cli`'s;
/// the rollback is `super::on_failure`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnFailure {
    /// Stop, leaving the node cordoned as it is.
    #[default]
    Stop,
    /// Roll that node back to the image it kept, then stop.
    Rollback,
}

/// What each node went through in this run, for the closing report and a
/// second Ctrl-C.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub done: Vec<String>,
    /// The node being worked on and the step it is in.
    pub current: Option<(String, String)>,
    /// Nodes fleetctl cordoned and has not uncordoned yet.
    pub cordoned: BTreeSet<String>,
}

pub struct Apply<'a> {
    pub inv: &'a Inventory,
    pub settings: Settings,
    remotes: BTreeMap<String, Remote>,
    pub progress: &'a Progress,
    pub stop: Stop,
    /// Where the plan is saved as it changes; `None` when there is no saved
    /// plan to keep up to date (`fleetctl reboot`).
    plan_path: Option<PathBuf>,
    pub plan: Plan,
    /// When fleetctl started working on each node, for "w-1 done (42s)".
    began: BTreeMap<String, Instant>,
    pub ledger: Arc<Mutex<Ledger>>,
    /// When the last node of this run was back and uncordoned: the soak
    /// counts from there.
    pub back_at: Option<Instant>,
    /// Kured's own gates, kept while fleetctl holds its lock
    /// (`super::kured_takeover`, held by `super::kured_gates`).
    pub kured: Option<super::kured_takeover::KuredTakeover>,
    /// Whether etcd is kubeadm's stacked one, read from kubeadm-config the
    /// first time a gate or a wait asks (`super::etcd_gate::stacked`): no
    /// step of a run changes where etcd lives.
    pub etcd_stacked: Arc<tokio::sync::OnceCell<bool>>,
}

impl<'a> Apply<'a> {
    pub fn new(
        inv: &'a Inventory,
        settings: Settings,
        remotes: BTreeMap<String, Remote>,
        progress: &'a Progress,
        stop: Stop,
        plan_path: Option<PathBuf>,
        plan: Plan,
    ) -> Apply<'a> {
        Apply {
            inv,
            settings,
            remotes,
            progress,
            stop,
            plan_path,
            plan,
            began: BTreeMap::new(),
            ledger: Arc::new(Mutex::new(Ledger::default())),
            back_at: None,
            kured: None,
            etcd_stacked: Arc::default(),
        }
    }

    /// The node's current session (a fresh one after its reboot).
    pub fn remote_of(&self, node: &str) -> Option<Remote> {
        self.remotes.get(node).cloned()
    }

    pub fn remote(&self, node: &str) -> anyhow::Result<Remote> {
        self.remote_of(node).with_context(|| {
            format!("{node}: no SSH session (it was not reachable when apply started)")
        })
    }

    pub fn set_remote(&mut self, node: &str, remote: Remote) {
        self.remotes.insert(node.to_string(), remote);
    }

    /// Every session, for the gates' reachability probe.
    pub fn remotes(&self) -> impl Iterator<Item = (&String, &Remote)> {
        self.remotes.iter()
    }

    /// kubectl runs on the first control-plane node, which has the admin kubeconfig.
    pub fn api(&self) -> anyhow::Result<Remote> {
        self.remote(&self.inv.first_control_plane().name)
    }

    pub fn role(&self, node: &str) -> Role {
        self.inv.node(node).map_or(Role::Worker, |n| n.role)
    }

    pub fn ledger(&self, f: impl FnOnce(&mut Ledger)) {
        if let Ok(mut l) = self.ledger.lock() {
            f(&mut l);
        }
    }

    pub fn deadline(&self) -> Instant {
        Instant::now() + self.settings.node_timeout
    }

    /// The run's one journal, shared by every node's session (none before
    /// the first connection).
    fn journal(&self) -> Option<&Arc<Journal>> {
        self.remotes.values().next().map(Remote::journal)
    }

    pub fn journal_event(&self, kind: &str, node: Option<&str>, detail: &str) {
        if let Some(j) = self.journal() {
            j.event(kind, node, detail);
        }
    }

    /// A line of what a step does, as `--dry-run` shows it (`Journal::line`).
    pub fn journal_line(&self, node: &str, text: &str) {
        if let Some(j) = self.journal() {
            j.line(node, text);
        }
    }

    pub fn begin(&mut self, node: &str, what: &str) {
        self.began
            .entry(node.to_string())
            .or_insert_with(Instant::now);
        self.ledger(|l| l.current = Some((node.to_string(), what.to_string())));
    }

    /// How long since fleetctl started on `node` in this run.
    pub fn took(&mut self, node: &str) -> Duration {
        self.began
            .remove(node)
            .map(|t| Duration::from_secs(t.elapsed().as_secs()))
            .unwrap_or_default()
    }

    /// Between steps: stop if asked. `drained`: a node that was drained but
    /// not yet rebooted, which the caller has just uncordoned again.
    pub fn check_stop(&self, drained: Option<&str>) -> anyhow::Result<()> {
        if !self.stop.requested() {
            return Ok(());
        }
        let done = self
            .ledger
            .lock()
            .map(|l| l.done.clone())
            .unwrap_or_default();
        Err(anyhow::Error::new(self.stop.interrupted(
            drained,
            &done,
            self.settings.rerun,
        )))
    }

    /// Marks `node` in progress in the saved plan before fleetctl changes
    /// it, so that a rerun after a failure does not call the plan stale
    /// because of fleetctl's own half-done work.
    pub fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        if self.plan.fingerprint.in_progress.contains(node) {
            return Ok(());
        }
        self.plan.fingerprint.mark_in_progress(node);
        self.save()
    }

    /// Writes the plan as it stands to its file (when it has one).
    pub fn save(&self) -> anyhow::Result<()> {
        match &self.plan_path {
            Some(path) => plan::save(&self.plan, path),
            None => Ok(()),
        }
    }

    /// Records a node's facts, read once its steps are done, as the plan's
    /// new baseline, and clears its in-progress mark.
    pub fn settle(&mut self, node: &str, facts: NodeFacts) -> anyhow::Result<()> {
        let fp = NodeFingerprint::of(&FleetNode {
            name: node.to_string(),
            role: self.role(node),
            facts,
        });
        self.plan.fingerprint.nodes.insert(node.to_string(), fp);
        self.plan.fingerprint.clear_in_progress(node);
        self.save()
    }

    /// After `upgrade apply`: the cluster's version the plan now expects.
    pub fn record_cluster_version(&mut self, v: crate::version::Version) -> anyhow::Result<()> {
        self.plan.fingerprint.cluster_version = Some(v);
        self.save()
    }
}

/// A node's facts once fleetctl is done changing it, for [`Apply::settle`].
pub async fn settled_facts(r: &Remote) -> anyhow::Result<NodeFacts> {
    let out = r.run_root("facts", remote::FACTS_SCRIPT, None).await?;
    node::parse_facts(&out.stdout)
        .with_context(|| format!("{}: reading facts after its steps", r.node()))
}

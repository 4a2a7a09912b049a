//! The run configuration: the command line and the inventory resolved into
//! one value per command, once, before anything is touched, and passed down.
//!
//! This is ripgrep's split of `LowArgs` and `HiArgs` (BurntSushi/ripgrep,
//! crates/core/flags/lowargs.rs and hiargs.rs, `HiArgs::from_low_args`):
//! the low level is what the operator typed, as clap parsed it (`crate::cli`:
//! parsing structs and value parsers only); the high level, here, exists
//! only once parsing is finished, because it needs all of it: flags judged
//! against each other (`--window kured` with `--no-kured-gates`), against
//! the inventory (its `window:`, `kured:`, `ssh:`, hub) and the operator's
//! `~/.ssh/config` (the targets). A bad combination is a usage error (exit 2)
//! here, so it is found before the lock is taken or a node is asked
//! anything, and no step ever reads a clap type (tests/layers.rs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::checks::{CheckName, HubImage};
use crate::cli::{ApplyArgs, Global, PaceArgs, RebootArgs, RollArgs, RollbackArgs, WindowArg};
use crate::inventory::{Inventory, KuredRef};
use crate::pacing::{AlertGate, CephGate, Filter, Pace, Window};
use crate::plan::{self, MaxUnavailable, WorkerStrategy};
use crate::ssh;
use crate::steps::lock::TakeRequest;
use crate::steps::{OnFailure, Rerun, Settings, etcd};
use crate::usage;

/// How the fleet is reached, for every command (status and plan need no
/// more): one set of SSH options per run, so its caches (decrypted keys,
/// parsed known_hosts, the handshakes in flight per sshd, the lines
/// already warned about) are the run's, whichever gather or step connects.
#[derive(Clone)]
pub struct Reach {
    pub ssh: ssh::Options,
    /// How many nodes to talk to at once (`--parallel`).
    pub parallel: usize,
}

impl Reach {
    /// The inventory's known_hosts policy, the operator's timeouts.
    pub fn new(global: &Global, inv: &Inventory) -> Reach {
        let mut ssh = ssh::Options::from_inventory(inv);
        ssh.connect_timeout = global.connect_timeout;
        Reach {
            ssh,
            parallel: global.parallel.into(),
        }
    }
}

/// What `apply`, `reboot` and `rollback` run with, resolved once.
pub struct RunConfig {
    pub reach: Reach,
    /// Each node's SSH target, for reconnecting after its reboot.
    pub targets: BTreeMap<String, ssh::Target>,
    /// The command that resumes after a failure.
    pub rerun: Rerun,
    /// `--yes`: no confirmation asked.
    pub yes: bool,
    pub dry_run: bool,
    pub node_timeout: Duration,
    pub drain_timeout: Duration,
    /// `--force-unlock`: a lock left by a dead fleetctl is removed.
    pub force_unlock: bool,
    /// `--kured`, else the inventory's `kured:`; `None`: find Kured.
    pub kured: Option<KuredRef>,
    /// Kured's own gates are kept while its lock is held (not
    /// `--no-kured-gates`).
    pub kured_gates: bool,
    /// `--window kured` (or the older `--kured-window`): Kured's reboot
    /// window, read once its lock is held, paces the run; `pace.window` is
    /// `None` until then.
    pub kured_window: bool,
    /// How long Kured's Prometheus gate may hold a drain, when its gates
    /// are kept (`--alert-gate-timeout`, whether or not `--alert-gate`).
    pub alert_gate_timeout: Duration,
    pub max_unavailable: MaxUnavailable,
    /// Soak, maintenance window, alert gate, Ceph gate.
    pub pace: Pace,
    /// apply's: what a node not up on its new kubelet leads to; `Stop` for
    /// reboot and rollback.
    pub on_failure: OnFailure,
    /// apply's: where etcd snapshots go (`None`: `--skip-etcd-snapshot`,
    /// and always for reboot and rollback) and the largest one copied.
    pub etcd_backups: Option<PathBuf>,
    pub etcd_snapshot_max: u64,
    /// apply's `--ignore-check` (the saved plan's are added when it is
    /// planned again) and `--workers` (`None`: the saved plan's).
    pub ignore_checks: Vec<CheckName>,
    pub workers: Option<WorkerStrategy>,
}

/// What apply's re-check found, which the steps judge with: the plan's
/// ignored checks, the hub's images and when the checks were judged.
/// Reboot and rollback find none.
#[derive(Default)]
pub struct HopFindings {
    pub ignored_checks: Vec<CheckName>,
    pub hub_images: Option<Vec<HubImage>>,
    pub checks_judged: Option<Instant>,
}

impl RunConfig {
    /// `fleetctl apply`: refuses a plain-HTTP hub unless allowed, then the
    /// shared settings, with apply's own.
    pub fn apply(global: &Global, args: &ApplyArgs, inv: &Inventory) -> anyhow::Result<Self> {
        plan::refuse_insecure_hub(&inv.hub, args.allow_insecure_hub)?;
        let mut config = Self::roll(global, &args.roll, inv, Rerun::Apply)?;
        config.on_failure = args.on_failure;
        config.etcd_backups =
            (!args.skip_etcd_snapshot).then(|| etcd::backups_dir(&inv.state_dir()));
        config.etcd_snapshot_max = args.etcd_snapshot_max;
        config.ignore_checks = args.checks.ignore_check.clone();
        config.workers = args.workers;
        Ok(config)
    }

    /// `fleetctl reboot`: no checks, hub or etcd snapshot.
    pub fn reboot(global: &Global, args: &RebootArgs, inv: &Inventory) -> anyhow::Result<Self> {
        Self::roll(global, &args.roll, inv, Rerun::Reboot)
    }

    /// `fleetctl rollback`: as reboot.
    pub fn rollback(global: &Global, args: &RollbackArgs, inv: &Inventory) -> anyhow::Result<Self> {
        Self::roll(global, &args.roll, inv, Rerun::Rollback)
    }

    /// What the three share: how nodes are taken down.
    fn roll(
        global: &Global,
        roll: &RollArgs,
        inv: &Inventory,
        rerun: Rerun,
    ) -> anyhow::Result<Self> {
        let kured_window = roll.kured_window || matches!(roll.pace.window, Some(WindowArg::Kured));
        if kured_window && roll.no_kured_gates {
            return Err(usage!(
                "--window kured holds each node to Kured's reboot window, one of the Kured gates \
                 --no-kured-gates turns off: pass one of them, or a --window of your own"
            ));
        }
        // Kured's window replaces the inventory's, whichever flag names it.
        let inventory_window = inv.window.as_ref().filter(|_| !kured_window);
        let pace = pace(&roll.pace, inventory_window).map_err(|e| usage!("{e}"))?;
        // Resolving touches no node: what fails is the operator's
        // configuration (no user to log in as, a bad ~/.ssh/config).
        let targets = ssh::resolve_all(inv)
            .map_err(|e| usage!("{e:#}"))?
            .into_iter()
            .map(|t| (t.node.clone(), t))
            .collect();
        Ok(RunConfig {
            reach: Reach::new(global, inv),
            targets,
            rerun,
            yes: roll.yes,
            dry_run: roll.dry_run,
            node_timeout: roll.node_timeout,
            drain_timeout: roll.drain_timeout,
            force_unlock: roll.force_unlock,
            kured: roll.kured.clone().or_else(|| inv.kured.clone()),
            kured_gates: !roll.no_kured_gates,
            kured_window,
            alert_gate_timeout: roll.pace.alert_gate_timeout,
            max_unavailable: roll.max_unavailable,
            pace,
            on_failure: OnFailure::Stop,
            etcd_backups: None,
            etcd_snapshot_max: 0,
            ignore_checks: Vec::new(),
            workers: None,
        })
    }

    /// The steps' view of the run, built here only (for the run and its dry
    /// run alike).
    pub fn settings(&self, found: HopFindings) -> Settings {
        Settings {
            node_timeout: self.node_timeout,
            drain_timeout: self.drain_timeout,
            ssh: self.reach.ssh.clone(),
            targets: self.targets.clone(),
            parallel: self.reach.parallel,
            max_unavailable: self.max_unavailable,
            ignored_checks: found.ignored_checks,
            hub_images: found.hub_images,
            etcd_backups: self.etcd_backups.clone(),
            etcd_snapshot_max: self.etcd_snapshot_max,
            checks_judged: found.checks_judged,
            pace: self.pace.clone(),
            on_failure: self.on_failure,
            rerun: self.rerun,
            kured_gates: self.kured_gates,
        }
    }

    /// The request to take the lock.
    pub fn take_request(&self) -> TakeRequest {
        TakeRequest {
            rerun: self.rerun,
            kured: self.kured.clone(),
            force_unlock: self.force_unlock,
            yes: self.yes,
            node_timeout: self.node_timeout,
            drain_timeout: self.drain_timeout,
        }
    }

    /// A run started outside its maintenance window, or too late in it for
    /// one node, stops before the lock is taken (exit 75).
    pub fn refuse_outside_window(&self) -> anyhow::Result<()> {
        match &self.pace.window {
            Some(window) => crate::steps::hold::in_window(
                window,
                "the run",
                self.drain_timeout + self.node_timeout,
                self.rerun,
            ),
            None => Ok(()),
        }
    }
}

/// The run's pacing (`--soak`, `--window`, `--alert-gate`, the Ceph gate);
/// `inventory_window` when --window is not given.
fn pace(args: &PaceArgs, inventory_window: Option<&Window>) -> Result<Pace, String> {
    let alert_gate = match &args.alert_gate {
        Some(url) => {
            let mut gate = AlertGate::new(
                url,
                Filter {
                    exclude: args.alert_filter.clone(),
                    firing_only: args.alert_firing_only,
                    match_only: false,
                },
                args.alert_gate_timeout,
            )?;
            gate.interval = args.alert_gate_interval;
            Some(gate)
        }
        None => None,
    };
    let ceph = &args.ceph;
    Ok(Pace {
        soak: args.soak,
        // `--window kured`: Kured's, known once its lock is held.
        window: match &args.window {
            Some(WindowArg::Given(w)) => Some(w.clone()),
            Some(WindowArg::Kured) => None,
            None => inventory_window.cloned(),
        },
        alert_gate,
        ceph: CephGate {
            enabled: !ceph.no_ceph_gate,
            hold_on: ceph.ceph_hold_on.clone(),
            timeout: ceph.ceph_timeout,
            recovery_timeout: ceph.ceph_recovery_timeout,
            ..CephGate::default()
        },
    })
}

#[cfg(test)]
mod tests;

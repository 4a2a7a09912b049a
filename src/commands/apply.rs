//! `fleetctl apply`, as the list of what it does:
//!
//! 1. **load** the saved plan: the operator's approval of a path;
//! 2. **lock**: Kured's reboot lock (or fleetctl's own), taken before the
//!    fleet is looked at, so nothing changes between the check and the run;
//! 3. **gather and re-check**: plan again from the live fleet with the saved
//!    plan's target (that is how a rerun resumes) and refuse a stale plan;
//! 4. **confirm**;
//! 5. **the hops**, each a list of phases in kubeadm's order (`steps::hop`);
//! 6. **release** the lock, on every path, and say where things stand.
//!
//! `--dry-run` stops after 3 and prints every command instead, without the lock.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::cli::{ApplyArgs, Global};
use crate::error::UsageError;
use crate::gather::{self, Gathered};
use crate::inventory::Inventory;
use crate::plan::{self, Action, Component, Plan, Warning};
use crate::ssh;
use crate::status;
use crate::steps::journal::Journal;
use crate::steps::lock::{self, Identity, Lock, LockOptions};
use crate::steps::runner::Remote;
use crate::steps::{Apply, Interrupted, Ledger, Settings, Stop, dry_run, hop};
use crate::ui::{Printer, Progress};
use crate::usage;

pub async fn run(global: &Global, args: &ApplyArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let plan_path = args
        .plan
        .clone()
        .unwrap_or_else(|| plan::default_path(&inv));
    let saved = load(&plan_path)?;
    if args.dry_run {
        let (fresh, _) = recheck(&inv, global, printer, &saved).await?;
        if fresh.hops.is_empty() {
            printer.note("nothing to do: the fleet already matches the plan's target");
        } else {
            printer.out(&dry_run::render(&fresh, &inv, args.max_unavailable));
        }
        return Ok(ExitCode::SUCCESS);
    }

    let stop = Stop::default();
    let second = Arc::new(tokio::sync::Notify::new());
    spawn_interrupt_handler(stop.clone(), second.clone(), printer.clone());
    let journal = Arc::new(Journal::create(&inv.state_dir())?);
    journal.echo_commands(printer.verbose() > 0);
    printer.note(&format!("journal: {}", journal.path().display()));

    let (lock_api, held) = take_lock(&inv, global, args, &journal, printer).await?;
    let run = Run {
        inv: &inv,
        global,
        args,
        printer,
        journal: &journal,
        plan_path: &plan_path,
    };
    let (result, api_now) = run.locked(&saved, stop, second).await;
    release(&held, api_now.as_ref().unwrap_or(&lock_api), printer).await;
    if let Err(e) = journal.check() {
        printer.warn(&format!("the journal is incomplete: {e:#}"));
    }
    result
}

/// The saved plan, or exit 2 saying to plan first.
fn load(path: &Path) -> anyhow::Result<Plan> {
    if !path.exists() {
        return Err(usage!(
            "no saved plan at {}: run `fleetctl plan` first",
            path.display()
        ));
    }
    plan::load(path).map_err(|e| usage!("{e:#}"))
}

/// Gathers the fleet, plans again with the saved plan's target and refuses
/// a plan the fleet has moved away from.
async fn recheck(
    inv: &Inventory,
    global: &Global,
    printer: &Printer,
    saved: &Plan,
) -> anyhow::Result<(Plan, Gathered)> {
    let gathered = super::gather_fleet(inv, global, printer).await?;
    let mut fresh = super::plan::compute(inv, &gathered, &saved.requested).await?;
    if let Some(reason) = keep_saved_patches(saved, &mut fresh) {
        printer.warn(&format!(
            "could not read the hub's image list ({reason}); going on with the patches the plan stages. \
             Downloading fails, before any kubeadm step or reboot, if the nodes cannot reach the hub either"
        ));
    }
    refuse_stale(saved, &fresh)?;
    Ok((fresh, gathered))
}

/// Connects to the first control-plane node and takes the lock there.
async fn take_lock(
    inv: &Inventory,
    global: &Global,
    args: &ApplyArgs,
    journal: &Arc<Journal>,
    printer: &Printer,
) -> anyhow::Result<(Remote, Lock)> {
    let first = inv.first_control_plane();
    let target = ssh::resolve(inv, first).map_err(|e| usage!("{e:#}"))?;
    let session = ssh::connect(&target, &super::ssh_options(inv, global))
        .await
        .with_context(|| format!("{}: connecting to take the lock", first.name))?;
    for w in session.warnings() {
        printer.warn(w);
    }
    let api = Remote::new(Arc::new(session), journal.clone());
    let lock_opts = LockOptions {
        force_unlock: args.force_unlock,
        ..LockOptions::default()
    };
    let held = lock::acquire(&api, &lock_opts, &Identity::local(), SystemTime::now()).await?;
    if let Some(prev) = held.forced() {
        printer.warn(&format!("--force-unlock removed a lock held by {prev}"));
    }
    for w in held.warnings() {
        printer.warn(w);
    }
    printer.note(&format!("holding {}", held.describe()));
    Ok((api, held))
}

async fn release(held: &Lock, api: &Remote, printer: &Printer) {
    if let Err(e) = held.release(api).await {
        printer.warn(&format!(
            "could not release {}: {e:#}. Remove it with `fleetctl apply --force-unlock` on the next run",
            held.describe()
        ));
    }
}

/// What the locked part of apply works with.
struct Run<'a> {
    inv: &'a Inventory,
    global: &'a Global,
    args: &'a ApplyArgs,
    printer: &'a Printer,
    journal: &'a Arc<Journal>,
    plan_path: &'a PathBuf,
}

impl Run<'_> {
    /// Everything between taking the lock and giving it back. Returns the
    /// outcome and the first control plane's current session (a new one
    /// after its reboot), for the release.
    async fn locked(
        &self,
        saved: &Plan,
        stop: Stop,
        second: Arc<tokio::sync::Notify>,
    ) -> (anyhow::Result<ExitCode>, Option<Remote>) {
        let (fresh, gathered) = match recheck(self.inv, self.global, self.printer, saved).await {
            Ok(x) => x,
            Err(e) => return (Err(e), None),
        };
        if fresh.hops.is_empty() {
            self.printer.out(&plan::summary(&fresh));
            self.printer
                .note("nothing to do: the fleet already matches the plan's target");
            return (
                plan::save(&fresh, self.plan_path).map(|()| ExitCode::SUCCESS),
                None,
            );
        }
        self.printer
            .out(&plan::render(&fresh, console::colors_enabled()));
        if let Err(e) = confirm(self.args.yes) {
            return (Err(e), None);
        }
        if stop.requested() {
            let e = anyhow::Error::new(Interrupted(
                "stopped by Ctrl-C before anything was changed".into(),
            ));
            return (Err(e), None);
        }
        self.hops(fresh, &gathered, stop, second).await
    }

    async fn hops(
        &self,
        fresh: Plan,
        gathered: &Gathered,
        stop: Stop,
        second: Arc<tokio::sync::Notify>,
    ) -> (anyhow::Result<ExitCode>, Option<Remote>) {
        let mut remotes = BTreeMap::new();
        for r in &gathered.nodes {
            if let Some(s) = &r.session {
                remotes.insert(
                    r.node.name.clone(),
                    Remote::new(s.clone(), self.journal.clone()),
                );
            }
        }
        let targets = match ssh::resolve_all(self.inv) {
            Ok(t) => t.into_iter().map(|t| (t.node.clone(), t)).collect(),
            Err(e) => return (Err(usage!("{e:#}")), None),
        };
        let settings = Settings {
            node_timeout: self.args.node_timeout,
            drain_timeout: self.args.drain_timeout,
            ssh: super::ssh_options(self.inv, self.global),
            targets,
            parallel: self.global.parallel.into(),
            max_unavailable: self.args.max_unavailable,
        };
        let total = fresh.steps().count();
        // Echoed commands and a redrawn bar do not mix: -v prints plain lines.
        let progress = Progress::new(
            self.printer.interactive && self.printer.verbose() == 0,
            total as u64,
        );
        if let Err(e) = plan::save(&fresh, self.plan_path) {
            return (Err(e), None);
        }
        let mut apply = Apply::new(
            self.inv,
            settings,
            remotes,
            &progress,
            stop,
            self.plan_path.clone(),
            fresh,
        );
        let ledger = apply.ledger.clone();
        let mut twice = false;
        let result = tokio::select! {
            r = hop::run(&mut apply) => r,
            _ = second.notified() => {
                twice = true;
                Err(stopped_at_once(&ledger))
            }
        };
        progress.finish();
        let api = apply.api().ok();
        let outcome = match result {
            Ok(()) => {
                self.printer.note(&format!(
                    "done: {} nodes upgraded; journal {}",
                    self.inv.nodes.len(),
                    self.journal.path().display()
                ));
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                let ledger = ledger.lock().map(|l| l.clone()).unwrap_or_default();
                let mut report = failure_report(&ledger, &e, self.journal.path());
                if !twice {
                    report.insert_str(
                        0,
                        &format!(
                            "the fleet now:\n{}\n",
                            fleet_now(self.inv, self.global).await
                        ),
                    );
                }
                self.printer.note(&report);
                Err(e)
            }
        };
        (outcome, api)
    }
}

/// What the operator reads after a failure: where it stopped, what was
/// finished, what is still cordoned, what to do.
fn failure_report(ledger: &Ledger, e: &anyhow::Error, journal: &Path) -> String {
    let mut report = String::new();
    if let Some((node, step)) = &ledger.current {
        report.push_str(&format!("stopped on {node} during: {step}\n"));
    }
    if !ledger.done.is_empty() {
        report.push_str(&format!(
            "finished in this run: {}\n",
            ledger.done.join(", ")
        ));
    }
    for n in &ledger.cordoned {
        report.push_str(&format!(
            "{n} IS STILL CORDONED: `fleetctl apply` uncordons it when it resumes, or run `kubectl uncordon {n}`\n"
        ));
    }
    report.push_str("the other nodes were not touched after the failure\n");
    if !e.chain().any(|c| c.is::<Interrupted>()) {
        report.push_str("next: fix the cause above, then run `fleetctl apply` again: it resumes from the fleet's real state\n");
    }
    report.push_str(&format!("journal: {}", journal.display()));
    report
}

/// Each node's real state after a failure, read again (briefly: a node that
/// is down shows as unreachable rather than holding the report up).
async fn fleet_now(inv: &Inventory, global: &Global) -> String {
    let mut opts = super::ssh_options(inv, global);
    opts.connect_timeout = opts.connect_timeout.min(Duration::from_secs(5));
    opts.command_timeout = Duration::from_secs(30);
    match gather::gather(inv, &opts, global.parallel.into()).await {
        Ok(g) => status::render_table(&super::status::report(&g)),
        Err(e) => format!("(could not read it again: {e:#})"),
    }
}

/// A second Ctrl-C abandons the step in progress: say which node was left
/// half-way, and that a rerun (not a fix) is what comes next.
fn stopped_at_once(ledger: &Mutex<Ledger>) -> anyhow::Error {
    let current = ledger.lock().ok().and_then(|l| l.current.clone());
    let msg = match current {
        Some((node, step)) => format!(
            "stopped at once by a second Ctrl-C: {node} was left half-way through `{step}`. \
             Check {node} (`fleetctl status`; if it was rebooting, wait until it is back), \
             then run `fleetctl apply` again: it resumes from the fleet's real state"
        ),
        None => {
            "stopped at once by a second Ctrl-C. Check the nodes (`fleetctl status`), then run \
                 `fleetctl apply` again: it resumes from the fleet's real state"
                .to_string()
        }
    };
    anyhow::Error::new(Interrupted(msg))
}

/// The hub unreadable now is not the hub changed: the saved plan's patches
/// (the ones the operator read) still hold, and downloading checks exactly
/// those rather than whatever the hub serves once it is back. Returns why
/// the hub could not be read when that was the case.
fn keep_saved_patches(saved: &Plan, fresh: &mut Plan) -> Option<String> {
    let at = fresh
        .warnings
        .iter()
        .position(|w| matches!(w, Warning::HubUnresolved { .. }))?;
    let mut kept = false;
    for hop in fresh.hops.iter_mut().filter(|h| h.version.is_none()) {
        let Some(v) = saved
            .hops
            .iter()
            .find(|h| h.minor == hop.minor)
            .and_then(|h| h.version.clone())
        else {
            continue;
        };
        for step in hop.phases.iter_mut().flat_map(|p| p.steps.iter_mut()) {
            match &mut step.action {
                Action::Download { expect, .. }
                | Action::Stage {
                    component: Component::Kubernetes,
                    expect,
                    ..
                } if expect.is_none() => *expect = Some(v.clone()),
                Action::UpgradeApply { version, .. } | Action::UpgradeNode { version, .. }
                    if version.is_none() =>
                {
                    *version = Some(v.clone())
                }
                _ => {}
            }
        }
        hop.version = Some(v);
        kept = true;
    }
    // Without a saved patch either, the plan's own warning still tells the truth.
    if !kept {
        return None;
    }
    match fresh.warnings.remove(at) {
        Warning::HubUnresolved { reason } => Some(reason),
        _ => None,
    }
}

/// The saved plan still describes this fleet, apart from the nodes apply
/// itself was changing; and the hub still stages the same patches.
fn refuse_stale(saved: &Plan, fresh: &Plan) -> anyhow::Result<()> {
    let mut lines = saved.fingerprint.diff(&fresh.fingerprint);
    for hop in &fresh.hops {
        if let Some(old) = saved.hops.iter().find(|h| h.minor == hop.minor)
            && old.version.is_some()
            && old.version != hop.version
        {
            lines.push(format!(
                "hub: the newest {} patch is now {}, the plan stages {}",
                hop.minor,
                hop.version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |v| v.to_string()),
                old.version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |v| v.to_string())
            ));
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(UsageError(format!(
        "the plan is stale: the fleet changed since it was made:\n  - {}\nRun `fleetctl plan` again, read it, then `fleetctl apply`",
        lines.join("\n  - ")
    ))))
}

fn confirm(yes: bool) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(usage!(
            "apply changes the cluster and needs confirmation, but there is no terminal to ask on: pass --yes"
        ));
    }
    eprint!("Apply this plan? Nodes will be drained and rebooted one at a time. [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("reading the answer")?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        Err(usage!("not applied: the answer was not yes"))
    }
}

fn spawn_interrupt_handler(stop: Stop, second: Arc<tokio::sync::Notify>, printer: Printer) {
    tokio::spawn(async move {
        loop {
            if tokio::signal::ctrl_c().await.is_err() {
                return;
            }
            if stop.press() == 1 {
                printer.warn("Ctrl-C: finishing the step in progress, then stopping at a safe point (Ctrl-C again to stop now)");
            } else {
                second.notify_one();
                return;
            }
        }
    });
}

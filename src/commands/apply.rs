//! `fleetctl apply`: load the saved plan, re-check it against the live fleet,
//! confirm, take the lock, run the hops, release the lock, say where things
//! stand. A rerun after a failure re-plans from the fleet's real state and
//! so resumes without repeating what is done.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::cli::{ApplyArgs, Global};
use crate::error::UsageError;
use crate::gather;
use crate::inventory::Inventory;
use crate::plan::{self, Action, Component, Plan, Warning};
use crate::ssh;
use crate::status;
use crate::steps::exec::{Executor, Interrupted, Ledger, Settings, Stop};
use crate::steps::journal::Journal;
use crate::steps::lock::{self, Identity, LockOptions};
use crate::steps::{dry_run, runner::Remote};
use crate::ui::{Printer, Progress};
use crate::usage;

pub async fn run(global: &Global, args: &ApplyArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let plan_path = args
        .plan
        .clone()
        .unwrap_or_else(|| plan::default_path(&inv));
    if !plan_path.exists() {
        return Err(usage!(
            "no saved plan at {}: run `fleetctl plan` first",
            plan_path.display()
        ));
    }
    let saved = plan::load(&plan_path).map_err(|e| usage!("{e:#}"))?;

    let gathered = super::gather_fleet(&inv, global, printer).await?;
    let mut fresh = super::plan::compute(&inv, &gathered, &saved.requested).await?;
    if let Some(reason) = keep_saved_patches(&saved, &mut fresh) {
        printer.warn(&format!(
            "could not read the hub's image list ({reason}); going on with the patches the plan stages. \
             Staging fails, before any reboot, if the nodes cannot reach the hub either"
        ));
    }
    refuse_stale(&saved, &fresh)?;

    if fresh.hops.is_empty() {
        printer.out(&plan::summary(&fresh));
        printer.note("nothing to do: the fleet already matches the plan's target");
        plan::save(&fresh, &plan_path)?;
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        printer.out(&dry_run::render(&fresh, &inv));
        return Ok(ExitCode::SUCCESS);
    }
    printer.out(&plan::render(&fresh, console::colors_enabled()));
    confirm(args.yes)?;

    let journal = Arc::new(Journal::create(&inv.state_dir())?);
    journal.echo_commands(printer.verbose() > 0);
    printer.note(&format!("journal: {}", journal.path().display()));
    let mut remotes = BTreeMap::new();
    for r in &gathered.nodes {
        if let Some(s) = &r.session {
            remotes.insert(r.node.name.clone(), Remote::new(s.clone(), journal.clone()));
        }
    }
    let first = inv.first_control_plane().name.clone();
    let api = remotes
        .get(&first)
        .cloned()
        .with_context(|| format!("{first}: no SSH session"))?;
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

    let targets = ssh::resolve_all(&inv)?
        .into_iter()
        .map(|t| (t.node.clone(), t))
        .collect();
    let settings = Settings {
        node_timeout: args.node_timeout,
        drain_timeout: args.drain_timeout,
        ssh: super::ssh_options(&inv, global),
        targets,
    };
    let total: usize = fresh.hops.iter().map(|h| h.steps.len()).sum();
    // Echoed commands and a redrawn bar do not mix: -v prints plain lines.
    let progress = Progress::new(printer.interactive && printer.verbose() == 0, total as u64);
    let stop = Stop::default();
    let second = Arc::new(tokio::sync::Notify::new());
    spawn_interrupt_handler(stop.clone(), second.clone(), printer.clone());

    plan::save(&fresh, &plan_path)?;
    let mut exec = Executor::new(
        &inv,
        settings,
        remotes,
        &progress,
        stop,
        plan_path.clone(),
        fresh,
    );
    let in_progress = exec.ledger.clone();
    let mut twice = false;
    let result = tokio::select! {
        r = exec.run() => r,
        _ = second.notified() => {
            twice = true;
            Err(stopped_at_once(&in_progress))
        }
    };
    progress.finish();

    let ledger = exec.ledger.lock().map(|l| l.clone()).unwrap_or_default();
    let api_now = exec_api(&exec, &first).unwrap_or(api);
    if let Err(e) = held.release(&api_now).await {
        printer.warn(&format!(
            "could not release {}: {e:#}. Remove it with `fleetctl apply --force-unlock` on the next run",
            held.describe()
        ));
    }
    if let Err(e) = journal.check() {
        printer.warn(&format!("the journal is incomplete: {e:#}"));
    }

    match result {
        Ok(()) => {
            printer.note(&format!(
                "done: {} nodes upgraded; journal {}",
                inv.nodes.len(),
                journal.path().display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
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
            report.push_str(&format!("journal: {}", journal.path().display()));
            if !twice {
                report.insert_str(
                    0,
                    &format!("the fleet now:\n{}\n", fleet_now(&inv, global).await),
                );
            }
            printer.note(&report);
            Err(e)
        }
    }
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

fn exec_api(exec: &Executor<'_>, first: &str) -> Option<Remote> {
    exec.remote_of(first)
}

/// The hub unreadable now is not the hub changed: the saved plan's patches
/// (the ones the operator read) still hold, and staging checks exactly those
/// rather than whatever the hub serves once it is back. Returns why the hub
/// could not be read when that was the case.
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
        for step in &mut hop.steps {
            match &mut step.action {
                Action::Stage {
                    component: Component::Kubernetes,
                    expect: expect @ None,
                    ..
                } => *expect = Some(v.clone()),
                Action::UpgradeApply {
                    version: version @ None,
                    ..
                } => *version = Some(v.clone()),
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

//! What `apply` and `reboot` share around their work on the nodes: the
//! journal, the lock (taken first, given back on every path), Ctrl-C, the
//! confirmation, and the report after a failure.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::cli::Global;
use crate::gather;
use crate::inventory::Inventory;
use crate::ssh;
use crate::status;
use crate::steps::journal::Journal;
use crate::steps::lock::{self, Identity, Lock, LockOptions};
use crate::steps::runner::Remote;
use crate::steps::{Interrupted, Ledger, Stop};
use crate::ui::Printer;
use crate::usage;

/// Opens the run's journal and says where it is.
pub fn open_journal(inv: &Inventory, printer: &Printer) -> anyhow::Result<Arc<Journal>> {
    let journal = Arc::new(Journal::create(&inv.state_dir())?);
    journal.echo_commands(printer.verbose() > 0);
    printer.note(&format!("journal: {}", journal.path().display()));
    Ok(journal)
}

/// Connects to the first control-plane node and takes the lock there.
pub async fn take_lock(
    inv: &Inventory,
    global: &Global,
    force_unlock: bool,
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
        force_unlock,
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

pub async fn release(held: &Lock, api: &Remote, printer: &Printer) {
    if let Err(e) = held.release(api).await {
        printer.warn(&format!(
            "could not release {}: {e:#}. Remove it with `fleetctl apply --force-unlock` on the next run",
            held.describe()
        ));
    }
}

/// What the operator reads after a failure: where it stopped, what was
/// finished, what is still cordoned, what to do.
/// `rerun`: the command that resumes (`fleetctl apply`, `fleetctl reboot`).
pub fn failure_report(ledger: &Ledger, e: &anyhow::Error, journal: &Path, rerun: &str) -> String {
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
        let resumes = if rerun == "fleetctl apply" {
            "`fleetctl apply` uncordons it when it resumes, or run"
        } else {
            "once it is back and Ready, run"
        };
        report.push_str(&format!(
            "{n} IS STILL CORDONED: {resumes} `kubectl uncordon {n}`\n"
        ));
    }
    report.push_str("the other nodes were not touched after the failure\n");
    if !e.chain().any(|c| c.is::<Interrupted>()) {
        report.push_str(&format!(
            "next: fix the cause above, then run `{rerun}` again: it resumes from the fleet's real state\n"
        ));
    }
    report.push_str(&format!("journal: {}", journal.display()));
    report
}

/// Each node's real state after a failure, read again (briefly: a node that
/// is down shows as unreachable rather than holding the report up).
pub async fn fleet_now(inv: &Inventory, global: &Global) -> String {
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
pub fn stopped_at_once(ledger: &Mutex<Ledger>) -> anyhow::Error {
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

pub fn confirm(yes: bool, question: &str) -> anyhow::Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(usage!(
            "apply changes the cluster and needs confirmation, but there is no terminal to ask on: pass --yes"
        ));
    }
    eprint!("{question} [y/N] ");
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

pub fn spawn_interrupt_handler(stop: Stop, second: Arc<tokio::sync::Notify>, printer: Printer) {
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

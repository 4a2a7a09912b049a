//! What `apply` and `reboot` share around their work on the nodes: the
//! journal, Ctrl-C, the confirmation, and the report after a failure. The
//! lock they work under, and the harness they run in, are `lock_run.rs`.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::cli::Global;
use crate::gather;
use crate::inventory::Inventory;
use crate::status;
use crate::steps::journal::Journal;
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
    // Part of a failure report: no bar, the report is what matters.
    let quiet = crate::ui::Progress::hidden();
    match gather::gather(inv, &opts, global.parallel.into(), &quiet).await {
        Ok(g) => status::render_table(&super::status::report(&g)),
        Err(e) => format!("(could not read it again: {e:#})"),
    }
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
    crate::ui::err_text(&format!("{question} [y/N] "));
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

/// SIGINT (Ctrl-C), SIGTERM (a supervisor, `kill`) and SIGHUP (the
/// terminal went away) all mean "stop": the first at the next safe point,
/// the second at once. Installed before the lock is taken, so no signal
/// can leave it held.
pub fn spawn_interrupt_handler(
    stop: Stop,
    second: Arc<tokio::sync::Notify>,
    printer: Printer,
) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                Some(()) = int.recv() => "Ctrl-C",
                Some(()) = term.recv() => "SIGTERM",
                Some(()) = hup.recv() => "SIGHUP",
                else => return,
            };
            if stop.press(name) == 1 {
                let again = match name {
                    "Ctrl-C" => "Ctrl-C again",
                    _ => "Ctrl-C, or the signal again,",
                };
                printer.warn(&format!(
                    "{name}: finishing the step in progress, then stopping at a safe point \
                     ({again} to stop now)"
                ));
            } else {
                second.notify_one();
                return;
            }
        }
    });
    Ok(())
}

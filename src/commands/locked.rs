//! What `apply`, `reboot` and `rollback` share around their work on the
//! nodes: [`run_under_lock`], the one skeleton each runs in (the maintenance
//! window, Ctrl-C, the journal, the lock taken and given back on every
//! path) with [`RunHandles`] at hand, [`recheck_under_lock`], the one "still
//! valid under the lock?" each asks before changing anything,
//! [`run_script`], their script run under it with its report, and the
//! confirmation. The lock itself (its [`LockKeeper`]) and the harness that
//! races the work against its lease ([`run_within_lease`]) are
//! `steps::lock`, whose module doc names each piece.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::IsTerminal;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::FutureExt;

use crate::gather::{self, Gathered};
use crate::inventory::Inventory;
use crate::plan::Plan;
use crate::status;
use crate::steps::journal::Journal;
use crate::steps::runner::Remote;
use crate::steps::script::Task;
use crate::steps::{Apply, Interrupted, Ledger, Rerun, Settings, Stop, execute};
use crate::ui::{Printer, Progress};
use crate::usage;

use crate::steps::kured_gates::{KuredTakeover, takeover};
use crate::steps::lock::{LockKeeper, WorkOutcome, run_within_lease, take_lock};

use super::{Reach, RunConfig};

/// What the work under the lock has at hand: the run's stop (Ctrl-C, a lost
/// lock), the second Ctrl-C that ends it at once, and its journal. (The
/// offline rollback, `rollback::without_api`, runs with these and no lock.)
pub struct RunHandles {
    pub stop: Stop,
    pub second: Arc<tokio::sync::Notify>,
    pub journal: Arc<Journal>,
    /// Kured's own gates, kept while its lock is held.
    pub kured: Option<KuredTakeover>,
}

/// Kured's gates fleetctl keeps while it holds Kured's lock, said before
/// anything changes; `--no-kured-gates` drops them, loudly.
fn kured_gates(
    keeper: &LockKeeper,
    config: &RunConfig,
    printer: &Printer,
    journal: &Journal,
) -> anyhow::Result<Option<KuredTakeover>> {
    let lock = keeper.lock();
    let Some(taken) = takeover(
        lock.kured_daemonset(),
        lock.kured_argv(),
        lock.kured_env(),
        config.alert_gate_timeout,
    )?
    else {
        if config.kured_window && lock.kured_daemonset().is_none() {
            anyhow::bail!(
                "--window kured: the lock fleetctl holds is not Kured's (no Kured was found), so \
                 there is no Kured reboot window to hold to; pass --window 'DAYS START-END [ZONE]'"
            );
        }
        return Ok(None);
    };
    let lines = taken.describe();
    if !config.kured_gates {
        let text = format!(
            "--no-kured-gates: Kured's own gates on daemonset {} are NOT checked while fleetctl \
             holds its lock; nodes reboot whatever they say: {}",
            taken.daemonset,
            lines.join("; ")
        );
        printer.warn(&text);
        journal.event("kured-gates-off", None, &text);
        return Ok(None);
    }
    let mut taken = taken;
    if config.kured_window {
        let text = taken.gates.window_text();
        let window = crate::pacing::Window::parse(&text).map_err(|e| {
            anyhow::anyhow!(
                "--window kured: Kured's reboot window in daemonset {} ({text}) is not one \
                 fleetctl can read: {e}; pass --window 'DAYS START-END [ZONE]' instead",
                taken.daemonset
            )
        })?;
        printer.note(&format!(
            "holding each node to Kured's reboot window: {window}"
        ));
        taken.window = Some(window);
    }
    printer.note(&format!(
        "keeping Kured's gates (daemonset {}) while its lock is held:\n  - {}",
        taken.daemonset,
        lines.join("\n  - ")
    ));
    journal.event("kured-gates", None, &lines.join("; "));
    Ok(Some(taken))
}

/// Runs `work` under the lock: refused outside the maintenance window, with
/// the signal handler installed before the lock is taken and the journal
/// open, and the lock given back on every path, a panic included; then the
/// journal is checked.
pub async fn run_under_lock(
    inv: &Inventory,
    config: &RunConfig,
    printer: &Printer,
    work: impl AsyncFnOnce(&RunHandles) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    config.refuse_outside_window()?;
    let stop = Stop::default();
    let second = Arc::new(tokio::sync::Notify::new());
    spawn_interrupt_handler(stop.clone(), second.clone(), printer.clone())?;
    let journal = open_journal(inv, printer)?;
    if !config.pace.ceph.enabled {
        let text = "--no-ceph-gate: the Ceph gate is OFF. Nodes will be drained and rebooted \
                    whatever Ceph says, even while placement groups are degraded or inactive: \
                    data may become unavailable";
        printer.warn(text);
        journal.event("ceph-gate-off", None, text);
    }
    let broken = stop.clone();
    journal.when_broken(move |why| {
        broken.abort(format!(
            "the journal cannot be written ({why}); it is the record of what was done, so \
             nothing more is started"
        ))
    });
    let request = config.take_request();
    let opts = config.reach.ssh.clone();
    let keeper = take_lock(inv, opts, &request, &journal, printer, &stop).await?;
    let kured = match kured_gates(&keeper, config, printer, &journal) {
        Ok(k) => k,
        Err(e) => {
            keeper.release(printer).await;
            return Err(e);
        }
    };
    let locked = RunHandles {
        stop,
        second,
        journal,
        kured,
    };
    let outcome = then_release(keeper, printer, work(&locked)).await;
    if let Err(e) = locked.journal.check() {
        printer.warn(&format!("the journal is incomplete: {e:#}"));
    }
    outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The lock as [`run_under_lock`] holds it: given back once the work ends
/// (a seam, so that "on every path" is tested without a fleet).
pub trait GiveBack {
    fn give_back(self, printer: &Printer) -> impl Future<Output = ()>;
}

impl GiveBack for LockKeeper {
    async fn give_back(self, printer: &Printer) {
        self.release(printer).await
    }
}

/// Runs `work`, then gives `held` back on every path: its result, its
/// error, or its panic (under catch_unwind: not even a bug in fleetctl
/// leaves the lock held), which the caller raises again.
async fn then_release<T>(
    held: impl GiveBack,
    printer: &Printer,
    work: impl Future<Output = T>,
) -> std::thread::Result<T> {
    let outcome = AssertUnwindSafe(work).catch_unwind().await;
    held.give_back(printer).await;
    outcome
}

/// Still valid under the lock? The one re-check apply, reboot and rollback
/// make once the lock is held and before anything changes: the fleet read
/// again, now that nobody else (Kured, another fleetctl, another operator)
/// may reboot a node until the lock is given back, and judged by
/// `decide_again`, the command's own part, against what the operator
/// confirmed (apply: the saved plan; reboot: the reboots; rollback: the
/// images). `decide_again` answers `Some(work)` to go on, `None` when
/// nothing is left to do (having said so), or an error when the fleet moved
/// away from what was confirmed: then nothing is changed and the command
/// exits. Going on, the work comes back with the fleet as read, whose
/// sessions the run uses.
pub async fn recheck_under_lock<T>(
    inv: &Inventory,
    reach: &Reach,
    printer: &Printer,
    decide_again: impl AsyncFnOnce(&Gathered) -> anyhow::Result<Option<T>>,
) -> anyhow::Result<Option<(T, Gathered)>> {
    let gathered = super::gather_fleet(inv, reach, printer).await?;
    Ok(decide_again(&gathered).await?.map(|work| (work, gathered)))
}

/// A script to run under the lock and what its report says.
pub struct Script {
    pub tasks: Vec<Task>,
    /// apply's bookkeeping: the plan the tasks come from, and where it is
    /// saved (`None`: reboot and rollback save nothing).
    pub plan: Plan,
    pub plan_path: Option<PathBuf>,
    pub settings: Settings,
    /// What the progress bar counts to.
    pub total: u64,
    /// What was done, for the closing line: `3 nodes upgraded`.
    pub done: String,
    /// A rollback run without the API (`rollback::without_api`): its roll is
    /// `execute::run_rollback`'s offline one, no gates and no drain.
    pub offline: bool,
}

/// Runs `script` on the nodes `gathered` reached, raced against a second
/// Ctrl-C and the lock's lease ([`run_within_lease`]); says it is done, or what
/// the operator reads after a failure (the fleet read again, unless told
/// to stop at once).
pub async fn run_script(
    inv: &Inventory,
    reach: &Reach,
    printer: &Printer,
    locked: &RunHandles,
    gathered: &Gathered,
    script: Script,
) -> anyhow::Result<ExitCode> {
    let mut remotes = BTreeMap::new();
    for r in &gathered.nodes {
        if let Some(s) = &r.session {
            remotes.insert(
                r.node.name.clone(),
                Remote::new(s.clone(), locked.journal.clone()),
            );
        }
    }
    // Echoed commands and a redrawn bar do not mix: -v prints plain lines.
    let progress = Progress::new(printer.interactive && printer.verbose() == 0, script.total);
    let rerun = script.settings.rerun;
    let mut apply = Apply::new(
        inv,
        script.settings,
        remotes,
        &progress,
        locked.stop.clone(),
        script.plan_path,
        script.plan,
    );
    apply.kured = locked.kured.clone();
    // --window kured: Kured's window, read once its lock was held.
    if let Some(w) = locked.kured.as_ref().and_then(|k| k.window.clone()) {
        apply.settings.pace.window.get_or_insert(w);
    }
    let ledger = apply.ledger.clone();
    let lease = apply.stop.clone();
    let WorkOutcome { result, at_once } =
        run_within_lease(&lease, &locked.second, &ledger, rerun, async {
            if script.offline {
                execute::run_rollback(&mut apply, &script.tasks, true).await
            } else {
                execute::run(&mut apply, &script.tasks).await
            }
        })
        .await;
    progress.finish();
    let journal = locked.journal.path();
    match result {
        Ok(()) => {
            printer.note(&format!(
                "done: {}; journal {}",
                script.done,
                journal.display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let ledger = ledger.lock().map(|l| l.clone()).unwrap_or_default();
            let mut report = failure_report(&ledger, &e, journal, rerun);
            if !at_once {
                report.insert_str(
                    0,
                    &format!("the fleet now:\n{}\n", fleet_now(inv, reach).await),
                );
            }
            printer.note(&report);
            Err(e)
        }
    }
}

/// Opens the run's journal and says where it is.
pub fn open_journal(inv: &Inventory, printer: &Printer) -> anyhow::Result<Arc<Journal>> {
    let journal = Arc::new(Journal::create(&inv.state_dir())?);
    journal.echo_commands(printer.verbose() > 0);
    printer.note(&format!("journal: {}", journal.path().display()));
    Ok(journal)
}

/// What the operator reads after a failure: where it stopped, what was
/// finished, what is still cordoned, what to do.
/// `rerun`: the command that resumes.
pub fn failure_report(ledger: &Ledger, e: &anyhow::Error, journal: &Path, rerun: Rerun) -> String {
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
        let resumes = if rerun == Rerun::Apply {
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
pub async fn fleet_now(inv: &Inventory, reach: &Reach) -> String {
    let mut opts = reach.ssh.clone();
    opts.connect_timeout = opts.connect_timeout.min(Duration::from_secs(5));
    opts.command_timeout = Duration::from_secs(30);
    // Part of a failure report: no bar, the report is what matters.
    let quiet = crate::ui::Progress::hidden();
    match gather::gather(inv, &opts, reach.parallel, &quiet).await {
        Ok(g) => status::render_table(&status::report(&g)),
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

#[cfg(test)]
mod release_tests;

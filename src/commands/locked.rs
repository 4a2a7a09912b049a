//! What `apply` and `reboot` share around their work on the nodes: the
//! journal, the lock (taken first, given back on every path), Ctrl-C, the
//! confirmation, and the report after a failure.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

use crate::cli::Global;
use crate::gather;
use crate::inventory::Inventory;
use crate::ssh;
use crate::status;
use crate::steps::journal::Journal;
use crate::steps::lock::{self, Identity, KuredRef, Lock, LockLost, LockOptions};
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

impl LockRequest {
    pub fn new(inv: &Inventory, roll: &crate::cli::RollArgs) -> LockRequest {
        LockRequest {
            kured: roll.kured.clone().or_else(|| inv.kured.clone()),
            force_unlock: roll.force_unlock,
            yes: roll.yes,
            node_timeout: roll.node_timeout,
        }
    }
}

/// What the operator asked about the lock.
pub struct LockRequest {
    /// `--kured`, else the inventory's `kured:`; `None`: find Kured.
    pub kured: Option<KuredRef>,
    pub force_unlock: bool,
    /// `--force-unlock --yes`: also a holder that may be alive.
    pub yes: bool,
    /// `--node-timeout`: the lock's TTL outlasts the longest stretch apply
    /// cannot refresh it (while the node kubectl runs on reboots).
    pub node_timeout: Duration,
}

/// The lock while apply (or reboot) holds it: refreshed in the background
/// every [`lock::HEARTBEAT_EVERY`], and given back by [`HeldLock::release`]
/// on every path (the caller runs its work under `catch_unwind` so that a
/// panic releases it too).
pub struct HeldLock {
    lock: Arc<Lock>,
    session: Arc<tokio::sync::Mutex<LockSession>>,
    beating: tokio::task::JoinHandle<()>,
    quit: Arc<tokio::sync::Notify>,
}

/// The session the lock is kept through: the first control-plane node's,
/// reconnected when that node rebooted.
struct LockSession {
    remote: Remote,
    target: ssh::Target,
    opts: ssh::Options,
    journal: Arc<Journal>,
}

impl LockSession {
    async fn reconnect(&mut self) -> anyhow::Result<()> {
        let mut quick = self.opts.clone();
        quick.connect_timeout = quick.connect_timeout.min(Duration::from_secs(5));
        let session = ssh::connect(&self.target, &quick).await?;
        self.remote = Remote::new(Arc::new(session), self.journal.clone());
        self.remote.report_warnings();
        Ok(())
    }
}

/// Connects to the first control-plane node, takes the lock there and
/// starts its heartbeat; a lost lock makes `stop` stop the run at its next
/// safe point.
pub async fn take_lock(
    inv: &Inventory,
    global: &Global,
    request: &LockRequest,
    journal: &Arc<Journal>,
    printer: &Printer,
    stop: &Stop,
) -> anyhow::Result<HeldLock> {
    let first = inv.first_control_plane();
    let target = ssh::resolve(inv, first).map_err(|e| usage!("{e:#}"))?;
    let opts = super::ssh_options(inv, global);
    let session = ssh::connect(&target, &opts)
        .await
        .with_context(|| format!("{}: connecting to take the lock", first.name))?;
    for w in session.warnings() {
        printer.warn(w);
    }
    let api = Remote::new(Arc::new(session), journal.clone());
    let lock_opts = LockOptions {
        kured: request.kured.clone(),
        force_unlock: request.force_unlock,
        force_yes: request.force_unlock && request.yes,
        ttl: lock::DEFAULT_TTL.max(request.node_timeout + Duration::from_secs(60)),
        ..LockOptions::default()
    };
    let held =
        Arc::new(lock::acquire(&api, &lock_opts, &Identity::local(), SystemTime::now()).await?);
    if let Some(prev) = held.forced() {
        printer.warn(&format!("--force-unlock removed {prev}"));
    }
    for w in held.warnings() {
        printer.warn(w);
    }
    printer.note(&format!("holding {}", held.describe()));
    let session = Arc::new(tokio::sync::Mutex::new(LockSession {
        remote: api,
        target,
        opts,
        journal: journal.clone(),
    }));
    let quit = Arc::new(tokio::sync::Notify::new());
    let beating = tokio::spawn(heartbeat(
        held.clone(),
        session.clone(),
        quit.clone(),
        stop.clone(),
        printer.clone(),
    ));
    Ok(HeldLock {
        lock: held,
        session,
        beating,
        quit,
    })
}

/// Refreshes the lock until told to quit. A lost lock stops the run; an
/// API that does not answer (the node kubectl runs on is rebooting) is
/// retried, over a new connection when the old one dropped, and stops the
/// run only when the lock would otherwise expire.
async fn heartbeat(
    lock: Arc<Lock>,
    session: Arc<tokio::sync::Mutex<LockSession>>,
    quit: Arc<tokio::sync::Notify>,
    stop: Stop,
    printer: Printer,
) {
    let mut last_ok = Instant::now();
    let mut warned = false;
    loop {
        tokio::select! {
            _ = quit.notified() => return,
            _ = tokio::time::sleep(lock::HEARTBEAT_EVERY) => {}
        }
        let mut s = session.lock().await;
        let beat = s.remote.clone();
        match lock.heartbeat(&beat, SystemTime::now()).await {
            Ok(()) => {
                last_ok = Instant::now();
                warned = false;
            }
            Err(e) if e.chain().any(|c| c.is::<LockLost>()) => {
                stop.abort(format!("{e:#}"));
                return;
            }
            Err(e) => {
                if ssh::is_disconnected(&e) || !warned {
                    let _ = s.reconnect().await;
                }
                let silent = last_ok.elapsed();
                // Two beats of margin before the TTL runs out.
                if silent + 2 * lock::HEARTBEAT_EVERY >= lock.ttl() {
                    stop.abort(format!(
                        "the lock could not be refreshed for {} ({e:#}) and would expire",
                        humantime::format_duration(Duration::from_secs(silent.as_secs()))
                    ));
                    return;
                }
                if !warned {
                    printer.debug(&format!("lock heartbeat failed, retrying: {e:#}"));
                    warned = true;
                }
            }
        }
    }
}

impl HeldLock {
    /// Stops the heartbeat, then gives the lock back (over a new connection
    /// if the old one dropped); a failure is a warning with what to do.
    pub async fn release(self, printer: &Printer) {
        self.quit.notify_one();
        let _ = self.beating.await;
        let mut s = self.session.lock().await;
        let mut result = self.lock.release(&s.remote).await;
        if result.is_err() && s.reconnect().await.is_ok() {
            result = self.lock.release(&s.remote).await;
        }
        if let Err(e) = result {
            printer.warn(&format!(
                "could not release {}: {e:#}. It expires by itself after {} (Kured then goes on); \
                 or remove it with `fleetctl apply --force-unlock` on the next run",
                self.lock.describe(),
                humantime::format_duration(self.lock.ttl())
            ));
        }
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
    // Part of a failure report: no bar, the report is what matters.
    let quiet = crate::ui::Progress::hidden();
    match gather::gather(inv, &opts, global.parallel.into(), &quiet).await {
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

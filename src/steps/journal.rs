//! The record of an apply: every remote command with its full output, and
//! every decision worth knowing afterwards (lock taken, lock forced, node
//! done), so an operator can see exactly what ran where, even after a crash.
//!
//! Two files per run under `<state dir>/journal/`, named by the UTC start
//! time: `<stamp>.log` for people (`less`, `grep w-1`) and `<stamp>.jsonl`
//! for tools (one JSON object a line). Each record is formatted whole and
//! written with one unbuffered `write_all` under a mutex, so concurrent
//! commands never interleave and nothing is lost if fleetctl dies.
//!
//! Secrets stay out of it: a value whose flag or variable name looks like
//! a URL, token, password, secret or key (Kured's `--notify-url=` carries a
//! webhook token) is written as `***`, in both files and in the `-v` echo;
//! see [`mask_secrets`]. The `.log` file, read with `less` or `cat`, has
//! its control characters escaped as the terminal's output has
//! ([`crate::ui::escape`]); the `.jsonl` keeps the text in JSON strings,
//! with every character a terminal acts on (C0 and C1 controls, DEL, bidi
//! overrides) written as a `\uXXXX` escape, so `cat` or `jq -r` of it is as
//! harmless as the `.log`. What the journal records of cluster objects is only
//! what fleetctl asked kubectl for, and the lock asks for little.
//!
//! Writing the journal never fails a command that already ran on a node:
//! the first write error is kept and [`Journal::check`] reports it, so the
//! caller can warn without mistaking it for a failed step.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use serde::Serialize;

use crate::redact::mask_secrets;
use crate::ssh::Output;

/// How many same-second journals may exist before we give up looking for a
/// free name (two applies started in the same second, tests). Two digits
/// keep `ls` order = run order.
const MAX_SAME_SECOND: u32 = 99;

/// An open journal; share it as `Arc<Journal>`.
#[derive(Debug)]
pub struct Journal {
    log_path: PathBuf,
    events_path: PathBuf,
    files: Mutex<Files>,
    /// The first write that failed, if any.
    failure: Mutex<Option<String>>,
    /// `-v`: also show each command on stderr as it completes.
    echo: std::sync::atomic::AtomicBool,
    /// Identical answers counted, not copied ([`bound`]).
    repeats: Mutex<bound::Repeats>,
    /// Bytes written to both files so far, against [`bound::MAX_TOTAL`].
    written: std::sync::atomic::AtomicU64,
    /// [`bound::MAX_TOTAL`], smaller in tests.
    cap: u64,
    /// Told once, on the first failure: the run stops at a safe point.
    broken: Mutex<Option<OnBroken>>,
}

/// What [`Journal::when_broken`] registered.
struct OnBroken(Box<dyn Fn(&str) + Send + Sync>);

impl std::fmt::Debug for OnBroken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnBroken")
    }
}

#[derive(Debug)]
struct Files {
    log: File,
    events: File,
}

/// One line of the `.jsonl` file. Field order is the documented one.
#[derive(Serialize)]
struct JournalLine<'a> {
    t: String,
    kind: &'a str,
    node: Option<&'a str>,
    detail: &'a str,
    #[serde(flatten)]
    command: Option<CommandFields<'a>>,
}

#[derive(Serialize)]
struct CommandFields<'a> {
    cmd: &'a str,
    root: bool,
    exit: Option<u32>,
    signal: Option<&'a str>,
    stdout: &'a str,
    stderr: &'a str,
    elapsed_ms: u128,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// A command as the journal records it.
#[derive(Debug, Clone, Copy)]
pub struct Ran<'a> {
    pub node: &'a str,
    /// What the step was doing, e.g. `drain w-1`.
    pub label: &'a str,
    /// The command as fleetctl wrote it (before any `sudo` wrapping).
    pub cmd: &'a str,
    /// Run as root (through `sudo -n sh -c` unless the user is root).
    pub root: bool,
}

impl Journal {
    /// Opens `<state_dir>/journal/<UTC stamp>.log` and `.jsonl`, creating
    /// the directories (0700) and the files (0600: they hold cluster details).
    pub fn create(state_dir: &Path) -> anyhow::Result<Journal> {
        Journal::create_at(state_dir, SystemTime::now())
    }

    fn create_at(state_dir: &Path, now: SystemTime) -> anyhow::Result<Journal> {
        let dir = state_dir.join("journal");
        create_private_dir(&dir)?;
        let stamp = file_stamp(now);
        for n in 1..=MAX_SAME_SECOND {
            let base = if n == 1 {
                stamp.clone()
            } else {
                // `_` sorts after the `.` of the first run's name (`-`
                // would sort before it): a listing stays in run order.
                format!("{stamp}_{n:02}")
            };
            let log_path = dir.join(format!("{base}.log"));
            let events_path = dir.join(format!("{base}.jsonl"));
            let Some(log) = create_new(&log_path)? else {
                continue;
            };
            let Some(events) = create_new(&events_path)? else {
                continue;
            };
            return Ok(Journal::from_files(log_path, events_path, log, events));
        }
        bail!(
            "cannot create a journal in {}: {MAX_SAME_SECOND} journals named {stamp}* already exist; \
             remove old ones or use another state directory",
            dir.display()
        )
    }

    fn from_files(log_path: PathBuf, events_path: PathBuf, log: File, events: File) -> Journal {
        Journal {
            log_path,
            events_path,
            files: Mutex::new(Files { log, events }),
            failure: Mutex::new(None),
            echo: std::sync::atomic::AtomicBool::new(false),
            repeats: Mutex::new(bound::Repeats::default()),
            written: std::sync::atomic::AtomicU64::new(0),
            cap: bound::MAX_TOTAL,
            broken: Mutex::new(None),
        }
    }

    /// The human-readable `.log` file.
    pub fn path(&self) -> &Path {
        &self.log_path
    }

    /// The JSON-lines `.jsonl` file.
    pub fn events_path(&self) -> &Path {
        &self.events_path
    }

    /// With `-v`, every command is also printed on stderr as it completes.
    pub fn echo_commands(&self, on: bool) {
        self.echo.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Records a command that ran (or could not run: `result` is the error),
    /// with its output, exit status and duration — secrets masked (see
    /// [`mask_secrets`]) in the command, its output and the error alike.
    ///
    /// Bounded ([`bound`]): each output keeps its head and tail, and an
    /// answer identical to the last one for the same node and label is
    /// counted instead of written.
    pub fn command(&self, ran: Ran<'_>, result: &anyhow::Result<Output>, elapsed: Duration) {
        let (size, print) = match result {
            Ok(out) => (
                out.stdout.len() + out.stderr.len(),
                bound::fingerprint(&[ran.cmd, &out.stdout, "\0", &out.stderr], out.exit),
            ),
            Err(e) => (0, bound::fingerprint(&[ran.cmd, &format!("{e:#}")], None)),
        };
        let seen = lock(&self.repeats).see(ran.node, ran.label, print);
        match seen {
            bound::Seen::Again => return,
            bound::Seen::New(Some(again)) => self.write_repeats(ran.node, ran.label, again),
            bound::Seen::New(None) => {}
        }
        off_the_workers(size > BLOCKING_ABOVE, || {
            self.record_command(ran, result, elapsed)
        });
    }

    /// Calls `f` once, with why, when the journal first fails to record:
    /// apply stops at its next safe point then, as the journal is the
    /// record of what was done.
    pub fn when_broken(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        let failed = lock(&self.failure).clone();
        if let Some(why) = failed {
            f(&why);
        }
        *lock(&self.broken) = Some(OnBroken(Box::new(f)));
    }

    fn write_repeats(&self, node: &str, label: &str, again: u64) {
        self.record_event(
            "repeated",
            Some(node),
            &format!("{label}: the same answer {again} more time(s), not copied"),
        );
    }

    fn record_command(&self, ran: Ran<'_>, result: &anyhow::Result<Output>, elapsed: Duration) {
        let now = SystemTime::now();
        let cmd = mask_secrets(ran.cmd);
        let ran = Ran { cmd: &cmd, ..ran };
        let result: Result<Output, String> = match result {
            // Masked whole, then cut: no secret straddles the cut half-masked.
            Ok(out) => Ok(Output {
                stdout: bound::head_and_tail(&mask_secrets(&out.stdout), bound::KEEP).into_owned(),
                stderr: bound::head_and_tail(&mask_secrets(&out.stderr), bound::KEEP).into_owned(),
                exit: out.exit,
                signal: out.signal.clone(),
            }),
            Err(e) => Err(mask_secrets(&format!("{e:#}")).into_owned()),
        };
        let text = crate::ui::escape::escape_controls(&command_text(now, ran, &result, elapsed))
            .into_owned();
        if self.echo.load(std::sync::atomic::Ordering::Relaxed) {
            crate::ui::err_text(&text);
        }
        let fields = match &result {
            Ok(out) => CommandFields {
                cmd: ran.cmd,
                root: ran.root,
                exit: out.exit,
                signal: out.signal.as_deref(),
                stdout: &out.stdout,
                stderr: &out.stderr,
                elapsed_ms: elapsed.as_millis(),
                error: None,
            },
            Err(e) => CommandFields {
                cmd: ran.cmd,
                root: ran.root,
                exit: None,
                signal: None,
                stdout: "",
                stderr: "",
                elapsed_ms: elapsed.as_millis(),
                error: Some(e.clone()),
            },
        };
        let record = JournalLine {
            t: rfc3339(now),
            kind: "command",
            node: Some(ran.node),
            detail: ran.label,
            command: Some(fields),
        };
        self.write(&text, &record);
    }

    /// Records something that happened beyond a command: `kind` is a short
    /// machine-readable word (`lock-acquired`), `detail` a sentence (secrets
    /// masked).
    ///
    /// An event also ends every run of repeated answers: their counts are
    /// written first, and an answer after it is recorded again in full, so
    /// each task's commands are in the journal under that task.
    pub fn event(&self, kind: &str, node: Option<&str>, detail: &str) {
        self.flush_repeats();
        self.record_event(kind, node, detail);
    }

    /// Records a line of what a step does as `--dry-run` shows it (kind
    /// `line`; `node` as the listing names it: `-` for no node, `*` for
    /// every node), journaled by the run as the step starts, so the journal
    /// holds every line the dry run prints and the commands that ran under
    /// it. Bounded as an output is ([`bound::head_and_tail`]): a line holds
    /// remote text (a stray config's name in a pin) and the inventory's
    /// health checks.
    pub fn line(&self, node: &str, text: &str) {
        self.event("line", Some(node), &bound::head_and_tail(text, bound::KEEP));
    }

    /// The counts of repeated answers not written yet, and forget the answers.
    fn flush_repeats(&self) {
        let counts = lock(&self.repeats).drain();
        for (node, label, again) in counts {
            self.write_repeats(&node, &label, again);
        }
    }

    fn record_event(&self, kind: &str, node: Option<&str>, detail: &str) {
        let now = SystemTime::now();
        let detail = mask_secrets(detail);
        let record = JournalLine {
            t: rfc3339(now),
            kind,
            node,
            detail: &detail,
            command: None,
        };
        let text = event_text(now, kind, node, &detail);
        self.write(&crate::ui::escape::escape_controls(&text), &record);
    }

    /// Fails if any record could not be written, saying which file and why.
    pub fn check(&self) -> anyhow::Result<()> {
        match &*lock(&self.failure) {
            None => Ok(()),
            Some(why) => bail!(
                "the journal {} is incomplete: {why}; the commands ran, but their record is missing",
                self.log_path.display()
            ),
        }
    }

    fn write(&self, text: &str, record: &JournalLine<'_>) {
        // DEL, the C1 controls and the bidi overrides as `\uXXXX`, as the
        // `.log` escapes them: serde_json escapes only C0.
        let mut line = match serde_json::to_string(record) {
            Ok(line) => crate::ui::escape::escape_json(&line).into_owned(),
            Err(e) => return self.fail(format!("cannot encode a record: {e}")),
        };
        line.push('\n');
        let size = (text.len() + line.len()) as u64;
        let before = self
            .written
            .fetch_add(size, std::sync::atomic::Ordering::SeqCst);
        if before + size > self.cap {
            return self.fail(format!(
                "it reached the {} KiB a run's journal may take; later records are left out",
                self.cap >> 10
            ));
        }
        let mut files = lock(&self.files);
        if let Err(e) = files.log.write_all(text.as_bytes()) {
            self.fail(format!("writing {}: {e}", self.log_path.display()));
        }
        if let Err(e) = files.events.write_all(line.as_bytes()) {
            self.fail(format!("writing {}: {e}", self.events_path.display()));
        }
    }

    fn fail(&self, why: String) {
        let first = {
            let mut failure = lock(&self.failure);
            let first = failure.is_none();
            failure.get_or_insert(why.clone());
            first
        };
        if first && let Some(f) = lock(&self.broken).as_ref() {
            (f.0)(&why);
        }
    }
}

impl Drop for Journal {
    /// The counts of repeated answers not written yet.
    fn drop(&mut self) {
        self.flush_repeats();
    }
}

/// Output past this size is masked and escaped with the runtime told the
/// thread may block: 32 MiB takes a noticeable part of a second, and the
/// lock's heartbeat and the other nodes' tasks must not wait for it.
const BLOCKING_ABOVE: usize = 64 << 10;

/// Runs `work` where it may take a while without starving the async
/// runtime: on a multi-threaded runtime (the binary's), through
/// [`tokio::task::block_in_place`], which hands this worker's other tasks
/// to another thread; elsewhere (a unit test, no runtime) in place.
fn off_the_workers<R>(big: bool, work: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if big && h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// A poisoned lock only means another thread panicked mid-write; the
/// files are still usable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    // The state directory itself must be the user's own, not only what fleetctl creates in it.
    if let Some(state_dir) = dir.parent() {
        crate::local_fs::private_dir(state_dir)?;
    }
    crate::local_fs::private_dir(dir).context("the journal directory")
}

/// `Ok(None)` when the file already exists (the name is taken).
fn create_new(path: &Path) -> anyhow::Result<Option<File>> {
    crate::local_fs::create_new(path).context("creating the journal file")
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `2026-11-29T19:30:12Z` → `20261129T193012Z`: sorts by time, no `:` in
/// file names.
fn file_stamp(t: SystemTime) -> String {
    rfc3339(t)
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect()
}

/// ```text
/// 2026-11-29T19:30:12Z cp-1: lock: read daemonset kube-system/kured
///   # kubectl … get daemonset kured -o json
///   out| {
///   err| …
///   exit 0 after 412ms
/// ```
/// `#` marks a command run as root, `$` one run as the SSH user.
fn command_text(
    now: SystemTime,
    ran: Ran<'_>,
    result: &Result<Output, String>,
    elapsed: Duration,
) -> String {
    let mut text = format!("{} {}: {}\n", rfc3339(now), ran.node, ran.label);
    let prompt = if ran.root { "#" } else { "$" };
    for (i, line) in ran.cmd.lines().enumerate() {
        let lead = if i == 0 { prompt } else { " " };
        text.push_str(&format!("  {lead} {line}\n"));
    }
    let took = humantime::format_duration(Duration::from_millis(
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
    ));
    match result {
        Ok(out) => {
            prefixed(&mut text, "out| ", &out.stdout);
            prefixed(&mut text, "err| ", &out.stderr);
            match (&out.exit, &out.signal) {
                (Some(code), _) => text.push_str(&format!("  exit {code} after {took}\n")),
                (None, Some(signal)) => {
                    text.push_str(&format!("  killed by signal {signal} after {took}\n"))
                }
                (None, None) => text.push_str(&format!("  no exit status after {took}\n")),
            }
        }
        Err(e) => prefixed(&mut text, "", &format!("failed after {took}: {e}")),
    }
    text.push('\n');
    text
}

fn event_text(now: SystemTime, kind: &str, node: Option<&str>, detail: &str) -> String {
    let mut text = match node {
        Some(node) => format!("{} {node}: [{kind}]\n", rfc3339(now)),
        None => format!("{} [{kind}]\n", rfc3339(now)),
    };
    prefixed(&mut text, "", detail);
    text.push('\n');
    text
}

fn prefixed(text: &mut String, prefix: &str, body: &str) {
    for line in body.lines() {
        text.push_str("  ");
        text.push_str(prefix);
        text.push_str(line);
        text.push('\n');
    }
}

mod bound;

#[cfg(test)]
mod tests;

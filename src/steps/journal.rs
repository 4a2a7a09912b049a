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
//! see [`mask_secrets`]. What the journal records of cluster objects is only
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
}

#[derive(Debug)]
struct Files {
    log: File,
    events: File,
}

/// One line of the `.jsonl` file. Field order is the documented one.
#[derive(Serialize)]
struct Record<'a> {
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
    pub fn command(&self, ran: Ran<'_>, result: &anyhow::Result<Output>, elapsed: Duration) {
        let now = SystemTime::now();
        let cmd = mask_secrets(ran.cmd);
        let ran = Ran { cmd: &cmd, ..ran };
        let result: Result<Output, String> = match result {
            Ok(out) => Ok(Output {
                stdout: mask_secrets(&out.stdout).into_owned(),
                stderr: mask_secrets(&out.stderr).into_owned(),
                ..out.clone()
            }),
            Err(e) => Err(mask_secrets(&format!("{e:#}")).into_owned()),
        };
        let text = command_text(now, ran, &result, elapsed);
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
        let record = Record {
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
    pub fn event(&self, kind: &str, node: Option<&str>, detail: &str) {
        let now = SystemTime::now();
        let detail = mask_secrets(detail);
        let record = Record {
            t: rfc3339(now),
            kind,
            node,
            detail: &detail,
            command: None,
        };
        self.write(&event_text(now, kind, node, &detail), &record);
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

    fn write(&self, text: &str, record: &Record<'_>) {
        let mut line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(e) => return self.fail(format!("cannot encode a record: {e}")),
        };
        line.push('\n');
        let mut files = lock(&self.files);
        if let Err(e) = files.log.write_all(text.as_bytes()) {
            self.fail(format!("writing {}: {e}", self.log_path.display()));
        }
        if let Err(e) = files.events.write_all(line.as_bytes()) {
            self.fail(format!("writing {}: {e}", self.events_path.display()));
        }
    }

    fn fail(&self, why: String) {
        lock(&self.failure).get_or_insert(why);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn at(rfc: &str) -> SystemTime {
        humantime::parse_rfc3339(rfc).unwrap()
    }

    fn events(j: &Journal) -> Vec<serde_json::Value> {
        std::fs::read_to_string(j.events_path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn log(j: &Journal) -> String {
        std::fs::read_to_string(j.path()).unwrap()
    }

    fn ran<'a>(node: &'a str, label: &'a str, cmd: &'a str) -> Ran<'a> {
        Ran {
            node,
            label,
            cmd,
            root: true,
        }
    }

    #[test]
    fn creates_both_files_named_by_utc_start_time_in_new_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(".fleetctl");
        let j = Journal::create_at(&state, at("2026-11-29T19:30:12Z")).unwrap();
        assert_eq!(j.path(), state.join("journal/20261129T193012Z.log"));
        assert_eq!(
            j.events_path(),
            state.join("journal/20261129T193012Z.jsonl")
        );
        assert!(j.path().is_file() && j.events_path().is_file());
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(j.path()), 0o600);
        assert_eq!(mode(&state.join("journal")), 0o700);
    }

    #[test]
    fn a_second_run_in_the_same_second_never_reuses_a_journal() {
        let dir = tempfile::tempdir().unwrap();
        let t = at("2026-11-29T19:30:12Z");
        let first = Journal::create_at(dir.path(), t).unwrap();
        first.event("apply-started", None, "first");
        let second = Journal::create_at(dir.path(), t).unwrap();
        assert_ne!(first.path(), second.path());
        assert!(second.path().ends_with("20261129T193012Z_02.log"));
        let mut names: Vec<_> = (3..=11)
            .map(|_| {
                Journal::create_at(dir.path(), t)
                    .unwrap()
                    .events_path()
                    .to_path_buf()
            })
            .collect();
        names.insert(0, second.events_path().to_path_buf());
        names.insert(0, first.events_path().to_path_buf());
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, names, "file names sort in run order");
        assert_eq!(events(&first).len(), 1);
        assert!(events(&second).is_empty());
    }

    #[test]
    fn a_command_is_written_through_with_output_exit_and_duration() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path()).unwrap();
        let out = Output {
            exit: Some(3),
            signal: None,
            stdout: "line one\nline two\n".into(),
            stderr: "oops\n".into(),
        };
        j.command(
            ran("cp-1", "lock: read daemonset", "kubectl get ds\n  -o json"),
            &Ok(out),
            Duration::from_millis(1412),
        );
        // Read while the journal is still open: nothing may sit in a buffer.
        let text = log(&j);
        assert!(text.contains(" cp-1: lock: read daemonset\n"), "{text}");
        assert!(
            text.contains("  # kubectl get ds\n      -o json\n"),
            "{text}"
        );
        assert!(
            text.contains("  out| line one\n  out| line two\n  err| oops\n"),
            "{text}"
        );
        assert!(text.contains("  exit 3 after 1s 412ms\n"), "{text}");

        let [record] = events(&j).try_into().unwrap();
        assert_eq!(record["kind"], "command");
        assert_eq!(record["node"], "cp-1");
        assert_eq!(record["detail"], "lock: read daemonset");
        assert_eq!(record["cmd"], "kubectl get ds\n  -o json");
        assert_eq!(record["root"], true);
        assert_eq!(record["exit"], 3);
        assert_eq!(record["signal"], serde_json::Value::Null);
        assert_eq!(record["stdout"], "line one\nline two\n");
        assert_eq!(record["stderr"], "oops\n");
        assert_eq!(record["elapsed_ms"], 1412);
        assert!(record.get("error").is_none());
        let t = record["t"].as_str().unwrap();
        assert!(humantime::parse_rfc3339(t).is_ok(), "{t}");
    }

    #[test]
    fn a_command_that_could_not_run_records_the_error_chain() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path()).unwrap();
        let err = Err(anyhow::anyhow!("connection dropped").context("w-1: running `reboot`"));
        j.command(
            Ran {
                root: false,
                ..ran("w-1", "reboot w-1", "systemctl reboot")
            },
            &err,
            Duration::from_secs(2),
        );
        let text = log(&j);
        assert!(text.contains("  $ systemctl reboot\n"), "{text}");
        assert!(
            text.contains("  failed after 2s: w-1: running `reboot`: connection dropped\n"),
            "{text}"
        );
        let [record] = events(&j).try_into().unwrap();
        assert_eq!(record["exit"], serde_json::Value::Null);
        assert_eq!(record["root"], false);
        assert_eq!(record["error"], "w-1: running `reboot`: connection dropped");
    }

    #[test]
    fn a_signal_is_recorded_instead_of_an_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path()).unwrap();
        let out = Output {
            exit: None,
            signal: Some("KILL".into()),
            ..Output::default()
        };
        j.command(
            ran("w-2", "drain w-2", "kubectl drain w-2"),
            &Ok(out),
            Duration::ZERO,
        );
        assert!(log(&j).contains("  killed by signal KILL after 0s\n"));
        assert_eq!(events(&j)[0]["signal"], "KILL");
    }

    #[test]
    fn events_have_the_documented_shape_with_or_without_a_node() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path()).unwrap();
        j.event("apply-started", None, "plan v1.36 → v1.37");
        j.event("lock-acquired", Some("cp-1"), "Kured's lock\nsecond line");
        let text = log(&j);
        assert!(
            text.contains(" [apply-started]\n  plan v1.36 → v1.37\n"),
            "{text}"
        );
        assert!(
            text.contains(" cp-1: [lock-acquired]\n  Kured's lock\n  second line\n"),
            "{text}"
        );
        let records = events(&j);
        let keys: Vec<_> = records[0].as_object().unwrap().keys().cloned().collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, ["detail", "kind", "node", "t"]);
        assert_eq!(records[0]["node"], serde_json::Value::Null);
        assert_eq!(records[1]["node"], "cp-1");
        assert_eq!(records[1]["detail"], "Kured's lock\nsecond line");
        // The raw line keeps the documented field order.
        let raw = std::fs::read_to_string(j.events_path()).unwrap();
        assert!(raw.lines().all(|l| l.starts_with("{\"t\":\"")), "{raw}");
        assert!(
            raw.contains("\"kind\":\"apply-started\",\"node\":null,\"detail\":"),
            "{raw}"
        );
    }

    #[test]
    fn concurrent_writers_never_interleave_records() {
        let dir = tempfile::tempdir().unwrap();
        let j = Arc::new(Journal::create(dir.path()).unwrap());
        let big = "x".repeat(64 * 1024);
        let threads: Vec<_> = (0..8)
            .map(|n| {
                let (j, big) = (j.clone(), big.clone());
                std::thread::spawn(move || {
                    for i in 0..20 {
                        let out = Output {
                            exit: Some(0),
                            stdout: format!("{n}-{i}{big}"),
                            ..Output::default()
                        };
                        j.command(
                            ran(&format!("w-{n}"), "probe", "true"),
                            &Ok(out),
                            Duration::ZERO,
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let records = events(&j);
        assert_eq!(records.len(), 160);
        for r in &records {
            let node = r["node"].as_str().unwrap();
            let stdout = r["stdout"].as_str().unwrap();
            assert!(stdout.starts_with(&format!("{}-", &node[2..])), "{node}");
        }
        assert_eq!(log(&j).matches(": probe\n").count(), 160);
        j.check().unwrap();
    }

    #[test]
    fn a_failed_write_is_reported_by_check_not_by_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("ro.log");
        let events_path = dir.path().join("ro.jsonl");
        std::fs::write(&log_path, "").unwrap();
        std::fs::write(&events_path, "").unwrap();
        // Opened read-only: every write fails, as on a full or vanished disk.
        let j = Journal::from_files(
            log_path.clone(),
            events_path,
            File::open(&log_path).unwrap(),
            File::open(dir.path().join("ro.jsonl")).unwrap(),
        );
        j.event("apply-started", None, "x");
        let err = j.check().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "the journal {} is incomplete: writing",
                log_path.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn the_log_the_jsonl_and_the_echo_never_hold_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::create(dir.path()).unwrap();
        let listing = "daemonset\tkured\tkured\ncontainer\tkured\tghcr.io/kubereboot/kured:1.23.0\t[\"/usr/bin/kured\"]\t[\"--notify-url=slack://T0/B0/xoxb-secret\"]\t[{\"name\":\"KURED_SLACK_HOOK_URL\",\"value\":\"https://hooks/xoxb-secret\"}]\t\n";
        let out = Output {
            exit: Some(0),
            stdout: listing.into(),
            stderr: "warning: --token=xoxb-secret is deprecated\n".into(),
            ..Output::default()
        };
        j.command(
            ran("cp-1", "lock: find Kured", "kured --notify-url xoxb-secret"),
            &Ok(out),
            Duration::ZERO,
        );
        j.command(
            ran("cp-1", "probe", "true"),
            &Err(anyhow::anyhow!("refused --password=xoxb-secret")),
            Duration::ZERO,
        );
        j.event(
            "lock-force-unlocked",
            Some("cp-1"),
            "removed --api-key=xoxb-secret",
        );
        let text = log(&j);
        let raw = std::fs::read_to_string(j.events_path()).unwrap();
        for file in [&text, &raw] {
            assert!(!file.contains("xoxb-secret"), "{file}");
        }
        assert!(text.contains("--notify-url=***"), "{text}");
        assert!(text.contains("# kured --notify-url ***"), "{text}");
        let records = events(&j);
        assert_eq!(records[0]["cmd"], "kured --notify-url ***");
        assert!(
            records[0]["stdout"]
                .as_str()
                .unwrap()
                .contains(r#"{"name":"KURED_SLACK_HOOK_URL","value":"***"}"#)
        );
        assert_eq!(records[1]["error"], "refused --password=***");
        assert_eq!(records[2]["detail"], "removed --api-key=***");
        // Not checked apart: the -v echo prints this very .log text.
    }
}

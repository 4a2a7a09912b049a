//! How the steps run a command on a node: through the node's SSH session,
//! always journaled, with a label that says why ("drain w-1"), and — for
//! [`Remote::check`] — a non-zero exit turned into an error that says
//! where, what, how it ended and the last lines it printed.
//!
//! A [`Remote`] is cheap to clone and to re-point: after a reboot the step
//! connects again and carries on with [`Remote::with_session`], keeping the
//! same journal.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::journal::{Journal, Ran};
use crate::ssh::{Output, Session};

/// How many trailing lines of output a failure quotes.
const TAIL_LINES: usize = 5;
/// Longer quoted lines are cut (a JSON blob on one line says nothing more).
const TAIL_LINE_CHARS: usize = 300;

/// One node's session plus the run's journal.
#[derive(Debug, Clone)]
pub struct Remote {
    session: Arc<Session>,
    journal: Arc<Journal>,
}

impl Remote {
    pub fn new(session: Arc<Session>, journal: Arc<Journal>) -> Remote {
        Remote { session, journal }
    }

    /// The same node and journal over a fresh connection (after a reboot).
    /// What connecting warned about (a host key recorded, or accepted with
    /// checking off) is printed and journaled here, as gathering does for
    /// the first connection: a reboot is exactly when a swapped host would show.
    pub fn with_session(&self, session: Arc<Session>) -> Remote {
        let fresh = Remote {
            session,
            journal: self.journal.clone(),
        };
        fresh.report_warnings();
        fresh
    }

    /// Prints and journals what connecting warned about (see [`Remote::with_session`]).
    pub fn report_warnings(&self) {
        for w in self.session.warnings() {
            self.journal.event("ssh-warning", Some(self.node()), w);
            crate::ui::alert(w);
        }
    }

    /// The inventory node name.
    pub fn node(&self) -> &str {
        self.session.node()
    }

    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Runs `cmd` as the SSH user. A non-zero exit is not an error here;
    /// not being able to run it (dropped connection, timeout) is.
    pub async fn run(
        &self,
        label: &str,
        cmd: &str,
        stdin: Option<&[u8]>,
    ) -> anyhow::Result<Output> {
        let ran = self.ran(label, cmd, false);
        journaled(&self.journal, ran, self.session.exec(cmd, stdin)).await
    }

    /// [`Remote::run`] as root.
    pub async fn run_root(
        &self,
        label: &str,
        cmd: &str,
        stdin: Option<&[u8]>,
    ) -> anyhow::Result<Output> {
        let ran = self.ran(label, cmd, true);
        journaled(&self.journal, ran, self.session.exec_root(cmd, stdin)).await
    }

    /// [`Remote::run_root`] with its own time limit, for the long steps.
    pub async fn run_root_timeout(
        &self,
        label: &str,
        cmd: &str,
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> anyhow::Result<Output> {
        let ran = self.ran(label, cmd, true);
        let exec = self.session.exec_root_timeout(cmd, stdin, timeout);
        journaled(&self.journal, ran, exec).await
    }

    /// Runs `cmd` as root with its stdout streamed into `sink` (a file
    /// copied off the node), stopped past `max_bytes`; journaled without the bytes.
    pub async fn run_root_into(
        &self,
        label: &str,
        cmd: &str,
        sink: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        max_bytes: u64,
        timeout: Duration,
    ) -> anyhow::Result<Output> {
        let ran = self.ran(label, cmd, true);
        let exec = self.session.exec_root_into(cmd, sink, max_bytes, timeout);
        journaled(&self.journal, ran, exec).await
    }

    /// Runs `cmd` as the SSH user and fails unless it exits 0
    /// ([`CommandFailed`] in the chain).
    pub async fn check(&self, label: &str, cmd: &str) -> anyhow::Result<Output> {
        let out = self.run(label, cmd, None).await?;
        succeeded(self.node(), label, out)
    }

    /// [`Remote::check`] as root.
    pub async fn check_root(&self, label: &str, cmd: &str) -> anyhow::Result<Output> {
        let out = self.run_root(label, cmd, None).await?;
        succeeded(self.node(), label, out)
    }

    fn ran<'a>(&'a self, label: &'a str, cmd: &'a str, root: bool) -> Ran<'a> {
        Ran {
            node: self.node(),
            label,
            cmd,
            root,
        }
    }
}

/// Awaits `exec`, journals what it produced (or why it could not run) with
/// its duration, and names the node and label on an error.
pub async fn journaled<F>(journal: &Journal, ran: Ran<'_>, exec: F) -> anyhow::Result<Output>
where
    F: Future<Output = anyhow::Result<Output>>,
{
    let started = Instant::now();
    let result = exec.await;
    journal.command(ran, &result, started.elapsed());
    result.with_context(|| format!("{}: {}", ran.node, ran.label))
}

/// `out` if it exited 0, otherwise a [`CommandFailed`] error.
pub fn succeeded(node: &str, label: &str, out: Output) -> anyhow::Result<Output> {
    if out.success() {
        Ok(out)
    } else {
        Err(anyhow::Error::new(CommandFailed::new(node, label, &out)))
    }
}

/// A command ran but did not exit 0. Find it in a chain with
/// `err.chain().find_map(|e| e.downcast_ref::<CommandFailed>())`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandFailed {
    pub node: String,
    pub label: String,
    /// `None` when a signal ended it.
    pub exit: Option<u32>,
    pub signal: Option<String>,
    /// The last lines of stderr (of stdout when stderr is empty).
    pub tail: Vec<String>,
    /// Which stream `tail` comes from: "stderr" or "stdout".
    pub tail_of: &'static str,
}

impl CommandFailed {
    pub fn new(node: &str, label: &str, out: &Output) -> CommandFailed {
        let (tail_of, text) = if out.stderr.trim().is_empty() {
            ("stdout", out.stdout.as_str())
        } else {
            ("stderr", out.stderr.as_str())
        };
        CommandFailed {
            node: node.to_string(),
            label: label.to_string(),
            exit: out.exit,
            signal: out.signal.clone(),
            tail: tail(text),
            tail_of,
        }
    }
}

impl fmt::Display for CommandFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} failed", self.node, self.label)?;
        match (&self.exit, &self.signal) {
            (Some(code), _) => write!(f, " (exit status {code})")?,
            (None, Some(signal)) => write!(f, " (killed by signal {signal})")?,
            (None, None) => write!(f, " (no exit status)")?,
        }
        if self.tail.is_empty() {
            return write!(f, " and printed nothing");
        }
        write!(f, "; last lines of its {}:", self.tail_of)?;
        for line in &self.tail {
            write!(f, "\n    {line}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CommandFailed {}

fn tail(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    lines[start..]
        .iter()
        .map(|line| {
            if line.chars().count() > TAIL_LINE_CHARS {
                let cut: String = line.chars().take(TAIL_LINE_CHARS).collect();
                format!("{cut}…")
            } else {
                line.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(exit: Option<u32>, stdout: &str, stderr: &str) -> Output {
        Output {
            exit,
            signal: None,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn success_passes_the_output_through() {
        let o = out(Some(0), "ok\n", "a warning\n");
        assert_eq!(succeeded("w-1", "drain w-1", o.clone()).unwrap(), o);
    }

    #[test]
    fn failure_names_node_label_status_and_last_stderr_lines() {
        let stderr = "1\n2\n\n3\n4\n5\n6\nerror: cannot evict pod web-0\n";
        let err = succeeded("w-1", "drain w-1", out(Some(1), "noise\n", stderr)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "w-1: drain w-1 failed (exit status 1); last lines of its stderr:\n    \
             3\n    4\n    5\n    6\n    error: cannot evict pod web-0"
        );
        let failed = err.downcast_ref::<CommandFailed>().unwrap();
        assert_eq!(failed.exit, Some(1));
        assert_eq!(failed.tail.len(), TAIL_LINES);
    }

    #[test]
    fn failure_quotes_stdout_when_stderr_is_empty_and_says_so() {
        let err = succeeded(
            "cp-1",
            "kubeadm upgrade apply",
            out(Some(2), "[preflight] bad\n", "  \n"),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cp-1: kubeadm upgrade apply failed (exit status 2); last lines of its stdout:\n    [preflight] bad"
        );
    }

    #[test]
    fn a_signal_or_silence_is_described() {
        let killed = Output {
            signal: Some("TERM".into()),
            ..out(None, "", "")
        };
        let err = succeeded("w-2", "reboot w-2", killed).unwrap_err();
        assert_eq!(
            err.to_string(),
            "w-2: reboot w-2 failed (killed by signal TERM) and printed nothing"
        );
    }

    #[test]
    fn long_lines_are_cut() {
        let long = "y".repeat(1000);
        let failed = CommandFailed::new("n", "l", &out(Some(1), "", &long));
        assert_eq!(failed.tail[0].chars().count(), TAIL_LINE_CHARS + 1);
        assert!(failed.tail[0].ends_with('…'));
    }

    #[tokio::test]
    async fn journaled_records_success_and_failure_and_adds_node_and_label() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::create(dir.path()).unwrap();
        let ran = Ran {
            node: "w-1",
            label: "read the reboot marker",
            cmd: "test -e /run/reboot-required",
            root: true,
        };
        let ok = journaled(&journal, ran, async { Ok(out(Some(1), "", "")) })
            .await
            .unwrap();
        assert_eq!(ok.exit, Some(1), "a non-zero exit is not an error here");
        let err = journaled(&journal, ran, async {
            Err(anyhow::anyhow!("connection dropped"))
        })
        .await
        .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "w-1: read the reboot marker: connection dropped"
        );

        let lines: Vec<serde_json::Value> = std::fs::read_to_string(journal.events_path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["exit"], 1);
        assert_eq!(lines[0]["cmd"], "test -e /run/reboot-required");
        assert_eq!(lines[1]["error"], "connection dropped");
    }
}

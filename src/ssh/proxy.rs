//! `ProxyCommand`: the SSH connection runs over a command's stdin and stdout
//! instead of a TCP socket, as ssh_config(5) describes it ("the command
//! should read from its standard input and write to its standard output").
//!
//! Like ssh, the command is run by a shell with `exec`, so the process that
//! is killed when the session ends is the command itself, not a shell
//! left in front of it. Its stderr is kept (the last few KiB) and shown
//! only when the connection fails: that is where `nc` or a nested `ssh -W`
//! say why.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow};
use tokio::io::{AsyncReadExt, Join};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use super::Target;

/// How much of the command's stderr is kept for an error message.
const STDERR_TAIL: usize = 4096;

/// The command's stdout (what the server sends) and stdin (what we send), as one stream.
pub(crate) type ProxyStream = Join<ChildStdout, ChildStdin>;

/// A running ProxyCommand; killed when dropped, as ssh kills its proxy on exit.
pub(crate) struct ProxyProcess {
    command: String,
    child: Child,
    stderr: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Starts `command` (tokens already expanded) for `target`.
pub(crate) fn spawn(target: &Target, command: &str) -> anyhow::Result<(ProxyProcess, ProxyStream)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "{}: cannot start its ProxyCommand `{command}` with sh: is /bin/sh there?",
                target.node
            )
        })?;
    let missing = || {
        anyhow!(
            "{}: ProxyCommand `{command}`: no pipe to the process",
            target.node
        )
    };
    let stdin = child.stdin.take().ok_or_else(missing)?;
    let stdout = child.stdout.take().ok_or_else(missing)?;
    let stderr_pipe = child.stderr.take().ok_or_else(missing)?;
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let reader = tokio::spawn(keep_tail(stderr_pipe, stderr.clone()));
    let process = ProxyProcess {
        command: command.to_string(),
        child,
        stderr,
        reader,
    };
    Ok((process, tokio::io::join(stdout, stdin)))
}

async fn keep_tail(mut pipe: ChildStderr, tail: Arc<Mutex<Vec<u8>>>) {
    let mut chunk = [0u8; 1024];
    while let Ok(n) = pipe.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
        tail.extend_from_slice(&chunk[..n]);
        let excess = tail.len().saturating_sub(STDERR_TAIL);
        tail.drain(..excess);
    }
}

impl ProxyProcess {
    /// What the command tells about a failed connection: whether it exited
    /// (and how) and the end of its stderr. Stops it if it still runs.
    pub(crate) async fn diagnose(&mut self) -> String {
        let grace = Duration::from_millis(500);
        let exited = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                let _ = self.child.start_kill();
                None
            }
        };
        // The reader ends when the pipe closes, which the exit (or kill) causes.
        let _ = tokio::time::timeout(grace, &mut self.reader).await;
        let said = {
            let tail = self.stderr.lock().unwrap_or_else(|p| p.into_inner());
            String::from_utf8_lossy(&tail).trim().to_string()
        };
        let what = match exited {
            Some(status) => format!("ProxyCommand `{}` ended ({status})", self.command),
            None => format!("ProxyCommand `{}` was still running", self.command),
        };
        if said.is_empty() {
            format!("{what} and printed nothing on stderr")
        } else {
            format!("{what}; its stderr: {said}")
        }
    }
}

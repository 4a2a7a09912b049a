//! One authenticated SSH connection per node, reused for every command (a
//! channel each), reached directly, through jump hosts or over a ProxyCommand.
//!
//! russh has no connect or command timeout, so every network wait here is
//! bounded by `tokio::time::timeout`; keepalives detect a dead peer while a
//! command is silent. A connection that ends before a command reports its
//! exit status surfaces as [`Disconnected`], which is how a reboot looks.

use std::time::Duration;

use anyhow::{Context, anyhow};
use russh::ChannelMsg;
use russh::client::Handle;

use super::Output;
use super::failure::{CommandTimedOut, Disconnected, SudoPasswordRequired};
use super::known_hosts::Unreadable;
use super::proxy::ProxyProcess;
use crate::shell;

mod capture;
mod dial;
pub use capture::DEFAULT_MAX_OUTPUT;
use capture::{Capture, MAX_STDERR};
use dial::Client;
pub use dial::{Unconnected, connect, connect_or_say};

/// What sudo prints when `-n` meets a password requirement.
const SUDO_NEEDS_PASSWORD: &str = "a password is required";

/// An authenticated connection to one node. Commands may run concurrently;
/// each gets its own channel.
pub struct Session {
    node: String,
    user: String,
    // Declared before `_carriers`, so it is dropped (closed) first.
    handle: Handle<Client>,
    /// Jump host connections and ProxyCommand processes; they carry this one
    /// and must outlive it.
    _carriers: Carriers,
    command_timeout: Duration,
    /// Most bytes of one command's stdout kept (capture.rs).
    max_output: usize,
    warnings: Vec<String>,
    retried: Vec<String>,
}

#[derive(Default)]
struct Carriers {
    via: Vec<Handle<Client>>,
    proxies: Vec<ProxyProcess>,
}

/// What connecting gathers besides the connection itself.
#[derive(Default)]
struct ConnectExtras {
    carriers: Carriers,
    warnings: Vec<String>,
    /// (node, line): reported once per run, see `Options::reported`.
    unreadable: Vec<(String, Unreadable)>,
    /// Connections sshd dropped before its banner and that then succeeded.
    retried: Vec<String>,
    /// Authentication began on some hop (`dial::Unconnected`).
    authenticated: bool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("node", &self.node)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// The inventory node name this connection belongs to.
    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn is_root(&self) -> bool {
        self.user == "root"
    }

    /// Things the operator must see (host key recorded, host key checking
    /// off). ssh never prints; the caller hands these to the printer.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Connections (to the node or a jump host) that sshd closed before its
    /// banner — MaxStartups — and that succeeded when tried again. Not a
    /// problem; the caller may show it with `-v`.
    pub fn retried(&self) -> &[String] {
        &self.retried
    }

    /// Runs `cmd` through the remote user's shell, feeding `stdin` (then EOF).
    /// A non-zero exit is NOT an error here; a dropped connection is
    /// ([`Disconnected`]), and so is running past the command timeout.
    pub async fn exec(&self, cmd: &str, stdin: Option<&[u8]>) -> anyhow::Result<Output> {
        self.exec_timeout(cmd, stdin, self.command_timeout).await
    }

    /// [`Session::exec`] with its own timeout, for the few long steps
    /// (downloads, `kubeadm upgrade apply`).
    pub async fn exec_timeout(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> anyhow::Result<Output> {
        let label = shell::label(cmd);
        match tokio::time::timeout(timeout, self.run(cmd, stdin)).await {
            Ok(result) => result.with_context(|| format!("{}: running `{label}`", self.node)),
            Err(_) => Err(anyhow::Error::new(CommandTimedOut {
                node: self.node.clone(),
                command: label,
                after: timeout,
            })),
        }
    }

    /// The same, as root: wrapped in `sudo -n sh -c '…'` unless the user is
    /// root. sudo asking for a password is a [`SudoPasswordRequired`] error.
    pub async fn exec_root(&self, cmd: &str, stdin: Option<&[u8]>) -> anyhow::Result<Output> {
        self.exec_root_timeout(cmd, stdin, self.command_timeout)
            .await
    }

    /// [`Session::exec_root`] with its own timeout.
    pub async fn exec_root_timeout(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        timeout: Duration,
    ) -> anyhow::Result<Output> {
        if self.is_root() {
            return self.exec_timeout(cmd, stdin, timeout).await;
        }
        let output = self
            .exec_timeout(&shell::sudo_wrap(cmd), stdin, timeout)
            .await?;
        if output.exit == Some(1) && output.stderr.contains(SUDO_NEEDS_PASSWORD) {
            return Err(anyhow::Error::new(SudoPasswordRequired {
                node: self.node.clone(),
                user: self.user.clone(),
            }));
        }
        Ok(output)
    }

    /// Closes the connection politely (jump hosts close with it).
    pub async fn close(self) {
        let _ = self
            .handle
            .disconnect(russh::Disconnect::ByApplication, "fleetctl done", "en")
            .await;
    }

    fn disconnected(&self) -> anyhow::Error {
        anyhow::Error::new(Disconnected {
            node: self.node.clone(),
        })
    }

    /// Runs `cmd` as root with its stdout streamed, byte for byte, into
    /// `sink` instead of kept (a file copied off the node: binary, and
    /// possibly larger than memory). The returned output has no stdout.
    /// More than `max_bytes` on stdout stops the command with an error: the
    /// caller knows how much to expect.
    pub async fn exec_root_into(
        &self,
        cmd: &str,
        sink: &mut (dyn tokio::io::AsyncWrite + Unpin + Send),
        max_bytes: u64,
        timeout: Duration,
    ) -> anyhow::Result<Output> {
        let wrapped;
        let cmd = if self.is_root() {
            cmd
        } else {
            wrapped = shell::sudo_wrap(cmd);
            &wrapped
        };
        let label = shell::label(cmd);
        let output =
            match tokio::time::timeout(timeout, self.run_into(cmd, None, Some((sink, max_bytes))))
                .await
            {
                Ok(result) => {
                    result.with_context(|| format!("{}: running `{label}`", self.node))?
                }
                Err(_) => {
                    return Err(anyhow::Error::new(CommandTimedOut {
                        node: self.node.clone(),
                        command: label,
                        after: timeout,
                    }));
                }
            };
        if !self.is_root() && output.exit == Some(1) && output.stderr.contains(SUDO_NEEDS_PASSWORD)
        {
            return Err(anyhow::Error::new(SudoPasswordRequired {
                node: self.node.clone(),
                user: self.user.clone(),
            }));
        }
        Ok(output)
    }

    async fn run(&self, cmd: &str, stdin: Option<&[u8]>) -> anyhow::Result<Output> {
        self.run_into(cmd, stdin, None).await
    }

    async fn run_into(
        &self,
        cmd: &str,
        stdin: Option<&[u8]>,
        mut sink: Option<(&mut (dyn tokio::io::AsyncWrite + Unpin + Send), u64)>,
    ) -> anyhow::Result<Output> {
        if self.handle.is_closed() {
            return Err(self.disconnected());
        }
        let mut channel = self
            .handle
            .channel_open_session()
            .await
            .map_err(|e| self.channel_error(e))?;
        channel
            .exec(true, cmd)
            .await
            .map_err(|e| self.channel_error(e))?;
        if let Some(data) = stdin {
            channel
                .data(data)
                .await
                .map_err(|e| self.channel_error(e))?;
        }
        // EOF even without input: a command reading stdin must not wait forever.
        channel.eof().await.map_err(|e| self.channel_error(e))?;

        let mut stdout = Capture::new(self.max_output);
        let mut stderr = Capture::new(self.max_output.min(MAX_STDERR));
        let mut streamed = 0u64;
        let mut exit = None;
        let mut signal = None;
        while let Some(msg) = channel.wait().await {
            match msg {
                ChannelMsg::Data { data } => match sink.as_mut() {
                    Some((sink, max_bytes)) => {
                        use tokio::io::AsyncWriteExt;
                        streamed += data.len() as u64;
                        if streamed > *max_bytes {
                            // Dropping the channel closes it: the node stops being read.
                            let _ = channel.close().await;
                            return Err(anyhow!(
                                "it sent more than the {max_bytes} bytes expected; fleetctl \
                                 stopped reading it"
                            ));
                        }
                        sink.write_all(&data).await.with_context(|| {
                            format!(
                                "{}: writing what `{}` printed",
                                self.node,
                                shell::label(cmd)
                            )
                        })?;
                    }
                    None => stdout.push(&data),
                },
                ChannelMsg::ExtendedData { data, ext: 1 } => stderr.push(&data),
                ChannelMsg::ExitStatus { exit_status } => exit = Some(exit_status),
                ChannelMsg::ExitSignal {
                    signal_name,
                    error_message,
                    ..
                } => {
                    signal = Some(
                        format!("{signal_name:?} {error_message}")
                            .trim()
                            .to_string(),
                    )
                }
                ChannelMsg::Failure => {
                    return Err(anyhow!(
                        "{}: the server refused to run the command",
                        self.node
                    ));
                }
                _ => {}
            }
        }
        if exit.is_none() && signal.is_none() {
            // Channel gone without a status: the connection (or sshd) went away.
            return Err(self.disconnected());
        }
        Ok(Output {
            exit,
            signal,
            stdout: stdout.finish("stdout"),
            stderr: stderr.finish("stderr"),
        })
    }

    /// A channel operation failing on a closed connection is a disconnect;
    /// anything else keeps its own message.
    fn channel_error(&self, err: russh::Error) -> anyhow::Error {
        if self.handle.is_closed()
            || matches!(
                err,
                russh::Error::SendError | russh::Error::Disconnect | russh::Error::HUP
            )
        {
            self.disconnected().context(err.to_string())
        } else {
            anyhow::Error::new(err).context(format!("{}: SSH channel error", self.node))
        }
    }
}

#[cfg(test)]
mod tests;

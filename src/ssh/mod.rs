//! The SSH transport: every byte fleetctl exchanges with a node goes through
//! here. One connection per node per run (a channel per command), bounded
//! parallel fan-out, timeouts on everything, host keys checked as OpenSSH
//! checks them, and errors that always name the node.
//!
//! - [`config`]: inventory → `~/.ssh/config` → defaults, into a [`Target`]
//! - [`known_hosts`]: the pure host key decision, and recording a key
//! - `auth`: ssh-agent, identity files, passphrases
//! - `session`: connect (jump hosts, timeouts, keepalive) and run commands
//! - [`shell`]: quoting for `sh -c`

mod auth;
pub mod config;
mod error;
pub mod known_hosts;
mod session;
pub mod shell;

#[cfg(test)]
mod tests_sshd;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::inventory::{HostKeyChecking, Inventory};

pub use auth::KeyCache;
pub use config::{resolve, resolve_all};
pub use error::{
    CommandTimedOut, Disconnected, HostKeyRejected, Rejection, SudoPasswordRequired,
    is_disconnected,
};
pub use session::{Session, connect};
pub use shell::quote;

/// Nodes connected at once unless `--parallel` says otherwise: below sshd's
/// default MaxStartups (10), which a shared bastion also enforces.
pub const DEFAULT_PARALLEL: usize = 8;

/// Where and as whom to connect, fully resolved (see [`config`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Inventory node name, used in every error (`jump host <host>` for a bastion).
    pub node: String,
    /// The address to connect to (after `HostName`); known_hosts is checked for it.
    pub host: String,
    pub port: u16,
    pub user: String,
    /// Tried in order after the agent's identities.
    pub identity_files: Vec<PathBuf>,
    /// The jump host to tunnel through (itself possibly behind another).
    pub jump: Option<Box<Target>>,
}

/// How to connect: the same for every node of a run.
#[derive(Debug, Clone)]
pub struct Options {
    pub known_hosts: PathBuf,
    pub host_key_checking: HostKeyChecking,
    /// TCP connect + SSH handshake, and each authentication round trip.
    pub connect_timeout: Duration,
    /// Default limit for one command ([`Session::exec_timeout`] overrides it).
    pub command_timeout: Duration,
    /// Silence after which a keepalive is sent...
    pub keepalive_interval: Duration,
    /// ...and how many may go unanswered before the connection is dropped.
    pub keepalive_max: usize,
    /// The ssh-agent socket (`SSH_AUTH_SOCK`); `None`: identity files only.
    pub agent_socket: Option<PathBuf>,
    /// Ask for key passphrases on the terminal (default: when stderr is one).
    pub prompt_passphrase: bool,
    /// Decrypted keys shared by every connection of the run.
    pub keys: KeyCache,
}

impl Options {
    /// Defaults for everything but the known_hosts file and its policy: a
    /// 15 s connect timeout, 10 min per command, a keepalive every 15 s
    /// (dead after 3 missed), the agent from `SSH_AUTH_SOCK`.
    pub fn new(known_hosts: PathBuf, host_key_checking: HostKeyChecking) -> Self {
        Options {
            known_hosts,
            host_key_checking,
            connect_timeout: Duration::from_secs(15),
            command_timeout: Duration::from_secs(600),
            keepalive_interval: Duration::from_secs(15),
            keepalive_max: 3,
            agent_socket: std::env::var_os("SSH_AUTH_SOCK")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            prompt_passphrase: console::Term::stderr().is_term(),
            keys: KeyCache::default(),
        }
    }

    /// The inventory's known_hosts file and host key policy, other defaults as [`Options::new`].
    pub fn from_inventory(inv: &Inventory) -> Self {
        Options::new(inv.ssh.known_hosts.clone(), inv.ssh.host_key_checking)
    }
}

/// What a command produced. Output is decoded as UTF-8, lossily.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// `None` when the command was killed by a signal (see `signal`).
    pub exit: Option<u32>,
    /// The signal that ended the command, with sshd's message, if any.
    pub signal: Option<String>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Exited with status 0.
    pub fn success(&self) -> bool {
        self.exit == Some(0)
    }
}

/// Connects to every target, at most `parallel` at a time, and returns one
/// result per target in the order given, each labelled with its node name.
pub async fn connect_all(
    targets: &[Target],
    opts: &Options,
    parallel: usize,
) -> Vec<(String, anyhow::Result<Session>)> {
    let permits = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let tasks: Vec<_> = targets
        .iter()
        .map(|target| {
            let (target, opts, permits) = (target.clone(), opts.clone(), permits.clone());
            tokio::spawn(async move {
                let _permit = permits.acquire_owned().await;
                connect(&target, &opts).await
            })
        })
        .collect();
    let mut results = Vec::with_capacity(tasks.len());
    for (target, task) in targets.iter().zip(tasks) {
        let result = match task.await {
            Ok(result) => result,
            Err(e) => Err(anyhow::anyhow!(
                "{}: the connection task failed: {e}",
                target.node
            )),
        };
        results.push((target.node.clone(), result));
    }
    results
}

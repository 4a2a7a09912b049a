//! The SSH transport: every byte fleetctl exchanges with a node goes through
//! here. One connection per node per run (a channel per command), bounded
//! parallel fan-out, timeouts on everything, host keys checked as OpenSSH
//! checks them, and errors that always name the node.
//!
//! - [`config`]: inventory → `~/.ssh/config` → defaults, into a [`Target`]
//! - [`known_hosts`]: the pure host key decision, and recording a key
//! - `auth`: ssh-agent, identity files, passphrases
//! - `keyfile`: reading an identity file, including the ECDSA keys ssh-key refuses
//! - `session`: connect (jump hosts, timeouts, keepalive) and run commands
//! - [`handshake`]: pacing handshakes under sshd's MaxStartups, retrying its drops
//! - `proxy`: a `ProxyCommand` as the connection's transport

mod auth;
pub mod config;
mod failure;
pub mod handshake;
mod keyfile;
pub mod known_hosts;
mod proxy;
mod session;

#[cfg(test)]
mod tests_sshd;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::inventory::{HostKeyChecking, Inventory};

pub use auth::KeyCache;
pub use config::{resolve, resolve_all};
pub use failure::{
    CommandTimedOut, Disconnected, HostKeyRejected, Rejection, SudoPasswordRequired,
    is_disconnected,
};
pub use session::{Session, Unconnected, connect, connect_or_say};

/// Nodes connected at once by [`connect_all`] callers that do not say
/// (fleetctl's commands use `--parallel`). Whatever the number, no sshd —
/// a node's or a shared jump host's — gets more than
/// [`handshake::PER_SSHD`] handshakes at once, below its MaxStartups.
pub const DEFAULT_PARALLEL: usize = 8;

/// Where and as whom to connect, fully resolved (see [`config`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    /// Inventory node name, used in every error (`jump host <host>` for a bastion).
    pub node: String,
    /// The address to connect to (after `HostName`); known_hosts is checked for it.
    pub host: String,
    pub port: u16,
    pub user: String,
    /// Tried in order after the agent's identities.
    pub identity_files: Vec<PathBuf>,
    /// `CertificateFile`: certificates offered with the identity file (or
    /// agent key) whose key they certify, beside `<identity>-cert.pub`,
    /// which is always looked for (ssh_config(5)).
    pub certificate_files: Vec<PathBuf>,
    /// The jump host to tunnel through (itself possibly behind another).
    pub jump: Option<Box<Target>>,
    /// `IdentitiesOnly yes`: offer only the keys of `identity_files` (read
    /// from the file, or signed by the agent when it holds that key), never
    /// the agent's other keys.
    pub identities_only: bool,
    /// `ProxyCommand`, tokens already expanded: run as `sh -c 'exec …'`, its
    /// stdin and stdout carry the connection. Not used when `jump` is set.
    pub proxy_command: Option<String>,
    /// How this target's host key is looked up and recorded.
    pub host_keys: HostKeyLookup,
}

/// What `~/.ssh/config` says about host keys for one target; `None` and
/// `false` leave [`Options`] in charge.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostKeyLookup {
    /// `HostKeyAlias`: the known_hosts name instead of `host` / `[host]:port`.
    pub alias: Option<String>,
    /// `UserKnownHostsFile` (empty for `none`), in place of
    /// [`Options::known_hosts`]; accept-new records in the first.
    pub user_files: Option<Vec<PathBuf>>,
    /// `GlobalKnownHostsFile` (empty for `none`), in place of
    /// [`Options::global_known_hosts`]; never written.
    pub global_files: Option<Vec<PathBuf>>,
    /// `HashKnownHosts yes`: accept-new records the name hashed (`|1|salt|hash`).
    pub hash: bool,
}

/// ssh's default GlobalKnownHostsFile (ssh_config(5)).
pub const GLOBAL_KNOWN_HOSTS: [&str; 2] = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"];

/// How to connect: the same for every node of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The user known_hosts file (the inventory's `ssh.known_hosts`): read
    /// first, and where accept-new records.
    pub known_hosts: PathBuf,
    /// Read after the user file, never written: [`GLOBAL_KNOWN_HOSTS`] unless
    /// set otherwise (tests do, so they never read the machine's own).
    pub global_known_hosts: Vec<PathBuf>,
    pub host_key_checking: HostKeyChecking,
    /// TCP connect + SSH handshake, and each authentication round trip.
    pub connect_timeout: Duration,
    /// Default limit for one command ([`Session::exec_timeout`] overrides it).
    pub command_timeout: Duration,
    /// Most bytes of one command's stdout kept, head and tail (stderr: at
    /// most 1 MiB of it); what is cut is marked in the text.
    pub max_output: usize,
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
    /// Unreadable known_hosts lines already reported in this run: each is
    /// warned about once, not once per node.
    pub reported: ReportedLines,
    /// The known_hosts files, parsed once for the whole run.
    pub hosts_files: known_hosts::HostsFiles,
    /// Handshakes in flight per sshd, shared by the run (MaxStartups).
    pub handshakes: handshake::Handshakes,
}

/// The set behind [`Options::reported`], shared by the clones of one run's options.
#[derive(Clone, Default)]
pub struct ReportedLines(Arc<Mutex<HashSet<known_hosts::Place>>>);

impl std::fmt::Debug for ReportedLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReportedLines")
    }
}

impl ReportedLines {
    /// True the first time `place` is seen in this run.
    pub fn first_time(&self, place: &known_hosts::Place) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(place.clone())
    }
}

impl Options {
    /// Defaults for everything but the known_hosts file and its policy: the
    /// global known_hosts files ssh reads, a 15 s connect timeout, 10 min per
    /// command, a keepalive every 15 s (dead after 3 missed), the agent from
    /// `SSH_AUTH_SOCK`.
    pub fn new(known_hosts: PathBuf, host_key_checking: HostKeyChecking) -> Self {
        Options {
            known_hosts,
            global_known_hosts: GLOBAL_KNOWN_HOSTS.iter().map(PathBuf::from).collect(),
            host_key_checking,
            connect_timeout: Duration::from_secs(15),
            command_timeout: Duration::from_secs(600),
            max_output: session::DEFAULT_MAX_OUTPUT,
            keepalive_interval: Duration::from_secs(15),
            keepalive_max: 3,
            agent_socket: std::env::var_os("SSH_AUTH_SOCK")
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            prompt_passphrase: console::Term::stderr().is_term(),
            keys: KeyCache::default(),
            reported: ReportedLines::default(),
            hosts_files: known_hosts::HostsFiles::default(),
            handshakes: handshake::Handshakes::default(),
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

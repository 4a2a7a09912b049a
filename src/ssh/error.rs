//! The SSH failures callers must tell apart, as types they can downcast to
//! from an `anyhow` chain: a dropped connection (a reboot looks exactly like
//! this), a refused host key (never retry, tell the operator), a command that
//! ran out of time, and sudo asking for a password.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use russh::keys::{Algorithm, PublicKey};

use super::known_hosts;

/// The connection to `node` dropped: the peer closed it, the network went
/// away or keepalives went unanswered. After `reboot` this is the expected
/// outcome; anywhere else it is a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disconnected {
    pub node: String,
}

impl fmt::Display for Disconnected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: the SSH connection dropped (the node rebooted, sshd stopped, or the network went away)",
            self.node
        )
    }
}

impl std::error::Error for Disconnected {}

/// True when `err` (or anything it wraps) is a [`Disconnected`].
pub fn is_disconnected(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<Disconnected>())
}

/// A command did not finish within its timeout. The channel was closed; the
/// command may still be running on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTimedOut {
    pub node: String,
    /// The first line of the command, shortened.
    pub command: String,
    pub after: Duration,
}

impl fmt::Display for CommandTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: `{}` did not finish within {}; it may still be running on the node",
            self.node,
            self.command,
            humantime::format_duration(self.after)
        )
    }
}

impl std::error::Error for CommandTimedOut {}

/// `sudo -n` refused because the login user needs a password for sudo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SudoPasswordRequired {
    pub node: String,
    pub user: String,
}

impl fmt::Display for SudoPasswordRequired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{node}: sudo needs a password for user {user:?}, and fleetctl runs sudo non-interactively (sudo -n). \
             Allow {user} to use sudo without a password on the node (e.g. `{user} ALL=(ALL) NOPASSWD: ALL` in /etc/sudoers.d/), \
             or log in as root (`user: root` in the inventory)",
            node = self.node,
            user = self.user
        )
    }
}

impl std::error::Error for SudoPasswordRequired {}

/// Why a host key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// Not in known_hosts and `host_key_checking: strict`.
    Unknown {
        other_types: Vec<(usize, Algorithm)>,
        cert_authorities: Vec<usize>,
    },
    /// A different key of the same type is recorded on `line`.
    Changed { line: usize },
    /// The key is marked `@revoked` on `line`.
    Revoked { line: usize },
    /// The server sent a host certificate; fleetctl verifies plain keys only.
    Certificate,
}

/// The host key of `node` was refused; no command was run on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKeyRejected {
    /// The inventory node (or the jump host's name).
    pub node: String,
    pub host: String,
    pub port: u16,
    pub known_hosts: PathBuf,
    pub key_type: String,
    /// `SHA256:…`
    pub fingerprint: String,
    /// `-t` argument for ssh-keyscan.
    pub keyscan_type: String,
    pub reason: Rejection,
}

impl HostKeyRejected {
    pub fn new(
        node: &str,
        host: &str,
        port: u16,
        known_hosts: PathBuf,
        key: &PublicKey,
        reason: Rejection,
    ) -> Self {
        HostKeyRejected {
            node: node.to_string(),
            host: host.to_string(),
            port,
            known_hosts,
            key_type: known_hosts::type_label(&key.algorithm()),
            fingerprint: known_hosts::fingerprint(key),
            keyscan_type: known_hosts::keyscan_type(&key.algorithm()),
            reason,
        }
    }

    fn name(&self) -> String {
        known_hosts::host_key_name(&self.host, self.port)
    }

    fn write_unknown(
        &self,
        f: &mut fmt::Formatter<'_>,
        other_types: &[(usize, Algorithm)],
        cert_authorities: &[usize],
    ) -> fmt::Result {
        let kh = self.known_hosts.display();
        writeln!(
            f,
            "{} ({}:{}): the host key is not in {kh} and host_key_checking is strict; refusing to connect. No command was run.",
            self.node, self.host, self.port
        )?;
        writeln!(
            f,
            "The {} key fingerprint is {}.",
            self.key_type, self.fingerprint
        )?;
        for (line, algorithm) in other_types {
            writeln!(
                f,
                "Note: {kh}:{line} holds a {} key for this host, a type the node did not offer.",
                known_hosts::type_label(algorithm)
            )?;
        }
        for line in cert_authorities {
            writeln!(
                f,
                "Note: {kh}:{line} is a @cert-authority line for this host; fleetctl does not verify host certificates, record the plain host key instead."
            )?;
        }
        writeln!(
            f,
            "Check the fingerprint on the node itself (`ssh-keygen -lf /etc/ssh/ssh_host_{}_key.pub`), then either add the key:",
            self.keyscan_type
        )?;
        writeln!(
            f,
            "  ssh-keyscan -p {} -t {} {} >> '{kh}'",
            self.port, self.keyscan_type, self.host
        )?;
        write!(
            f,
            "or set `host_key_checking: accept-new` under `ssh:` in the inventory to record it on first contact."
        )
    }

    fn write_changed(&self, f: &mut fmt::Formatter<'_>, line: usize) -> fmt::Result {
        let kh = self.known_hosts.display();
        writeln!(
            f,
            "{} ({}:{}): WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! Refusing to connect. No command was run.",
            self.node, self.host, self.port
        )?;
        writeln!(
            f,
            "The {} key it sent ({}) is not the one recorded in {kh}:{line}.",
            self.key_type, self.fingerprint
        )?;
        writeln!(
            f,
            "Someone could be eavesdropping on you right now (man-in-the-middle attack), or the node was reinstalled and has a new host key."
        )?;
        writeln!(
            f,
            "If you know why it changed, remove the offending key (line {line}) and connect again:"
        )?;
        writeln!(f, "  ssh-keygen -f '{kh}' -R '{}'", self.name())?;
        write!(
            f,
            "then record the new key (`host_key_checking: accept-new`, or ssh-keyscan after checking the fingerprint)."
        )
    }
}

impl fmt::Display for HostKeyRejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Rejection::Unknown {
                other_types,
                cert_authorities,
            } => self.write_unknown(f, other_types, cert_authorities),
            Rejection::Changed { line } => self.write_changed(f, *line),
            Rejection::Revoked { line } => write!(
                f,
                "{} ({}:{}): the {} host key {} is marked @revoked in {}:{line}; refusing to connect. No command was run. \
                 The node must get a new host key.",
                self.node,
                self.host,
                self.port,
                self.key_type,
                self.fingerprint,
                self.known_hosts.display()
            ),
            Rejection::Certificate => write!(
                f,
                "{} ({}:{}): the server presented a host certificate, which fleetctl cannot verify; refusing to connect. \
                 No command was run. Record its plain host key in {}.",
                self.node,
                self.host,
                self.port,
                self.known_hosts.display()
            ),
        }
    }
}

impl std::error::Error for HostKeyRejected {}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH17g4gplXVYCJTLdFmqD7FeGWQWH+bMbI2RvzP5AaMf";

    fn rejected(reason: Rejection, port: u16) -> HostKeyRejected {
        HostKeyRejected::new(
            "cp-1",
            "10.0.0.5",
            port,
            PathBuf::from("/home/op/.ssh/known_hosts"),
            &PublicKey::from_openssh(K1).unwrap(),
            reason,
        )
    }

    #[test]
    fn changed_key_message_names_line_and_removal_command() {
        let msg = rejected(Rejection::Changed { line: 7 }, 2222).to_string();
        assert!(
            msg.starts_with(
                "cp-1 (10.0.0.5:2222): WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!"
            ),
            "{msg}"
        );
        assert!(msg.contains("/home/op/.ssh/known_hosts:7"), "{msg}");
        assert!(
            msg.contains("SHA256:7cPFwqkjErlEFBfu9gLfrgWOkmqveMcvc5QvUGABmNM"),
            "{msg}"
        );
        assert!(
            msg.contains("ssh-keygen -f '/home/op/.ssh/known_hosts' -R '[10.0.0.5]:2222'"),
            "{msg}"
        );
        assert!(msg.contains("No command was run"), "{msg}");
    }

    #[test]
    fn unknown_key_message_gives_fingerprint_and_both_fixes() {
        let msg = rejected(
            Rejection::Unknown {
                other_types: vec![],
                cert_authorities: vec![3],
            },
            22,
        )
        .to_string();
        assert!(msg.contains("not in /home/op/.ssh/known_hosts"), "{msg}");
        assert!(
            msg.contains("ED25519 key fingerprint is SHA256:7cPF"),
            "{msg}"
        );
        assert!(
            msg.contains("ssh-keyscan -p 22 -t ed25519 10.0.0.5 >> '/home/op/.ssh/known_hosts'"),
            "{msg}"
        );
        assert!(msg.contains("accept-new"), "{msg}");
        assert!(
            msg.contains("known_hosts:3 is a @cert-authority line"),
            "{msg}"
        );
    }

    #[test]
    fn typed_errors_survive_context() {
        let err = anyhow::Error::new(Disconnected { node: "w-1".into() })
            .context("w-1: running `reboot`");
        assert!(is_disconnected(&err));
        assert!(!is_disconnected(&anyhow::anyhow!("w-1: other")));
        assert!(format!("{err:#}").contains("w-1: the SSH connection dropped"));
    }
}

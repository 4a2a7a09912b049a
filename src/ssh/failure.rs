//! The SSH failures callers must tell apart, as types they can downcast to
//! from an `anyhow` chain: a dropped connection (a reboot looks exactly like
//! this), a refused host key (never retry, tell the operator), a command that
//! ran out of time, and sudo asking for a password.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use russh::keys::{Algorithm, PublicKey};

use super::known_hosts::{self, Place};

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
        other_types: Vec<(Place, Algorithm)>,
        cert_authorities: Vec<Place>,
    },
    /// `accept-new`, but the host is already recorded with keys of other
    /// types only: a second key type is never added on its own.
    OtherType { recorded: Vec<(Place, Algorithm)> },
    /// A different key of the same type is recorded at `at`.
    Changed { at: Place },
    /// The key is marked `@revoked` at `at`.
    Revoked { at: Place },
    /// The server sent a host certificate that a `@cert-authority` line
    /// names the signer of, and it failed: why.
    Certificate { reason: String },
}

/// The host key of `node` was refused; no command was run on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKeyRejected {
    /// The inventory node (or the jump host's name).
    pub node: String,
    pub host: String,
    pub port: u16,
    /// The name looked up in known_hosts: `[host]:port`, or the `HostKeyAlias`.
    pub name: String,
    /// Where a key is added (the first user known_hosts file); `None` with
    /// `UserKnownHostsFile none`.
    pub add_to: Option<PathBuf>,
    /// Every known_hosts file read, user files first.
    pub searched: Vec<PathBuf>,
    /// Lines of those files skipped as unreadable: one may have been this host's.
    pub skipped: Vec<Place>,
    pub key_type: String,
    /// `SHA256:…`
    pub fingerprint: String,
    /// `-t` argument for ssh-keyscan.
    pub keyscan_type: String,
    pub reason: Rejection,
}

impl HostKeyRejected {
    /// A rejection of `key` for `host:port`, looked up as `[host]:port` in
    /// `known_hosts` alone; the caller fills in `name`, `searched` and
    /// `skipped` when it read more.
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
            name: known_hosts::host_key_name(host, port),
            searched: vec![known_hosts.clone()],
            add_to: Some(known_hosts),
            skipped: Vec::new(),
            key_type: known_hosts::type_label(&key.algorithm()),
            fingerprint: known_hosts::fingerprint(key),
            keyscan_type: known_hosts::keyscan_type(&key.algorithm()),
            reason,
        }
    }

    fn head(&self) -> String {
        format!("{} ({}:{})", self.node, self.host, self.port)
    }

    fn searched(&self) -> String {
        if self.searched.is_empty() {
            return "any known_hosts file (UserKnownHostsFile and GlobalKnownHostsFile are none for this host in ~/.ssh/config)".to_string();
        }
        let files: Vec<String> = self
            .searched
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        files.join(" or ")
    }

    /// The command that adds the key after the operator checked it: what
    /// ssh-keyscan prints is named `[host]:port`, so a `HostKeyAlias` is
    /// swapped in.
    fn write_add_command(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(file) = &self.add_to else {
            return write!(
                f,
                "UserKnownHostsFile is none for this host in ~/.ssh/config, so there is no file to add it to: \
                 add it to one of {} or remove that UserKnownHostsFile line.",
                self.searched()
            );
        };
        let scan = format!(
            "ssh-keyscan -p {} -t {} {}",
            self.port, self.keyscan_type, self.host
        );
        if self.name == known_hosts::host_key_name(&self.host, self.port) {
            write!(f, "  {scan} >> '{}'", file.display())
        } else {
            write!(
                f,
                "  {scan} | sed 's/^[^ ]*/{}/' >> '{}'",
                self.name,
                file.display()
            )
        }
    }

    fn write_notes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for place in &self.skipped {
            writeln!(
                f,
                "Note: {place} could not be read and was skipped; if it was this host's entry, fix it."
            )?;
        }
        Ok(())
    }

    fn write_check_on_node(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Check the fingerprint on the node itself (`ssh-keygen -lf /etc/ssh/ssh_host_{}_key.pub`)",
            self.keyscan_type
        )
    }

    fn write_unknown(
        &self,
        f: &mut fmt::Formatter<'_>,
        other_types: &[(Place, Algorithm)],
        cert_authorities: &[Place],
    ) -> fmt::Result {
        writeln!(
            f,
            "{}: the host key is not in {} and host_key_checking is strict; refusing to connect. No command was run.",
            self.head(),
            self.searched()
        )?;
        writeln!(
            f,
            "The {} key fingerprint is {}.",
            self.key_type, self.fingerprint
        )?;
        for (place, algorithm) in other_types {
            writeln!(
                f,
                "Note: {place} holds a {} key for this host, a type the node did not offer.",
                known_hosts::type_label(algorithm)
            )?;
        }
        for place in cert_authorities {
            writeln!(
                f,
                "Note: {place} is a @cert-authority line for this host, but the node presented no host certificate that authority signed."
            )?;
        }
        self.write_notes(f)?;
        self.write_check_on_node(f)?;
        writeln!(f, ", then either add the key:")?;
        self.write_add_command(f)?;
        write!(
            f,
            "\nor set `host_key_checking: accept-new` under `ssh:` in the inventory to record it on first contact."
        )
    }

    fn write_other_type(
        &self,
        f: &mut fmt::Formatter<'_>,
        recorded: &[(Place, Algorithm)],
    ) -> fmt::Result {
        let recorded: Vec<String> = recorded
            .iter()
            .map(|(place, a)| format!("{} at {place}", known_hosts::type_label(a)))
            .collect();
        writeln!(
            f,
            "{}: the host offered a {} host key ({}), but {} is recorded with another key type only ({}); refusing to connect. No command was run.",
            self.head(),
            self.key_type,
            self.fingerprint,
            self.name,
            recorded.join(", ")
        )?;
        writeln!(
            f,
            "host_key_checking accept-new records hosts it has never seen; it does not add a second key type to a known host, \
             because a node that stops offering its recorded key looks exactly like an impersonator offering a new one."
        )?;
        self.write_notes(f)?;
        self.write_check_on_node(f)?;
        writeln!(f, "; if it matches, add the key:")?;
        self.write_add_command(f)
    }

    fn write_changed(&self, f: &mut fmt::Formatter<'_>, at: &Place) -> fmt::Result {
        writeln!(
            f,
            "{}: WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! Refusing to connect. No command was run.",
            self.head()
        )?;
        writeln!(
            f,
            "The {} key it sent ({}) is not the one recorded in {at}.",
            self.key_type, self.fingerprint
        )?;
        writeln!(
            f,
            "Someone could be eavesdropping on you right now (man-in-the-middle attack), or the node was reinstalled and has a new host key."
        )?;
        writeln!(
            f,
            "If you know why it changed, remove the offending key (line {}) and connect again:",
            at.line
        )?;
        writeln!(
            f,
            "  ssh-keygen -f '{}' -R '{}'",
            at.file.display(),
            self.name
        )?;
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
            Rejection::OtherType { recorded } => self.write_other_type(f, recorded),
            Rejection::Changed { at } => self.write_changed(f, at),
            Rejection::Revoked { at } => write!(
                f,
                "{}: the {} host key {} is marked @revoked in {at}; refusing to connect. No command was run. \
                 The node must get a new host key.",
                self.head(),
                self.key_type,
                self.fingerprint,
            ),
            Rejection::Certificate { reason } => write!(
                f,
                "{}: the host certificate it presented is refused: {reason}; refusing to connect. \
                 No command was run. Have the node's host certificate signed again (ssh-keygen -s CA -h -n HOST), \
                 or check the @cert-authority lines in {}.",
                self.head(),
                self.searched()
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
        let msg = rejected(
            Rejection::Changed {
                at: Place {
                    file: "/home/op/.ssh/known_hosts".into(),
                    line: 7,
                },
            },
            2222,
        )
        .to_string();
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
                cert_authorities: vec![Place {
                    file: "/home/op/.ssh/known_hosts".into(),
                    line: 3,
                }],
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

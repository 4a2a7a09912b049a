//! The inventory: which nodes make up the fleet, how to reach them, and which
//! Kubernetes minor series they should track. Loading validates everything
//! before any node is touched (see `load`).

mod ansible;
mod load;
mod raw;
mod validate;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::version::Minor;

pub use load::{load, parse};

/// Nothing but whitespace, comments and document markers: a parser would
/// only say "end of file" (either format).
fn is_blank(text: &str) -> bool {
    text.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line == "---"
    })
}

/// The default extension hub, as in sysext-bakery's published configs.
pub const DEFAULT_HUB: &str = "https://extensions.flatcar.org/extensions";

#[derive(Debug, Clone)]
pub struct Inventory {
    /// The file it was read from; `.fleetctl/` lives beside it.
    pub path: PathBuf,
    /// Target minor series: the default for `plan`.
    pub kubernetes_version: Minor,
    /// containerd's sysext is pinned the same way when this is set.
    pub containerd_version: Option<Minor>,
    /// Base URL of the extension hub, without a trailing slash.
    pub hub: String,
    pub ssh: SshDefaults,
    /// Operator gates run on the first control-plane node before every reboot.
    pub health_checks: Vec<HealthCheck>,
    /// Kured's DaemonSet, when the operator names it rather than letting
    /// fleetctl find it.
    pub kured: Option<KuredRef>,
    /// The maintenance window apply and reboot keep to unless `--window`
    /// says otherwise (`crate::pacing::Window`).
    pub window: Option<crate::pacing::Window>,
    /// In file order; the first control-plane node is the one `upgrade apply` runs on.
    pub nodes: Vec<Node>,
    /// Where each node's settings came from, for an Ansible inventory
    /// (`status -v`); empty for fleetctl's own, whose lines say it.
    pub provenance: Vec<Provenance>,
}

/// One setting of one node (or `fleet`), its value, and the file, line and
/// variable it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provenance {
    pub node: String,
    pub setting: String,
    pub value: String,
    pub from: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshDefaults {
    /// `None`: ask `~/.ssh/config`, then fall back to the local user name.
    pub user: Option<String>,
    /// `None`: ask `~/.ssh/config`, then 22.
    pub port: Option<u16>,
    /// `None`: ask `~/.ssh/config`, then the agent and the usual default keys.
    pub identity_file: Option<PathBuf>,
    /// Tilde already expanded.
    pub known_hosts: PathBuf,
    pub host_key_checking: HostKeyChecking,
    pub jump: Option<Jump>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyChecking {
    /// Refuse unknown and changed keys (the default, as OpenSSH's `yes`).
    #[default]
    Strict,
    /// Record unknown keys, refuse changed ones.
    AcceptNew,
    /// Accept anything, with a loud warning.
    Off,
}

/// A bastion, `user@host:port` in the inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jump {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ControlPlane,
    Worker,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The Kubernetes node name.
    pub name: String,
    pub address: String,
    pub role: Role,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub identity_file: Option<PathBuf>,
    /// The failure domain the node is in (`topology.kubernetes.io/zone`, a
    /// rack, a room): a batch of workers taken down together never spans two.
    pub zone: Option<String>,
}

/// A Kured DaemonSet named by the operator, `NAMESPACE/NAME` (the
/// inventory's `kured:` key, `--kured`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredRef {
    pub namespace: String,
    pub name: String,
}

impl FromStr for KuredRef {
    type Err = String;

    fn from_str(text: &str) -> Result<KuredRef, String> {
        let usage = || {
            format!(
                "`{text}` does not name a DaemonSet: write NAMESPACE/NAME, e.g. `kured/kured` \
                 (`kubectl get daemonsets -A` lists them)"
            )
        };
        let (namespace, name) = text.trim().split_once('/').ok_or_else(usage)?;
        // Namespaces are DNS labels, DaemonSet names DNS subdomains.
        let label = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !s.starts_with('-')
                && !s.ends_with('-')
        };
        let subdomain = |s: &str| s.len() <= 253 && s.split('.').all(label);
        if !label(namespace) || !subdomain(name) {
            return Err(usage());
        }
        Ok(KuredRef {
            namespace: namespace.into(),
            name: name.into(),
        })
    }
}

impl fmt::Display for KuredRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub name: String,
    /// Run with `sh -c` on the first control-plane node.
    pub command: String,
    /// The output must contain this.
    pub expect: String,
}

impl Inventory {
    /// The node `kubeadm upgrade apply` runs on: the first control-plane node in the file.
    pub fn first_control_plane(&self) -> &Node {
        // `load` refuses an inventory without a control-plane node.
        self.nodes
            .iter()
            .find(|n| n.role == Role::ControlPlane)
            .unwrap_or(&self.nodes[0])
    }

    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Where plans, locks and journals live: `.fleetctl/` beside the inventory.
    pub fn state_dir(&self) -> PathBuf {
        self.path
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default()
            .join(".fleetctl")
    }
}

//! The cluster's own Ansible inventory as fleetctl's inventory: one place to
//! bump `kubernetes_version` (docs/inventory.md).
//!
//! Three ways in, one model out:
//! - an Ansible YAML inventory with its `group_vars/` and `host_vars/`,
//!   read here as Ansible reads it (`tree`);
//! - the JSON `ansible-inventory -i FILE --list` prints (`listed`), for
//!   what only Ansible resolves (INI files, inventory plugins, vault);
//! - that JSON made on the spot, when `ansible-inventory` is on PATH and
//!   the file needs it (`listed::run`), said on stderr.
//!
//! A host is a Kubernetes node when a conventional group or `fleetctl_role`
//! gives it a role; the cluster's own `node-role.kubernetes.io/control-plane`
//! label is checked against that on every run (`crate::gather`). A value
//! fleetctl would have to template (`{{ … }}`) is refused, never guessed.

mod build;
mod listed;

pub(super) use listed::which as ansible_inventory;
mod ssh_args;
mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_saphyr::MessageFormatter as _;
use serde_saphyr::Spanned;

use super::Inventory;
use super::is_blank;

/// The key a whole vault-encrypted vars file is recorded under.
const VAULT_FILE: &str = "\u{0}vault-encrypted file";

/// Groups whose hosts are control planes, as kubespray, kubeadm-based
/// playbooks and older layouts name them.
const CONTROL_PLANE_GROUPS: &[&str] = &[
    "kube_control_plane",
    "control_plane",
    "controlplane",
    "kube_master",
    "masters",
    "master",
];
/// Groups whose hosts are workers (a host in both kinds is a control plane:
/// kubespray lists schedulable control planes in `kube_node` too).
const WORKER_GROUPS: &[&str] = &["kube_node", "workers", "worker", "nodes"];

/// One host with its groups (every ancestor but `all`) and variables.
#[derive(Debug, Clone)]
struct Host {
    name: String,
    groups: Vec<String>,
    vars: BTreeMap<String, Var>,
}

/// A variable's value and where it was set (`file:line:column`, or a file).
#[derive(Debug, Clone)]
struct Var {
    value: serde_json::Value,
    at: String,
    vault: bool,
}

impl Var {
    fn new(v: Spanned<serde_json::Value>, path: &Path) -> Var {
        let vault = matches!(&v.value, serde_json::Value::String(s) if s.trim_start().starts_with("$ANSIBLE_VAULT"))
            || v.value.get("__ansible_vault").is_some();
        Var {
            value: v.value,
            at: tree::at(path, v.referenced),
            vault,
        }
    }
}

/// What the file is: fleetctl's own inventory, or one of Ansible's.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum InventoryKind {
    Fleetctl,
    AnsibleYaml,
    /// `ansible-inventory --list` output.
    AnsibleJson,
    /// Only Ansible can read it (INI, an inventory plugin's config).
    NeedsAnsible(&'static str),
}

/// Tells the kinds apart by their shape: fleetctl's has `nodes:`,
/// Ansible's YAML has groups at the top (`all:` usually), the listing has
/// `_meta`, an inventory plugin's config has `plugin:`.
pub(super) fn kind(text: &str) -> InventoryKind {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return InventoryKind::AnsibleJson;
    }
    let top: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '-']) && !l.trim().is_empty())
        .filter_map(|l| l.split(':').next())
        .collect();
    if top.iter().any(|k| k.trim() == "nodes") {
        return InventoryKind::Fleetctl;
    }
    if top.iter().any(|k| k.trim() == "plugin") {
        return InventoryKind::NeedsAnsible("an inventory plugin's configuration");
    }
    if text
        .lines()
        .any(|l| l.trim_start().starts_with('[') && l.trim_end().ends_with(']'))
    {
        return InventoryKind::NeedsAnsible("an INI inventory");
    }
    if top.iter().any(|k| k.trim() == "all")
        || text.contains("\n  hosts:")
        || text.contains("\n  children:")
    {
        return InventoryKind::AnsibleYaml;
    }
    InventoryKind::Fleetctl
}

/// Reads an Ansible inventory at `path` (its text already read).
pub(super) fn load(
    text: &str,
    path: &Path,
    kind: InventoryKind,
    home: Option<&Path>,
    ansible_inventory: Option<&Path>,
) -> Result<(Inventory, Vec<(PathBuf, String)>), String> {
    let hosts = match kind {
        InventoryKind::AnsibleYaml => {
            let raw: tree::RawFile = yaml(text, path)?;
            let resolved = tree::resolve(raw, path).map_err(|p| p.join("\n"))?;
            // A variable fleetctl uses that only Ansible can decrypt: let
            // Ansible resolve the whole file, or say how.
            if let Some((host, var)) = needs_vault(&resolved.hosts) {
                let why = format!("host `{host}`'s {var} is vault-encrypted");
                listed::run(ansible_inventory, path, &why)?
            } else {
                resolved.hosts
            }
        }
        InventoryKind::AnsibleJson => listed::parse(text, &path.display().to_string())?,
        InventoryKind::NeedsAnsible(why) => {
            listed::run(ansible_inventory, path, &format!("it is {why}"))?
        }
        InventoryKind::Fleetctl => return Err("not an Ansible inventory".into()),
    };
    build::build(&hosts, path, home)
}

/// The first variable fleetctl reads that is vault-encrypted.
fn needs_vault(hosts: &[Host]) -> Option<(String, String)> {
    for h in hosts {
        for (k, v) in &h.vars {
            if v.vault && (k == VAULT_FILE || used(k)) {
                let what = match k.as_str() {
                    VAULT_FILE => format!("a vault-encrypted file ({})", v.at),
                    k => format!("{k} ({})", v.at),
                };
                return Some((h.name.clone(), what));
            }
        }
    }
    None
}

/// The variables fleetctl reads.
fn used(key: &str) -> bool {
    key.starts_with("ansible_")
        || key.starts_with("fleetctl_")
        || key == "kubernetes_version"
        || key == "containerd_version"
}

fn yaml<T: serde::de::DeserializeOwned>(text: &str, path: &Path) -> Result<T, String> {
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options::<T>(text, options).map_err(|e| {
        let message = serde_saphyr::UserMessageFormatter
            .format_message(e.without_snippet())
            .chars()
            .flat_map(char::escape_debug)
            .collect::<String>();
        match e.location() {
            Some(loc) => format!("{}: {message}", tree::at(path, loc)),
            None => format!("{}: {message}", path.display()),
        }
    })
}

#[cfg(test)]
mod tests;

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

mod listed;

pub(super) use listed::which as ansible_inventory;
mod ssh_args;
mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_saphyr::MessageFormatter as _;
use serde_saphyr::Spanned;

use super::is_blank;
use super::{
    DEFAULT_HUB, HealthCheck, HostKeyChecking, Inventory, KuredRef, Node, Provenance, Role,
    SshDefaults, validate,
};
use crate::version::Minor;

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
pub(super) enum Kind {
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
pub(super) fn kind(text: &str) -> Kind {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        return Kind::AnsibleJson;
    }
    let top: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with([' ', '\t', '#', '-']) && !l.trim().is_empty())
        .filter_map(|l| l.split(':').next())
        .collect();
    if top.iter().any(|k| k.trim() == "nodes") {
        return Kind::Fleetctl;
    }
    if top.iter().any(|k| k.trim() == "plugin") {
        return Kind::NeedsAnsible("an inventory plugin's configuration");
    }
    if text
        .lines()
        .any(|l| l.trim_start().starts_with('[') && l.trim_end().ends_with(']'))
    {
        return Kind::NeedsAnsible("an INI inventory");
    }
    if top.iter().any(|k| k.trim() == "all")
        || text.contains("\n  hosts:")
        || text.contains("\n  children:")
    {
        return Kind::AnsibleYaml;
    }
    Kind::Fleetctl
}

/// Reads an Ansible inventory at `path` (its text already read).
pub(super) fn load(
    text: &str,
    path: &Path,
    kind: Kind,
    home: Option<&Path>,
    ansible_inventory: Option<&Path>,
) -> Result<(Inventory, Vec<(PathBuf, String)>), String> {
    let hosts = match kind {
        Kind::AnsibleYaml => {
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
        Kind::AnsibleJson => listed::parse(text, &path.display().to_string())?,
        Kind::NeedsAnsible(why) => listed::run(ansible_inventory, path, &format!("it is {why}"))?,
        Kind::Fleetctl => return Err("not an Ansible inventory".into()),
    };
    build(&hosts, path, home)
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

/// The hosts as fleetctl's model, every problem found at once.
fn build(
    hosts: &[Host],
    path: &Path,
    home: Option<&Path>,
) -> Result<(Inventory, Vec<(PathBuf, String)>), String> {
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let mut b = Build {
        problems: Vec::new(),
        provenance: Vec::new(),
        key_files: Vec::new(),
        base,
        home: home.map(Path::to_path_buf),
    };
    let fleet: Vec<(&Host, Role, String)> = hosts
        .iter()
        .filter_map(|h| b.role(h).map(|(r, why)| (h, r, why)))
        .collect();
    if fleet.is_empty() {
        return Err(format!(
            "{}: no host is in a control-plane or worker group ({} or {}) or sets fleetctl_role: \
             fleetctl cannot tell which hosts are Kubernetes nodes",
            path.display(),
            CONTROL_PLANE_GROUPS.join(", "),
            WORKER_GROUPS.join(", ")
        ));
    }
    let nodes: Vec<Option<Node>> = fleet.iter().map(|(h, r, why)| b.node(h, *r, why)).collect();
    let shared = b.shared(&fleet, path);
    b.duplicates(&nodes);
    if !fleet.iter().any(|(_, r, _)| *r == Role::ControlPlane) {
        b.problems.push(format!(
            "{}: no host is a control plane: fleetctl upgrades the control plane first and \
             needs at least one (put it in {})",
            path.display(),
            CONTROL_PLANE_GROUPS[0]
        ));
    }
    if !b.problems.is_empty() {
        return Err(b.problems.join("\n"));
    }
    let (Some(shared), Some(nodes)) = (shared, nodes.into_iter().collect::<Option<Vec<_>>>())
    else {
        return Err(format!("{}: invalid inventory", path.display()));
    };
    let inventory = Inventory {
        path: path.to_path_buf(),
        kubernetes_version: shared.kubernetes_version,
        containerd_version: shared.containerd_version,
        hub: shared.hub,
        ssh: shared.ssh,
        health_checks: shared.health_checks,
        kured: shared.kured,
        window: shared.window,
        nodes,
        provenance: b.provenance,
    };
    Ok((inventory, b.key_files))
}

struct Build {
    problems: Vec<String>,
    provenance: Vec<Provenance>,
    key_files: Vec<(PathBuf, String)>,
    base: PathBuf,
    home: Option<PathBuf>,
}

/// What must be the same for every node (fleetctl has one value of each).
struct Shared {
    kubernetes_version: Minor,
    containerd_version: Option<Minor>,
    hub: String,
    ssh: SshDefaults,
    health_checks: Vec<HealthCheck>,
    kured: Option<KuredRef>,
    window: Option<crate::pacing::Window>,
}

impl Build {
    /// The host's role from its groups and `fleetctl_role`, with why; `None`
    /// when it is not a Kubernetes node (a bastion, a load balancer).
    fn role(&mut self, h: &Host) -> Option<(Role, String)> {
        let by_group = |names: &[&str]| h.groups.iter().find(|g| names.contains(&g.as_str()));
        let from_groups = match (by_group(CONTROL_PLANE_GROUPS), by_group(WORKER_GROUPS)) {
            (Some(g), _) => Some((Role::ControlPlane, format!("group {g}"))),
            (None, Some(g)) => Some((Role::Worker, format!("group {g}"))),
            (None, None) => None,
        };
        let Some(var) = h.vars.get("fleetctl_role") else {
            return from_groups;
        };
        let explicit = self
            .string(h, "fleetctl_role", var)
            .and_then(|s| self.check(h, "fleetctl_role", var, validate::role(&s)))?;
        match from_groups {
            Some((r, g)) if r != explicit => {
                self.problems.push(format!(
                    "{}: host `{}`: fleetctl_role says {explicit} but it is in {g}, which is {r}'s: \
                     make them agree",
                    var.at, h.name
                ));
                None
            }
            _ => Some((explicit, format!("fleetctl_role ({})", var.at))),
        }
    }

    fn node(&mut self, h: &Host, role: Role, why: &str) -> Option<Node> {
        let name = match h.vars.get("fleetctl_node_name") {
            Some(v) => self.string(h, "fleetctl_node_name", v)?,
            None => h.name.clone(),
        };
        if let Err(e) = validate::node_name(&name) {
            self.problems.push(format!(
                "{}: host `{}`: {e} (set fleetctl_node_name to the Kubernetes node's name)",
                h.vars
                    .get("fleetctl_node_name")
                    .map_or("the inventory", |v| v.at.as_str()),
                h.name
            ));
            return None;
        }
        self.note(&name, "role", &role.to_string(), why);
        let address = match self.get(h, &["ansible_host", "ansible_ssh_host"]) {
            Some((k, v)) => {
                let s = self.string(h, k, v)?;
                let a = self.check(h, k, v, validate::address(&s))?;
                self.note(&name, "address", &a, &format!("{k} ({})", v.at));
                a
            }
            None => {
                self.note(&name, "address", &h.name, "the inventory host name");
                validate::address(&h.name).ok()?
            }
        };
        let port = match self.get(h, &["ansible_port", "ansible_ssh_port"]) {
            Some((k, v)) => {
                let p = self.port(h, k, v)?;
                self.note(&name, "port", &p.to_string(), &format!("{k} ({})", v.at));
                Some(p)
            }
            None => None,
        };
        let user = match self.get(h, &["ansible_user", "ansible_ssh_user"]) {
            Some((k, v)) => {
                let s = self.string(h, k, v)?;
                let u = self.check(h, k, v, validate::user(&s))?;
                self.note(&name, "user", &u, &format!("{k} ({})", v.at));
                Some(u)
            }
            None => None,
        };
        let identity_file = match self.get(
            h,
            &["ansible_ssh_private_key_file", "ansible_private_key_file"],
        ) {
            Some((k, v)) => {
                let s = self.string(h, k, v)?;
                let p = self.check(
                    h,
                    k,
                    v,
                    validate::local_path(&s, &self.base, self.home.as_deref()),
                )?;
                self.note(
                    &name,
                    "identity_file",
                    &p.display().to_string(),
                    &format!("{k} ({})", v.at),
                );
                self.key_files
                    .push((p.clone(), format!("{}: host `{}`: {k}", v.at, h.name)));
                Some(p)
            }
            None => None,
        };
        let zone = match h.vars.get("fleetctl_zone") {
            Some(v) => {
                let s = self.string(h, "fleetctl_zone", v)?;
                Some(self.check(h, "fleetctl_zone", v, validate::zone(&s))?)
            }
            None => None,
        };
        self.connection(h, user.as_deref())?;
        Some(Node {
            name,
            address,
            role,
            port,
            user,
            identity_file,
            zone,
        })
    }

    /// What fleetctl cannot do as Ansible would is refused: another
    /// connection plugin, or privilege escalation other than sudo.
    fn connection(&mut self, h: &Host, user: Option<&str>) -> Option<()> {
        if let Some(v) = h.vars.get("ansible_connection") {
            let c = self.string(h, "ansible_connection", v)?;
            if !matches!(
                c.as_str(),
                "ssh" | "smart" | "paramiko" | "ansible.builtin.ssh"
            ) {
                return self.refuse(
                    h,
                    "ansible_connection",
                    v,
                    &format!("`{c}`: fleetctl reaches nodes over SSH only"),
                );
            }
        }
        if let Some(v) = h.vars.get("ansible_become_method") {
            let m = self.string(h, "ansible_become_method", v)?;
            if !matches!(m.as_str(), "sudo" | "ansible.builtin.sudo") {
                return self.refuse(
                    h,
                    "ansible_become_method",
                    v,
                    &format!("`{m}`: fleetctl becomes root with `sudo -n` only"),
                );
            }
        }
        if let Some(v) = h.vars.get("ansible_become") {
            let off = matches!(&v.value, serde_json::Value::Bool(false))
                || matches!(&v.value, serde_json::Value::String(s) if ["false", "no", "0"].contains(&s.to_ascii_lowercase().as_str()));
            if off && user.is_some_and(|u| u != "root") {
                return self.refuse(
                    h,
                    "ansible_become",
                    v,
                    "false, but fleetctl needs root on the node: it runs its commands through \
                     `sudo -n` as any user but root (set it true, or log in as root)",
                );
            }
        }
        Some(())
    }

    /// The fleet-wide settings: each the same on every node.
    fn shared(&mut self, fleet: &[(&Host, Role, String)], path: &Path) -> Option<Shared> {
        let kubernetes_version = match self.same(fleet, "kubernetes_version") {
            Some((h, v)) => self.minor(h, "kubernetes_version", v),
            None => {
                self.problems.push(format!(
                    "{}: no host has kubernetes_version: set it (e.g. in group_vars/all.yml) \
                     to the minor the fleet should run, as `v1.37` or `1.37.2`",
                    path.display()
                ));
                None
            }
        };
        let containerd_version = match self.same(fleet, "containerd_version") {
            Some((h, v)) => self.minor(h, "containerd_version", v).map(Some),
            None => Some(None),
        };
        let hub = match self.same(fleet, "fleetctl_hub") {
            Some((h, v)) => {
                let s = self.string(h, "fleetctl_hub", v)?;
                self.check(h, "fleetctl_hub", v, validate::hub(&s))
            }
            None => Some(DEFAULT_HUB.to_string()),
        };
        let ssh = self.ssh(fleet);
        let health_checks = match self.same(fleet, "fleetctl_health_checks") {
            Some((h, v)) => {
                let checks: Result<Vec<HealthCheck>, String> =
                    serde_json::from_value::<Vec<RawCheck>>(v.value.clone())
                        .map_err(|e| format!("expected a list of {{name, command, expect}}: {e}"))
                        .and_then(|c| c.into_iter().map(RawCheck::into_check).collect());
                self.check(h, "fleetctl_health_checks", v, checks)
            }
            None => Some(Vec::new()),
        };
        let kured = match self.same(fleet, "fleetctl_kured") {
            Some((h, v)) => {
                let s = self.string(h, "fleetctl_kured", v)?;
                self.check(h, "fleetctl_kured", v, s.parse::<KuredRef>())
                    .map(Some)
            }
            None => Some(None),
        };
        let window = match self.same(fleet, "fleetctl_window") {
            Some((h, v)) => {
                let s = self.string(h, "fleetctl_window", v)?;
                let w = crate::pacing::Window::parse(&s).map_err(|e| e.to_string());
                self.check(h, "fleetctl_window", v, w).map(Some)
            }
            None => Some(None),
        };
        Some(Shared {
            kubernetes_version: kubernetes_version?,
            containerd_version: containerd_version?,
            hub: hub?,
            ssh: ssh?,
            health_checks: health_checks?,
            kured: kured?,
            window: window?,
        })
    }

    fn ssh(&mut self, fleet: &[(&Host, Role, String)]) -> Option<SshDefaults> {
        let args = match self.same(fleet, "ansible_ssh_common_args") {
            Some((h, v)) => {
                let s = self.string(h, "ansible_ssh_common_args", v)?;
                self.check(h, "ansible_ssh_common_args", v, ssh_args::parse(&s))?
            }
            None => ssh_args::SshArgs::default(),
        };
        let mut host_key_checking = args.host_key_checking;
        let mut known_hosts = args.known_hosts;
        if let Some((h, v)) = self.same(fleet, "fleetctl_host_key_checking") {
            let s = self.string(h, "fleetctl_host_key_checking", v)?;
            host_key_checking = Some(self.check(
                h,
                "fleetctl_host_key_checking",
                v,
                validate::host_key_checking(&s),
            )?);
        }
        if let Some((h, v)) = self.same(fleet, "fleetctl_known_hosts") {
            known_hosts = Some(self.string(h, "fleetctl_known_hosts", v)?);
        }
        let known_hosts = match known_hosts {
            Some(k) => match validate::local_path(&k, &self.base, self.home.as_deref()) {
                Ok(p) => p,
                Err(e) => {
                    self.problems.push(format!("known_hosts: {e}"));
                    return None;
                }
            },
            None => match &self.home {
                Some(home) => home.join(".ssh/known_hosts"),
                None => {
                    self.problems.push(
                        "HOME is not set, so the default ~/.ssh/known_hosts cannot be found: \
                         set fleetctl_known_hosts"
                            .into(),
                    );
                    return None;
                }
            },
        };
        Some(SshDefaults {
            // Per node in Ansible: each node carries its own.
            user: None,
            port: None,
            identity_file: None,
            known_hosts,
            host_key_checking: host_key_checking.unwrap_or(HostKeyChecking::Strict),
            jump: args.jump,
        })
    }

    /// The one value of a fleet-wide variable, or a problem naming two hosts
    /// that differ. `None` when no host sets it.
    fn same<'h>(
        &mut self,
        fleet: &[(&'h Host, Role, String)],
        key: &str,
    ) -> Option<(&'h Host, &'h Var)> {
        let mut set = fleet
            .iter()
            .filter_map(|(h, _, _)| h.vars.get(key).map(|v| (*h, v)));
        let first = set.next()?;
        for (h, v) in set {
            if v.value != first.1.value {
                self.problems.push(format!(
                    "{}: host `{}`: {key} differs from host `{}`'s ({}): fleetctl has one {key} \
                     for the whole fleet",
                    v.at, h.name, first.0.name, first.1.at
                ));
                return None;
            }
        }
        if fleet.iter().any(|(h, _, _)| !h.vars.contains_key(key))
            && key != "ansible_ssh_common_args"
        {
            let missing: Vec<&str> = fleet
                .iter()
                .filter(|(h, _, _)| !h.vars.contains_key(key))
                .map(|(h, _, _)| h.name.as_str())
                .take(3)
                .collect();
            self.problems.push(format!(
                "{}: {key} is set for host `{}` but not for {}: set it for the whole fleet \
                 (group_vars/all.yml)",
                first.1.at,
                first.0.name,
                missing.join(", ")
            ));
            return None;
        }
        Some(first)
    }

    fn minor(&mut self, h: &Host, key: &str, v: &Var) -> Option<Minor> {
        let s = match &v.value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => {
                return self.refuse(
                    h,
                    key,
                    v,
                    &format!(
                        "{n} is a number to YAML, which drops trailing zeros (1.30 reads as \
                         1.3): write the version quoted, e.g. \"v1.30\""
                    ),
                );
            }
            _ => return self.refuse(h, key, v, "expected a version such as v1.37 or 1.37.2"),
        };
        self.string(h, key, v)?;
        let bare = s.trim().trim_start_matches('v');
        let mut parts = bare.split('.');
        let minor = match (parts.next(), parts.next()) {
            (Some(a), Some(b)) => format!("v{a}.{b}"),
            _ => s.clone(),
        };
        let parsed = minor.parse::<Minor>().map_err(|e| format!("{e:#}"));
        let m = self.check(h, key, v, parsed)?;
        self.note("fleet", key, &m.to_string(), &format!("{key} ({})", v.at));
        Some(m)
    }

    fn port(&mut self, h: &Host, key: &str, v: &Var) -> Option<u16> {
        let n = match &v.value {
            serde_json::Value::Number(n) => n.as_u64(),
            serde_json::Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match n.and_then(|n| u16::try_from(n).ok()) {
            Some(p) => self.check(h, key, v, validate::port(p)),
            None => self.refuse(h, key, v, "invalid port: expected a number from 1 to 65535"),
        }
    }

    /// A string value, refusing templates, vault and other types.
    fn string(&mut self, h: &Host, key: &str, v: &Var) -> Option<String> {
        if v.vault {
            return self.refuse(
                h,
                key,
                v,
                "is vault-encrypted: run fleetctl where `ansible-inventory` and the vault password \
                 are available, or pass -i with the JSON of `ansible-inventory -i FILE --list`",
            );
        }
        let s = match &v.value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            _ => return self.refuse(h, key, v, "expected a single value, not a list or mapping"),
        };
        if s.contains("{{") || s.contains("{%") {
            return self.refuse(
                h,
                key,
                v,
                "is a Jinja2 template, which only Ansible evaluates (and `ansible-inventory --list` \
                 does not): fleetctl does not guess its value; write the value itself",
            );
        }
        Some(s)
    }

    fn get<'h>(&self, h: &'h Host, keys: &[&'static str]) -> Option<(&'static str, &'h Var)> {
        keys.iter().find_map(|k| h.vars.get(*k).map(|v| (*k, v)))
    }

    fn check<T>(&mut self, h: &Host, key: &str, v: &Var, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(t) => Some(t),
            Err(e) => self.refuse(h, key, v, &e),
        }
    }

    fn refuse<T>(&mut self, h: &Host, key: &str, v: &Var, why: &str) -> Option<T> {
        self.problems
            .push(format!("{}: host `{}`: {key}: {why}", v.at, h.name));
        None
    }

    fn note(&mut self, node: &str, setting: &str, value: &str, from: &str) {
        if self
            .provenance
            .iter()
            .any(|p| p.node == node && p.setting == setting)
        {
            return;
        }
        self.provenance.push(Provenance {
            node: node.to_string(),
            setting: setting.to_string(),
            value: value.to_string(),
            from: from.to_string(),
        });
    }

    fn duplicates(&mut self, nodes: &[Option<Node>]) {
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        let mut endpoints: BTreeMap<(String, u16), &str> = BTreeMap::new();
        for n in nodes.iter().flatten() {
            *names.entry(&n.name).or_default() += 1;
            let key = (n.address.to_ascii_lowercase(), n.port.unwrap_or(22));
            if let Some(other) = endpoints.insert(key.clone(), &n.name) {
                self.problems.push(format!(
                    "hosts `{other}` and `{}` both reach {} port {}: each node must be a \
                     different machine",
                    n.name, key.0, key.1
                ));
            }
        }
        for (name, count) in names {
            if count > 1 {
                self.problems.push(format!(
                    "{count} hosts are Kubernetes node `{name}`: set fleetctl_node_name so each \
                     names its own node"
                ));
            }
        }
    }
}

/// A health check as written in `fleetctl_health_checks`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    name: String,
    command: String,
    expect: String,
}

impl RawCheck {
    /// As fleetctl's own `health_checks`: no field empty (an empty `expect`
    /// is in every output, so the check could never fail).
    fn into_check(self) -> Result<HealthCheck, String> {
        for (key, value) in [
            ("name", &self.name),
            ("command", &self.command),
            ("expect", &self.expect),
        ] {
            if value.trim().is_empty() {
                return Err(format!("health check `{}`: {key} is empty", self.name));
            }
        }
        Ok(HealthCheck {
            name: self.name,
            command: self.command,
            expect: self.expect,
        })
    }
}

#[cfg(test)]
mod tests;

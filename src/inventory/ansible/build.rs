//! An Ansible inventory's resolved hosts as fleetctl's model: which hosts
//! are nodes and their roles, each node's connection, every problem
//! collected with the file, line, host and variable to fix (`fleet_wide`:
//! the settings that must agree on every node).

mod fleet_wide;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::{Inventory, Node, Provenance, Role, validate};
use super::{CONTROL_PLANE_GROUPS, Host, Var, WORKER_GROUPS};

/// The hosts as fleetctl's model, every problem found at once.
pub(super) fn build(
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

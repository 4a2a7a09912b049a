//! Ansible's YAML inventory and its `group_vars/` and `host_vars/`
//! directories, read as Ansible reads them, into one [`Hosts`] list whose
//! every variable knows the file, line and column it came from.
//!
//! What follows Ansible's own code (ansible/ansible, `lib/ansible`):
//! - the file: top-level keys are groups; a group has `hosts` (a host
//!   with its inline vars, or nothing), `children` (groups) and `vars`
//!   (`plugins/inventory/yaml.py`, `_parse_group`);
//! - `group_vars/NAME` and `host_vars/NAME` beside the file: a file named
//!   NAME, NAME.yml, NAME.yaml or NAME.json, or a directory NAME whose
//!   files are read in sorted order; hidden and backup (`~`) files are
//!   skipped (`plugins/vars/host_group_vars.py`, `DataLoader.find_vars_files`);
//! - precedence, low to high: the file's group vars (groups sorted by depth,
//!   then `ansible_group_priority`, then name: `inventory/helpers.py`
//!   `sort_groups`, with `all` first), then `group_vars/all`, then the other
//!   `group_vars/` (same order), then the file's host vars, then
//!   `host_vars/` (`vars/manager.py` `get_vars`, its default
//!   VARIABLE_PRECEDENCE); a variable is replaced whole, never merged
//!   (DEFAULT_HASH_BEHAVIOUR `replace`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_saphyr::{Location, Spanned};

use super::{Host, Var};

/// At most this many groups or hosts: an inventory, not a data dump, and
/// the group graph walk stays cheap.
const MAX_ENTRIES: usize = 100_000;
/// At most this deep a `children` nesting (Ansible has no limit; a real
/// inventory is a handful deep, and a loop is refused separately).
const MAX_DEPTH: usize = 64;
/// The largest vars file read, in bytes.
const MAX_FILE: u64 = 4 << 20;

/// A YAML mapping in file order (hosts keep the order they are listed in:
/// the first control plane is the one `upgrade apply` runs on).
#[derive(Debug)]
pub(super) struct Ordered<V>(pub Vec<(Spanned<String>, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V2<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V2<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<Spanned<String>, V>()? {
                    if entries.len() >= MAX_ENTRIES {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_ENTRIES} entries in one mapping"
                        )));
                    }
                    entries.push((k, v));
                }
                Ok(Ordered(entries))
            }
            // `hosts:` or `vars:` with nothing under it is an empty mapping.
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Ordered(Vec::new()))
            }
        }
        d.deserialize_map(V2(std::marker::PhantomData))
    }
}

/// One group as written in the inventory file.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGroup {
    #[serde(default)]
    hosts: Option<Ordered<Option<Ordered<Spanned<serde_json::Value>>>>>,
    #[serde(default)]
    children: Option<Ordered<Option<RawGroup>>>,
    #[serde(default)]
    vars: Option<Ordered<Spanned<serde_json::Value>>>,
}

/// The file's top level: groups, `all` among them.
pub(super) type RawFile = Ordered<Option<RawGroup>>;

#[derive(Debug, Default)]
struct Group {
    vars: Vec<(String, Var)>,
    children: Vec<String>,
    hosts: Vec<String>,
    /// Where the group was first written, for messages.
    at: String,
}

/// The hosts of the file with their groups and resolved variables.
pub(super) struct Hosts {
    pub hosts: Vec<Host>,
}

/// Reads the inventory file's tree (already parsed) and the vars
/// directories beside it, and resolves every host's variables.
pub(super) fn resolve(raw: RawFile, path: &Path) -> Result<Hosts, Vec<String>> {
    let mut problems = Vec::new();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut inline: BTreeMap<String, Vec<(String, Var)>> = BTreeMap::new();
    let all = groups.entry("all".into()).or_default();
    all.at = path.display().to_string();
    for (name, group) in raw.0 {
        let group = group.unwrap_or_default();
        collect(
            &name,
            group,
            path,
            0,
            &mut groups,
            &mut order,
            &mut inline,
            &mut problems,
        );
        if name.value != "all" {
            add_child(&mut groups, "all", &name.value);
        }
    }
    // Ansible puts a host that is in no group but `all` into `ungrouped`;
    // nothing here depends on that group, so it is not made.
    let depth = match depths(&groups) {
        Ok(d) => d,
        Err(e) => {
            problems.push(format!("{}: {e}", path.display()));
            return Err(problems);
        }
    };
    let base = path.parent().unwrap_or(Path::new("")).to_path_buf();
    let group_files = vars_dirs(&base.join("group_vars"), groups.keys(), &mut problems);
    let host_files = vars_dirs(&base.join("host_vars"), order.iter(), &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    let priority = |g: &str| -> i64 {
        groups
            .get(g)
            .and_then(|g| {
                g.vars
                    .iter()
                    .rev()
                    .find(|(k, _)| k == "ansible_group_priority")
            })
            .and_then(|(_, v)| v.value.as_i64())
            .unwrap_or(1)
    };
    let mut hosts = Vec::with_capacity(order.len());
    for host in &order {
        let member: BTreeSet<String> = groups
            .iter()
            .filter(|(_, g)| g.hosts.contains(host))
            .map(|(n, _)| n.clone())
            .collect();
        let all_groups = ancestors(&groups, &member);
        let mut sorted: Vec<&String> = all_groups.iter().filter(|g| *g != "all").collect();
        sorted.sort_by_key(|g| {
            (
                depth.get(*g).copied().unwrap_or(0),
                priority(g),
                (*g).clone(),
            )
        });
        let mut vars: BTreeMap<String, Var> = BTreeMap::new();
        let mut layer = |from: &[(String, Var)]| {
            for (k, v) in from {
                vars.insert(k.clone(), v.clone());
            }
        };
        // The file's `all` vars, then its other groups' (all_inventory,
        // groups_inventory), then group_vars/all and group_vars/*
        // (all_plugins_inventory, groups_plugins_inventory), then the
        // file's host vars and host_vars/.
        layer(&groups["all"].vars);
        for g in &sorted {
            layer(&groups[*g].vars);
        }
        if let Some(v) = group_files.get("all") {
            layer(v);
        }
        for g in &sorted {
            if let Some(v) = group_files.get(*g) {
                layer(v);
            }
        }
        if let Some(v) = inline.get(host) {
            layer(v);
        }
        if let Some(v) = host_files.get(host) {
            layer(v);
        }
        hosts.push(Host {
            name: host.clone(),
            groups: all_groups.into_iter().filter(|g| g != "all").collect(),
            vars,
        });
    }
    Ok(Hosts { hosts })
}

#[allow(clippy::too_many_arguments)]
fn collect(
    name: &Spanned<String>,
    raw: RawGroup,
    path: &Path,
    nesting: usize,
    groups: &mut BTreeMap<String, Group>,
    order: &mut Vec<String>,
    inline: &mut BTreeMap<String, Vec<(String, Var)>>,
    problems: &mut Vec<String>,
) {
    let at = at(path, name.referenced);
    if nesting > MAX_DEPTH {
        problems.push(format!(
            "{at}: group `{}` is nested more than {MAX_DEPTH} deep",
            name.value
        ));
        return;
    }
    if let Err(e) = group_name(&name.value) {
        problems.push(format!("{at}: {e}"));
        return;
    }
    let group = groups.entry(name.value.clone()).or_default();
    if group.at.is_empty() {
        group.at = at.clone();
    }
    for (k, v) in raw.vars.map(|o| o.0).unwrap_or_default() {
        let var = Var::new(v, path);
        group.vars.push((k.value, var));
    }
    for (host, vars) in raw.hosts.map(|o| o.0).unwrap_or_default() {
        if !group.hosts.contains(&host.value) {
            group.hosts.push(host.value.clone());
        }
        if !order.contains(&host.value) {
            if order.len() >= MAX_ENTRIES {
                problems.push(format!("{at}: more than {MAX_ENTRIES} hosts"));
                return;
            }
            order.push(host.value.clone());
        }
        let entry = inline.entry(host.value.clone()).or_default();
        for (k, v) in vars.map(|o| o.0).unwrap_or_default() {
            entry.push((k.value, Var::new(v, path)));
        }
    }
    for (child, raw_child) in raw.children.map(|o| o.0).unwrap_or_default() {
        add_child(groups, &name.value, &child.value);
        collect(
            &child,
            raw_child.unwrap_or_default(),
            path,
            nesting + 1,
            groups,
            order,
            inline,
            problems,
        );
    }
}

fn add_child(groups: &mut BTreeMap<String, Group>, parent: &str, child: &str) {
    let parent = groups.entry(parent.to_string()).or_default();
    if !parent.children.iter().any(|c| c == child) {
        parent.children.push(child.to_string());
    }
}

/// Ansible's group names: letters, digits and `_` (it warns about others
/// and, since 2.8, replaces them; fleetctl refuses instead of guessing).
fn group_name(name: &str) -> Result<(), String> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "group name `{}` is not a valid Ansible group name: use letters, digits and `_`",
            name.escape_debug()
        ));
    }
    Ok(())
}

/// Every group's depth: its longest path from `all` (Ansible's
/// `Group.depth`, raised as children are added). A loop is an error.
fn depths(groups: &BTreeMap<String, Group>) -> Result<BTreeMap<String, usize>, String> {
    let mut depth: BTreeMap<String, usize> = BTreeMap::new();
    depth.insert("all".into(), 0);
    // Longest paths by relaxation, bounded by the number of groups: a
    // further change would mean a loop.
    for _ in 0..=groups.len() {
        let mut changed = false;
        for (name, g) in groups {
            let Some(&d) = depth.get(name) else { continue };
            for c in &g.children {
                if depth.get(c).is_none_or(|&cd| cd < d + 1) {
                    depth.insert(c.clone(), d + 1);
                    changed = true;
                }
            }
        }
        if !changed {
            return Ok(depth);
        }
    }
    Err("the groups' `children` form a loop: a group cannot be its own descendant".into())
}

/// `member` and every group above them.
fn ancestors(groups: &BTreeMap<String, Group>, member: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = member.clone();
    loop {
        let before = out.len();
        for (name, g) in groups {
            if g.children.iter().any(|c| out.contains(c)) {
                out.insert(name.clone());
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// `dir/NAME`'s variables for each name that has a file or directory there.
fn vars_dirs<'a>(
    dir: &Path,
    names: impl Iterator<Item = &'a String>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, Vec<(String, Var)>> {
    let mut out = BTreeMap::new();
    if !dir.is_dir() {
        return out;
    }
    for name in names {
        let mut vars = Vec::new();
        for file in vars_files(dir, name) {
            match read_vars_file(&file) {
                Ok(v) => vars.extend(v),
                Err(e) => problems.push(e),
            }
        }
        if !vars.is_empty() {
            out.insert(name.clone(), vars);
        }
    }
    out
}

/// The files Ansible reads for NAME in a vars directory, in its order.
fn vars_files(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for ext in ["", ".yml", ".yaml", ".json"] {
        let p = dir.join(format!("{name}{ext}"));
        if p.is_file() {
            out.push(p);
        }
    }
    let d = dir.join(name);
    if d.is_dir() {
        let mut files = Vec::new();
        walk(&d, &mut files, 0);
        files.sort();
        out.extend(files);
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten().take(MAX_ENTRIES) {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        let p = e.path();
        if p.is_dir() && depth < MAX_DEPTH {
            walk(&p, out, depth + 1);
        } else if p.is_file()
            && [".yml", ".yaml", ".json", ""]
                .iter()
                .any(|ext| name.ends_with(ext) && (!ext.is_empty() || !name.contains('.')))
        {
            out.push(p);
        }
    }
}

fn read_vars_file(path: &Path) -> Result<Vec<(String, Var)>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_FILE {
        return Err(format!(
            "{}: {} bytes; fleetctl reads vars files of at most {MAX_FILE}",
            path.display(),
            meta.len()
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if text.trim_start().starts_with("$ANSIBLE_VAULT") {
        // A whole vault-encrypted file: its variables are unknown until
        // ansible decrypts them.
        return Ok(vec![(
            super::VAULT_FILE.to_string(),
            Var {
                value: serde_json::Value::Null,
                at: path.display().to_string(),
                vault: true,
            },
        )]);
    }
    if super::is_blank(&text) {
        return Ok(Vec::new());
    }
    let vars: Ordered<Spanned<serde_json::Value>> = super::yaml(&text, path)?;
    Ok(vars
        .0
        .into_iter()
        .map(|(k, v)| (k.value, Var::new(v, path)))
        .collect())
}

/// `file:line:column`.
pub(super) fn at(path: &Path, loc: Location) -> String {
    if loc.line() == 0 {
        path.display().to_string()
    } else {
        format!("{}:{}:{}", path.display(), loc.line(), loc.column())
    }
}

//! Reading the inventory: YAML to [`Inventory`], refusing anything wrong
//! before a single node is touched.
//!
//! Two kinds of problems are reported, both as a [`UsageError`] (exit 2)
//! whose lines read `file:line:column: what is wrong`:
//! - the YAML itself (syntax, unknown or duplicate keys, wrong types): the
//!   parser stops at the first one and gives its location;
//! - the values (versions, names, roles, duplicates, …): all of them are
//!   collected, so one edit-and-retry fixes everything.
//!
//! [`parse`] is pure apart from reading `$HOME` for `~`; [`load`] also reads
//! the file and checks that every key file named in it can be read.
//!
//! [`UsageError`]: crate::error::UsageError

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde_saphyr::{Location, MessageFormatter, Spanned, UserMessageFormatter};

use super::ansible;
use super::raw::{RawHealthCheck, RawInventory, RawSsh};
use super::{DEFAULT_HUB, HealthCheck, HostKeyChecking, Inventory, SshDefaults, validate};
use crate::usage;
use crate::version::Minor;

/// The default SSH port, for telling whether two nodes share an endpoint.
const SSH_PORT: u16 = 22;

/// Reads, parses and validates the inventory at `path`, including that every
/// `identity_file` it names can be opened.
pub fn load(path: &Path) -> anyhow::Result<Inventory> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        usage!(
            "cannot read the inventory {}: {e}; check the path, or start from inventory.example.yaml",
            path.display()
        )
    })?;
    let ansible_inventory = ansible::ansible_inventory();
    let (inventory, key_files) =
        parse_any(&text, path, home().as_deref(), ansible_inventory.as_deref())?;
    check_key_files(&key_files)?;
    Ok(inventory)
}

/// `text` read as fleetctl's own inventory or, by its shape, as an Ansible
/// inventory (`super::ansible`), with the key files it names.
/// `ansible_inventory`: the program that resolves what only Ansible can
/// (`None`: such an inventory is refused, saying how to resolve it).
fn parse_any(
    text: &str,
    path: &Path,
    home: Option<&Path>,
    ansible_inventory: Option<&Path>,
) -> anyhow::Result<(Inventory, Vec<KeyFile>)> {
    match ansible::kind(text) {
        ansible::InventoryKind::Fleetctl => parse_located(text, path, home),
        kind => {
            let (inventory, keys) = ansible::load(text, path, kind, home, ansible_inventory)
                .map_err(|e| usage!("{e}"))?;
            let keys = keys
                .into_iter()
                .map(|(path, origin)| KeyFile { origin, path })
                .collect();
            Ok((inventory, keys))
        }
    }
}

/// Parses and validates inventory `text` as if read from `path` (which names
/// it in messages and anchors relative paths). Does not touch the file system.
pub fn parse(text: &str, path: &Path) -> anyhow::Result<Inventory> {
    // Runs nothing either: an inventory only Ansible can read is refused
    // here rather than handed to ansible-inventory.
    parse_any(text, path, home().as_deref(), None).map(|(inventory, _)| inventory)
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// A key file named in the inventory, with where it was named.
#[derive(Debug)]
struct KeyFile {
    path: PathBuf,
    /// `file:line:col: <owner> identity_file`, ready to prefix a message.
    origin: String,
}

fn parse_located(
    text: &str,
    path: &Path,
    home: Option<&Path>,
) -> anyhow::Result<(Inventory, Vec<KeyFile>)> {
    let raw = parse_yaml(text, path)?;
    let mut build = Builder {
        problems: Problems::new(path),
        base: path.parent().unwrap_or(Path::new("")).to_path_buf(),
        home: home.map(Path::to_path_buf),
        key_files: Vec::new(),
    };
    let inventory = build.inventory(raw, path);
    build.problems.into_result()?;
    // `into_result` returned Ok: every field was valid, so `inventory` is Some.
    let inventory = inventory.ok_or_else(|| usage!("{}: invalid inventory", path.display()))?;
    Ok((inventory, build.key_files))
}

fn parse_yaml(text: &str, path: &Path) -> anyhow::Result<RawInventory> {
    if super::is_blank(text) {
        return Err(usage!(
            "{}: the file is empty: expected at least kubernetes_version and nodes \
             (see inventory.example.yaml)",
            path.display()
        ));
    }
    let options = serde_saphyr::options! { with_snippet: false };
    serde_saphyr::from_str_with_options::<RawInventory>(text, options)
        .map_err(|e| usage!("{}", yaml_message(&e, path)))
}

/// `file:line:col: message`, in the parser's user-facing wording, with the
/// one message that would puzzle an operator ("invalid u16") made specific.
fn yaml_message(err: &serde_saphyr::Error, path: &Path) -> String {
    let message = UserMessageFormatter.format_message(err.without_snippet());
    let message = match message.as_ref() {
        "invalid u16" => "invalid port: expected a number from 1 to 65535".to_string(),
        other => without_control_chars(other),
    };
    match err.location() {
        Some(loc) => format!("{}: {message}", at(path, loc)),
        None => format!("{}: {message}", path.display()),
    }
}

/// The message may quote the file (an unknown key, say); a terminal escape
/// in it must reach the operator's terminal as text, not as a command.
fn without_control_chars(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// `file:line:column`, or just `file` when the location is unknown.
fn at(path: &Path, loc: Location) -> String {
    if loc.line() == 0 {
        path.display().to_string()
    } else {
        format!("{}:{}:{}", path.display(), loc.line(), loc.column())
    }
}

/// Every semantic problem found, reported in file order.
struct Problems {
    path: PathBuf,
    /// (line, column, message); line 0 when no place in the file is to blame.
    lines: Vec<(u64, u64, String)>,
}

impl Problems {
    fn new(path: &Path) -> Self {
        Problems {
            path: path.to_path_buf(),
            lines: Vec::new(),
        }
    }

    fn at(&mut self, loc: Location, message: impl std::fmt::Display) {
        let line = format!("{}: {message}", at(&self.path, loc));
        self.lines.push((loc.line(), loc.column(), line));
    }

    /// Records the error of a check and returns its value, if any.
    fn check<T>(&mut self, loc: Location, result: Result<T, String>) -> Option<T> {
        result.map_err(|message| self.at(loc, message)).ok()
    }

    fn into_result(mut self) -> anyhow::Result<()> {
        if self.lines.is_empty() {
            return Ok(());
        }
        // Stable: problems at the same place keep the order they were found in.
        self.lines.sort_by_key(|(line, column, _)| (*line, *column));
        let lines: Vec<String> = self.lines.into_iter().map(|(_, _, l)| l).collect();
        Err(usage!("{}", lines.join("\n")))
    }
}

/// Turns the raw YAML into the model, recording every problem on the way.
/// Returns `None` when anything was invalid (the problems say what).
struct Builder {
    problems: Problems,
    base: PathBuf,
    home: Option<PathBuf>,
    key_files: Vec<KeyFile>,
}

impl Builder {
    fn inventory(&mut self, raw: RawInventory, path: &Path) -> Option<Inventory> {
        let kubernetes_version = self.minor("kubernetes_version", &raw.kubernetes_version);
        let containerd_version = match &raw.containerd_version {
            Some(v) => self.minor("containerd_version", v).map(Some),
            None => Some(None),
        };
        let hub = match raw.sysupdate.and_then(|s| s.hub) {
            Some(h) => self.problems.check(
                h.referenced,
                validate::hub(&h.value).map_err(scoped("sysupdate.")),
            ),
            None => Some(DEFAULT_HUB.to_string()),
        };
        let raw_ssh = raw.ssh.unwrap_or_default();
        let default_port = raw_ssh.port.as_ref().map_or(SSH_PORT, |p| p.value);
        let ssh = self.ssh(raw_ssh);
        let health_checks = self.health_checks(raw.health_checks.unwrap_or_default());
        let kured = match &raw.kured {
            Some(k) => self
                .problems
                .check(
                    k.referenced,
                    k.value
                        .parse::<crate::inventory::KuredRef>()
                        .map_err(|e| format!("kured: {e}")),
                )
                .map(Some),
            None => Some(None),
        };
        let window = match &raw.window {
            Some(w) => self
                .problems
                .check(
                    w.referenced,
                    crate::pacing::Window::parse(&w.value).map_err(|e| format!("window: {e}")),
                )
                .map(Some),
            None => Some(None),
        };
        let nodes = self.nodes(raw.nodes, default_port);
        Some(Inventory {
            path: path.to_path_buf(),
            kubernetes_version: kubernetes_version?,
            containerd_version: containerd_version?,
            hub: hub?,
            ssh: ssh?,
            health_checks: health_checks?,
            kured: kured?,
            window: window?,
            nodes: nodes?,
            provenance: Vec::new(),
        })
    }

    fn minor(&mut self, key: &str, value: &Spanned<String>) -> Option<Minor> {
        let parsed = value
            .value
            .parse::<Minor>()
            .map_err(|e| format!("{key}: {e:#}"));
        self.problems.check(value.referenced, parsed)
    }

    fn ssh(&mut self, raw: RawSsh) -> Option<SshDefaults> {
        let in_ssh = scoped("ssh.");
        let user = self.opt(raw.user.as_ref(), |u| validate::user(u).map_err(&in_ssh));
        let port = self.opt(raw.port.as_ref(), |p| validate::port(*p).map_err(&in_ssh));
        let identity_file = match &raw.identity_file {
            Some(f) => self.identity_file(f, "ssh.identity_file").map(Some),
            None => Some(None),
        };
        let known_hosts = self.known_hosts(raw.known_hosts.as_ref());
        let host_key_checking = self
            .opt(raw.host_key_checking.as_ref(), |h| {
                validate::host_key_checking(h).map_err(&in_ssh)
            })
            .map(|h| h.unwrap_or(HostKeyChecking::Strict));
        let jump = self
            .opt(raw.jump.as_ref(), |j| validate::jump(j).map_err(&in_ssh))
            .map(Option::flatten);
        Some(SshDefaults {
            user: user?,
            port: port?,
            identity_file: identity_file?,
            known_hosts: known_hosts?,
            host_key_checking: host_key_checking?,
            jump: jump?,
        })
    }

    /// Validates an optional value: `Some(None)` when absent, `None` when invalid.
    fn opt<T, U>(
        &mut self,
        value: Option<&Spanned<T>>,
        check: impl FnOnce(&T) -> Result<U, String>,
    ) -> Option<Option<U>> {
        match value {
            Some(v) => self.problems.check(v.referenced, check(&v.value)).map(Some),
            None => Some(None),
        }
    }

    fn known_hosts(&mut self, raw: Option<&Spanned<String>>) -> Option<PathBuf> {
        match raw {
            Some(k) => {
                let path = validate::local_path(&k.value, &self.base, self.home.as_deref())
                    .map_err(|e| format!("ssh.known_hosts: {e}"));
                self.problems.check(k.referenced, path)
            }
            None => match &self.home {
                Some(home) => Some(home.join(".ssh/known_hosts")),
                None => {
                    let message = "ssh.known_hosts: HOME is not set, so the default \
                                   ~/.ssh/known_hosts cannot be found: set ssh.known_hosts";
                    self.problems.at(Location::UNKNOWN, message);
                    None
                }
            },
        }
    }

    /// Resolves an `identity_file` and remembers it for the readability check in `load`.
    fn identity_file(&mut self, raw: &Spanned<String>, owner: &str) -> Option<PathBuf> {
        let path = validate::local_path(&raw.value, &self.base, self.home.as_deref())
            .map_err(|e| format!("{owner}: {e}"));
        let path = self.problems.check(raw.referenced, path)?;
        self.key_files.push(KeyFile {
            path: path.clone(),
            origin: format!("{}: {owner}", at(&self.problems.path, raw.referenced)),
        });
        Some(path)
    }

    fn health_checks(&mut self, raw: Vec<RawHealthCheck>) -> Option<Vec<HealthCheck>> {
        let mut seen: HashMap<String, u64> = HashMap::new();
        let mut checks = Some(Vec::with_capacity(raw.len()));
        for check in raw {
            let name = &check.name;
            if let Some(first) = seen.get(&name.value) {
                self.problems.at(
                    name.referenced,
                    format!(
                        "health check `{}` is defined twice (first on line {first})",
                        name.value
                    ),
                );
                checks = None;
            }
            seen.insert(name.value.clone(), name.referenced.line());
            let built = self.health_check(&check);
            checks = checks.zip(built).map(|(mut all, one)| {
                all.push(one);
                all
            });
        }
        checks
    }

    fn health_check(&mut self, raw: &RawHealthCheck) -> Option<HealthCheck> {
        let label = if raw.name.value.is_empty() {
            "health check".to_string()
        } else {
            format!("health check `{}`", raw.name.value)
        };
        let mut non_empty = |field: &Spanned<String>, key: &str, why: &str| {
            let result = if field.value.trim().is_empty() {
                Err(format!("{label}: {key} is empty{why}"))
            } else {
                Ok(field.value.clone())
            };
            self.problems.check(field.referenced, result)
        };
        let name = non_empty(&raw.name, "name", "");
        let command = non_empty(&raw.command, "command", "");
        let expect = non_empty(
            &raw.expect,
            "expect",
            ": every output contains the empty string, so the check could never fail",
        );
        Some(HealthCheck {
            name: name?,
            command: command?,
            expect: expect?,
        })
    }
}

/// Prefixes a check's message (which starts with the key) with where the key lives.
fn scoped(scope: &str) -> impl Fn(String) -> String + '_ {
    move |e| format!("{scope}{e}")
}

/// Every key file must be readable now, not halfway through an upgrade.
fn check_key_files(key_files: &[KeyFile]) -> anyhow::Result<()> {
    let mut problems = Vec::new();
    for key in key_files {
        if let Err(why) = readable_file(&key.path) {
            problems.push(format!(
                "{} {} cannot be read: {why}",
                key.origin,
                key.path.display()
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(usage!("{}", problems.join("\n")))
    }
}

fn readable_file(path: &Path) -> Result<(), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if meta.is_file() {
        Ok(())
    } else {
        Err("it is not a regular file".to_string())
    }
}

mod node_entries;

#[cfg(test)]
mod tests;

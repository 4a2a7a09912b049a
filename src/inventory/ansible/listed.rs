//! The JSON `ansible-inventory -i FILE --list` prints: Ansible's own reading
//! of an inventory it alone can resolve (INI, inventory plugins, vault).
//!
//! Its shape (ansible/ansible `lib/ansible/cli/inventory.py`, `json_inventory`):
//! a key per group with `hosts` and `children` lists, and `_meta.hostvars`
//! with every host's variables already resolved in Ansible's precedence
//! (`VariableManager.get_vars`), vault values decrypted when the vault
//! password was given. Without `--export`, group `vars` are folded into the
//! hosts' and a group's own `vars` key is absent.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Host, Var};

/// The most of ansible-inventory's output read (a fleet of thousands of
/// hosts with their variables fits many times over).
const MAX_OUTPUT: u64 = 32 << 20;
/// How long ansible-inventory may take (a dynamic plugin asks an API).
const TIMEOUT: Duration = Duration::from_secs(120);
/// At most this many groups and hosts.
const MAX_ENTRIES: usize = 100_000;

/// Reads the listing; `origin` names it in messages.
pub(super) fn parse(text: &str, origin: &str) -> Result<Vec<Host>, String> {
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| format!("{origin}: not the JSON `ansible-inventory --list` prints: {e}"))?;
    let obj = doc
        .as_object()
        .ok_or_else(|| format!("{origin}: expected a JSON object of groups and _meta"))?;
    let hostvars = obj
        .get("_meta")
        .and_then(|m| m.get("hostvars"))
        .and_then(|h| h.as_object())
        .ok_or_else(|| {
            format!("{origin}: no _meta.hostvars: make it with `ansible-inventory -i FILE --list`")
        })?;
    if obj.len() > MAX_ENTRIES || hostvars.len() > MAX_ENTRIES {
        return Err(format!("{origin}: more than {MAX_ENTRIES} groups or hosts"));
    }
    let list = |g: &serde_json::Value, key: &str| -> Vec<String> {
        g.get(key)
            .and_then(|l| l.as_array())
            .map(|l| {
                l.iter()
                    .filter_map(|h| h.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Host order: as the groups list them, walked from `all` (the listing
    // keeps the inventory's order within a group).
    let mut order: Vec<String> = Vec::new();
    let mut groups_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<(String, Vec<String>)> = vec![("all".into(), Vec::new())];
    while let Some((group, above)) = stack.pop() {
        if !seen.insert(group.clone()) || seen.len() > MAX_ENTRIES {
            continue;
        }
        let Some(g) = obj.get(&group) else { continue };
        let mut chain = above.clone();
        if group != "all" {
            chain.push(group.clone());
        }
        for h in list(g, "hosts") {
            if !order.contains(&h) {
                order.push(h.clone());
            }
            groups_of
                .entry(h)
                .or_default()
                .extend(chain.iter().cloned());
        }
        let children = list(g, "children");
        for c in children.into_iter().rev() {
            stack.push((c, chain.clone()));
        }
    }
    for h in hostvars.keys() {
        if !order.contains(h) {
            order.push(h.clone());
        }
    }
    let hosts = order
        .into_iter()
        .map(|name| {
            let at = format!("{origin} (_meta.hostvars.{name})");
            let vars = hostvars
                .get(&name)
                .and_then(|v| v.as_object())
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let vault = v.get("__ansible_vault").is_some();
                            let var = Var {
                                value: v.clone(),
                                at: at.clone(),
                                vault,
                            };
                            (k.clone(), var)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Host {
                groups: groups_of
                    .remove(&name)
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
                name,
                vars,
            }
        })
        .collect();
    Ok(hosts)
}

/// Runs `ansible-inventory -i PATH --list` (no shell: the path is one
/// argument) and reads its listing, saying so on stderr first.
pub(super) fn run(program: Option<&Path>, path: &Path, why: &str) -> Result<Vec<Host>, String> {
    let program = program.ok_or_else(|| {
        format!(
            "{}: only Ansible can read this inventory ({why}), and ansible-inventory is not on \
             PATH: install Ansible, or pass -i with the JSON of \
             `ansible-inventory -i {} --list`",
            path.display(),
            path.display()
        )
    })?;
    eprintln!(
        "fleetctl: reading {} through `ansible-inventory --list` ({why})",
        path.display()
    );
    let mut child = Command::new(program)
        .arg("-i")
        .arg(path)
        .arg("--list")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let mut stdout = child.stdout.take().ok_or("ansible-inventory: no stdout")?;
    let mut stderr = child.stderr.take().ok_or("ansible-inventory: no stderr")?;
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(64 << 10).read_to_end(&mut buf);
        buf
    });
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = (&mut stdout).take(MAX_OUTPUT + 1).read_to_end(&mut buf);
        r.map(|_| buf)
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "ansible-inventory -i {} --list did not finish within {} s",
                    path.display(),
                    TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting for ansible-inventory: {e}")),
        }
    };
    let out = out_reader
        .join()
        .map_err(|_| "ansible-inventory: reading its output failed".to_string())?
        .map_err(|e| format!("ansible-inventory: reading its output: {e}"))?;
    let err = err_reader.join().unwrap_or_default();
    if !status.success() {
        let err = String::from_utf8_lossy(&err);
        let err: String = err
            .trim()
            .chars()
            .flat_map(char::escape_debug)
            .take(2000)
            .collect();
        return Err(format!(
            "ansible-inventory -i {} --list failed ({status}): {err}",
            path.display()
        ));
    }
    if out.len() as u64 > MAX_OUTPUT {
        return Err(format!(
            "ansible-inventory printed more than {MAX_OUTPUT} bytes for {}",
            path.display()
        ));
    }
    let text =
        String::from_utf8(out).map_err(|_| "ansible-inventory printed non-UTF-8".to_string())?;
    parse(
        &text,
        &format!("{} (through ansible-inventory --list)", path.display()),
    )
}

/// `ansible-inventory` on PATH, if there is one.
pub(crate) fn which() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("ansible-inventory"))
        .find(|p| p.is_file())
}

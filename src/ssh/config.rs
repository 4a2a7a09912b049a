//! Where to connect and as whom: the inventory first, then the operator's
//! `~/.ssh/config` (as `ssh <address>` would read it), then defaults.
//!
//! Per field, first answer wins:
//! - user: node `user` → inventory `ssh.user` → `User` → `$USER`/`$LOGNAME`
//! - port: node `port` → inventory `ssh.port` → `Port` → 22
//! - identity files: node `identity_file` → inventory `ssh.identity_file` →
//!   `IdentityFile` (all of them) → those of `~/.ssh/id_ed25519`,
//!   `id_ecdsa`, `id_rsa` that exist
//! - host: `HostName` (with `%h`) when set, else the node's address. Host key
//!   checking uses this rewritten host, as OpenSSH does (it records
//!   `HostName`, not the alias).
//! - jump: inventory `ssh.jump` → `ProxyJump` (`none` disables; `a,b` goes
//!   through a, then b). A jump host is itself looked up in `~/.ssh/config`;
//!   its user comes from the jump spec → `User` → the local user (not the
//!   inventory's `ssh.user`, which is the nodes' login), its keys from
//!   `IdentityFile` → inventory `ssh.identity_file` → the defaults.
//!
//! - `HostKeyAlias`, `UserKnownHostsFile`, `GlobalKnownHostsFile`,
//!   `HashKnownHosts`: how the host key is looked up and recorded
//!   ([`HostKeyLookup`]). `UserKnownHostsFile` counts only while the
//!   inventory's `ssh.known_hosts` is the default `~/.ssh/known_hosts`: a file
//!   the inventory names wins, like every other inventory setting.
//! - `IdentitiesOnly`: only the identity files' keys are offered.
//! - `ProxyCommand` (`%h %p %r %n %%`): the connection runs over the
//!   command's stdin/stdout. An inventory `ssh.jump` replaces it, as `ssh -J`
//!   does; with both `ProxyJump` and `ProxyCommand` for a host the order in
//!   the file decides for ssh, which the parser does not keep, so that is refused.
//!   Every expanded value reaches `sh` as one word, or the command is refused
//!   (config/tokens.rs: CVE-2023-51385).
//! - Refused, naming the option and the host, because ignoring them would
//!   connect somewhere else or trust something else than ssh would:
//!   `KnownHostsCommand`, `ProxyUseFdpass yes`, and `Match` blocks in an
//!   `Include`d file (the parser does not understand them and would apply
//!   what follows to the Host block before). `Match` in ~/.ssh/config itself
//!   is evaluated per host as ssh does (config/matching.rs), `exec` refused.
//! - Everything else (StrictHostKeyChecking: the inventory's
//!   `host_key_checking` decides; CheckHostIP, IdentityAgent, ControlMaster…)
//!   is ignored. docs/ssh.md has the full list.
//!
//! Reading the environment and the file happens in [`resolve`] /
//! [`resolve_all`]; [`resolve_with`] is pure and unit-tested.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use ssh2_config::{HostParams, ParseRule, SshConfig};

mod matching;
pub use matching::ConfigText;

use super::{HostKeyLookup, Target};
use crate::inventory::{Inventory, Node};

mod tokens;
use tokens::{expand_command, expand_tokens};

mod jump_chain;
pub use jump_chain::parse_jump_spec;
use jump_chain::{jump_target, proxy_jump};

/// Default identity files, in the order they are tried.
const DEFAULT_IDENTITIES: [&str; 3] = ["id_ed25519", "id_ecdsa", "id_rsa"];

/// The largest ~/.ssh/config read (its `Match` lines are evaluated per host).
const MAX_CONFIG: u64 = 1 << 20;

/// What resolution needs from the operator's machine, read once at the edge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalEnv {
    /// `$USER`, else `$LOGNAME`.
    pub user: Option<String>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// The default identity files that exist, in order.
    pub default_identities: Vec<PathBuf>,
}

impl LocalEnv {
    pub fn detect() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let home = var("HOME").map(PathBuf::from);
        let default_identities = home
            .iter()
            .flat_map(|h| {
                DEFAULT_IDENTITIES
                    .iter()
                    .map(move |f| h.join(".ssh").join(f))
            })
            .filter(|p| p.is_file())
            .collect();
        LocalEnv {
            user: var("USER").or_else(|| var("LOGNAME")),
            home,
            default_identities,
        }
    }
}

/// Reads `$HOME/.ssh/config` if it exists. Unknown and unsupported options
/// are tolerated (real configs are full of them); a malformed file is an
/// error, as it is for ssh.
pub fn load_ssh_config(home: Option<&Path>) -> anyhow::Result<Option<ConfigText>> {
    let Some(home) = home else {
        return Ok(None);
    };
    let path = home.join(".ssh").join("config");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(BufReader::new(file), MAX_CONFIG + 1),
        &mut text,
    )
    .with_context(|| format!("reading {}", path.display()))?;
    if text.len() as u64 > MAX_CONFIG {
        bail!("{} is larger than {MAX_CONFIG} bytes", path.display());
    }
    ConfigText::new(text, home)
        .with_context(|| {
            format!(
                "reading {}: fix the file (ssh -G <host> shows how ssh reads it)",
                path.display()
            )
        })
        .map(Some)
}

/// Parses ssh_config text, expanding `~` against `home`.
pub fn parse_ssh_config(
    text: &mut impl std::io::BufRead,
    home: &Path,
) -> anyhow::Result<SshConfig> {
    SshConfig::default()
        .home_dir(home)
        .parse(
            text,
            ParseRule::ALLOW_UNKNOWN_FIELDS | ParseRule::ALLOW_UNSUPPORTED_FIELDS,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The connection target for `node`, reading `$HOME/.ssh/config` and the environment.
pub fn resolve(inv: &Inventory, node: &Node) -> anyhow::Result<Target> {
    let env = LocalEnv::detect();
    let ssh_config = load_ssh_config(env.home.as_deref())?;
    resolve_with(inv, node, ssh_config.as_ref(), &env)
}

/// Every node's target, in inventory order, reading the config once.
pub fn resolve_all(inv: &Inventory) -> anyhow::Result<Vec<Target>> {
    let env = LocalEnv::detect();
    let ssh_config = load_ssh_config(env.home.as_deref())?;
    inv.nodes
        .iter()
        .map(|node| resolve_with(inv, node, ssh_config.as_ref(), &env))
        .collect()
}

/// [`resolve`] without I/O: the parsed config and environment are given.
pub fn resolve_with(
    inv: &Inventory,
    node: &Node,
    ssh_config: Option<&ConfigText>,
    env: &LocalEnv,
) -> anyhow::Result<Target> {
    let given = node.user.as_deref().or(inv.ssh.user.as_deref());
    let params = query(ssh_config, &node.address, given, env)
        .with_context(|| format!("{}: ~/.ssh/config", node.name))?;
    let user = node
        .user
        .clone()
        .or_else(|| inv.ssh.user.clone())
        .or_else(|| params.user.clone())
        .or_else(|| env.user.clone())
        .with_context(|| {
            format!(
                "{}: no user to log in as: set `user:` for the node or under `ssh:` in the inventory (or User in ~/.ssh/config)",
                node.name
            )
        })?;
    let explicit_key = node
        .identity_file
        .as_ref()
        .or(inv.ssh.identity_file.as_ref())
        .map(|p| expand_tilde(p, env));
    let jump = match &inv.ssh.jump {
        Some(jump) => Some(jump_target(&node.name, jump, inv, ssh_config, env, 1)?),
        None => proxy_jump(&node.name, &params, inv, ssh_config, env, 1)?,
    };
    let mut target = Target {
        node: node.name.clone(),
        host: host_name(&params, &node.address),
        port: node.port.or(inv.ssh.port).or(params.port).unwrap_or(22),
        user,
        identity_files: match explicit_key {
            Some(key) => vec![key],
            None => identity_files(&params, env),
        },
        jump: jump.map(Box::new),
        ..Target::default()
    };
    // The inventory's jump replaces the node's own ProxyJump *and* ProxyCommand, as `ssh -J` does.
    let proxy = if inv.ssh.jump.is_some() {
        Proxy::Replaced
    } else {
        Proxy::FromConfig
    };
    honour_options(&mut target, &node.address, &params, inv, env, proxy)?;
    Ok(target)
}

/// Whether a target's own `ProxyCommand` applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proxy {
    FromConfig,
    /// The inventory's `ssh.jump` wins, as `ssh -J` does over ProxyCommand.
    Replaced,
}

/// The ssh_config options ssh2-config parses but does not interpret (it
/// keeps them raw in `unsupported_fields`, keyed in lower case): applied to
/// `target` or refused with the option and the host named.
fn honour_options(
    target: &mut Target,
    typed: &str,
    params: &HostParams,
    inv: &Inventory,
    env: &LocalEnv,
    proxy: Proxy,
) -> anyhow::Result<()> {
    let option = |name: &str| params.unsupported_fields.get(name).map(Vec::as_slice);
    let refuse = |option: &str, why: &str| {
        anyhow::anyhow!(
            "{}: ~/.ssh/config sets {option} for host {typed}, {why}",
            target.node
        )
    };
    if params
        .ignored_fields
        .keys()
        .any(|k| k.eq_ignore_ascii_case("match"))
    {
        return Err(refuse(
            "a Match block in a file it Includes",
            "and fleetctl evaluates Match in ~/.ssh/config itself only: the parser would apply the lines under it to the Host block before it.              Move that Match block into ~/.ssh/config, or rewrite it as a Host block",
        ));
    }
    if let Some(args) = option("knownhostscommand").filter(|a| !is_none(a)) {
        return Err(refuse(
            &format!("KnownHostsCommand {}", args.join(" ")),
            "which fleetctl does not run: record the host keys in a known_hosts file instead \
             (KnownHostsCommand none for this host, or remove the line)",
        ));
    }
    if let Some(args) = option("proxyusefdpass")
        && parse_bool(args) != Some(false)
    {
        return Err(refuse(
            &format!("ProxyUseFdpass {}", args.join(" ")),
            "and fleetctl cannot take a file descriptor from a ProxyCommand: remove it, the command's \
             stdin/stdout work as well",
        ));
    }

    let yes_no = |name: &str, label: &str| -> anyhow::Result<bool> {
        match option(name) {
            None => Ok(false),
            Some(args) => parse_bool(args).ok_or_else(|| {
                refuse(
                    &format!("{label} {}", args.join(" ")),
                    "which is not yes or no: fix that line",
                )
            }),
        }
    };
    target.identities_only = yes_no("identitiesonly", "IdentitiesOnly")?;
    target.certificate_files = params
        .certificate_file
        .iter()
        .map(|p| expand_tilde(p, env))
        .collect();
    let hash = yes_no("hashknownhosts", "HashKnownHosts")?;

    let alias = match option("hostkeyalias") {
        Some([alias]) if !alias.is_empty() => Some(alias.to_ascii_lowercase()),
        Some(args) => {
            return Err(refuse(
                &format!("HostKeyAlias {:?}", args.join(" ")),
                "which is not a single name: fix that line",
            ));
        }
        None => None,
    };

    let user_default = env
        .home
        .as_ref()
        .is_some_and(|home| inv.ssh.known_hosts == home.join(".ssh").join("known_hosts"));
    let files = |name: &str,
                 label: &str,
                 tokens: &[(char, &str)]|
     -> anyhow::Result<Option<Vec<PathBuf>>> {
        let Some(args) = option(name) else {
            return Ok(None);
        };
        if is_none(args) {
            return Ok(Some(Vec::new()));
        }
        args.iter()
            .map(|arg| {
                let arg = arg.trim_matches('"');
                let expanded = expand_tokens(arg, tokens).map_err(|why| {
                    refuse(
                        &format!("{label} {arg}"),
                        &format!("{why}: spell the path out"),
                    )
                })?;
                Ok(expand_tilde(Path::new(&expanded), env))
            })
            .collect::<anyhow::Result<Vec<_>>>()
            .map(Some)
    };
    let port = target.port.to_string();
    let home = env
        .home
        .as_ref()
        .map(|h| h.display().to_string())
        .unwrap_or_default();
    let local_user = env.user.clone().unwrap_or_default();
    let user_file_tokens = [
        ('d', home.as_str()),
        ('h', target.host.as_str()),
        ('k', alias.as_deref().unwrap_or(typed)),
        ('n', typed),
        ('p', port.as_str()),
        ('r', target.user.as_str()),
        ('u', local_user.as_str()),
    ];
    let user_files = if user_default {
        files(
            "userknownhostsfile",
            "UserKnownHostsFile",
            &user_file_tokens,
        )?
    } else {
        None
    };
    let global_files = files("globalknownhostsfile", "GlobalKnownHostsFile", &[])?;
    target.host_keys = HostKeyLookup {
        alias,
        user_files,
        global_files,
        hash,
    };

    let command = option("proxycommand").filter(|a| !a.is_empty() && !is_none(a));
    target.proxy_command = match (command, proxy) {
        (None, _) | (Some(_), Proxy::Replaced) => None,
        (Some(args), Proxy::FromConfig) => {
            let command = args.join(" ");
            let jump = params.proxy_jump.iter().flatten().any(|j| {
                !j.split(',')
                    .all(|h| h.trim().is_empty() || h.trim().eq_ignore_ascii_case("none"))
            });
            if jump {
                return Err(refuse(
                    "both ProxyJump and ProxyCommand",
                    "and ssh uses whichever comes first in the file, which fleetctl cannot tell: keep one of them",
                ));
            }
            let tokens = [
                ('h', target.host.as_str()),
                ('n', typed),
                ('p', port.as_str()),
                ('r', target.user.as_str()),
            ];
            Some(
                expand_command(&command, &tokens)
                    .map_err(|why| refuse(&format!("ProxyCommand {command}"), &why))?,
            )
        }
    };
    Ok(())
}

/// `none` (any case), which turns an option off.
fn is_none(args: &[String]) -> bool {
    matches!(args, [one] if one.eq_ignore_ascii_case("none"))
}

/// yes/true or no/false, as ssh reads booleans.
fn parse_bool(args: &[String]) -> Option<bool> {
    match args {
        [one] if one.eq_ignore_ascii_case("yes") || one.eq_ignore_ascii_case("true") => Some(true),
        [one] if one.eq_ignore_ascii_case("no") || one.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

fn query(
    ssh_config: Option<&ConfigText>,
    host: &str,
    given_user: Option<&str>,
    env: &LocalEnv,
) -> anyhow::Result<HostParams> {
    match ssh_config {
        Some(cfg) => cfg.query(host, given_user, env.user.as_deref()),
        None => Ok(SshConfig::default().query(host)),
    }
}

/// `HostName`, with `%h` (the name typed) and `%%` expanded.
fn host_name(params: &HostParams, address: &str) -> String {
    match &params.host_name {
        Some(name) => name.replace("%h", address).replace("%%", "%"),
        None => address.to_string(),
    }
}

fn identity_files(params: &HostParams, env: &LocalEnv) -> Vec<PathBuf> {
    match &params.identity_file {
        Some(files) if !files.is_empty() => files.iter().map(|p| expand_tilde(p, env)).collect(),
        _ => env.default_identities.clone(),
    }
}

fn expand_tilde(path: &Path, env: &LocalEnv) -> PathBuf {
    match (path.strip_prefix("~"), &env.home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
pub(crate) mod tests;

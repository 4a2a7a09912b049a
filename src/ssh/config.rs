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
//!   `KnownHostsCommand`, `ProxyUseFdpass yes`, and `Match` blocks (the
//!   parser does not understand them and would apply what follows to the
//!   Host block before).
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

use super::{HostKeyLookup, Target};
use crate::inventory::{Inventory, Jump, Node};

mod tokens;
use tokens::{expand_command, expand_tokens};

/// Default identity files, in the order they are tried.
const DEFAULT_IDENTITIES: [&str; 3] = ["id_ed25519", "id_ecdsa", "id_rsa"];

/// `a,b,c` chains deeper than this are refused (and catch ProxyJump loops).
const MAX_JUMPS: usize = 4;

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
pub fn load_ssh_config(home: Option<&Path>) -> anyhow::Result<Option<SshConfig>> {
    let Some(home) = home else {
        return Ok(None);
    };
    let path = home.join(".ssh").join("config");
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    parse_ssh_config(&mut BufReader::new(file), home)
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
    ssh_config: Option<&SshConfig>,
    env: &LocalEnv,
) -> anyhow::Result<Target> {
    let params = query(ssh_config, &node.address);
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
            "a Match block after a Host block",
            "and fleetctl cannot evaluate Match: the lines under it would be applied to that Host block's hosts.              Rewrite that Match block as a Host block (or move it after every Host block that matches this host)",
        ));
    }
    if let Some(args) = option("knownhostscommand").filter(|a| !is_none(a)) {
        return Err(refuse(
            &format!("KnownHostsCommand {}", args.join(" ")),
            "which fleetctl does not run: record the host keys in a known_hosts file instead              (KnownHostsCommand none for this host, or remove the line)",
        ));
    }
    if let Some(args) = option("proxyusefdpass")
        && parse_bool(args) != Some(false)
    {
        return Err(refuse(
            &format!("ProxyUseFdpass {}", args.join(" ")),
            "and fleetctl cannot take a file descriptor from a ProxyCommand: remove it, the command's              stdin/stdout work as well",
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

fn query(ssh_config: Option<&SshConfig>, host: &str) -> HostParams {
    match ssh_config {
        Some(cfg) => cfg.query(host),
        None => SshConfig::default().query(host),
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

/// The jump chain from a `ProxyJump` value, last hop first.
fn proxy_jump(
    node: &str,
    params: &HostParams,
    inv: &Inventory,
    ssh_config: Option<&SshConfig>,
    env: &LocalEnv,
    depth: usize,
) -> anyhow::Result<Option<Target>> {
    let hops: Vec<&str> = params
        .proxy_jump
        .iter()
        .flatten()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .collect();
    if hops.is_empty() || hops.iter().any(|h| h.eq_ignore_ascii_case("none")) {
        return Ok(None);
    }
    if depth + hops.len() > MAX_JUMPS + 1 {
        bail!(
            "{node}: ProxyJump in ~/.ssh/config goes through more than {MAX_JUMPS} jump hosts (or loops); fix the ProxyJump lines"
        );
    }
    let mut previous: Option<Target> = None;
    for (i, hop) in hops.iter().enumerate() {
        let spec = parse_jump_spec(hop)
            .with_context(|| format!("{node}: ProxyJump {hop:?} in ~/.ssh/config"))?;
        let mut target = jump_target(node, &spec, inv, ssh_config, env, depth + i)?;
        // A hop's own ProxyJump (and ProxyCommand) is replaced by the chain's previous hop, as ssh -J does.
        if i > 0 {
            target.jump = previous.take().map(Box::new);
            target.proxy_command = None;
        }
        previous = Some(target);
    }
    Ok(previous)
}

fn jump_target(
    node: &str,
    jump: &Jump,
    inv: &Inventory,
    ssh_config: Option<&SshConfig>,
    env: &LocalEnv,
    depth: usize,
) -> anyhow::Result<Target> {
    if depth > MAX_JUMPS {
        bail!(
            "{node}: the jump host chain is longer than {MAX_JUMPS} (is there a ProxyJump loop in ~/.ssh/config?)"
        );
    }
    let params = query(ssh_config, &jump.host);
    let user = jump
        .user
        .clone()
        .or_else(|| params.user.clone())
        .or_else(|| env.user.clone())
        .with_context(|| {
            format!(
                "{node}: no user for jump host {}: write it as user@{} in the inventory",
                jump.host, jump.host
            )
        })?;
    let identity_files = match (&params.identity_file, &inv.ssh.identity_file) {
        (Some(files), _) if !files.is_empty() => {
            files.iter().map(|p| expand_tilde(p, env)).collect()
        }
        (_, Some(key)) => vec![expand_tilde(key, env)],
        _ => env.default_identities.clone(),
    };
    let next = proxy_jump(node, &params, inv, ssh_config, env, depth + 1)?;
    let mut target = Target {
        node: format!("jump host {}", jump.host),
        host: host_name(&params, &jump.host),
        port: jump.port.or(params.port).unwrap_or(22),
        user,
        identity_files,
        jump: next.map(Box::new),
        ..Target::default()
    };
    honour_options(
        &mut target,
        &jump.host,
        &params,
        inv,
        env,
        Proxy::FromConfig,
    )?;
    Ok(target)
}

/// `[user@]host[:port]` or `ssh://[user@]host[:port]`, with `[v6]:port`.
pub fn parse_jump_spec(spec: &str) -> anyhow::Result<Jump> {
    let rest = spec.strip_prefix("ssh://").unwrap_or(spec);
    let (user, hostport) = match rest.rsplit_once('@') {
        Some((u, h)) if !u.is_empty() => (Some(u.to_string()), h),
        Some(_) => bail!("empty user in jump host {spec:?}"),
        None => (None, rest),
    };
    let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
        let (host, after) = inner
            .split_once(']')
            .with_context(|| format!("missing ']' in jump host {spec:?}"))?;
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => bail!("unexpected {after:?} after ']' in jump host {spec:?}"),
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        bail!("empty host in jump host {spec:?}");
    }
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .with_context(|| format!("bad port {p:?} in jump host {spec:?}"))
        })
        .transpose()?;
    Ok(Jump {
        user,
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::inventory::{HostKeyChecking, Role, SshDefaults};
    use crate::version::Minor;

    pub(crate) fn env() -> LocalEnv {
        LocalEnv {
            user: Some("op".into()),
            home: Some("/home/op".into()),
            default_identities: vec!["/home/op/.ssh/id_ed25519".into()],
        }
    }

    pub(crate) fn node(name: &str, address: &str) -> Node {
        Node {
            name: name.into(),
            address: address.into(),
            role: Role::Worker,
            port: None,
            user: None,
            identity_file: None,
            zone: None,
        }
    }

    pub(crate) fn inventory(nodes: Vec<Node>) -> Inventory {
        Inventory {
            path: "/fleet/inventory.yaml".into(),
            kubernetes_version: "v1.37".parse::<Minor>().unwrap(),
            containerd_version: None,
            hub: crate::inventory::DEFAULT_HUB.into(),
            ssh: SshDefaults {
                user: None,
                port: None,
                identity_file: None,
                known_hosts: "/home/op/.ssh/known_hosts".into(),
                host_key_checking: HostKeyChecking::Strict,
                jump: None,
            },
            health_checks: vec![],
            kured: None,
            nodes,
        }
    }

    fn config(text: &str) -> SshConfig {
        parse_ssh_config(&mut text.as_bytes(), Path::new("/home/op")).unwrap()
    }

    const CONFIG: &str = "\
Host w1
  HostName 10.1.0.11
  User cfguser
  Port 2201
  IdentityFile ~/.ssh/fleet_key
Host *.lan
  HostName %h.example.com
  ProxyJump bastion
Host bastion
  HostName 192.0.2.1
  User jumper
  Port 2022
Host w9
  ProxyJump ops@hop1:2200,hop2
Host hop2
  User h2
Host loop1
  ProxyJump loop2
Host loop2
  ProxyJump loop1
Host direct
  ProxyJump none
Host *
  ServerAliveInterval 30
  SomeUnknownOption yes
";

    #[test]
    fn defaults_without_any_config() {
        let inv = inventory(vec![node("w1", "10.0.0.1")]);
        let t = resolve_with(&inv, &inv.nodes[0], None, &env()).unwrap();
        assert_eq!(
            t,
            Target {
                node: "w1".into(),
                host: "10.0.0.1".into(),
                port: 22,
                user: "op".into(),
                identity_files: vec!["/home/op/.ssh/id_ed25519".into()],
                jump: None,
                ..Target::default()
            }
        );
    }

    #[test]
    fn ssh_config_fills_what_the_inventory_leaves_out() {
        let inv = inventory(vec![node("worker-1", "w1")]);
        let cfg = config(CONFIG);
        let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        assert_eq!(t.node, "worker-1");
        assert_eq!(t.host, "10.1.0.11", "HostName rewrites the address");
        assert_eq!(t.user, "cfguser");
        assert_eq!(t.port, 2201);
        assert_eq!(
            t.identity_files,
            vec![PathBuf::from("/home/op/.ssh/fleet_key")]
        );
        assert_eq!(t.jump, None);
    }

    #[test]
    fn inventory_defaults_beat_ssh_config_and_node_values_beat_both() {
        let mut inv = inventory(vec![node("a", "w1"), node("b", "w1")]);
        inv.ssh.user = Some("core".into());
        inv.ssh.port = Some(2000);
        inv.ssh.identity_file = Some("~/.ssh/inv_key".into());
        inv.nodes[1].user = Some("root".into());
        inv.nodes[1].port = Some(3000);
        inv.nodes[1].identity_file = Some("/keys/b".into());
        let cfg = config(CONFIG);

        let a = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        assert_eq!((a.user.as_str(), a.port), ("core", 2000));
        assert_eq!(
            a.identity_files,
            vec![PathBuf::from("/home/op/.ssh/inv_key")]
        );
        assert_eq!(a.host, "10.1.0.11", "HostName still applies");

        let b = resolve_with(&inv, &inv.nodes[1], Some(&cfg), &env()).unwrap();
        assert_eq!((b.user.as_str(), b.port), ("root", 3000));
        assert_eq!(b.identity_files, vec![PathBuf::from("/keys/b")]);
    }

    #[test]
    fn proxy_jump_from_config_resolves_the_bastion_through_config_too() {
        let inv = inventory(vec![node("cp-1", "cp1.lan")]);
        let cfg = config(CONFIG);
        let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        assert_eq!(t.host, "cp1.lan.example.com", "%h expanded");
        let jump = t.jump.expect("ProxyJump bastion");
        assert_eq!(jump.host, "192.0.2.1");
        assert_eq!(jump.user, "jumper");
        assert_eq!(jump.port, 2022);
        assert_eq!(jump.identity_files, env().default_identities);
        assert_eq!(jump.jump, None);
    }

    #[test]
    fn proxy_jump_chain_goes_through_hops_in_order() {
        let inv = inventory(vec![node("w9", "w9")]);
        let cfg = config(CONFIG);
        let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        // Connect order: hop1, then hop2, then the node; the target's jump is the last hop.
        let last = t.jump.unwrap();
        assert_eq!(
            (last.host.as_str(), last.user.as_str(), last.port),
            ("hop2", "h2", 22)
        );
        let first = last.jump.unwrap();
        assert_eq!(
            (first.host.as_str(), first.user.as_str(), first.port),
            ("hop1", "ops", 2200)
        );
        assert!(first.jump.is_none());
    }

    #[test]
    fn proxy_jump_loop_is_an_error_and_none_disables() {
        let inv = inventory(vec![node("x", "loop1"), node("y", "direct")]);
        let cfg = config(CONFIG);
        let err = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap_err();
        assert!(format!("{err:#}").contains("loop"), "{err:#}");
        let t = resolve_with(&inv, &inv.nodes[1], Some(&cfg), &env()).unwrap();
        assert!(t.jump.is_none());
    }

    #[test]
    fn inventory_jump_wins_and_uses_the_inventory_key() {
        let mut inv = inventory(vec![node("cp-1", "cp1.lan")]);
        inv.ssh.user = Some("core".into());
        inv.ssh.identity_file = Some("/keys/fleet".into());
        inv.ssh.jump = Some(Jump {
            user: None,
            host: "gw".into(),
            port: Some(2222),
        });
        let cfg = config(CONFIG);
        let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        let jump = t.jump.unwrap();
        assert_eq!(jump.host, "gw");
        assert_eq!(jump.port, 2222);
        assert_eq!(
            jump.user, "op",
            "the nodes' `core` does not apply to the bastion"
        );
        assert_eq!(jump.identity_files, vec![PathBuf::from("/keys/fleet")]);
        assert_eq!(jump.node, "jump host gw");
    }

    #[test]
    fn no_user_anywhere_is_a_clear_error() {
        let inv = inventory(vec![node("w1", "10.0.0.1")]);
        let env = LocalEnv {
            user: None,
            ..env()
        };
        let err = resolve_with(&inv, &inv.nodes[0], None, &env).unwrap_err();
        assert!(
            err.to_string().starts_with("w1: no user to log in as"),
            "{err}"
        );
    }

    #[test]
    fn jump_specs() {
        let j = |s: &str| parse_jump_spec(s).unwrap();
        assert_eq!(
            j("gw"),
            Jump {
                user: None,
                host: "gw".into(),
                port: None
            }
        );
        assert_eq!(
            j("ops@gw:2200"),
            Jump {
                user: Some("ops".into()),
                host: "gw".into(),
                port: Some(2200)
            }
        );
        assert_eq!(
            j("ssh://ops@[2001:db8::1]:22"),
            Jump {
                user: Some("ops".into()),
                host: "2001:db8::1".into(),
                port: Some(22)
            }
        );
        assert!(parse_jump_spec("gw:notaport").is_err());
        assert!(parse_jump_spec("@gw").is_err());
        assert!(parse_jump_spec("[::1").is_err());
    }

    #[test]
    fn config_file_is_read_from_home_and_missing_is_fine() {
        let home = tempfile::tempdir().unwrap();
        assert!(load_ssh_config(Some(home.path())).unwrap().is_none());
        std::fs::create_dir(home.path().join(".ssh")).unwrap();
        std::fs::write(
            home.path().join(".ssh/config"),
            "Host w1\n  User fromfile\n  IdentityFile ~/k\n",
        )
        .unwrap();
        let cfg = load_ssh_config(Some(home.path())).unwrap().unwrap();
        let params = cfg.query("w1");
        assert_eq!(params.user.as_deref(), Some("fromfile"));
        assert_eq!(params.identity_file, Some(vec![home.path().join("k")]));
    }

    const OPTIONS: &str = "\
Host aliased
  HostName 10.2.0.1
  Port 2222
  HostKeyAlias CP-1.Fleet
  IdentitiesOnly yes
  HashKnownHosts yes
  UserKnownHostsFile ~/.ssh/fleet_hosts /keys/%r@%h:%p-%k-%n-%u-%d-%%
  GlobalKnownHostsFile /etc/fleet/known_hosts
Host proxied
  HostName 10.2.0.2
  User core
  ProxyCommand ssh -W %h:%p ops@gw.example -o 'Foo=%n' %%
Host proxied-none
  ProxyCommand none
Host nofiles
  UserKnownHostsFile none
  GlobalKnownHostsFile none
Host both
  ProxyJump gw
  ProxyCommand nc %h %p
Host badbool
  IdentitiesOnly maybe
Host badtoken
  ProxyCommand nc %h %C
Host envvar
  UserKnownHostsFile ${HOME}/kh
Host cmd
  KnownHostsCommand /usr/bin/lookup %H
Host fdpass
  ProxyCommand nc %h %p
  ProxyUseFdpass yes
Host gw
  ProxyCommand connect-gw %h %p
Host matched
  User m
Match host other
  User someone-else
";

    fn resolve_in(config_text: &str, address: &str) -> anyhow::Result<Target> {
        let inv = inventory(vec![node("n", address)]);
        let cfg = config(config_text);
        resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env())
    }

    #[test]
    fn host_key_options_identities_only_and_their_tokens() {
        let t = resolve_in(OPTIONS, "aliased").unwrap();
        assert!(t.identities_only);
        assert_eq!(
            t.host_keys,
            HostKeyLookup {
                alias: Some("cp-1.fleet".into()),
                user_files: Some(vec![
                    "/home/op/.ssh/fleet_hosts".into(),
                    "/keys/op@10.2.0.1:2222-cp-1.fleet-aliased-op-/home/op-%".into(),
                ]),
                global_files: Some(vec!["/etc/fleet/known_hosts".into()]),
                hash: true,
            }
        );
        assert_eq!(t.proxy_command, None);

        let t = resolve_in(OPTIONS, "nofiles").unwrap();
        assert_eq!(t.host_keys.user_files, Some(vec![]));
        assert_eq!(t.host_keys.global_files, Some(vec![]));
        assert!(!t.identities_only && !t.host_keys.hash);

        let plain = resolve_in(OPTIONS, "elsewhere").unwrap();
        assert_eq!(plain.host_keys, HostKeyLookup::default());
    }

    #[test]
    fn a_known_hosts_file_named_by_the_inventory_wins_over_user_known_hosts_file() {
        let mut inv = inventory(vec![node("n", "aliased")]);
        inv.ssh.known_hosts = "/fleet/known_hosts".into();
        let cfg = config(OPTIONS);
        let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        assert_eq!(t.host_keys.user_files, None);
        // The global files and the alias still come from ~/.ssh/config.
        assert_eq!(
            t.host_keys.global_files,
            Some(vec!["/etc/fleet/known_hosts".into()])
        );
        assert_eq!(t.host_keys.alias.as_deref(), Some("cp-1.fleet"));
    }

    #[test]
    fn proxy_command_tokens_are_expanded_and_none_disables_it() {
        let t = resolve_in(OPTIONS, "proxied").unwrap();
        assert_eq!(
            t.proxy_command.as_deref(),
            Some("ssh -W 10.2.0.2:22 ops@gw.example -o 'Foo=proxied' %")
        );
        assert_eq!(t.jump, None);
        assert_eq!(
            resolve_in(OPTIONS, "proxied-none").unwrap().proxy_command,
            None
        );
    }

    #[test]
    fn an_inventory_jump_replaces_proxy_command_but_a_bastion_keeps_its_own() {
        let mut inv = inventory(vec![node("n", "proxied")]);
        inv.ssh.jump = Some(Jump {
            user: None,
            host: "gw".into(),
            port: None,
        });
        let cfg = config(OPTIONS);
        let t = resolve_with(&inv, &inv.nodes[0], Some(&cfg), &env()).unwrap();
        assert_eq!(t.proxy_command, None, "ssh -J replaces ProxyCommand");
        let gw = t.jump.unwrap();
        assert_eq!(gw.proxy_command.as_deref(), Some("connect-gw gw 22"));
    }

    #[test]
    fn options_that_cannot_be_honoured_are_refused_naming_option_and_host() {
        let cases = [
            (
                "both",
                "n: ~/.ssh/config sets both ProxyJump and ProxyCommand for host both",
            ),
            (
                "badbool",
                "IdentitiesOnly maybe for host badbool, which is not yes or no",
            ),
            (
                "badtoken",
                "ProxyCommand nc %h %C for host badtoken, it uses %C",
            ),
            (
                "envvar",
                "UserKnownHostsFile ${HOME}/kh for host envvar, it uses an environment variable",
            ),
            ("cmd", "KnownHostsCommand /usr/bin/lookup %H for host cmd"),
            ("fdpass", "ProxyUseFdpass yes for host fdpass"),
            (
                "matched",
                "a Match block after a Host block for host matched",
            ),
        ];
        for (host, expected) in cases {
            let err = resolve_in(OPTIONS, host).unwrap_err();
            let msg = format!("{err:#}");
            assert!(msg.contains(expected), "{host}: {msg}");
            assert!(msg.starts_with("n: "), "{host}: {msg}");
        }
    }

    #[test]
    fn a_proxy_command_never_lets_sh_read_an_address() {
        // The inventory refuses such an address; resolution quotes it anyway.
        let cfg = "Host *\n  ProxyCommand nc %h %p\n";
        let t = resolve_in(cfg, "$(touch /tmp/pwned)").unwrap();
        assert_eq!(
            t.proxy_command.as_deref(),
            Some("nc '$(touch /tmp/pwned)' 22")
        );
        let cfg = "Host *\n  ProxyCommand sh -c 'nc %h %p'\n";
        let err = resolve_in(cfg, "a;b").unwrap_err();
        assert!(
            format!("{err:#}").contains("inside its own quotes"),
            "{err:#}"
        );
    }
}

//! The jump hosts in front of a node: a `ProxyJump` chain or the
//! inventory's `ssh.jump`, each hop looked up in `~/.ssh/config` in turn,
//! bounded in length. Its own file because a chain and its spec's grammar are
//! one concept, apart from the options of a single host.

use anyhow::{Context, bail};
use ssh2_config::HostParams;

use super::{ConfigText, LocalEnv, Proxy, expand_tilde, honour_options, host_name, query};
use crate::inventory::{Inventory, Jump};
use crate::ssh::Target;

/// `a,b,c` chains deeper than this are refused (and catch ProxyJump loops).
const MAX_JUMPS: usize = 4;

/// The jump chain from a `ProxyJump` value, last hop first.
pub(super) fn proxy_jump(
    node: &str,
    params: &HostParams,
    inv: &Inventory,
    ssh_config: Option<&ConfigText>,
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

pub(super) fn jump_target(
    node: &str,
    jump: &Jump,
    inv: &Inventory,
    ssh_config: Option<&ConfigText>,
    env: &LocalEnv,
    depth: usize,
) -> anyhow::Result<Target> {
    if depth > MAX_JUMPS {
        bail!(
            "{node}: the jump host chain is longer than {MAX_JUMPS} (is there a ProxyJump loop in ~/.ssh/config?)"
        );
    }
    let params = query(ssh_config, &jump.host, jump.user.as_deref(), env)
        .with_context(|| format!("{node}: ~/.ssh/config, for jump host {}", jump.host))?;
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

//! Checks on single inventory values: is this a valid node name, a usable
//! address, a hub URL, a bastion? Each returns the normalised value or a
//! message saying what is wrong and what to write instead; the loader adds
//! the file, line and column.

use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

use super::{HostKeyChecking, Jump, Role};

/// Kubernetes' own limit for a DNS-1123 subdomain (a node name).
const MAX_NODE_NAME: usize = 253;

/// A node name must be what Kubernetes calls the node: an RFC 1123
/// subdomain, or `kubectl` and fleetctl will never agree on which node is which.
pub(super) fn node_name(name: &str) -> Result<(), String> {
    let hint = "use lowercase letters, digits, '-' and '.', starting and ending each \
                dot-separated part with a letter or digit (RFC 1123)";
    if name.is_empty() {
        return Err("node name is empty".to_string());
    }
    if name.len() > MAX_NODE_NAME {
        return Err(format!(
            "node name `{}…` is {} characters long; Kubernetes allows at most {MAX_NODE_NAME}",
            prefix(name, 20),
            name.len()
        ));
    }
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        let edge = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(&first), Some(&last)) => {
                edge(first) && edge(last) && bytes.iter().all(|&b| edge(b) || b == b'-')
            }
            _ => false,
        }
    };
    if name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!(
            "node name `{name}` is not a valid Kubernetes node name: {hint}"
        ))
    }
}

/// An SSH address: a host name or an IP address, without user or port
/// (those have their own keys). IPv6 may be written with or without brackets.
///
/// A name is letters, digits, `.`, `_` and `-`, not starting with `-` or
/// `.`: the address reaches a `ProxyCommand` that `sh` runs on the laptop
/// (`%h`, `%n`), and a name with `$(…)` or `;` in it would run a command
/// there. OpenSSH ≥ 9.6 refuses most shell metacharacters in names given on
/// its command line for the same reason (CVE-2023-51385;
/// `ssh_valid_hostname` in openssh-portable's readconf.c); a DNS name or an
/// IPv4 address never needs more.
pub(super) fn address(address: &str) -> Result<String, String> {
    if address.trim().is_empty() {
        return Err("address is empty".to_string());
    }
    if address.chars().any(char::is_whitespace) {
        return Err(format!("address `{address}` contains whitespace"));
    }
    if address.contains('@') {
        return Err(format!(
            "address `{address}` contains '@': put the user in `user:`, not in the address"
        ));
    }
    let unbracketed = address
        .strip_prefix('[')
        .and_then(|a| a.strip_suffix(']'))
        .unwrap_or(address);
    if unbracketed.parse::<Ipv6Addr>().is_ok() {
        return Ok(unbracketed.to_string());
    }
    if address.contains(':') {
        return Err(format!(
            "address `{address}` contains ':': put the port in `port:`, not in the address"
        ));
    }
    host_name("address", address)?;
    Ok(address.to_string())
}

/// Letters, digits, `.`, `_`, `-`; not starting with `-` (an option to ssh
/// or to a ProxyCommand) or `.`.
fn host_name(what: &str, name: &str) -> Result<(), String> {
    let hint = "a host name or IP address is letters, digits, '.', '_' and '-' \
                (fleetctl, like OpenSSH 9.6, refuses shell metacharacters: they would reach \
                the ProxyCommand's shell on this machine)";
    if name.starts_with('-') || name.starts_with('.') {
        return Err(format!(
            "{what} `{name}` starts with '{}': {hint}",
            &name[..1]
        ));
    }
    portable_chars(what, name, hint)
}

/// Only letters, digits, `.`, `_` and `-` (a host name, a user name): else
/// `{what} `{name}` contains {the first other character}: {hint}`.
fn portable_chars(what: &str, name: &str, hint: &str) -> Result<(), String> {
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c)))
    {
        Some(bad) => Err(format!(
            "{what} `{}` contains {}: {hint}",
            name.escape_default(),
            describe(bad)
        )),
        None => Ok(()),
    }
}

/// A character named for an error message, control characters escaped.
fn describe(c: char) -> String {
    if c.is_control() {
        format!("the control character {}", c.escape_default())
    } else {
        format!("'{c}'")
    }
}

/// A login name for SSH: letters, digits, `.`, `_`, `-`, not starting with
/// `-` (POSIX's portable user names; `%r` reaches the ProxyCommand's shell,
/// see [`address`] and `ssh_valid_ruser` in openssh-portable's readconf.c).
pub(super) fn user(user: &str) -> Result<String, String> {
    if user.is_empty() {
        return Err("user is empty: remove the key to use the default".to_string());
    }
    let hint = "an SSH user name is letters, digits, '.', '_' and '-', not starting with '-'";
    if user.starts_with('-') {
        return Err(format!("user `{user}` starts with '-': {hint}"));
    }
    portable_chars("user", user, hint)?;
    Ok(user.to_string())
}

/// A zone is a label value (`topology.kubernetes.io/zone` is the usual
/// source): at most 63 characters of letters, digits, `-`, `_` and `.`.
pub(super) fn zone(zone: &str) -> Result<String, String> {
    let ok = !zone.is_empty()
        && zone.len() <= 63
        && zone
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(zone.to_string())
    } else {
        Err(format!(
            "zone `{zone}` is not a label value: 1 to 63 letters, digits, '-', '_' or '.'"
        ))
    }
}

/// Port 0 parses as a `u16` but can never be connected to.
pub(super) fn port(port: u16) -> Result<u16, String> {
    if port == 0 {
        Err("port 0 is not a usable SSH port: expected 1 to 65535".to_string())
    } else {
        Ok(port)
    }
}

pub(super) fn role(role: &str) -> Result<Role, String> {
    match role {
        "control-plane" => Ok(Role::ControlPlane),
        "worker" => Ok(Role::Worker),
        other => Err(format!(
            "unknown role `{other}`, expected `control-plane` or `worker`"
        )),
    }
}

pub(super) fn host_key_checking(value: &str) -> Result<HostKeyChecking, String> {
    match value {
        "strict" => Ok(HostKeyChecking::Strict),
        "accept-new" => Ok(HostKeyChecking::AcceptNew),
        "off" => Ok(HostKeyChecking::Off),
        other => Err(format!(
            "host_key_checking `{other}` is unknown, expected `strict`, `accept-new` or `off`"
        )),
    }
}

/// The extension hub: an http(s) URL, stored without trailing slashes so
/// `<hub>/<extension>/` is always well formed.
pub(super) fn hub(url: &str) -> Result<String, String> {
    let trimmed = url.trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("https://")
        .or_else(|| trimmed.strip_prefix("http://"));
    let Some(rest) = rest else {
        return Err(format!(
            "hub `{url}` is not an http(s) URL: expected e.g. {}",
            super::DEFAULT_HUB
        ));
    };
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        return Err(format!("hub `{url}` has no host name"));
    }
    // Refused rather than hidden: the hub URL is written into every node's
    // /etc/sysupdate.*.d/*.conf (readable there), the saved plan and the
    // journal, so a credential in it would be copied everywhere.
    if host.contains('@') {
        return Err(format!(
            "hub `{url}` carries credentials (user:password@): they would be copied into every \
             node's sysupdate config, the plan and the journal. Serve the hub without them, e.g. \
             a mirror the nodes may read"
        ));
    }
    if trimmed.contains('?') || trimmed.contains('#') {
        return Err(format!(
            "hub `{url}` has a query or fragment (`?`, `#`): fleetctl appends \
             `/<extension>/SHA256SUMS` to the hub URL, and a query is where access tokens go, which \
             would be copied into every node's sysupdate config. Use a plain URL"
        ));
    }
    if trimmed.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("hub `{url}` contains whitespace"));
    }
    Ok(trimmed.to_string())
}

/// A bastion written `user@host:port`; user and port are optional, an IPv6
/// host needs brackets when a port follows. Empty means "no bastion".
pub(super) fn jump(value: &str) -> Result<Option<Jump>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let bad = |why: &str| format!("jump `{value}` {why}: expected user@host:port");
    let (user, hostport) = match value.rsplit_once('@') {
        Some((user, rest)) => (Some(self::user(user).map_err(|e| bad(&e))?), rest),
        None => (None, value),
    };
    let (host, port) = split_host_port(hostport).map_err(|e| bad(&e))?;
    if host.is_empty() {
        return Err(bad("has no host"));
    }
    if host.parse::<Ipv6Addr>().is_err() {
        host_name("host", host).map_err(|e| bad(&e))?;
    }
    let port = match port {
        Some(p) => {
            let n = p
                .parse::<u16>()
                .map_err(|_| bad(&format!("has port `{p}`, which is not 1 to 65535")))?;
            Some(self::port(n).map_err(|e| bad(&e))?)
        }
        None => None,
    };
    Ok(Some(Jump {
        user,
        host: host.to_string(),
        port,
    }))
}

fn split_host_port(hostport: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = hostport.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "has an unclosed '['".to_string())?;
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err(format!("has `{after}` after the bracketed host")),
            },
        };
    }
    match hostport.matches(':').count() {
        0 => Ok((hostport, None)),
        // An unbracketed IPv6 address: all colons belong to the host.
        n if n > 1 => Ok((hostport, None)),
        _ => match hostport.split_once(':') {
            Some((host, port)) => Ok((host, Some(port))),
            None => Ok((hostport, None)),
        },
    }
}

/// Resolves a path from the inventory: `~` is the operator's home, and a
/// relative path is relative to the inventory file, not to wherever
/// fleetctl happens to be run from.
pub(super) fn local_path(raw: &str, base: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    if raw.is_empty() {
        return Err("path is empty: remove the key to use the default".to_string());
    }
    if raw == "~" || raw.starts_with("~/") {
        let home = home.ok_or_else(|| {
            format!("`{raw}` starts with ~ but HOME is not set: write the full path")
        })?;
        let rest = raw.trim_start_matches('~').trim_start_matches('/');
        return Ok(if rest.is_empty() {
            home.to_path_buf()
        } else {
            home.join(rest)
        });
    }
    if raw.starts_with('~') {
        return Err(format!(
            "`{raw}`: ~user paths are not supported: write the full path"
        ));
    }
    let path = Path::new(raw);
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    })
}

/// The first `n` characters, for quoting very long values.
fn prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod validate_proptests;

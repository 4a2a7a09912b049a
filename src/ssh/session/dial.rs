//! Reaching a node: TCP, a jump chain or a ProxyCommand, each hop's host
//! key checked against known_hosts, then authentication. Every wait is
//! bounded; sshd's MaxStartups drops are told apart and retried
//! (`crate::ssh::handshake`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow};
use russh::client::{self, Handle};
use russh::keys::Algorithm;
use russh::{Preferred, SshId};

use crate::ssh::known_hosts::{self, Unreadable};
use crate::ssh::proxy::{self};
use crate::ssh::{Options, Target, auth, handshake};

use super::{ConnectExtras, Session};

mod host_key_check;
pub(crate) use host_key_check::Client;
use host_key_check::{HostKeyVerdict, Lookup, take};

/// Connects to `target` (through its jump hosts or ProxyCommand), checks the
/// host key and authenticates. A refused host key is a [`HostKeyRejected`]
/// in the chain.
pub async fn connect(target: &Target, opts: &Options) -> anyhow::Result<Session> {
    connect_or_say(target, opts).await.map_err(|u| u.error)
}

/// A connection that failed, and whether it got as far as authenticating
/// on some hop (a jump host's, or the node's own): only then may the
/// operator's key have signed anything.
#[derive(Debug)]
pub struct Unconnected {
    pub error: anyhow::Error,
    pub authenticated: bool,
}

/// [`connect`], telling a failure before any authentication (a node still
/// booting refuses TCP, or closes before its banner: nothing was signed, so
/// trying again soon costs no signature) from one after it.
pub async fn connect_or_say(target: &Target, opts: &Options) -> Result<Session, Unconnected> {
    let mut got = ConnectExtras::default();
    let handle = match connect_chain(target, opts, &mut got).await {
        Ok(handle) => handle,
        Err(error) => {
            return Err(Unconnected {
                error,
                authenticated: got.authenticated,
            });
        }
    };
    // Only a connection that succeeded uses up the once-per-run report of a
    // bad line: a failed one shows its error instead, and the next may warn.
    let mut warnings: Vec<String> = got
        .unreadable
        .iter()
        .filter(|(_, bad)| opts.reported.first_time(&bad.place))
        .map(|(node, bad)| unreadable_warning(node, bad))
        .collect();
    warnings.append(&mut got.warnings);
    Ok(Session {
        node: target.node.clone(),
        user: target.user.clone(),
        handle,
        _carriers: got.carriers,
        command_timeout: opts.command_timeout,
        max_output: opts.max_output,
        warnings,
        retried: got.retried,
    })
}

fn unreadable_warning(node: &str, bad: &Unreadable) -> String {
    format!(
        "{node}: skipped line {} of {}: {}; the file's other lines still count. \
         Fix or delete that line (`ssh-keygen -l -f {}` lists the entries ssh can read).",
        bad.place.line,
        bad.place.file.display(),
        bad.reason,
        bad.place.file.display()
    )
}

/// Connects the jump hosts outermost first, then `target` over the last one.
async fn connect_chain(
    target: &Target,
    opts: &Options,
    got: &mut ConnectExtras,
) -> anyhow::Result<Handle<Client>> {
    let Some(jump) = &target.jump else {
        return connect_one(target, opts, None, got).await;
    };
    let bastion = Box::pin(connect_chain(jump, opts, got))
        .await
        .with_context(|| {
            format!(
                "{}: cannot reach it through {} ({}@{}:{})",
                target.node, jump.node, jump.user, jump.host, jump.port
            )
        })?;
    let handle = connect_one(target, opts, Some((jump, &bastion)), got).await;
    got.carriers.via.push(bastion);
    handle
}

/// Handshake, host key check and authentication over a tunnel through a
/// jump host (`via`), a ProxyCommand or TCP. The handshake holds one of the
/// sshd's slots ([`handshake::Handshakes`]) until authenticated, and is
/// tried again when sshd turns it away before its banner (MaxStartups).
async fn connect_one(
    target: &Target,
    opts: &Options,
    via: Option<(&Target, &Handle<Client>)>,
    got: &mut ConnectExtras,
) -> anyhow::Result<Handle<Client>> {
    let lookup = Arc::new(
        Lookup::read(target, opts)
            .with_context(|| format!("{}: cannot check its host key", target.node))?,
    );
    got.unreadable.extend(
        lookup
            .unreadable
            .iter()
            .map(|bad| (target.node.clone(), bad.clone())),
    );
    let config = Arc::new(client_config(
        opts,
        &known_hosts::recorded_algorithms(&lookup.files, &lookup.name),
        known_hosts::has_cert_authority(&lookup.files, &lookup.name),
    ));
    // Held until authenticated: MaxStartups counts a connection until then.
    let slot = opts.handshakes.acquire(&target.host, target.port).await;
    let mut dropped: Vec<String> = Vec::new();
    let mut handle = loop {
        let failed = match attempt(target, opts, via, &lookup, &config, got).await {
            Ok(handle) => break handle,
            Err(failed) => failed,
        };
        match failed.dropped {
            Some(said) if (dropped.len() as u32) + 1 < handshake::ATTEMPTS => {
                dropped.push(said);
                tokio::time::sleep(handshake::backoff(dropped.len() as u32)).await;
            }
            Some(said) => {
                dropped.push(said);
                return Err(failed.error.context(turned_away(target, &dropped)));
            }
            None => return Err(failed.error),
        }
    };
    if !dropped.is_empty() {
        got.retried.push(format!(
            "{}: connected on attempt {}; sshd closed the earlier ones before its banner{}",
            target.node,
            dropped.len() + 1,
            said_note(&dropped)
        ));
    }
    got.authenticated = true;
    auth::authenticate(&mut handle, target, opts).await?;
    if slot.contended() {
        // See `Slot::contended`. Only pacing: whatever the outcome, go on.
        let _ = tokio::time::timeout(opts.connect_timeout, handle.send_ping()).await;
    }
    drop(slot);
    Ok(handle)
}

/// Why a connection failed; `dropped`: sshd closed it before its banner
/// (with what it said first, maybe nothing), so trying again is safe.
struct Failed {
    error: anyhow::Error,
    dropped: Option<String>,
}

impl From<anyhow::Error> for Failed {
    fn from(error: anyhow::Error) -> Self {
        Failed {
            error,
            dropped: None,
        }
    }
}

/// One connection attempt up to the end of the key exchange and host key check.
async fn attempt(
    target: &Target,
    opts: &Options,
    via: Option<(&Target, &Handle<Client>)>,
    lookup: &Arc<Lookup>,
    config: &Arc<client::Config>,
    got: &mut ConnectExtras,
) -> Result<Handle<Client>, Failed> {
    let verdict = Arc::new(Mutex::new(HostKeyVerdict::default()));
    let client = Client {
        node: target.node.clone(),
        principal: target
            .host_keys
            .alias
            .clone()
            .unwrap_or_else(|| target.host.clone())
            .to_ascii_lowercase(),
        host: target.host.clone(),
        port: target.port,
        lookup: lookup.clone(),
        checking: opts.host_key_checking,
        verdict: verdict.clone(),
    };
    let config = config.clone();
    let mut proxy = None;
    let mut addr = format!("{}:{}", target.host, target.port);
    let (result, banner) = match (via, &target.proxy_command) {
        (Some((jump, bastion)), _) => {
            let channel = tokio::time::timeout(
                opts.connect_timeout,
                bastion.channel_open_direct_tcpip(target.host.as_str(), u32::from(target.port), "127.0.0.1", 0),
            )
            .await
            .map_err(|_| anyhow!("{}: {} did not open a tunnel within {}", target.node, jump.node, fmt_duration(opts.connect_timeout)))?
            .with_context(|| {
                format!(
                    "{}: {} refused to forward to {}:{} (does it allow TCP forwarding — AllowTcpForwarding — and reach that address?)",
                    target.node, jump.node, target.host, target.port
                )
            })?;
            let (stream, banner) = handshake::Watched::new(channel.into_stream());
            let result = tokio::time::timeout(
                opts.connect_timeout,
                client::connect_stream(config, stream, client),
            )
            .await;
            (result, banner)
        }
        (None, Some(command)) => {
            let (process, stream) = proxy::spawn(target, command)?;
            proxy = Some(process);
            addr = format!("{addr} through ProxyCommand `{command}`");
            let (stream, banner) = handshake::Watched::new(stream);
            let result = tokio::time::timeout(
                opts.connect_timeout,
                client::connect_stream(config, stream, client),
            )
            .await;
            (result, banner)
        }
        (None, None) => {
            let mut banner = None;
            // One deadline for TCP and the handshake, as before.
            let result = tokio::time::timeout(opts.connect_timeout, async {
                let socket =
                    tokio::net::TcpStream::connect((target.host.as_str(), target.port)).await?;
                // Commands are small round trips: no Nagle delay on them.
                let _ = socket.set_nodelay(true);
                let (stream, watched) = handshake::Watched::new(socket);
                banner = Some(watched);
                client::connect_stream(config, stream, client).await
            })
            .await;
            (result, banner.unwrap_or_default())
        }
    };
    let mut verdict = take(&verdict);
    got.warnings.append(&mut verdict.warnings);
    if let Some(rejected) = verdict.rejected {
        return Err(anyhow::Error::new(rejected).into());
    }
    let failure = match result {
        Ok(Ok(handle)) => {
            // The command carries the connection: it lives as long as the session.
            got.carriers.proxies.extend(proxy);
            return Ok(handle);
        }
        Err(_) => anyhow!(
            "{}: no SSH handshake with {addr} within {}: is the address right and sshd running?",
            target.node,
            fmt_duration(opts.connect_timeout)
        ),
        Ok(Err(e)) => {
            let hint = if handshake::out_of_files(&e) {
                format!(": {}", out_of_files_hint())
            } else {
                String::new()
            };
            e.context(format!(
                "{}: cannot connect to {addr} over SSH{hint}",
                target.node
            ))
        }
    };
    let Some(process) = proxy.as_mut() else {
        let dropped =
            handshake::dropped_before_banner(&failure, banner.seen()).then(|| banner.said());
        return Err(Failed {
            error: failure,
            dropped,
        });
    };
    // Not retried: an end before the banner may be the command giving up
    // (no route, its own ssh -W refused), not sshd. The command usually
    // knows best why nothing came through.
    let error = failure.context(format!("{}: {}", target.node, process.diagnose().await));
    Err(error.into())
}

/// The error of a connection sshd closed before its banner every time.
fn turned_away(target: &Target, dropped: &[String]) -> String {
    format!(
        "{}: {}:{} closed the connection before its SSH banner {} times in a row{}: \
         sshd does that when too many connections are still authenticating (MaxStartups); \
         fleetctl keeps at most {} handshakes in flight to one sshd, so others are connecting \
         to it as well, or its MaxStartups is lower: try again, or raise it",
        target.node,
        target.host,
        target.port,
        dropped.len(),
        said_note(dropped),
        handshake::PER_SSHD
    )
}

/// ` (it said: Exceeded MaxStartups)`, or nothing when sshd said nothing.
fn said_note(dropped: &[String]) -> String {
    match dropped.iter().rev().find(|s| !s.is_empty()) {
        Some(said) => format!(" (it said: {said})"),
        None => String::new(),
    }
}

/// What to do about "Too many open files", with the limit in force.
fn out_of_files_hint() -> String {
    let limit = crate::limits::open_files()
        .map(|(soft, _)| format!(" (now {soft})"))
        .unwrap_or_default();
    format!(
        "fleetctl keeps one connection per node open (two through a jump host), \
         and ran out of file descriptors: raise the open-file limit{limit}, e.g. `ulimit -n 65536`, \
         or ask your administrator to raise the hard limit"
    )
}

/// `certificates`: a `@cert-authority` line names the host, so its host
/// certificate is asked for first, as OpenSSH orders its host key
/// algorithms then (`sshconnect2.c`, `order_hostkeyalgs`).
fn client_config(opts: &Options, recorded: &[Algorithm], certificates: bool) -> client::Config {
    let mut preferred = Preferred::default();
    preferred.key = prefer_recorded(&preferred.key, recorded).into();
    if certificates {
        preferred.host_key_certificates = preferred.key.clone();
    }
    client::Config {
        client_id: SshId::Standard(concat!("SSH-2.0-fleetctl_", env!("CARGO_PKG_VERSION")).into()),
        keepalive_interval: Some(opts.keepalive_interval),
        keepalive_max: opts.keepalive_max,
        nodelay: true,
        preferred,
        ..Default::default()
    }
}

/// Host key algorithms with those already in known_hosts first (as OpenSSH
/// does), so a host recorded with its ECDSA key is checked against it.
pub(super) fn prefer_recorded(default: &[Algorithm], recorded: &[Algorithm]) -> Vec<Algorithm> {
    let is_recorded = |a: &Algorithm| {
        recorded.iter().any(|r| match (r, a) {
            (Algorithm::Rsa { .. }, Algorithm::Rsa { .. }) => true,
            (r, a) => r == a,
        })
    };
    let (mut first, rest): (Vec<Algorithm>, Vec<Algorithm>) =
        default.iter().cloned().partition(is_recorded);
    first.extend(rest);
    first
}

fn fmt_duration(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

//! Apply's lock: only one apply per fleet at a time, and no Kured reboot
//! behind fleetctl's back while it runs.
//!
//! When Kured is installed, fleetctl holds *Kured's own* reboot lock — the
//! annotation on Kured's DaemonSet, written in Kured's format with every
//! slot taken — so Kured sees a holder and waits. The holder id
//! `fleetctl/<user>@<host>` contains a `/`, which no node name can, so no
//! Kured pod ever takes it for its own. The write names the resourceVersion
//! it read, so a Kured pod taking the lock at the same moment makes the API
//! answer Conflict instead of one silently overwriting the other.
//!
//! Without Kured, the lock is a configmap in kube-system, created
//! atomically (AlreadyExists means held), recording holder, host, pid and
//! start time.
//!
//! A held lock stops apply with who holds it and since when; `--force-unlock`
//! removes any holder first (journaled). Release removes the lock only if it
//! is still ours, and is safe to call twice.
//!
//! Everything that decides (Kured's args, the annotation's two JSON forms,
//! expiry, messages) is pure; the API is reached through [`Kubectl`], which
//! [`Remote`] implements (kubectl as root on a control-plane node) and the
//! tests fake.
//!
//! This file holds what both backends share (the seam, who we are, the
//! options, holders and messages, and the dispatch); `kured.rs` is Kured's
//! annotation lock, `configmap.rs` fleetctl's own. Each has its tests beside
//! it, against the fake API server in `testkit.rs`.

mod configmap;
mod kured;

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use super::runner::{CommandFailed, Remote};
use crate::remote::kubectl as k;
use crate::ssh::Output;

pub use configmap::parse_lock_configmap;
pub use kured::{
    KURED_ANNOTATION, KURED_NAME, KURED_NAMESPACE, KuredConfig, KuredInfo, kured_lock_state,
    kured_lock_value, parse_daemonset,
};

/// Read–decide–write rounds before giving up on an object that keeps
/// changing (a DaemonSet's resourceVersion also moves with its status).
const ATTEMPTS: usize = 3;

/// The `--force-unlock` hint every "held" message ends with.
const FORCE_HINT: &str = "run `fleetctl apply --force-unlock`";

/// The API as the lock needs it: kubectl with these arguments, as root with
/// the admin kubeconfig on a control-plane node.
pub trait Kubectl {
    /// Runs kubectl with `args`; `label` says why, for the journal. A
    /// non-zero exit is not an error here (the lock reads kubectl's reason).
    fn kubectl(
        &self,
        label: &str,
        args: &[String],
    ) -> impl Future<Output = anyhow::Result<Output>> + Send;

    /// Records a lock decision in the journal (`lock-acquired`, …).
    fn note(&self, kind: &str, detail: &str);

    /// The node kubectl runs on, for error messages.
    fn node(&self) -> &str;
}

impl Kubectl for Remote {
    async fn kubectl(&self, label: &str, args: &[String]) -> anyhow::Result<Output> {
        self.run_root(label, &k::kubectl(args), None).await
    }

    fn note(&self, kind: &str, detail: &str) {
        self.journal().event(kind, Some(Remote::node(self)), detail);
    }

    fn node(&self) -> &str {
        Remote::node(self)
    }
}

/// Who is taking the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub host: String,
    pub pid: u32,
}

impl Identity {
    /// This process: `$USER` (or `$LOGNAME`), the machine's hostname, its pid.
    pub fn local() -> Identity {
        Identity {
            user: local_user(),
            host: local_host(),
            pid: std::process::id(),
        }
    }

    /// `fleetctl/<user>@<host>`: never a node name (node names cannot
    /// contain `/`), so Kured never mistakes it for one of its pods.
    pub fn holder(&self) -> String {
        format!("fleetctl/{}@{}", self.user, self.host)
    }
}

fn local_user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn local_host() -> String {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_command = || {
        std::process::Command::new("hostname")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    from_proc
        .or_else(from_command)
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// Where to look for Kured, and whether to remove a lock someone holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub kured_namespace: String,
    pub kured_name: String,
    /// `--force-unlock`: remove the current holder's lock first (any holder).
    pub force_unlock: bool,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            kured_namespace: KURED_NAMESPACE.into(),
            kured_name: KURED_NAME.into(),
            force_unlock: false,
        }
    }
}

/// Who holds a lock and since when, as recorded in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// A Kured node name, or `fleetctl/<user>@<host>`.
    pub id: String,
    /// The start time as recorded (RFC 3339), possibly empty.
    pub since: String,
    /// The holder's pid and host, when recorded (fleetctl's configmap).
    pub pid: Option<String>,
    pub host: Option<String>,
}

impl Holder {
    fn is_fleetctl(&self) -> bool {
        self.id.starts_with("fleetctl/")
    }
}

/// What a lock annotation (or its absence) means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    Free,
    Held(Vec<Holder>),
    /// A value that is not a lock in either of Kured's forms.
    Unreadable {
        value: String,
        why: String,
    },
}

// ---------------------------------------------------------------------------
// Messages

/// Apply cannot start: someone else holds the lock. The message says who,
/// since when, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHeld {
    /// "Kured's reboot lock on daemonset kube-system/kured"
    pub lock: String,
    pub state: LockState,
    /// When this was observed, for the holder's age.
    pub now: SystemTime,
}

impl fmt::Display for LockHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            LockState::Free => write!(f, "{} is free", self.lock),
            LockState::Unreadable { value, why } => write!(
                f,
                "{} holds a value fleetctl cannot read as a lock ({why}): {value}. \
                 If nothing uses it, {FORCE_HINT} to remove it.",
                self.lock
            ),
            LockState::Held(holders) => {
                write!(f, "{} is held by ", self.lock)?;
                for (i, holder) in holders.iter().enumerate() {
                    if i > 0 {
                        f.write_str(if i + 1 == holders.len() {
                            " and "
                        } else {
                            ", "
                        })?;
                    }
                    f.write_str(&describe_holder(holder, self.now))?;
                }
                f.write_str(". ")?;
                if let Some(node) = holders.iter().find(|h| !h.is_fleetctl()) {
                    write!(
                        f,
                        "Kured is rebooting node {}: wait until it is back and Kured releases the lock, then retry. \
                         If the lock is stale (the node is gone, Kured was removed mid-reboot), {FORCE_HINT}.",
                        node.id
                    )
                } else {
                    write!(
                        f,
                        "If that holder is dead (e.g. a fleetctl that was killed), {FORCE_HINT}."
                    )
                }
            }
        }
    }
}

impl std::error::Error for LockHeld {}

/// `fleetctl/alice@laptop (pid 4242) since 2026-11-29T19:30:12Z (3m 5s ago)`
fn describe_holder(holder: &Holder, now: SystemTime) -> String {
    let mut text = if holder.id.is_empty() {
        "an entry with no nodeID".to_string()
    } else {
        holder.id.clone()
    };
    if let Some(pid) = &holder.pid {
        text.push_str(&format!(" (pid {pid})"));
    }
    if !holder.since.is_empty() {
        text.push_str(&format!(" since {}", holder.since));
        if let Some(age) = age(&holder.since, now) {
            text.push_str(&format!(" ({age} ago)"));
        }
    }
    text
}

fn age(since: &str, now: SystemTime) -> Option<String> {
    let since = humantime::parse_rfc3339(since).ok()?;
    let age = now.duration_since(since).ok()?;
    Some(humantime::format_duration(Duration::from_secs(age.as_secs())).to_string())
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn failed<K: Kubectl>(api: &K, label: &str, out: &Output) -> anyhow::Error {
    anyhow::Error::new(CommandFailed::new(api.node(), label, out))
}

// ---------------------------------------------------------------------------
// Acquire and release

/// A lock fleetctl holds; [`Lock::release`] gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    kind: LockKind,
    holder: String,
    forced: Option<String>,
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LockKind {
    Kured {
        namespace: String,
        name: String,
        annotation: String,
        created: String,
    },
    ConfigMap {
        namespace: String,
        name: String,
        pid: String,
        started: String,
    },
}

/// What [`Lock::release`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// Our lock was there and is gone now.
    Removed,
    /// Nothing to remove (released already, or the object is gone).
    AlreadyGone,
    /// Someone else holds it now (a `--force-unlock` elsewhere): left alone.
    TakenOver { by: String },
}

/// Takes the lock: Kured's when a DaemonSet `opts.kured_namespace/kured_name`
/// exists (its flags say where Kured keeps the lock), fleetctl's configmap
/// otherwise. `now` is recorded as the start time.
pub async fn acquire<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
) -> anyhow::Result<Lock> {
    let lock = match kured::read_daemonset(api, &opts.kured_namespace, &opts.kured_name).await? {
        Some(kured) => kured::acquire_kured(api, opts, me, now, kured).await?,
        None => configmap::acquire_configmap(api, opts, me, now).await?,
    };
    api.note(
        "lock-acquired",
        &format!("{} taken by {}", lock.describe(), lock.holder),
    );
    Ok(lock)
}

/// `None` when the DaemonSet does not exist.
impl Lock {
    /// "Kured's reboot lock on daemonset kube-system/kured (annotation …)"
    /// or "fleetctl's lock (configmap kube-system/fleetctl-lock)".
    pub fn describe(&self) -> String {
        match &self.kind {
            LockKind::Kured {
                namespace,
                name,
                annotation,
                ..
            } => format!(
                "Kured's reboot lock on daemonset {namespace}/{name} (annotation {annotation})"
            ),
            LockKind::ConfigMap {
                namespace, name, ..
            } => {
                format!("fleetctl's lock (configmap {namespace}/{name})")
            }
        }
    }

    /// The holder id written into the lock.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// With `--force-unlock`: the lock that was removed, described.
    pub fn forced(&self) -> Option<&str> {
        self.forced.as_deref()
    }

    /// Things the operator must read (a Kured `--lock-ttl`, a Kured node
    /// left cordoned by a forced unlock).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Gives the lock back if it is still ours; safe to call again, and
    /// from any control-plane node.
    pub async fn release<K: Kubectl>(&self, api: &K) -> anyhow::Result<Released> {
        let released = match &self.kind {
            LockKind::Kured {
                namespace,
                name,
                annotation,
                created,
            } => {
                self.release_kured(api, namespace, name, annotation, created)
                    .await?
            }
            LockKind::ConfigMap {
                namespace,
                name,
                pid,
                started,
            } => {
                self.release_configmap(api, namespace, name, pid, started)
                    .await?
            }
        };
        let detail = match &released {
            Released::Removed => format!("{} released", self.describe()),
            Released::AlreadyGone => format!("{} was already released", self.describe()),
            Released::TakenOver { by } => {
                format!("{} left alone: it is now held by {by}", self.describe())
            }
        };
        api.note("lock-released", &detail);
        Ok(released)
    }
}

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

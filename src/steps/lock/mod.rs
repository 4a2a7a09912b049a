//! Apply's lock: only one apply per fleet at a time, and no Kured reboot
//! behind fleetctl's back while it runs.
//!
//! **Which lock.** Kured reboots a node only while it holds its own lock,
//! an annotation on a DaemonSet. So when Kured runs — in whatever namespace
//! its manifest or Helm release put it — fleetctl holds *that* lock, in
//! Kured's format with every slot taken, and Kured waits. fleetctl finds
//! Kured by looking at every DaemonSet's containers; the operator can name
//! it instead ([`LockOptions::kured`]). Several Kured DaemonSets, or Kured
//! pods that no DaemonSet explains, stop apply: guessing would leave some
//! Kured free to reboot nodes mid-upgrade. Only with no Kured anywhere does
//! fleetctl take its own lock, a configmap; it never falls back to it
//! because Kured's lock could not be had.
//!
//! **Who holds it.** The lock records `fleetctl/<user>@<host>` (a `/`, which
//! no node name has, so no Kured pod mistakes it for its own), the host,
//! the pid, when the run started, and a heartbeat that [`Lock::heartbeat`]
//! refreshes. On Kured's lock the heartbeat is the entry's `created` and the
//! entry carries a TTL, which is how Kured itself judges expiry: a lock left
//! behind by a fleetctl that died frees itself for Kured after the TTL
//! instead of blocking reboots cluster-wide.
//!
//! **Someone else holds it.** apply stops and says who, on which host, with
//! which pid, and how old its heartbeat is. A holder whose heartbeat stopped
//! longer ago than [`LockOptions::dead_after`] is dead and one
//! `--force-unlock` removes it; a live one (fresh heartbeat, a Kured node
//! mid-reboot, or anything fleetctl cannot judge) only with `--force-unlock
//! --yes`. Every write and removal names the resourceVersion (and, for the
//! configmap, the uid) it judged, so it never lands on a lock that changed
//! in between.
//!
//! Everything that decides (Kured's flags, the annotation's forms, expiry,
//! liveness, messages) is pure; the API is reached through [`Kubectl`],
//! which [`Remote`] implements (kubectl as root on a control-plane node) and
//! the tests fake.
//!
//! This file holds what both backends share (the seam, who we are, the
//! options, holders and messages, and the dispatch); `kured.rs` is finding
//! Kured and its annotation lock, `configmap.rs` fleetctl's own. Each has
//! its tests beside it, against the fake API server in `testkit.rs`.

mod configmap;
mod kured;

use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use super::runner::{CommandFailed, Remote};
use crate::remote::kubectl as k;
use crate::ssh::Output;

pub use configmap::{LockConfigMap, parse_lock_configmap};
pub use kured::{
    ContainerInfo, DaemonSetInfo, KURED_ANNOTATION, KURED_NAME, KURED_NAMESPACE, KuredConfig,
    KuredInfo, kured_lock_state, kured_lock_value, parse_daemonsets,
};

/// How long a lock fleetctl holds stays valid without a heartbeat. Kured
/// takes an entry back once its TTL ran out, so this must outlast the
/// longest stretch apply cannot refresh it: the reboot of the control-plane
/// node kubectl runs on, which `--node-timeout` (15 minutes by default)
/// bounds. Shorter, and Kured could reboot a staged node mid-upgrade.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// How often apply should call [`Lock::heartbeat`].
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);

/// A heartbeat older than this means its fleetctl is dead: ten missed
/// beats, and well past what a slow API server explains.
pub const DEFAULT_DEAD_AFTER: Duration = Duration::from_secs(5 * 60);

/// Read–decide–write rounds before giving up on an object that keeps
/// changing (a DaemonSet's resourceVersion also moves with its status).
const ATTEMPTS: usize = 3;

/// The API as the lock needs it: kubectl with these arguments, as root with
/// the admin kubeconfig on a control-plane node.
pub trait Kubectl {
    /// Runs kubectl with `args`, `stdin` on its standard input; `label` says
    /// why, for the journal. A non-zero exit is not an error here (the lock
    /// reads kubectl's reason).
    fn kubectl(
        &self,
        label: &str,
        args: &[String],
        stdin: Option<&str>,
    ) -> impl Future<Output = anyhow::Result<Output>> + Send;

    /// Records a lock decision in the journal (`lock-acquired`, …).
    fn note(&self, kind: &str, detail: &str);

    /// The node kubectl runs on, for error messages.
    fn node(&self) -> &str;
}

impl Kubectl for Remote {
    async fn kubectl(
        &self,
        label: &str,
        args: &[String],
        stdin: Option<&str>,
    ) -> anyhow::Result<Output> {
        self.run_root(label, &k::kubectl(args), stdin.map(str::as_bytes))
            .await
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

pub use crate::inventory::KuredRef;

/// Where Kured is, how long the lock lives, and whether to remove a lock
/// someone else holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    /// Kured's DaemonSet as the operator named it; `None`: find it.
    pub kured: Option<KuredRef>,
    /// `--force-unlock`: remove a dead holder's lock first.
    pub force_unlock: bool,
    /// `--force-unlock --yes`: remove the lock even if its holder may be
    /// alive (a fresh heartbeat, a Kured node mid-reboot, a value fleetctl
    /// cannot judge).
    pub force_yes: bool,
    /// The TTL written into Kured's lock; see [`DEFAULT_TTL`].
    pub ttl: Duration,
    /// A holder whose heartbeat is older is dead; see [`DEFAULT_DEAD_AFTER`].
    pub dead_after: Duration,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            kured: None,
            force_unlock: false,
            force_yes: false,
            ttl: DEFAULT_TTL,
            dead_after: DEFAULT_DEAD_AFTER,
        }
    }
}

// ---------------------------------------------------------------------------
// Holders

/// Who holds a lock, as recorded in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// A Kured node name, or `fleetctl/<user>@<host>`.
    pub id: String,
    /// The host and pid of a fleetctl holder.
    pub host: Option<String>,
    pub pid: Option<String>,
    /// When it took the lock (RFC 3339, as recorded).
    pub started: Option<String>,
    /// A fleetctl holder's last heartbeat (RFC 3339); `None` for a Kured
    /// node and for a fleetctl older than heartbeats.
    pub heartbeat: Option<String>,
}

impl Holder {
    fn is_fleetctl(&self) -> bool {
        self.id.starts_with("fleetctl/")
    }

    /// Alive, dead, or not for fleetctl to judge, at `now`.
    pub fn liveness(&self, now: SystemTime, dead_after: Duration) -> Liveness {
        if self.id.is_empty() {
            return Liveness::Unknown;
        }
        if !self.is_fleetctl() {
            return Liveness::KuredNode;
        }
        let Some(beat) = self.heartbeat.as_deref().and_then(parse_time) else {
            return Liveness::Unknown;
        };
        // A heartbeat ahead of our clock is as fresh as it gets.
        let age = now.duration_since(beat).unwrap_or(Duration::ZERO);
        if age >= dead_after {
            Liveness::Dead { age }
        } else {
            Liveness::Alive { age }
        }
    }

    /// Is this entry the lock this run wrote?
    fn is(&self, mine: &Mine) -> bool {
        self.id == mine.holder
            && self.pid.as_deref() == Some(mine.pid.to_string().as_str())
            && self.started.as_deref() == Some(mine.started.as_str())
    }
}

/// What a holder's record says about whether it still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A Kured node: it holds the lock through its reboot, and only Kured
    /// knows when that ends.
    KuredNode,
    /// A fleetctl whose heartbeat is fresher than the dead threshold.
    Alive { age: Duration },
    /// A fleetctl whose heartbeat stopped longer ago than that.
    Dead { age: Duration },
    /// No heartbeat recorded (a fleetctl older than heartbeats, an entry
    /// with no holder): fleetctl cannot tell.
    Unknown,
}

/// What a lock (or its absence) means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    Free,
    Held(Vec<Holder>),
    /// A value that is not a lock in any form fleetctl knows.
    Unreadable {
        value: String,
        why: String,
    },
}

impl LockState {
    /// Every holder is a fleetctl whose heartbeat stopped: one
    /// `--force-unlock` may remove it.
    fn all_dead(&self, now: SystemTime, dead_after: Duration) -> bool {
        match self {
            LockState::Held(holders) => holders
                .iter()
                .all(|h| matches!(h.liveness(now, dead_after), Liveness::Dead { .. })),
            LockState::Free | LockState::Unreadable { .. } => false,
        }
    }
}

/// This run's identity in the lock it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mine {
    holder: String,
    host: String,
    pid: u32,
    started: String,
}

impl Mine {
    fn new(me: &Identity, now: SystemTime) -> Mine {
        Mine {
            holder: me.holder(),
            host: me.host.clone(),
            pid: me.pid,
            started: rfc3339(now),
        }
    }
}

// ---------------------------------------------------------------------------
// Messages

/// apply cannot take the lock: someone else holds it (and, with
/// `--force-unlock`, fleetctl would not remove it). The message says who,
/// whether it looks alive, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHeld {
    /// "Kured's reboot lock on daemonset kube-system/kured"
    pub lock: String,
    pub state: LockState,
    /// When this was observed, for ages.
    pub now: SystemTime,
    pub dead_after: Duration,
    /// `--force-unlock` was given, and refused: the holder may be alive.
    pub refused_force: bool,
}

impl LockHeld {
    /// What a forced removal removed: the lock and who held it, without the
    /// advice the refusal gives.
    pub fn removed(&self) -> String {
        match &self.state {
            LockState::Held(holders) => format!(
                "{} held by {}",
                self.lock,
                holders
                    .iter()
                    .map(|h| describe_holder(h, self.now))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            LockState::Unreadable { value, .. } => format!("{} holding {value}", self.lock),
            LockState::Free => format!("{} (free)", self.lock),
        }
    }
}

impl fmt::Display for LockHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let yes_hint = "run `fleetctl apply --force-unlock --yes`";
        match &self.state {
            LockState::Free => write!(f, "{} is free", self.lock),
            LockState::Unreadable { value, why } => {
                write!(
                    f,
                    "{} holds a value fleetctl cannot read as a lock ({why}): {value}. \
                     fleetctl cannot tell whether whatever wrote it still relies on it. ",
                    self.lock
                )?;
                if self.refused_force {
                    write!(
                        f,
                        "--force-unlock alone does not remove it: if nothing uses it, {yes_hint}."
                    )
                } else {
                    write!(f, "If nothing uses it, {yes_hint} to remove it.")
                }
            }
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
                let live: Vec<(&Holder, Liveness)> = holders
                    .iter()
                    .map(|h| (h, h.liveness(self.now, self.dead_after)))
                    .collect();
                let dead_after = human(self.dead_after);
                let every = human(HEARTBEAT_EVERY);
                if let Some((node, _)) = live.iter().find(|(_, l)| *l == Liveness::KuredNode) {
                    write!(
                        f,
                        "Kured is rebooting node {}: wait until it is back and Kured releases the lock, \
                         then retry. ",
                        node.id
                    )?;
                } else if let Some((_, Liveness::Alive { age })) = live
                    .iter()
                    .find(|(_, l)| matches!(l, Liveness::Alive { .. }))
                {
                    write!(
                        f,
                        "That apply is alive (its last heartbeat is {} old, under {dead_after}): \
                         wait for it to finish. ",
                        human(*age)
                    )?;
                } else if live.iter().any(|(_, l)| *l == Liveness::Unknown) {
                    f.write_str(
                        "It records no heartbeat (an older fleetctl), so fleetctl cannot tell \
                         whether it still runs. ",
                    )?;
                }
                if self.state.all_dead(self.now, self.dead_after) {
                    return write!(
                        f,
                        "That fleetctl looks dead: no heartbeat for over {dead_after}, while a \
                         running apply refreshes it every {every}. Run `fleetctl apply --force-unlock` \
                         to remove its lock."
                    );
                }
                if self.refused_force {
                    f.write_str(
                        "--force-unlock alone does not remove a lock whose holder may be alive. ",
                    )?;
                }
                write!(
                    f,
                    "If you are sure it is not (its machine is gone, Kured was removed \
                     mid-reboot), {yes_hint}."
                )
            }
        }
    }
}

impl std::error::Error for LockHeld {}

/// A heartbeat found the lock no longer ours: someone removed it
/// (`--force-unlock` elsewhere, by hand) or Kured took it after it expired.
/// apply must stop at its next safe point. Find it in a chain with
/// `err.chain().find_map(|e| e.downcast_ref::<LockLost>())`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockLost {
    /// "Kured's reboot lock on daemonset kube-system/kured"
    pub lock: String,
    /// Who holds it now, described; `None` when it is simply gone.
    pub held_by: Option<String>,
}

impl fmt::Display for LockLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is no longer held by this apply: ", self.lock)?;
        match &self.held_by {
            Some(by) => write!(f, "it is now held by {by}")?,
            None => f.write_str(
                "it was removed (a `fleetctl apply --force-unlock` elsewhere, or by hand)",
            )?,
        }
        f.write_str(
            ". Stopping before anything else changes: find out who is working on this cluster \
             before running `fleetctl apply` again",
        )
    }
}

impl std::error::Error for LockLost {}

/// `fleetctl/bob@ops-1 (pid 77 on ops-1), started 2026-11-29T18:30:12Z,
/// last heartbeat 2026-11-29T19:29:50Z (22s ago)`, or `node w-2 since …`.
fn describe_holder(holder: &Holder, now: SystemTime) -> String {
    if holder.id.is_empty() {
        return "an entry with no nodeID".into();
    }
    let ago = |t: &str| match age(t, now) {
        Some(age) => format!("{t} ({} ago)", human(age)),
        None => t.to_string(),
    };
    if !holder.is_fleetctl() {
        let mut text = format!("node {}", holder.id);
        if let Some(since) = &holder.started {
            text.push_str(&format!(" since {}", ago(since)));
        }
        return text;
    }
    let mut text = holder.id.clone();
    match (&holder.pid, &holder.host) {
        (Some(pid), Some(host)) => text.push_str(&format!(" (pid {pid} on {host})")),
        (Some(pid), None) => text.push_str(&format!(" (pid {pid})")),
        _ => {}
    }
    match (&holder.started, &holder.heartbeat) {
        (Some(started), Some(beat)) => text.push_str(&format!(
            ", started {started}, last heartbeat {}",
            ago(beat)
        )),
        (Some(started), None) => text.push_str(&format!(" since {}", ago(started))),
        (None, Some(beat)) => text.push_str(&format!(", last heartbeat {}", ago(beat))),
        (None, None) => {}
    }
    text
}

fn parse_time(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(text.trim()).ok()
}

fn age(since: &str, now: SystemTime) -> Option<Duration> {
    now.duration_since(parse_time(since)?).ok()
}

/// `2h 12m 5s`: whole seconds.
fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn failed<K: Kubectl>(api: &K, label: &str, out: &Output) -> anyhow::Error {
    anyhow::Error::new(CommandFailed::new(api.node(), label, out))
}

/// What to do about a lock someone else holds.
enum Verdict {
    /// Stop with this.
    Refuse(LockHeld),
    /// `--force-unlock` allows removing it (then journal this).
    Remove(LockHeld),
}

/// `--force-unlock` removes a dead holder's lock; a live one (or one
/// fleetctl cannot judge) only with `--yes` as well. It removes at most
/// once per acquire (`already_forced`): if someone takes the lock again
/// right after, apply stops instead of fighting over it.
fn judge(
    lock: &str,
    state: LockState,
    opts: &LockOptions,
    now: SystemTime,
    already_forced: bool,
) -> Verdict {
    let all_dead = state.all_dead(now, opts.dead_after);
    let mut held = LockHeld {
        lock: lock.to_string(),
        state,
        now,
        dead_after: opts.dead_after,
        refused_force: false,
    };
    if !opts.force_unlock || already_forced {
        return Verdict::Refuse(held);
    }
    if all_dead || opts.force_yes {
        return Verdict::Remove(held);
    }
    held.refused_force = true;
    Verdict::Refuse(held)
}

// ---------------------------------------------------------------------------
// Acquire, heartbeat, release

/// A lock fleetctl holds; [`Lock::heartbeat`] keeps it, [`Lock::release`]
/// gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    kind: LockKind,
    mine: Mine,
    ttl: Duration,
    /// Why this lock: where Kured was found, or that there is none.
    chosen: String,
    forced: Option<String>,
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LockKind {
    Kured {
        namespace: String,
        name: String,
        annotation: String,
        concurrency: usize,
    },
    ConfigMap {
        namespace: String,
        name: String,
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

/// Takes the lock: Kured's when Kured runs (found in any namespace, or as
/// `opts.kured` names it), fleetctl's configmap when no Kured runs
/// anywhere. `now` is recorded as the start time and first heartbeat.
pub async fn acquire<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
) -> anyhow::Result<Lock> {
    let lock = match kured::find(api, opts).await? {
        kured::Found::Kured(found) => kured::acquire(api, opts, me, now, *found).await?,
        kured::Found::Nowhere => configmap::acquire(api, opts, me, now).await?,
    };
    api.note(
        "lock-acquired",
        &format!(
            "{} taken by {} (pid {} on {}), TTL {}; {}",
            lock.what(),
            lock.mine.holder,
            lock.mine.pid,
            lock.mine.host,
            human(lock.ttl),
            lock.chosen
        ),
    );
    Ok(lock)
}

impl Lock {
    /// What the lock is and why this one, e.g. "Kured's reboot lock on
    /// daemonset kured/kured (annotation weave.works/kured-node-lock); Kured
    /// runs as daemonset kured/kured" or "fleetctl's lock (configmap
    /// kube-system/fleetctl-lock); no Kured DaemonSet or pod in any namespace".
    pub fn describe(&self) -> String {
        format!("{}; {}", self.what(), self.chosen)
    }

    /// The lock itself, without why it was chosen.
    fn what(&self) -> String {
        match &self.kind {
            LockKind::Kured {
                namespace,
                name,
                annotation,
                ..
            } => format!(
                "Kured's reboot lock on daemonset {namespace}/{name} (annotation {annotation})"
            ),
            LockKind::ConfigMap { namespace, name } => {
                format!("fleetctl's lock (configmap {namespace}/{name})")
            }
        }
    }

    /// The holder id written into the lock.
    pub fn holder(&self) -> &str {
        &self.mine.holder
    }

    /// How long the lock stays valid without a heartbeat (Kured's TTL).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// With `--force-unlock`: the lock that was removed, described.
    pub fn forced(&self) -> Option<&str> {
        self.forced.as_deref()
    }

    /// Things the operator must read (Kured settings fleetctl cannot see, a
    /// Kured node left cordoned by a forced unlock, another Kured this lock
    /// does not hold back).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Refreshes the heartbeat to `now`, only if the lock is still exactly
    /// ours (resourceVersion precondition). [`LockLost`] in the error chain
    /// means it is not: stop. Any other error is transient (API down, a
    /// control-plane reboot): try again at the next beat.
    pub async fn heartbeat<K: Kubectl>(&self, api: &K, now: SystemTime) -> anyhow::Result<()> {
        let result = match &self.kind {
            LockKind::Kured { .. } => kured::heartbeat(self, api, now).await,
            LockKind::ConfigMap { .. } => configmap::heartbeat(self, api, now).await,
        };
        if let Err(e) = &result
            && let Some(lost) = e.downcast_ref::<LockLost>()
        {
            api.note("lock-lost", &lost.to_string());
        }
        result
    }

    /// Gives the lock back if it is still ours; safe to call again, and
    /// from any control-plane node.
    pub async fn release<K: Kubectl>(&self, api: &K) -> anyhow::Result<Released> {
        let released = match &self.kind {
            LockKind::Kured { .. } => kured::release(self, api).await?,
            LockKind::ConfigMap { .. } => configmap::release(self, api).await?,
        };
        let what = self.what();
        let detail = match &released {
            Released::Removed => format!("{what} released"),
            Released::AlreadyGone => format!("{what} was already released"),
            Released::TakenOver { by } => {
                format!("{what} left alone: it is now held by {by}")
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

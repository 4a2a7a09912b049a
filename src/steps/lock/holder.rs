//! Who holds a lock and whether they still run ([`Holder`], [`Liveness`],
//! [`LockState`]), what `--force-unlock` may do about it ([`judge`]), and
//! the messages an operator reads when the lock is held or lost.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::{HEARTBEAT_EVERY, Identity, Kubectl, LockOptions};
use crate::ssh::Output;
use crate::steps::runner::CommandFailed;

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
    pub(super) fn is_fleetctl(&self) -> bool {
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
    pub(super) fn is(&self, mine: &Mine) -> bool {
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
    pub(super) fn all_dead(&self, now: SystemTime, dead_after: Duration) -> bool {
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
pub(super) struct Mine {
    pub(super) holder: String,
    pub(super) host: String,
    pub(super) pid: u32,
    pub(super) started: String,
}

impl Mine {
    pub(super) fn new(me: &Identity, now: SystemTime) -> Mine {
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
pub(super) fn describe_holder(holder: &Holder, now: SystemTime) -> String {
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

pub(super) fn parse_time(text: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(text.trim()).ok()
}

pub(super) fn age(since: &str, now: SystemTime) -> Option<Duration> {
    now.duration_since(parse_time(since)?).ok()
}

/// `2h 12m 5s`: whole seconds.
pub(super) fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

pub(super) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

pub(super) fn failed<K: Kubectl>(api: &K, label: &str, out: &Output) -> anyhow::Error {
    anyhow::Error::new(CommandFailed::new(api.node(), label, out))
}

/// What to do about a lock someone else holds.
pub(super) enum Verdict {
    /// Stop with this.
    Refuse(LockHeld),
    /// `--force-unlock` allows removing it (then journal this).
    Remove(LockHeld),
}

/// `--force-unlock` removes a dead holder's lock; a live one (or one
/// fleetctl cannot judge) only with `--yes` as well. It removes at most
/// once per acquire (`already_forced`): if someone takes the lock again
/// right after, apply stops instead of fighting over it.
pub(super) fn judge(
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

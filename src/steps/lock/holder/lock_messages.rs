//! The messages an operator reads when the lock is held by someone else
//! ([`LockHeld`]) or was lost mid-run ([`LockLost`]), and how a holder is
//! described in them.

use std::fmt;
use std::time::{Duration, SystemTime};

use super::{HEARTBEAT_EVERY, Holder, Liveness, LockState, age, human};

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
        let yes_hint = "run fleetctl again with `--force-unlock --yes`";
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
                let every = human(HEARTBEAT_EVERY);
                if let Some((node, _)) = live.iter().find(|(_, l)| *l == Liveness::KuredNode) {
                    write!(
                        f,
                        "Kured is rebooting node {}: wait until it is back and Kured releases the lock, \
                         then retry. ",
                        node.id
                    )?;
                } else if let Some((_, Liveness::Alive { age, ttl })) = live
                    .iter()
                    .find(|(_, l)| matches!(l, Liveness::Alive { .. }))
                {
                    write!(
                        f,
                        "That fleetctl (an apply or a reboot) is alive as far as it can tell (its last heartbeat is {} \
                         old, and its lock stays valid for {} without one, which a node it waits \
                         for may take): wait for it to finish. ",
                        human(*age),
                        human(*ttl)
                    )?;
                } else if live.iter().any(|(_, l)| *l == Liveness::Unknown) {
                    f.write_str(
                        "It records no heartbeat (an older fleetctl), so fleetctl cannot tell \
                         whether it still runs. ",
                    )?;
                }
                if self.state.all_dead(self.now, self.dead_after) {
                    let why: Vec<String> = live
                        .iter()
                        .map(|(h, l)| match l {
                            Liveness::Exited => format!(
                                "{} ran on this machine as pid {}, which no longer runs",
                                h.id,
                                h.pid.as_deref().unwrap_or("?")
                            ),
                            Liveness::Dead { ttl, .. } => format!(
                                "no heartbeat for over {}, the time its lock stays valid without \
                                 one, while a running apply or reboot refreshes it every {every}",
                                human(*ttl)
                            ),
                            _ => String::new(),
                        })
                        .filter(|w| !w.is_empty())
                        .collect();
                    return write!(
                        f,
                        "That fleetctl looks dead: {}. Run fleetctl again with `--force-unlock` \
                         to remove its lock.",
                        why.join("; ")
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

impl LockLost {
    /// What a heartbeat returns on finding `lock` no longer this run's.
    pub(in crate::steps::lock) fn error(lock: &str, held_by: Option<String>) -> anyhow::Error {
        anyhow::Error::new(LockLost {
            lock: lock.to_string(),
            held_by,
        })
    }
}

impl fmt::Display for LockLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is no longer held by this fleetctl run: ", self.lock)?;
        match &self.held_by {
            Some(by) => write!(f, "it is now held by {by}")?,
            None => f.write_str(
                "it was removed (a fleetctl run with `--force-unlock` elsewhere, or by hand)",
            )?,
        }
        f.write_str(
            ". Stopping before anything else changes: find out who is working on this cluster \
             before running fleetctl again",
        )
    }
}

impl std::error::Error for LockLost {}

/// `fleetctl/bob@ops-1 (pid 77 on ops-1), started 2026-11-29T18:30:12Z,
/// last heartbeat 2026-11-29T19:29:50Z (22s ago)`, or `node w-2 since …`.
pub(in crate::steps::lock) fn describe_holder(holder: &Holder, now: SystemTime) -> String {
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

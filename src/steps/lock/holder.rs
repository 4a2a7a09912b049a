//! Who holds a lock and whether they still run ([`Holder`], [`Liveness`],
//! [`LockState`]), what `--force-unlock` may do about it ([`judge`]), and
//! the messages an operator reads when the lock is held or lost (`lock_messages`).

use std::time::{Duration, SystemTime};

use super::{HEARTBEAT_EVERY, Identity, Kubectl, LockOptions};
use crate::remote::kubectl::{ApiError, api_error};
use crate::ssh::Output;
use crate::steps::runner::CommandFailed;

mod lock_messages;
pub(super) use lock_messages::describe_holder;
pub use lock_messages::{LockHeld, LockLost};

// ---------------------------------------------------------------------------
// Holders

/// Who holds a lock, as recorded in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holder {
    /// A Kured node name, or `fleetctl/<user>@<host>`.
    pub id: String,
    /// The host and pid of a fleetctl holder.
    pub host: Option<String>,
    pub pid: Option<String>,
    /// Which process that pid was: its boot id and start time
    /// ([`process_identity`]); `None` from a fleetctl that did not record it.
    pub process: Option<String>,
    /// When it took the lock (RFC 3339, as recorded).
    pub started: Option<String>,
    /// A fleetctl holder's last heartbeat (RFC 3339); `None` for a Kured
    /// node and for a fleetctl older than heartbeats.
    pub heartbeat: Option<String>,
    /// How long its lock stays valid without a heartbeat, as it recorded
    /// it (Kured's entry `TTL`, the configmap's `ttl`).
    pub ttl: Option<Duration>,
    /// It ran on this machine and its process no longer exists (set by
    /// [`LocalProcesses::mark_gone`]).
    pub gone: bool,
}

impl Holder {
    pub(super) fn is_fleetctl(&self) -> bool {
        self.id.starts_with("fleetctl/")
    }

    /// Alive, dead, or not for fleetctl to judge, at `now`. A fleetctl is
    /// dead once its heartbeat is older than its own TTL (`fallback_ttl`
    /// when it recorded none): until then its lock is valid, and it may
    /// simply be waiting for a node to come back, which can take that long.
    /// A fleetctl on this machine whose process is gone is dead at once.
    pub fn liveness(&self, now: SystemTime, fallback_ttl: Duration) -> Liveness {
        if self.id.is_empty() {
            return Liveness::Unknown;
        }
        if !self.is_fleetctl() {
            return Liveness::KuredNode;
        }
        if self.gone {
            return Liveness::Exited;
        }
        let Some(beat) = self.heartbeat.as_deref().and_then(parse_time) else {
            return Liveness::Unknown;
        };
        // A heartbeat ahead of our clock is as fresh as it gets.
        let age = now.duration_since(beat).unwrap_or(Duration::ZERO);
        let ttl = self.ttl.unwrap_or(fallback_ttl);
        if age > ttl {
            Liveness::Dead { age, ttl }
        } else {
            Liveness::Alive { age, ttl }
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
    /// A fleetctl whose heartbeat is younger than its TTL.
    Alive { age: Duration, ttl: Duration },
    /// A fleetctl whose heartbeat is older than its TTL.
    Dead { age: Duration, ttl: Duration },
    /// A fleetctl that ran on this machine and whose process is gone.
    Exited,
    /// No heartbeat recorded (a fleetctl older than heartbeats, an entry
    /// with no holder): fleetctl cannot tell.
    Unknown,
}

impl Liveness {
    fn is_dead(self) -> bool {
        matches!(self, Liveness::Dead { .. } | Liveness::Exited)
    }
}

/// How this machine's processes are judged: a holder that ran here is gone
/// when its pid is not the process it recorded (none runs, or another one
/// started since). "Ran here" is the same host name *and* the same boot id
/// (`/proc/sys/kernel/random/boot_id`, recorded as the first half of
/// [`Holder::process`]): a host name alone is shared by two laptops called
/// `laptop`, containers and VMs cloned from one image, and a pid on one of
/// them says nothing about the other. A holder from an earlier boot of this
/// machine is not judged here either: it is dead by its TTL like any other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum LocalProcesses {
    /// Not judged (every holder may be alive).
    #[default]
    Unjudged,
    /// `/proc` on the machine called `host`, booted as `boot` (`None`: the
    /// boot id could not be read, and no holder is judged).
    System { host: String, boot: Option<String> },
    /// For tests: on `host`, booted as `boot`, these pids run as these
    /// processes.
    Fixed {
        host: String,
        boot: String,
        running: std::collections::BTreeMap<u32, String>,
    },
}

impl LocalProcesses {
    /// This machine, as `/proc` shows it.
    pub fn here(host: &str) -> LocalProcesses {
        LocalProcesses::System {
            host: host.into(),
            boot: boot_id(),
        }
    }

    fn running(&self, pid: u32) -> Option<String> {
        match self {
            LocalProcesses::Unjudged => None,
            LocalProcesses::System { .. } => process_identity(pid),
            LocalProcesses::Fixed { running, .. } => running.get(&pid).cloned(),
        }
    }

    /// Sets `gone` on each fleetctl holder that recorded this machine (its
    /// host name and its boot id), a pid and which process it was, when
    /// that process no longer runs here.
    pub(super) fn mark_gone(&self, state: &mut LockState) {
        let (host, boot) = match self {
            LocalProcesses::Unjudged => return,
            LocalProcesses::System {
                host,
                boot: Some(boot),
            } => (host, boot),
            LocalProcesses::System { boot: None, .. } => return,
            LocalProcesses::Fixed { host, boot, .. } => (host, boot),
        };
        let LockState::Held(holders) = state else {
            return;
        };
        for h in holders.iter_mut().filter(|h| h.is_fleetctl()) {
            let (Some(their_host), Some(pid), Some(process)) = (&h.host, &h.pid, &h.process) else {
                continue;
            };
            let Ok(pid) = pid.trim().parse::<u32>() else {
                continue;
            };
            let their_boot = process.split_once('/').map(|(b, _)| b);
            if their_host == host
                && their_boot == Some(boot.as_str())
                && self.running(pid).as_deref() != Some(process.as_str())
            {
                h.gone = true;
            }
        }
    }
}

/// This boot of this machine: the kernel's random boot id, new at every
/// boot (`/proc/sys/kernel/random/boot_id`, random(4)).
fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains('/')).then(|| id.to_string())
}

/// Which process `pid` is on this machine, `<boot id>/<start time>`: the
/// kernel's boot id (`/proc/sys/kernel/random/boot_id`) and the process's
/// start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`,
/// proc(5)). A pid is reused, a pid with its start time within one boot is
/// not. `None` when no such process runs (or `/proc` cannot be read).
pub fn process_identity(pid: u32) -> Option<String> {
    let boot = boot_id()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let start = stat_start_time(&stat)?;
    Some(format!("{boot}/{start}"))
}

/// Field 22 of a `/proc/<pid>/stat` line. The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses, so fields are
/// counted after its last `)`.
fn stat_start_time(stat: &str) -> Option<u64> {
    let (_, after) = stat.rsplit_once(')')?;
    after.split_whitespace().nth(19)?.parse().ok()
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
    /// Every holder is a fleetctl whose heartbeat stopped or whose process
    /// is gone: one `--force-unlock` may remove it.
    pub(super) fn all_dead(&self, now: SystemTime, dead_after: Duration) -> bool {
        match self {
            LockState::Held(holders) => holders
                .iter()
                .all(|h| h.liveness(now, dead_after).is_dead()),
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
    pub(super) process: Option<String>,
    pub(super) started: String,
}

impl Mine {
    pub(super) fn new(me: &Identity, now: SystemTime) -> Mine {
        Mine {
            holder: me.holder(),
            host: me.host.clone(),
            pid: me.pid,
            process: me.process.clone(),
            started: rfc3339(now),
        }
    }
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

/// Reads an object that may not exist (the lock configmap, Kured's
/// DaemonSet): what kubectl printed, `None` when the API server says
/// NotFound, the failure otherwise.
pub(super) async fn read_if_found<K: Kubectl>(
    api: &K,
    label: &str,
    args: &[String],
) -> anyhow::Result<Option<String>> {
    let out = api.kubectl(label, args, None).await?;
    if out.success() {
        return Ok(Some(out.stdout));
    }
    if api_error(&out.stderr) == Some(ApiError::NotFound) {
        return Ok(None);
    }
    Err(failed(api, label, &out))
}

/// What to do about a lock someone else holds.
pub(super) enum ForeignLockAction {
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
    mut state: LockState,
    opts: &LockOptions,
    now: SystemTime,
    already_forced: bool,
) -> ForeignLockAction {
    opts.local.mark_gone(&mut state);
    let all_dead = state.all_dead(now, opts.dead_after);
    let mut held = LockHeld {
        lock: lock.to_string(),
        state,
        now,
        dead_after: opts.dead_after,
        refused_force: false,
    };
    if !opts.force_unlock || already_forced {
        return ForeignLockAction::Refuse(held);
    }
    if all_dead || opts.force_yes {
        return ForeignLockAction::Remove(held);
    }
    held.refused_force = true;
    ForeignLockAction::Refuse(held)
}

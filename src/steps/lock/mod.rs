//! Apply's lock: only one apply per fleet at a time, and no Kured reboot
//! behind fleetctl's back while it runs.
//!
//! **Which lock.** Kured reboots a node only while it holds its own lock,
//! an annotation on a DaemonSet. So when Kured runs — in whatever namespace
//! its manifest or Helm release put it — fleetctl holds *that* lock, in
//! Kured's format with every slot taken, and Kured waits. fleetctl finds
//! Kured by the names, images and programs of every DaemonSet's containers
//! (`listing.rs`: records no field can forge), counting only one whose pods
//! can reboot a node (hostPID, privileged), then reads the flags and
//! environment of Kured's container alone (no other program's settings or
//! secrets); the operator can name it instead ([`LockOptions::kured`]).
//! Several Kured DaemonSets, or Kured pods that no DaemonSet explains, stop
//! apply: guessing would leave some Kured free to reboot nodes mid-upgrade;
//! look-alikes that cannot reboot a node are only warned about. Only with no Kured anywhere does
//! fleetctl take its own lock, a configmap; it never falls back to it
//! because Kured's lock could not be had.
//!
//! **In whose time.** Kured judges an entry's TTL by its node's clock, so
//! `created` and every heartbeat are written in the cluster's time: the
//! laptop's clock moved by the offset `clock.rs` measures, and apply
//! refuses to run when the two clocks are more than 5 minutes apart. Every
//! `now` this module takes is that cluster time.
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
//! longer ago than its own TTL (or [`LockOptions::dead_after`] when it
//! recorded none), or that ran on this machine and whose process is gone
//! ([`LocalProcesses`]), is dead and one `--force-unlock` removes it; a live
//! one (a heartbeat within its TTL, a Kured node
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
//! **The words**, one thing each, from the object in the API to the work
//! done under it:
//!
//! | name | what it is | where |
//! |---|---|---|
//! | [`Lock`] | the lock as taken: Kured's annotation or fleetctl's configmap, with [`Lock::heartbeat`] and [`Lock::release`] | this file |
//! | [`LockOptions`] | how [`acquire`] judges a lock someone else holds, and the TTL it writes | this file |
//! | [`TakeRequest`] | a request to take the lock: what the operator asked (`--kured`, `--force-unlock`, the timeouts the TTL outlasts), in plain values | `keeper.rs` |
//! | [`take_lock`] | takes it through the first control plane, in the cluster's time | `keeper.rs` |
//! | [`LockKeeper`] | the lock held with its heartbeat: refreshed through any control plane that answers (`ControlPlanes`, `planes.rs`), the lease renewed in the run's `Stop`, given back by [`LockKeeper::release`] | `keeper.rs` |
//! | [`lock_ttl`], [`LAPSE_MARGIN`] | how long the lock lives, and how long before it would lapse the run stops | `keeper.rs` |
//! | [`run_within_lease`] | runs the work raced against the lease and a second Ctrl-C | `within_lease.rs` |
//! | [`WorkOutcome`] | how the work under the lock ended: its result, and whether it was abandoned at once | `within_lease.rs` |
//!
//! Above them, in `commands/locked.rs`: `run_under_lock`, the skeleton each
//! locked command runs in (window, signals, journal, [`take_lock`], Kured's
//! gates, the work, [`LockKeeper::release`] on every path); `RunHandles`,
//! what the work has at hand there; `recheck_under_lock`, the one "still
//! valid under the lock?" (the fleet read again, judged by the command's
//! own closure); and `run_script`, the script run through
//! [`run_within_lease`].
//!
//! This file holds what both backends share (the seam, who we are, the
//! options, and the dispatch); `holder.rs` judges holders and words the
//! messages, `clock.rs` measures the cluster's time, `listing.rs` reads
//! kubectl's listings, `discovery.rs` finds Kured and reads its flags,
//! `kured.rs` is Kured's annotation lock, `configmap.rs` fleetctl's own;
//! `keeper.rs` keeps it while a command works (through the control planes of
//! `planes.rs`), `within_lease.rs` races that
//! work against its lease. Each has its tests beside it, against the fake
//! API server in `lock_testkit.rs` where they need the API.

pub mod clock;
mod configmap;
mod discovery;
mod holder;
mod keeper;
mod kured;
mod listing;
mod planes;
mod within_lease;

use std::future::Future;
use std::time::{Duration, SystemTime};

use super::runner::Remote;
use crate::remote::kubectl as k;
use crate::ssh::Output;

pub use configmap::{LockConfigMap, parse_lock_configmap};
pub use discovery::{
    KURED_ANNOTATION, KURED_NAME, KURED_NAMESPACE, KuredConfig, KuredInfo, MAX_CONCURRENCY,
};
use holder::{
    ForeignLockAction, Mine, describe_holder, failed, human, judge, parse_time, read_if_found,
    rfc3339,
};
pub use holder::{
    Holder, Liveness, LocalProcesses, LockHeld, LockLost, LockState, process_identity,
};
pub use keeper::{LAPSE_MARGIN, LockKeeper, TakeRequest, heartbeat_every, lock_ttl, take_lock};
pub use kured::{kured_lock_state, kured_lock_value};
pub use listing::{ContainerInfo, DaemonSetInfo, Marker, parse_daemonsets};
pub use within_lease::{WorkOutcome, run_within_lease, stopped_at_once};

/// How long a lock fleetctl holds stays valid without a heartbeat. Kured
/// takes an entry back once its TTL ran out, so this must outlast the
/// longest stretch apply cannot refresh it: the reboot of the control-plane
/// node kubectl runs on, which `--node-timeout` (15 minutes by default)
/// bounds. Shorter, and Kured could reboot a staged node mid-upgrade.
pub const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// How often apply should call [`Lock::heartbeat`].
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(30);

/// A holder that recorded no TTL of its own is dead once its heartbeat is
/// older than this: the TTL fleetctl writes by default. Anything shorter
/// would call dead a fleetctl that is only waiting for a node to boot.
pub const DEFAULT_DEAD_AFTER: Duration = DEFAULT_TTL;

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
    /// Which process the pid is ([`process_identity`]), so that a later
    /// fleetctl on this machine can tell this one has exited.
    pub process: Option<String>,
}

impl Identity {
    /// This process: `$USER` (or `$LOGNAME`), the machine's hostname, its
    /// pid, its boot id and start time.
    pub fn local() -> Identity {
        let pid = std::process::id();
        Identity {
            user: local_user(),
            host: local_host(),
            pid,
            process: process_identity(pid),
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
    /// A holder that recorded no TTL is dead once its heartbeat is older;
    /// see [`DEFAULT_DEAD_AFTER`].
    pub dead_after: Duration,
    /// How a holder that ran on this machine is judged.
    pub local: LocalProcesses,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            kured: None,
            force_unlock: false,
            force_yes: false,
            ttl: DEFAULT_TTL,
            dead_after: DEFAULT_DEAD_AFTER,
            local: LocalProcesses::Unjudged,
        }
    }
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
        /// Kured's container's `command` then `args`: the blockers it
        /// checks before each reboot (`crate::checks::parse_kured_gates`).
        argv: Vec<String>,
        /// Its `env` (`None`: a `valueFrom`) and image, which say how
        /// `KURED_*` variables add to those flags
        /// (`crate::checks::parse_kured_settings`).
        env: Vec<crate::checks::KuredEnvVar>,
        image: String,
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
    let lock = match discovery::find(api, opts).await? {
        discovery::Found::Kured(found) => kured::acquire(api, opts, me, now, *found).await?,
        discovery::Found::Nowhere { warnings } => {
            let mut lock = configmap::acquire(api, opts, me, now).await?;
            lock.warnings.extend(warnings);
            lock
        }
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

    /// Kured's command line when the lock is Kured's: what its own gates
    /// are, which fleetctl keeps while it holds Kured off.
    pub fn kured_argv(&self) -> Option<&[String]> {
        match &self.kind {
            LockKind::Kured { argv, .. } => Some(argv),
            LockKind::ConfigMap { .. } => None,
        }
    }

    /// Kured's container's env and image when the lock is Kured's.
    pub fn kured_env(&self) -> Option<(&[crate::checks::KuredEnvVar], &str)> {
        match &self.kind {
            LockKind::Kured { env, image, .. } => Some((env, image)),
            LockKind::ConfigMap { .. } => None,
        }
    }

    /// `namespace/name` of Kured's DaemonSet when the lock is Kured's.
    pub fn kured_daemonset(&self) -> Option<String> {
        match &self.kind {
            LockKind::Kured {
                namespace, name, ..
            } => Some(format!("{namespace}/{name}")),
            LockKind::ConfigMap { .. } => None,
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
mod lock_fuzz;
#[cfg(test)]
mod lock_testkit;
#[cfg(test)]
mod tests;

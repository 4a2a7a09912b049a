//! The lock while `apply`, `reboot` or `rollback` works under it: taken
//! through a control plane ([`take_lock`], as a [`TakeRequest`] asks),
//! kept by a [`LockKeeper`] (a heartbeat through any control plane that
//! answers (`planes.rs`), watched, with the lease renewed in the run's [`Stop`]), and
//! given back on every path ([`LockKeeper::release`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;

use super::clock::ClockOffset;
use super::planes::{ControlPlanes, heartbeat_round, release_through};
use super::{Identity, Kubectl, KuredRef, LocalProcesses, Lock, LockOptions};
use crate::inventory::{Inventory, Role};
use crate::ssh;
use crate::steps::journal::Journal;
use crate::steps::lock;
use crate::steps::runner::Remote;
use crate::steps::{Lease, Rerun, Stop};
use crate::ui::Printer;
use crate::usage;

/// A request to take the lock: what the operator asked about it, as plain
/// values (`commands/run_config.rs` builds it from the command line and the
/// inventory).
pub struct TakeRequest {
    /// `--kured`, else the inventory's `kured:`; `None`: find Kured.
    pub kured: Option<KuredRef>,
    pub force_unlock: bool,
    /// `--force-unlock --yes`: also a holder that may be alive.
    pub yes: bool,
    /// `--node-timeout` and `--drain-timeout`: the lock's TTL outlasts the
    /// longest step apply starts (see [`lock_ttl`]).
    pub node_timeout: Duration,
    pub drain_timeout: Duration,
    /// The command that resumes, named when the lease lapses.
    pub rerun: Rerun,
}

/// The lock held, with the heartbeat that keeps it: refreshed in the
/// background every [`heartbeat_every`] through [`ControlPlanes`], the run
/// stopped when that fails for good (and the work raced against the lease
/// by [`run_within_lease`](super::run_within_lease)), and given back by
/// [`LockKeeper::release`] on every path (the caller runs its work under
/// `catch_unwind` so that a panic releases it too).
pub struct LockKeeper {
    lock: Arc<Lock>,
    planes: Arc<tokio::sync::Mutex<ControlPlanes>>,
    /// Watches the heartbeat task; ends when it does.
    watching: tokio::task::JoinHandle<()>,
    quit: Arc<tokio::sync::Notify>,
    quitting: Arc<AtomicBool>,
}

/// The lock's TTL: apply starts a step only if it ends within the lease
/// (the TTL after the last heartbeat, less [`LAPSE_MARGIN`]), so the TTL
/// must outlast the longest one (a node's reboot and wait, bounded by
/// `--node-timeout`; a drain, `--drain-timeout` and a minute; a kubeadm
/// step, 20 minutes) with room for a few missed heartbeats.
pub fn lock_ttl(node_timeout: Duration, drain_timeout: Duration) -> Duration {
    let longest = node_timeout
        .max(drain_timeout + Duration::from_secs(60))
        .max(crate::steps::KUBEADM_TIMEOUT);
    lock::DEFAULT_TTL.max(longest + 2 * LAPSE_MARGIN + Duration::from_secs(60))
}

/// A test build's (`debug_assertions`, as `cargo test` builds the binary
/// the cli tests drive) stand-in for one of the lock's durations, from the
/// environment variable `name` (a duration, `2s`), so that a cli test can
/// see a lease run out without waiting out real minutes. A release build
/// never reads it.
fn test_duration(name: &str) -> Option<Duration> {
    #[cfg(debug_assertions)]
    if let Some(d) = std::env::var(name)
        .ok()
        .and_then(|v| humantime::parse_duration(v.trim()).ok())
        .filter(|d| !d.is_zero())
    {
        return Some(d);
    }
    let _ = name;
    None
}

/// How long before the lock would lapse (its TTL after the last heartbeat
/// that landed) apply stops, and the least lease a step must have left to
/// start: room for two missed beats and a slow API server.
pub const LAPSE_MARGIN: Duration = Duration::from_secs(60);

/// Takes the lock as `request` asks: connects to the first control-plane
/// node (with `opts`, the run's SSH settings), takes the lock there and
/// starts its heartbeat; a lost lock makes `stop` stop the run at its next
/// safe point, and `stop` knows the lock's lease from then on.
pub async fn take_lock(
    inv: &Inventory,
    opts: ssh::Options,
    request: &TakeRequest,
    journal: &Arc<Journal>,
    printer: &Printer,
    stop: &Stop,
) -> anyhow::Result<LockKeeper> {
    let first = inv.first_control_plane();
    let targets: Vec<ssh::Target> = inv
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane)
        .map(|n| ssh::resolve(inv, n))
        .collect::<anyhow::Result<_>>()
        .map_err(|e| usage!("{e:#}"))?;
    let Some(target) = targets.first() else {
        return Err(usage!(
            "the inventory has no control-plane node to take the lock through"
        ));
    };
    let session = ssh::connect(target, &opts)
        .await
        .with_context(|| format!("{}: connecting to take the lock", first.name))?;
    for w in session.warnings() {
        printer.warn(w);
    }
    let api = Remote::new(Arc::new(session), journal.clone());
    // Kured judges the lock by the cluster's clock: write it in that time,
    // and do not run at all when the clocks are too far apart.
    let clock = lock::clock::measure(&api).await?;
    let me = Identity::local();
    let ttl = lock_ttl(request.node_timeout, request.drain_timeout);
    let lock_opts = LockOptions {
        kured: request.kured.clone(),
        force_unlock: request.force_unlock,
        force_yes: request.force_unlock && request.yes,
        ttl,
        // A holder that recorded no TTL of its own gets as long as ours.
        dead_after: ttl,
        local: LocalProcesses::here(&me.host),
    };
    let taken = Instant::now();
    let held = Arc::new(
        acquire_in_clusters_time(
            &api,
            clock,
            &first.name,
            &lock_opts,
            &me,
            lock::clock::laptop_now(),
        )
        .await?,
    );
    if clock.by >= Duration::from_secs(1) {
        printer.debug(&format!(
            "this machine's clock is {} {} {}'s: the lock is written in the cluster's time",
            humantime::format_duration(Duration::from_secs(clock.by.as_secs())),
            if clock.cluster_ahead {
                "behind"
            } else {
                "ahead of"
            },
            first.name
        ));
    }
    stop.hold_lease(Lease {
        what: held.describe(),
        renewed: taken,
        ttl: held.ttl(),
        margin: LAPSE_MARGIN,
        rerun: request.rerun,
    });
    if let Some(prev) = held.forced() {
        printer.warn(&format!("--force-unlock removed {prev}"));
    }
    for w in held.warnings() {
        printer.warn(w);
    }
    printer.note(&format!("holding {}", held.describe()));
    let planes = Arc::new(tokio::sync::Mutex::new(ControlPlanes {
        remote: api,
        targets,
        current: 0,
        opts,
        journal: journal.clone(),
    }));
    let quit = Arc::new(tokio::sync::Notify::new());
    let quitting = Arc::new(AtomicBool::new(false));
    let beating = tokio::spawn(heartbeat(
        held.clone(),
        clock,
        planes.clone(),
        quit.clone(),
        stop.clone(),
        printer.clone(),
    ));
    let watching = tokio::spawn(watch_heartbeat(beating, stop.clone(), quitting.clone()));
    Ok(LockKeeper {
        lock: held,
        planes,
        watching,
        quit,
        quitting,
    })
}

/// The lock taken through `api` once the clocks are judged: refused, with
/// nothing read or written, when this machine's clock (`laptop`) and
/// `node`'s are further apart than the bound; else written in the
/// cluster's time (`clock`), which is how Kured judges its TTL.
async fn acquire_in_clusters_time<K: Kubectl>(
    api: &K,
    clock: ClockOffset,
    node: &str,
    opts: &LockOptions,
    me: &Identity,
    laptop: SystemTime,
) -> anyhow::Result<Lock> {
    clock.within_bound(node).map_err(anyhow::Error::new)?;
    lock::acquire(api, opts, me, clock.cluster_time(laptop)).await
}

/// The heartbeat task ending before apply let it go (a panic, a bug) stops
/// the run at its next safe point: nothing keeps the lock alive any more,
/// and the lease runs out on its own (see [`Stop::lapsing`]).
async fn watch_heartbeat(
    beating: tokio::task::JoinHandle<()>,
    stop: Stop,
    quitting: Arc<AtomicBool>,
) {
    let ended = beating.await;
    if quitting.load(Ordering::SeqCst) {
        return;
    }
    let how = match ended {
        Ok(()) => "it ended".to_string(),
        Err(e) if e.is_panic() => "it panicked (a bug in fleetctl)".to_string(),
        Err(e) => format!("it was cancelled ({e})"),
    };
    stop.abort(format!(
        "the lock's heartbeat stopped ({how}), so the lock would lapse while apply still acts"
    ));
}

/// Refreshes the lock until told to quit. A lost lock stops the run. A
/// heartbeat that fails otherwise (the node kubectl runs on is rebooting)
/// is tried again at once through the next control plane that answers;
/// [`Stop::lapsing`] stops the run if none does before the lease's margin.
async fn heartbeat(
    lock: Arc<Lock>,
    clock: ClockOffset,
    planes: Arc<tokio::sync::Mutex<ControlPlanes>>,
    quit: Arc<tokio::sync::Notify>,
    stop: Stop,
    printer: Printer,
) {
    let mut warned = false;
    loop {
        tokio::select! {
            _ = quit.notified() => return,
            _ = tokio::time::sleep(heartbeat_every()) => {}
        }
        let mut planes = planes.lock().await;
        if !heartbeat_round(&lock, clock, &mut *planes, &stop, &mut warned, &printer).await {
            return;
        }
    }
}

impl LockKeeper {
    /// The lock as taken.
    pub fn lock(&self) -> &lock::Lock {
        &self.lock
    }

    /// Stops the heartbeat, then gives the lock back (through any control
    /// plane that answers); a failure is a warning with what to do.
    pub async fn release(self, printer: &Printer) {
        self.quitting.store(true, Ordering::SeqCst);
        self.quit.notify_one();
        let _ = self.watching.await;
        let mut planes = self.planes.lock().await;
        if let Err(e) = release_through(&self.lock, &mut *planes).await {
            printer.warn(&format!(
                "could not release {}: {e:#}. It expires by itself after {} (Kured then goes on); \
                 or remove it with `--force-unlock` on the next run",
                self.lock.describe(),
                humantime::format_duration(self.lock.ttl())
            ));
        }
    }
}

/// How often the heartbeat refreshes the lock: [`lock::HEARTBEAT_EVERY`],
/// or in a test build `FLEETCTL_TEST_HEARTBEAT` ([`test_duration`]).
pub fn heartbeat_every() -> Duration {
    test_duration("FLEETCTL_TEST_HEARTBEAT").unwrap_or(lock::HEARTBEAT_EVERY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_heartbeat_task_that_dies_stops_the_run_and_one_told_to_quit_does_not() {
        let stop = Stop::default();
        let quitting = Arc::new(AtomicBool::new(false));
        let dies = tokio::spawn(async { panic!("a bug in the heartbeat") });
        watch_heartbeat(dies, stop.clone(), quitting).await;
        assert!(stop.requested());
        assert_eq!(
            stop.reason().unwrap(),
            "the lock's heartbeat stopped (it panicked (a bug in fleetctl)), so the lock would \
             lapse while apply still acts"
        );

        let stop = Stop::default();
        let quitting = Arc::new(AtomicBool::new(true));
        watch_heartbeat(tokio::spawn(async {}), stop.clone(), quitting).await;
        assert!(!stop.requested(), "released on purpose");
    }

    #[test]
    fn the_heartbeat_interval_is_the_constant_unless_a_test_build_is_told() {
        // SAFETY (edition 2024 marks set_var unsafe): no other test of this
        // binary reads or writes FLEETCTL_TEST_HEARTBEAT.
        unsafe { std::env::remove_var("FLEETCTL_TEST_HEARTBEAT") };
        assert_eq!(heartbeat_every(), lock::HEARTBEAT_EVERY);
        unsafe { std::env::set_var("FLEETCTL_TEST_HEARTBEAT", "2s") };
        assert_eq!(heartbeat_every(), Duration::from_secs(2));
        unsafe { std::env::set_var("FLEETCTL_TEST_HEARTBEAT", "0s") };
        assert_eq!(heartbeat_every(), lock::HEARTBEAT_EVERY);
        unsafe { std::env::remove_var("FLEETCTL_TEST_HEARTBEAT") };
    }

    /// What `a_laptop_clock_30_minutes_behind_the_fleet_is_refused_before_any_lock_is_written`
    /// and the "minutes behind" cli test proved on real-OS fleets.
    #[tokio::test]
    async fn a_clock_too_far_off_is_refused_before_the_api_is_asked_and_a_near_one_writes_cluster_time()
     {
        use crate::steps::lock::lock_testkit::{Api, me};
        let laptop = humantime::parse_rfc3339("2026-11-29T19:30:12Z").unwrap();
        let behind =
            |secs: u64| ClockOffset::measured(laptop, laptop + Duration::from_secs(secs), laptop);
        let api = Api::default();
        let e = acquire_in_clusters_time(
            &api,
            behind(30 * 60),
            "cp-1",
            &LockOptions::default(),
            &me(),
            laptop,
        )
        .await
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("this machine's clock is 30m behind cp-1's"),
            "{e}"
        );
        assert!(api.verbs().is_empty(), "asked the API: {:?}", api.verbs());
        assert!(api.notes().is_empty());

        // 4 minutes: taken, started and beating in the cluster's time.
        acquire_in_clusters_time(
            &api,
            behind(4 * 60),
            "cp-1",
            &LockOptions::default(),
            &me(),
            laptop,
        )
        .await
        .unwrap();
        let state = api.state();
        let data = &state.lock_configmap().unwrap().data;
        assert_eq!(data["started"], "2026-11-29T19:34:12Z");
        assert_eq!(data["heartbeat"], "2026-11-29T19:34:12Z");
    }

    #[test]
    fn the_ttl_outlasts_the_longest_step_with_room_for_missed_heartbeats() {
        let m = |n: u64| Duration::from_secs(n * 60);
        // kubeadm's 20 minutes are the longest step with the defaults.
        assert_eq!(lock_ttl(m(15), m(5)), m(23));
        assert_eq!(lock_ttl(m(1), m(1)), m(23));
        assert_eq!(lock_ttl(m(10), m(30)), m(34));
        assert_eq!(lock_ttl(m(40), m(5)), m(43));
        // What roll checks before a reboot fits in a fresh lease.
        for (node, drain) in [(m(15), m(5)), (m(40), m(5)), (m(5), m(30))] {
            let ttl = lock_ttl(node, drain);
            assert!(node + LAPSE_MARGIN < ttl && drain + m(1) + LAPSE_MARGIN < ttl);
            assert!(crate::steps::KUBEADM_TIMEOUT + LAPSE_MARGIN < ttl);
        }
    }
}

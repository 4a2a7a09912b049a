//! When apply stops at its next safe point: Ctrl-C (or SIGTERM, SIGHUP), a
//! reason of fleetctl's own (the lock was lost), or the lock's lease about to
//! lapse. Its own file because it is one concept that every step consults
//! through [`super::context::Apply`], apart from what the run carries.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why to stop at the next safe point: Ctrl-C (or SIGTERM, SIGHUP) presses
/// so far, shared with the signal handler, or a reason of fleetctl's own
/// (the lock was lost).
#[derive(Debug, Clone, Default)]
pub struct Stop {
    presses: Arc<AtomicU8>,
    /// What the first press was (`Ctrl-C`, `SIGTERM`, `SIGHUP`), for the report.
    signal: Arc<Mutex<Option<&'static str>>>,
    reason: Arc<Mutex<Option<String>>>,
    /// The lock's lease, once it is held: apply acts only while it lasts.
    lease: Arc<Mutex<Option<Lease>>>,
    /// The least margin any lease gets: the fleet's worst clock skew
    /// ([`Stop::widen_margin`]).
    margin_floor: Arc<Mutex<Duration>>,
}

/// The lock as the heartbeat keeps it: valid for `ttl` after the last
/// heartbeat that landed (Kured's own rule: an entry expires `TTL` after its
/// `created`). apply stops `margin` before that, so that it never acts on a
/// lock that may have lapsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The lock, described for messages.
    pub what: String,
    pub renewed: Instant,
    pub ttl: Duration,
    pub margin: Duration,
    /// The command that resumes, named in the lapse's message.
    pub rerun: Rerun,
}

/// The command an operator runs again to resume a run that stopped: every
/// "then run … again" a step or the lock says names it, so that a failed
/// `fleetctl reboot` never sends the operator to `fleetctl apply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rerun {
    Apply,
    Reboot,
    Rollback,
}

impl std::fmt::Display for Rerun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Rerun::Apply => "fleetctl apply",
            Rerun::Reboot => "fleetctl reboot",
            Rerun::Rollback => "fleetctl rollback",
        })
    }
}

impl Lease {
    /// Until when apply may act on the lock.
    pub fn safe_until(&self) -> Instant {
        self.renewed + self.ttl.saturating_sub(self.margin)
    }

    /// Whether a step that takes up to `bound` from `now` ends before the
    /// lease's margin; `Err` says why not.
    pub fn room_for(&self, step: &str, bound: Duration, now: Instant) -> Result<(), LeaseLapsing> {
        if now + bound <= self.safe_until() {
            return Ok(());
        }
        let left = self.safe_until().saturating_duration_since(now);
        Err(LeaseLapsing(format!(
            "not starting `{step}`: it may take up to {}, but {} was last refreshed {} ago and, \
             without another heartbeat, must not be relied on in {} (its TTL of {} less a margin of \
             {}). The heartbeat keeps failing: fix what stops it (the API server through the \
             control-plane nodes), then run `{}` again; it resumes where it stopped",
            secs(bound),
            self.what,
            secs(now.saturating_duration_since(self.renewed)),
            secs(left),
            secs(self.ttl),
            secs(self.margin),
            self.rerun
        )))
    }

    /// `Some` once `now` is past the lease's margin.
    pub fn lapsing(&self, now: Instant) -> Option<LeaseLapsing> {
        (now >= self.safe_until()).then(|| {
            LeaseLapsing(format!(
                "stopped at once: {} was last refreshed {} ago and lapses {} after its last \
                 heartbeat, so fleetctl no longer relies on it (nothing further was started; a \
                 step already running on a node goes on there). Check the nodes (`fleetctl \
                 status`), fix what stops the heartbeat (the API server through the control-plane \
                 nodes), then run `{}` again: it resumes from the fleet's real state",
                self.what,
                secs(now.saturating_duration_since(self.renewed)),
                secs(self.ttl),
                self.rerun
            ))
        })
    }
}

fn secs(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// apply stopped (or did not start a step) because the lock could lapse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseLapsing(pub String);

impl std::fmt::Display for LeaseLapsing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LeaseLapsing {}

impl Stop {
    /// Counts a press of `signal`; returns how many there have been.
    pub fn press(&self, signal: &'static str) -> u8 {
        if let Ok(mut s) = self.signal.lock() {
            s.get_or_insert(signal);
        }
        self.presses
            .fetch_add(1, Ordering::SeqCst)
            .saturating_add(1)
    }

    /// The signal that asked to stop first, if one did.
    pub fn signal(&self) -> Option<&'static str> {
        self.signal.lock().ok().and_then(|s| *s)
    }

    /// Stops at the next safe point for `reason` (said in the report).
    pub fn abort(&self, reason: String) {
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(reason);
        }
    }

    /// What a run stopped at a safe point says: why (the signal, or the
    /// reason given to [`Stop::abort`]), the node `drained` but not rebooted
    /// and uncordoned again, what was `done`, and the command that resumes.
    pub fn interrupted(&self, drained: Option<&str>, done: &[String], rerun: Rerun) -> Interrupted {
        let mut msg = match self.reason() {
            Some(reason) => format!("stopped at a safe point: {reason}"),
            None => format!(
                "stopped by {} at a safe point",
                self.signal().unwrap_or("Ctrl-C")
            ),
        };
        if let Some(n) = drained {
            msg.push_str(&format!(
                " ({n} was drained but not rebooted, and was uncordoned again)"
            ));
        }
        if !done.is_empty() {
            msg.push_str(&format!("; finished in this run: {}", done.join(", ")));
        }
        msg.push_str(&format!(
            ". Run `{rerun}` again to continue where it stopped"
        ));
        Interrupted(msg)
    }

    pub fn requested(&self) -> bool {
        self.presses.load(Ordering::SeqCst) > 0 || self.reason().is_some()
    }

    /// The reason given to [`Stop::abort`], if any.
    pub fn reason(&self) -> Option<String> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }

    /// The lock was taken (or its heartbeat landed) at `at`.
    pub fn hold_lease(&self, mut lease: Lease) {
        if let Ok(floor) = self.margin_floor.lock() {
            lease.margin = lease.margin.max(*floor);
        }
        if let Ok(mut l) = self.lease.lock() {
            *l = Some(lease);
        }
    }

    /// Makes the lease's margin (this one and every later one) at least
    /// `margin`: a node whose clock runs ahead of the one the lock is
    /// written in sees it that much older, so apply must stop acting that
    /// much sooner (issue 38; `steps::lock::clock::fleet_skew`).
    pub fn widen_margin(&self, margin: Duration) {
        if let Ok(mut floor) = self.margin_floor.lock() {
            *floor = (*floor).max(margin);
        }
        if let Ok(mut l) = self.lease.lock()
            && let Some(lease) = l.as_mut()
        {
            lease.margin = lease.margin.max(margin);
        }
    }

    /// The margin the lease has now, if one is held.
    pub fn lease_margin(&self) -> Option<Duration> {
        self.lease().map(|l| l.margin)
    }

    /// A heartbeat landed at `at`.
    pub fn renew_lease(&self, at: Instant) {
        if let Ok(mut l) = self.lease.lock()
            && let Some(lease) = l.as_mut()
        {
            lease.renewed = lease.renewed.max(at);
        }
    }

    fn lease(&self) -> Option<Lease> {
        self.lease.lock().ok().and_then(|l| l.clone())
    }

    /// `Some` once the lock is past its lease's margin without a heartbeat.
    pub fn lapsed_now(&self) -> Option<LeaseLapsing> {
        self.lease()?.lapsing(Instant::now())
    }

    /// Refuses to start `step`, which may take up to `bound`, when the lock
    /// (as of its last heartbeat) would reach its margin first. Without a
    /// lease (no lock held, as in tests of single steps) anything may start.
    pub fn ensure_lease(&self, step: &str, bound: Duration) -> anyhow::Result<()> {
        match self.lease() {
            Some(lease) => lease
                .room_for(step, bound, Instant::now())
                .map_err(anyhow::Error::new),
            None => Ok(()),
        }
    }

    /// Resolves once the lock reaches its margin without a heartbeat; never
    /// while no lock is held. Raced against the whole run, so that a wait
    /// (a node's boot, kubeadm, a drain) stops at once rather than at its
    /// own timeout.
    pub async fn lapsing(&self) -> LeaseLapsing {
        loop {
            let Some(lease) = self.lease() else {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            if let Some(lapsing) = lease.lapsing(Instant::now()) {
                return lapsing;
            }
            // A heartbeat may move it meanwhile: look again when it is due.
            tokio::time::sleep_until(lease.safe_until().into()).await;
        }
    }
}

/// The run stopped because the operator asked it to.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

#[cfg(test)]
mod tests {
    use super::*;

    /// SIGTERM (or Ctrl-C, SIGHUP): the first press asks for a safe point
    /// and is the one named; the second ends the run at once. What the
    /// stop then says is `stop_reports`'s.
    #[test]
    fn the_first_signal_asks_for_a_safe_point_and_is_the_one_named() {
        let stop = Stop::default();
        assert!(!stop.requested());
        assert_eq!(stop.press("SIGTERM"), 1);
        assert!(stop.requested());
        assert_eq!(stop.press("Ctrl-C"), 2, "the second press ends it at once");
        assert_eq!(stop.signal(), Some("SIGTERM"), "the first one is named");
    }

    /// Issue 38: a node's clock ahead of the lock's widens the margin of
    /// the lease held now and of every later one (a heartbeat's re-hold).
    #[test]
    fn the_fleets_clock_skew_widens_every_leases_margin() {
        let stop = Stop::default();
        stop.widen_margin(Duration::from_secs(30));
        stop.hold_lease(lease(Instant::now()));
        assert_eq!(stop.lease_margin(), Some(Duration::from_secs(60)));
        stop.widen_margin(Duration::from_secs(240));
        assert_eq!(stop.lease_margin(), Some(Duration::from_secs(240)));
        stop.hold_lease(lease(Instant::now()));
        assert_eq!(stop.lease_margin(), Some(Duration::from_secs(240)));
    }

    fn lease(renewed: Instant) -> Lease {
        Lease {
            what: "fleetctl's lock (configmap kube-system/fleetctl-lock)".into(),
            renewed,
            ttl: Duration::from_secs(18 * 60),
            margin: Duration::from_secs(60),
            rerun: Rerun::Apply,
        }
    }

    #[test]
    fn a_step_starts_only_if_it_ends_within_the_lease_less_its_margin() {
        let t0 = Instant::now();
        let l = lease(t0);
        // 17 minutes of lease are left: a 15-minute reboot fits.
        assert!(
            l.room_for("cp-1: reboot", Duration::from_secs(15 * 60), t0)
                .is_ok()
        );
        assert!(
            l.room_for("cp-1: reboot", Duration::from_secs(17 * 60), t0)
                .is_ok()
        );
        // Three minutes later, with no heartbeat since, it no longer does.
        let later = t0 + Duration::from_secs(3 * 60);
        let err = l
            .room_for("cp-1: reboot", Duration::from_secs(15 * 60), later)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "not starting `cp-1: reboot`: it may take up to 15m, but fleetctl's lock (configmap \
             kube-system/fleetctl-lock) was last refreshed 3m ago and, without another heartbeat, \
             must not be relied on in 14m (its TTL of 18m less a margin of 1m). The heartbeat keeps \
             failing: fix what stops it (the API server through the control-plane nodes), then run \
             `fleetctl apply` again; it resumes where it stopped"
        );
    }

    #[test]
    fn the_lease_lapses_at_its_margin_and_a_heartbeat_moves_it() {
        let t0 = Instant::now();
        let l = lease(t0);
        assert_eq!(l.lapsing(t0 + Duration::from_secs(16 * 60)), None);
        let lapsing = l.lapsing(t0 + Duration::from_secs(17 * 60)).unwrap();
        assert!(
            lapsing
                .to_string()
                .starts_with("stopped at once: fleetctl's lock (configmap kube-system/fleetctl-lock) was last refreshed 17m ago"),
            "{lapsing}"
        );
        let stop = Stop::default();
        assert_eq!(stop.lapsed_now(), None, "no lock, no lease");
        assert!(stop.ensure_lease("anything", Duration::MAX / 4).is_ok());
        stop.hold_lease(l.clone());
        stop.renew_lease(t0 + Duration::from_secs(10 * 60));
        stop.renew_lease(t0 + Duration::from_secs(5 * 60));
        assert_eq!(
            stop.lease().unwrap().renewed,
            t0 + Duration::from_secs(10 * 60),
            "a late answer to an older heartbeat never moves it back"
        );
    }

    #[tokio::test]
    async fn lapsing_resolves_once_the_margin_is_reached_and_not_before() {
        let stop = Stop::default();
        let ttl = Duration::from_secs(600);
        let margin = Duration::from_secs(60);
        // Renewed just now: ten minutes of lease, nothing to report.
        let held = |renewed| Lease {
            what: "the lock".into(),
            renewed,
            ttl,
            margin,
            rerun: Rerun::Reboot,
        };
        stop.hold_lease(held(Instant::now()));
        let waiting = tokio::time::timeout(Duration::from_millis(300), stop.lapsing()).await;
        assert!(waiting.is_err(), "resolved with a fresh lease");
        // Last renewed past its margin: resolves at once.
        let long_ago = Instant::now()
            .checked_sub(ttl)
            .expect("the clock is past ten minutes since boot");
        stop.hold_lease(held(long_ago));
        let lapsing = tokio::time::timeout(Duration::from_secs(60), stop.lapsing())
            .await
            .expect("resolves");
        assert!(
            lapsing
                .to_string()
                .contains("the lock was last refreshed 10m")
        );
        assert!(
            lapsing.to_string().ends_with(
                "then run `fleetctl reboot` again: it resumes from the fleet's real state"
            ),
            "the lapse names the command that resumes: {lapsing}"
        );
        assert!(stop.lapsed_now().is_some());
    }
}

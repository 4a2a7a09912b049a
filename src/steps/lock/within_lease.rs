//! The work done under the lock, raced against its lease and a second
//! Ctrl-C: [`run_within_lease`], the one harness `apply`, `reboot` and
//! `rollback` run their work in, so that they cannot drift apart (before
//! issue 24 only apply raced its work against the lease), and
//! [`WorkOutcome`], how that work ended.

use std::sync::Mutex;

use crate::steps::{Interrupted, Ledger, Rerun, Stop};

/// How the work done under the lock ended: its result, and whether a
/// second Ctrl-C abandoned it half-way (then the fleet is not read again
/// for the report: the operator asked to stop now).
pub struct WorkOutcome<T> {
    pub result: anyhow::Result<T>,
    pub at_once: bool,
}

/// Runs `work` (apply's hops, reboot's rolling reboots, rollback's) within
/// the lock's lease: the one loop the commands share, so they cannot drift
/// apart again. `work` ends early, at once and whatever it waits for (a
/// node's boot, kubeadm, a drain, a soak), on a second Ctrl-C or when the
/// lock's lease reaches its margin without a heartbeat ([`Stop::lapsing`]:
/// the TTL after the last heartbeat that landed, less
/// [`LAPSE_MARGIN`](super::LAPSE_MARGIN)); then nothing else starts and no
/// other node is rebooted. The heartbeat itself runs
/// from [`take_lock`](super::take_lock) until
/// [`LockKeeper::release`](super::LockKeeper::release).
pub async fn run_within_lease<T>(
    stop: &Stop,
    second: &tokio::sync::Notify,
    ledger: &Mutex<Ledger>,
    rerun: Rerun,
    work: impl std::future::Future<Output = anyhow::Result<T>>,
) -> WorkOutcome<T> {
    tokio::select! {
        result = work => WorkOutcome { result, at_once: false },
        _ = second.notified() => WorkOutcome {
            result: Err(stopped_at_once(ledger, rerun)),
            at_once: true,
        },
        lapsing = stop.lapsing() => WorkOutcome {
            result: Err(anyhow::Error::new(lapsing)),
            at_once: false,
        },
    }
}

/// A second Ctrl-C abandons the step in progress: say which node was left
/// half-way, and that a rerun (not a fix) is what comes next.
pub fn stopped_at_once(ledger: &Mutex<Ledger>, rerun: Rerun) -> anyhow::Error {
    let current = ledger.lock().ok().and_then(|l| l.current.clone());
    let msg = match current {
        Some((node, step)) => format!(
            "stopped at once by a second Ctrl-C: {node} was left half-way through `{step}`. \
             Check {node} (`fleetctl status`; if it was rebooting, wait until it is back), \
             then run `{rerun}` again: it resumes from the fleet's real state"
        ),
        None => format!(
            "stopped at once by a second Ctrl-C. Check the nodes (`fleetctl status`), then run \
             `{rerun}` again: it resumes from the fleet's real state"
        ),
    };
    anyhow::Error::new(Interrupted(msg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::Lease;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn work_under_the_lock_stops_at_once_when_the_lease_reaches_its_margin() {
        let stop = Stop::default();
        let second = tokio::sync::Notify::new();
        let ledger = Mutex::new(Ledger::default());
        // Valid for 400 ms after the last heartbeat, less a 200 ms margin;
        // no heartbeat lands. The work waits for ever (a node that hangs).
        let t0 = Instant::now();
        stop.hold_lease(Lease {
            what: "fleetctl's lock".into(),
            renewed: t0,
            ttl: Duration::from_millis(400),
            margin: Duration::from_millis(200),
            rerun: Rerun::Apply,
        });
        let ran: WorkOutcome<()> = tokio::time::timeout(
            Duration::from_secs(10),
            run_within_lease(
                &stop,
                &second,
                &ledger,
                Rerun::Apply,
                std::future::pending(),
            ),
        )
        .await
        .expect("the lapsing lease ends the work");
        assert!(t0.elapsed() >= Duration::from_millis(200));
        assert!(!ran.at_once);
        let e = ran.result.unwrap_err();
        assert!(e.is::<crate::steps::context::LeaseLapsing>(), "{e:#}");
        assert!(
            e.to_string()
                .starts_with("stopped at once: fleetctl's lock was last refreshed"),
            "{e}"
        );

        // A second Ctrl-C ends it at once too, and says so.
        let stop = Stop::default();
        second.notify_one();
        let ran: WorkOutcome<()> = run_within_lease(
            &stop,
            &second,
            &ledger,
            Rerun::Rollback,
            std::future::pending(),
        )
        .await;
        assert!(ran.at_once);
        let e = ran.result.unwrap_err();
        assert!(e.is::<Interrupted>());
        assert!(
            e.to_string().contains("then run `fleetctl rollback` again"),
            "names the command that resumes: {e}"
        );

        // Work that ends first is what counts.
        let ran = run_within_lease(&stop, &second, &ledger, Rerun::Apply, async { Ok(7) }).await;
        assert_eq!(ran.result.unwrap(), 7);
    }
}

//! The lock given back on every path of the work under it, and what the
//! operator reads after a stop: what
//! `sigterm_during_a_drain_stops_at_a_safe_point_releases_the_lock_and_a_rerun_finishes`
//! and the `--force-unlock` refusals (a confirmation refused under the
//! lock) proved on real-OS fleets.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::FutureExt;

use super::*;
use crate::steps::{Interrupted, Ledger, Rerun};

/// A lock that counts how often it was given back.
struct Counted(Arc<AtomicUsize>);

impl GiveBack for Counted {
    async fn give_back(self, _: &Printer) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn the_lock_is_given_back_once_after_success_failure_or_panic() {
    let printer = Printer::new(true, 0);
    let given = Arc::new(AtomicUsize::new(0));

    let ok = then_release(Counted(given.clone()), &printer, async { 7 }).await;
    assert_eq!(ok.unwrap(), 7);
    assert_eq!(given.load(Ordering::SeqCst), 1);

    // A refusal under the lock (apply's confirmation without a terminal,
    // a stop at a safe point): the error comes back, the lock is given back.
    let refused = then_release(Counted(given.clone()), &printer, async {
        Err::<(), _>(anyhow::Error::new(Interrupted("stopped by SIGTERM".into())))
    })
    .await;
    assert!(refused.unwrap().is_err());
    assert_eq!(given.load(Ordering::SeqCst), 2);

    // A bug: the panic comes back for the caller to raise again, after the
    // lock was given back.
    let panicked = AssertUnwindSafe(then_release(Counted(given.clone()), &printer, async {
        panic!("a bug in the work")
    }))
    .catch_unwind()
    .await;
    assert!(panicked.expect("caught, not raised through").is_err());
    assert_eq!(given.load(Ordering::SeqCst), 3);
}

#[test]
fn a_stop_at_a_safe_point_says_where_and_how_to_resume_but_no_cause_to_fix() {
    let ledger = Ledger {
        done: vec!["cp-1".into()],
        current: Some(("w-1".into(), "drain".into())),
        ..Ledger::default()
    };
    let journal = Path::new("/state/journal");
    let stopped = anyhow::Error::new(Interrupted("stopped by SIGTERM at a safe point".into()));
    let report = failure_report(&ledger, &stopped, journal, Rerun::Apply);
    assert_eq!(
        report,
        "stopped on w-1 during: drain\nfinished in this run: cp-1\nthe other nodes were not \
         touched after the failure\njournal: /state/journal"
    );
    // A failure, by contrast, asks for its cause to be fixed, and names a
    // node left cordoned.
    let mut ledger = ledger;
    ledger.cordoned.insert("w-1".into());
    let failed = anyhow::anyhow!("w-1: drain failed");
    let report = failure_report(&ledger, &failed, journal, Rerun::Apply);
    assert!(
        report.contains("w-1 IS STILL CORDONED: `fleetctl apply` uncordons it when it resumes")
            && report.contains("next: fix the cause above, then run `fleetctl apply` again"),
        "{report}"
    );
}

#[test]
fn without_yes_and_without_a_terminal_nothing_is_confirmed() {
    // `cargo test` runs with stdin not a terminal (the cli tests' apply, too).
    if std::io::stdin().is_terminal() {
        return;
    }
    let e = confirm(false, "apply?").unwrap_err();
    assert!(
        e.to_string()
            .contains("there is no terminal to ask on: pass --yes"),
        "{e}"
    );
    assert!(confirm(true, "apply?").is_ok());
}

//! What the operator reads after a failure (`locked::failure_report`),
//! from the ledger alone: tests/cli/{apply_faults,batches,on_failure}.rs
//! read these lines off real-OS fleets (docs/rules-on-the-fake.md).

use std::path::Path;

use super::locked::failure_report;
use crate::steps::{Interrupted, Ledger, Rerun};

/// The ledger of a run stopped on `node` during its reboot, `node` still
/// cordoned, cp-1 finished.
fn stopped_on(node: &str) -> Ledger {
    Ledger {
        done: vec!["cp-1".into()],
        current: Some((node.into(), "reboot into the staged images".into())),
        cordoned: [node.to_string()].into(),
    }
}

#[test]
fn a_node_that_never_came_back_is_named_still_cordoned_with_the_way_on() {
    let e = anyhow::anyhow!("w-3 did not come back from its reboot within 30s. It is cordoned");
    let report = failure_report(&stopped_on("w-3"), &e, Path::new("/j"), Rerun::Apply);
    assert_eq!(
        report,
        "stopped on w-3 during: reboot into the staged images\n\
         finished in this run: cp-1\n\
         w-3 IS STILL CORDONED: `fleetctl apply` uncordons it when it resumes, or run `kubectl \
         uncordon w-3`\n\
         the other nodes were not touched after the failure\n\
         next: fix the cause above, then run `fleetctl apply` again: it resumes from the \
         fleet's real state\n\
         journal: /j"
    );
    // `fleetctl reboot` does not uncordon on its rerun: the operator does.
    let report = failure_report(&stopped_on("w-3"), &e, Path::new("/j"), Rerun::Reboot);
    assert!(
        report.contains(
            "w-3 IS STILL CORDONED: once it is back and Ready, run `kubectl uncordon w-3`"
        ),
        "{report}"
    );
}

#[test]
fn a_stop_the_operator_asked_for_has_nothing_to_fix() {
    let e = anyhow::Error::new(Interrupted("stopped by Ctrl-C at a safe point".into()))
        .context("rolling w-1");
    let report = failure_report(&Ledger::default(), &e, Path::new("/j"), Rerun::Apply);
    assert!(!report.contains("fix the cause"), "{report}");
    assert!(!report.contains("STILL CORDONED"), "{report}");
}

//! What a stop says, from its readings alone: a Ctrl-C at a safe point
//! (`safe_point::Stop::interrupted`) and a second Ctrl-C that abandons the
//! step in progress (`lock::stopped_at_once`). tests/cli/apply_faults.rs
//! read these words off real-OS fleets (docs/rules-on-the-fake.md); the
//! real signal's path stays there, once.

use std::sync::Mutex;

use super::lock::stopped_at_once;
use super::{Interrupted, Ledger, Rerun, Stop};

#[test]
fn a_ctrl_c_during_a_drain_says_the_batch_was_uncordoned_again_and_a_rerun_continues() {
    let stop = Stop::default();
    stop.press("Ctrl-C");
    let e = stop.interrupted(Some("w-1"), &["cp-1".into()], Rerun::Apply);
    assert_eq!(
        e.to_string(),
        "stopped by Ctrl-C at a safe point (w-1 was drained but not rebooted, and was \
         uncordoned again); finished in this run: cp-1. Run `fleetctl apply` again to continue \
         where it stopped"
    );
    // The lease's keeper asks with its reason, not a signal.
    let stop = Stop::default();
    stop.abort("fleetctl's lock was lost".into());
    let e = stop.interrupted(None, &[], Rerun::Reboot);
    assert_eq!(
        e.to_string(),
        "stopped at a safe point: fleetctl's lock was lost. Run `fleetctl reboot` again to \
         continue where it stopped"
    );
}

#[test]
fn a_second_ctrl_c_names_the_node_left_half_way_and_asks_for_a_rerun_not_a_fix() {
    let ledger = Mutex::new(Ledger {
        current: Some(("w-1".into(), "reboot into the staged images".into())),
        ..Ledger::default()
    });
    let e = stopped_at_once(&ledger, Rerun::Apply);
    assert!(e.is::<Interrupted>(), "{e:#}");
    let text = e.to_string();
    for words in [
        "stopped at once by a second Ctrl-C: w-1 was left half-way through `reboot into the \
         staged images`",
        "wait until it is back), then run `fleetctl apply` again",
    ] {
        assert!(text.contains(words), "no `{words}` in {text}");
    }
}

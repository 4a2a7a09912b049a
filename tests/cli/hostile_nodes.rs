//! Issue 38, end to end: what one hostile or broken node may cost the
//! operator's machine and the run.

use std::fs;

use crate::support::{self, Fleet};

/// Bytes of every file in `.fleetctl/journal/`.
fn journal_bytes(fleet: &Fleet) -> u64 {
    fs::read_dir(fleet.dir().join(".fleetctl/journal"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

#[test]
fn a_node_answering_every_poll_after_its_reboot_with_32_mib_leaves_a_small_journal_and_apply_stops_at_its_node_timeout()
 {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .faults(|f| {
                f.kubelet_version_flood.insert("w-1".into(), "v1.35".into());
            }),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    // The deadline counts from w-1's reboot, and every poll until it
    // moves 32 MiB through sshd and fleetctl, back to back: the test's
    // CPU is that one core for as long as the timeout runs, minus the
    // boot. A worker boots in 2 s alone and 4 to 6 s beside the rest of
    // the suite, and a poll takes 1 to 2 s there: 20 s leaves well over
    // the two polls asserted below (40 s cost 48 CPU-seconds, 7% of the
    // suite's; docs/architecture.md, "Tests and CI").
    let run = support::apply(&fleet, &["--yes", "--node-timeout", "20s"]).expect_code(1);
    assert!(
        run.stderr
            .contains("w-1: after the reboot kubelet reports `Kubernetes v1.35."),
        "{}",
        &run.stderr[..run.stderr.len().min(4000)]
    );
    // The 32 MiB line is not echoed whole in the error either.
    assert!(
        run.stderr.len() < 256 << 10,
        "stderr holds {} bytes",
        run.stderr.len()
    );
    // Every poll answered 32 MiB; the journal kept one answer's head and
    // tail and counted the rest.
    let bytes = journal_bytes(&fleet);
    assert!(bytes < 4 << 20, "the journal holds {bytes} bytes");
    // Every poll is in it: the first answer copied (cut), the same ones
    // after it counted.
    let polls = support::times_run(&fleet, "w-1", "kubelet unit and version");
    assert!(polls >= 2, "polls of w-1: {polls}");
}

#[test]
fn a_node_whose_clock_is_4_minutes_ahead_sets_the_locks_margin() {
    // Nothing to upgrade: apply takes the lock, gathers, judges the
    // clocks, and finds nothing to do.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.3")
            .with_node("w-1", |n| n.clock_offset = 240),
    );
    let ahead = fleet.ssh_ok("w-1", "root", "date -u +%s").unwrap();
    let now = fleet.ssh_ok("cp-1", "root", "date -u +%s").unwrap();
    let diff = ahead.trim().parse::<i64>().unwrap() - now.trim().parse::<i64>().unwrap();
    assert!((239..=241).contains(&diff), "w-1's date is {diff} s ahead");
    support::run(&fleet.inventory(), &["plan", "v1.34"]).expect_code(0);
    let run = support::apply(&fleet, &["--yes"]).expect_code(0);
    assert!(
        run.stderr.contains("w-1's clock is 4m ahead of cp-1's")
            || run.stderr.contains("w-1's clock is 3m 59s ahead of cp-1's"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("ahead of cp-1's: the lock's safety margin is at least that"),
        "{}",
        run.stderr
    );
}

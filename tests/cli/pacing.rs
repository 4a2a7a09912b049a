//! Issue 17's pacing where it needs the real thing: the refusal of a run
//! outside its maintenance window before the lock (the binary's exit 75
//! and its usage error), and the alert gate reading the fleet's Prometheus
//! through the real curl on a control plane. What the holds decide (the
//! soak, a window closing between nodes, alerts holding and resolving,
//! timeouts) is tested on the fake world (`src/steps/hold_tests.rs`,
//! docs/rules-on-the-fake.md).

use jiff::Timestamp;

use super::support::{self, assert_has, describe, schedulability};

use super::support::run_on as run;

/// `HH:MM:SS` of now + `secs`, UTC.
fn clock_in(secs: i64) -> String {
    let t = Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap();
    t.strftime("%H:%M:%S").to_string()
}

#[test]
fn outside_the_window_apply_touches_nothing_and_says_when_it_opens() {
    // Refused before the lock: it only reads, so it borrows apply's 1 + 2.
    let fleet = crate::apply::SMALL_V1_34_2.get();
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let before = fleet.events().unwrap().len();
    // A window that closed a minute ago.
    let window = format!("* {}-{}", clock_in(-120), clock_in(-60));
    let out = support::apply(&fleet, &["--yes", "--window", &window]);
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert_has(
        &out.stderr,
        &[
            "not starting the run: outside the maintenance window",
            "UTC",
            "it opens",
        ],
    );
    let after = fleet.events().unwrap();
    assert_eq!(
        after.len(),
        before,
        "a run outside its window touched the fleet:\n{}",
        describe(&after[before..])
    );
    // A window fleetctl cannot read is a usage error, before anything.
    let bad = support::apply(&fleet, &["--yes", "--window", "Caturday 01:00-05:00"]);
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert_has(&bad.stderr, &["\"Caturday\" is not a day"]);
}

#[test]
fn an_alert_at_the_fleets_prometheus_holds_the_drain_and_past_the_timeout_stops_naming_it() {
    // One worker with a patch staged: `fleetctl reboot w-1` would roll it.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .with_node("w-1", |n| n.staged = Some("v1.34.3".into()))
            .faults(|f| {
                f.alerts.insert("Watchdog".into(), "firing".into());
                f.alerts.insert("KubeNodeNotReady".into(), "firing".into());
            }),
    );
    let url = fleet.prometheus_url().to_string();
    let before = fleet.events().unwrap().len();
    let out = run(
        &fleet,
        &[
            "reboot",
            "w-1",
            "--yes",
            "--alert-gate",
            &url,
            "--alert-filter",
            "^Watchdog$",
            "--alert-gate-timeout",
            "3s",
            "--alert-gate-interval",
            "1s",
        ],
    )
    .expect_code(1);
    assert_has(
        &out.stderr,
        &[
            "alert gate holds w-1: alerts firing: KubeNodeNotReady",
            "not taking w-1 down: the alert gate still holds after 3s",
        ],
    );
    assert!(
        !out.stderr.contains("Watchdog"),
        "an excluded alert was reported as holding:\n{}",
        out.stderr
    );
    let after = fleet.events().unwrap();
    assert!(
        !after[before..]
            .iter()
            .any(|e| matches!(schedulability(e), Some((_, "w-1")))),
        "w-1 was touched:\n{}",
        describe(&after[before..])
    );
    support::assert_consistent(&fleet, &["cp-1", "w-1"], None);
}

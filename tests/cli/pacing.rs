//! Issue 17's pacing against the simulated fleet: `--soak` between nodes
//! and after a hop, a maintenance window (`--window`) that closes mid-run,
//! and the alert gate (`--alert-gate`) against the fleet's Prometheus.

use fleetsim::state::{Event, now};
use jiff::Timestamp;

use super::support::{self, Running, Scenario, assert_has, describe, is_lock, schedulability};

use super::support::run_on as run;

/// One control plane and two workers at v1.34.2.
fn small() -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(2)
        .kubernetes("v1.34.2")
}

/// Two workers with a patch staged: `fleetctl reboot` rolls them.
fn two_staged() -> Scenario {
    small()
        .with_node("w-1", |n| n.staged = Some("v1.34.3".into()))
        .with_node("w-2", |n| n.staged = Some("v1.34.3".into()))
}

/// When `verb` (cordon, drain, uncordon) first or last happened to `node`.
fn when(events: &[Event], verb: &str, node: &str, last: bool) -> f64 {
    let hit = |e: &&Event| schedulability(e) == Some((verb, node));
    let found = if last {
        events.iter().rfind(hit)
    } else {
        events.iter().find(hit)
    };
    found
        .unwrap_or_else(|| panic!("no {verb} of {node}:\n{}", describe(events)))
        .t
}

/// `HH:MM:SS` of now + `secs`, UTC.
fn clock_in(secs: i64) -> String {
    let t = Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(secs))
        .unwrap();
    t.strftime("%H:%M:%S").to_string()
}

#[test]
fn soak_waits_after_each_node_and_after_the_hop_then_judges_the_gates() {
    let fleet = support::start(small());
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let mut apply = Running::spawn(&fleet.inventory(), &["apply", "--yes", "--soak", "4s"]);
    // A worker lost while the fleet is watched after the hop: the gates
    // judged after the soak must see it.
    apply.wait_for("soak (4s): watching the fleet after hop 1/1");
    fleet
        .faults(|f| {
            f.slow_boot.insert("w-1".into(), 60.0);
        })
        .unwrap();
    fleet.power_cycle("w-1").unwrap();
    let out = apply.finish();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_has(
        &out.stderr,
        &[
            "soak (4s): watching the fleet before w-1",
            "soak (4s): watching the fleet before w-2",
            "after hop 1/1, the fleet is not healthy",
            "w-1",
        ],
    );
    let events = fleet.events().unwrap();
    // The next node is drained only once the soak after the last one is over.
    for (back, next) in [("cp-1", "w-1"), ("w-1", "w-2")] {
        let gap = when(&events, "drain", next, false) - when(&events, "uncordon", back, true);
        assert!(
            gap >= 4.0,
            "{next} was drained {gap:.1} s after {back} was back, within the 4 s soak:\n{}",
            describe(&events)
        );
    }
    // The journal records each soak, for whoever reads the run later.
    let soaks: Vec<String> = support::journal_records(&fleet)
        .iter()
        .filter(|r| r["kind"] == "soak")
        .filter_map(|r| r["detail"].as_str().map(String::from))
        .collect();
    assert!(
        soaks.iter().any(|d| d.contains("before w-2"))
            && soaks.iter().any(|d| d.contains("after hop 1/1")),
        "the journal's soaks: {soaks:?}"
    );
    // And the lock was held through the soak after the hop.
    let released = events
        .iter()
        .rfind(|e| is_lock(e))
        .expect("the lock was released");
    assert!(
        released.t >= when(&events, "uncordon", "w-2", true) + 4.0,
        "the lock was given back before the hop's soak was over:\n{}",
        describe(&events)
    );
    support::assert_invariants_hold(&events);
}

#[test]
fn a_window_that_closes_mid_run_stops_between_nodes_and_the_next_run_finishes() {
    let fleet = support::start(small());
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    // Each node may take up to 5 s + 40 s; the window leaves time for the
    // first reboot (cp-1, within 30 s of the start) but not, after the 40 s
    // soak, for the next one.
    let window = format!("* {}-{} UTC", clock_in(-60), clock_in(45 + 30));
    let start = fleet.events().unwrap().len();
    let out = support::apply(
        &fleet,
        &[
            "--yes",
            "--window",
            &window,
            "--drain-timeout",
            "5s",
            "--node-timeout",
            "40s",
            "--soak",
            "40s",
        ],
    );
    assert_eq!(out.code, Some(75), "{}", out.stderr);
    assert_has(
        &out.stderr,
        &[
            "not starting w-1: the maintenance window",
            "run `fleetctl apply` again in the next window",
        ],
    );
    let events = fleet.events().unwrap();
    let log = &events[start..];
    assert!(
        log.iter()
            .any(|e| schedulability(e) == Some(("uncordon", "cp-1"))),
        "cp-1 was rolled inside the window:\n{}",
        describe(log)
    );
    assert!(
        !log.iter()
            .any(|e| matches!(schedulability(e), Some((_, "w-1" | "w-2")))),
        "a worker was taken down after the window had no room for it:\n{}",
        describe(log)
    );
    // Stopped at a safe point: nothing cordoned, the lock given back.
    support::assert_consistent(&fleet, &["cp-1", "w-1", "w-2"], None);

    // The next run, without a window, finishes what is left.
    let out = support::apply(&fleet, &["--yes"]).expect_code(0);
    assert!(out.stderr.contains("done"), "{}", out.stderr);
    support::assert_on_target(
        &fleet,
        &["cp-1", "w-1", "w-2"],
        &support::newest_on_hub(&fleet, "v1.35"),
    );
    support::assert_invariants_hold(&fleet.events().unwrap());
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
fn a_firing_alert_holds_the_drain_until_it_resolves_and_excluded_ones_do_not() {
    let fleet = support::start(two_staged());
    fleet
        .faults(|f| {
            f.alerts.insert("Watchdog".into(), "firing".into());
            f.alerts.insert("KubeNodeNotReady".into(), "firing".into());
        })
        .unwrap();
    let url = fleet.prometheus_url().to_string();
    let mut running = Running::spawn(
        &fleet.inventory(),
        &[
            "reboot",
            "--yes",
            "--alert-gate",
            &url,
            "--alert-filter",
            "^Watchdog$",
            "--alert-gate-interval",
            "1s",
        ],
    );
    running.wait_for("alert gate holds w-1: alerts firing: KubeNodeNotReady");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let held = fleet.events().unwrap();
    assert!(
        !held
            .iter()
            .any(|e| matches!(schedulability(e), Some((_, "w-1" | "w-2")))),
        "a node was taken down while an alert fired:\n{}",
        describe(&held)
    );
    let resolved_at = now();
    fleet
        .faults(|f| {
            f.alerts.remove("KubeNodeNotReady");
        })
        .unwrap();
    let out = running.finish();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        !out.stderr.contains("Watchdog"),
        "an excluded alert was reported as holding:\n{}",
        out.stderr
    );
    let events = fleet.events().unwrap();
    assert!(
        when(&events, "drain", "w-1", false) > resolved_at,
        "w-1 was drained before the alert resolved:\n{}",
        describe(&events)
    );
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-1"].kubelet_version, "v1.34.3");
    assert_eq!(c.nodes["w-2"].kubelet_version, "v1.34.3");
}

#[test]
fn an_alert_that_never_resolves_fails_after_the_gate_timeout_naming_it() {
    let fleet = support::start(two_staged());
    fleet
        .faults(|f| {
            f.alerts.insert("EtcdNoLeader".into(), "pending".into());
        })
        .unwrap();
    let url = format!("{}/api/v2/alerts", fleet.prometheus_url());
    // Alertmanager never sees pending alerts: nothing holds.
    let start = fleet.events().unwrap().len();
    run(
        &fleet,
        &[
            "reboot",
            "w-1",
            "--yes",
            "--alert-gate",
            &url,
            "--alert-gate-timeout",
            "3s",
            "--alert-gate-interval",
            "1s",
        ],
    )
    .expect_code(0);
    // Prometheus does: pending holds, unless --alert-firing-only.
    let url = fleet.prometheus_url().to_string();
    let gate = [
        "reboot",
        "w-2",
        "--yes",
        "--alert-gate",
        &url,
        "--alert-gate-timeout",
        "3s",
        "--alert-gate-interval",
        "1s",
    ];
    let before = fleet.events().unwrap().len();
    let out = run(&fleet, &gate).expect_code(1);
    assert_has(
        &out.stderr,
        &[
            "not taking w-2 down: the alert gate still holds after 3s",
            "alerts firing: EtcdNoLeader",
        ],
    );
    let after = fleet.events().unwrap();
    assert!(
        !after[before..]
            .iter()
            .any(|e| matches!(schedulability(e), Some((_, "w-2")))),
        "w-2 was touched:\n{}",
        describe(&after[before..])
    );
    support::assert_consistent(&fleet, &["cp-1", "w-1", "w-2"], None);
    let mut firing_only = gate.to_vec();
    firing_only.push("--alert-firing-only");
    run(&fleet, &firing_only).expect_code(0);
    let events = fleet.events().unwrap();
    assert!(
        events[start..]
            .iter()
            .any(|e| schedulability(e) == Some(("uncordon", "w-2"))),
        "{}",
        describe(&events[start..])
    );
}

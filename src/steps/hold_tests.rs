//! The holds before a node (the soak, the maintenance window, the alert
//! gate, Kured's blocking pods) and the soak after a hop, tested with
//! their own code (`super::hold`, `super::kured_gates`) on the fake world
//! (`super::fake_holds`): a virtual clock and scripted readings, each test
//! in milliseconds where tests/cli held real-OS fleets for minutes.

use std::time::Duration;

use futures_util::FutureExt;

use super::Rerun;
use super::fake_holds::FakeHolds;
use super::hold::{HoldsBefore, holds, soak_then_gates};
use super::kured_gates::KuredTakeover;
use crate::error::OutsideWindow;
use crate::pacing::{AlertGate, Filter, Pace, Window};

const S: fn(u64) -> Duration = Duration::from_secs;
const PROMETHEUS: &str = "http://prometheus.monitoring:9090";

fn by<'p>(pace: &'p Pace, kured: Option<&'p KuredTakeover>) -> HoldsBefore<'p> {
    HoldsBefore {
        pace,
        kured,
        since_back: None,
        needed: S(600),
        node_timeout: S(900),
        rerun: Rerun::Apply,
    }
}

/// The holds before `node`, run to the end on the fake (it never waits).
fn hold(w: &mut FakeHolds, by: &HoldsBefore<'_>, node: &str) -> anyhow::Result<()> {
    holds(w, by, &[node.to_string()])
        .now_or_never()
        .expect("the fake world never waits")
}

/// ALERTS as Prometheus answers them, each `(name, state)`.
fn alerts(firing: &[(&str, &str)]) -> Result<String, String> {
    let result: Vec<String> = firing
        .iter()
        .map(|(name, state)| {
            format!(
                r#"{{"metric":{{"__name__":"ALERTS","alertname":"{name}","alertstate":"{state}"}},"value":[1764640000.1,"1"]}}"#
            )
        })
        .collect();
    Ok(format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
        result.join(",")
    ))
}

fn gate(filter: Filter, timeout: u64) -> AlertGate {
    let mut g = AlertGate::new(PROMETHEUS, filter, S(timeout)).unwrap();
    g.interval = S(1);
    g
}

fn excluding(regex: &str) -> Filter {
    Filter {
        exclude: Some(regex_lite::Regex::new(regex).unwrap()),
        ..Filter::default()
    }
}

#[test]
fn soak_waits_what_is_left_since_the_last_node_came_back_then_the_next_holds() {
    let pace = Pace {
        soak: S(40),
        alert_gate: Some(gate(Filter::default(), 60)),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        alerts: vec![(0, alerts(&[]))],
        ..FakeHolds::default()
    };
    let mut b = by(&pace, None);
    b.since_back = Some(S(15));
    hold(&mut w, &b, "w-2").unwrap();
    assert_eq!(w.t, S(25), "the soak waits what is left of it");
    assert_eq!(
        w.said,
        ["  soak (40s): watching the fleet before w-2, 25s left"]
    );
    assert_eq!(w.kinds(), ["soak", "soak-done"]);
    // The alerts are read once the soak is over, right before the gates.
    assert_eq!(
        w.reads,
        [(25, format!("alerts {PROMETHEUS}/api/v1/query?query=ALERTS"))]
    );

    // Nothing came back yet (the run's first node), or long enough ago:
    // no wait.
    for since_back in [None, Some(S(40)), Some(S(90))] {
        let mut w = FakeHolds {
            alerts: vec![(0, alerts(&[]))],
            ..FakeHolds::default()
        };
        b.since_back = since_back;
        hold(&mut w, &b, "w-2").unwrap();
        assert_eq!(w.t, S(0), "{since_back:?}");
        assert!(w.said.is_empty(), "{:?}", w.said);
    }
}

#[test]
fn a_stop_ends_the_soak_at_once() {
    let pace = Pace {
        soak: S(600),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        stop_at: Some(S(7)),
        ..FakeHolds::default()
    };
    let mut b = by(&pace, None);
    b.since_back = Some(S(0));
    let e = hold(&mut w, &b, "w-1").unwrap_err();
    assert!(e.is::<super::Interrupted>(), "{e:#}");
    assert_eq!(w.t, S(7));
    assert!(!w.kinds().contains(&"soak-done"));
}

/// A window of 09:00-11:00 UTC every day; the fake's clock starts at 10:00.
fn window() -> Window {
    Window::parse("* 09:00-11:00 UTC").unwrap()
}

#[test]
fn the_window_is_judged_after_the_soak_so_a_soak_past_its_end_stops_between_nodes() {
    // 60 min left at 10:00: a node that may take 45 min fits, but not
    // once a 40 min soak has passed. The run stops before the node, its
    // error the one that exits 75 ("try again later").
    let pace = Pace {
        soak: S(40 * 60),
        window: Some(window()),
        ..Pace::default()
    };
    let mut b = by(&pace, None);
    b.needed = S(45 * 60);
    let mut w = FakeHolds::default();
    hold(&mut w, &b, "w-1").unwrap();
    assert_eq!(w.t, S(0), "the first node fits and does not soak");

    b.since_back = Some(S(0));
    let mut w = FakeHolds::default();
    let e = hold(&mut w, &b, "w-1").unwrap_err();
    assert!(e.is::<OutsideWindow>(), "{e:#}");
    let text = e.to_string();
    for part in [
        "not starting w-1: the maintenance window (",
        "closes at 11:00 UTC and w-1 may take up to 45m",
        "run `fleetctl apply` again in the next window (it opens Tue 2026-12-08 09:00 UTC)",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
    assert_eq!(w.kinds(), ["soak", "soak-done", "window"]);
    assert_eq!(w.t, S(40 * 60));
}

#[test]
fn outside_the_window_nothing_is_read_and_the_error_says_when_it_opens() {
    let pace = Pace {
        window: Some(Window::parse("* 01:00-05:00 UTC").unwrap()),
        alert_gate: Some(gate(Filter::default(), 60)),
        ..Pace::default()
    };
    let mut w = FakeHolds::default();
    let e = hold(&mut w, &by(&pace, None), "w-1").unwrap_err();
    assert!(e.is::<OutsideWindow>(), "{e:#}");
    assert!(
        e.to_string()
            .contains("not starting w-1: outside the maintenance window (")
            && e.to_string().contains("it opens Tue 2026-12-08 01:00 UTC"),
        "{e:#}"
    );
    assert!(w.reads.is_empty(), "{:?}", w.reads);
}

#[test]
fn a_firing_alert_holds_the_drain_until_it_resolves_and_an_excluded_one_never_does() {
    let pace = Pace {
        alert_gate: Some(gate(excluding("^Watchdog$"), 600)),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        alerts: vec![
            (
                0,
                alerts(&[("Watchdog", "firing"), ("KubeNodeNotReady", "firing")]),
            ),
            (10, alerts(&[("Watchdog", "firing")])),
        ],
        ..FakeHolds::default()
    };
    hold(&mut w, &by(&pace, None), "w-1").unwrap();
    assert_eq!(w.t, S(10), "held until the alert resolved, and no longer");
    assert_eq!(
        w.said,
        [
            "  alert gate holds w-1: alerts firing: KubeNodeNotReady (waiting up to 10m)",
            "  alert gate: no alert holds the drain now",
        ],
        "said once while it held, and the excluded alert never"
    );
    assert_eq!(w.kinds(), ["alerts", "alerts-resolved"]);
    assert_eq!(w.reads.len(), 11, "read every interval: {:?}", w.reads);
}

#[test]
fn an_alert_that_never_resolves_fails_before_the_timeout_naming_it_and_pending_holds() {
    // Prometheus's pending alerts hold (Kured's default), unless
    // --alert-firing-only.
    let pace = Pace {
        alert_gate: Some(gate(Filter::default(), 3)),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        alerts: vec![(0, alerts(&[("EtcdNoLeader", "pending")]))],
        ..FakeHolds::default()
    };
    let e = hold(&mut w, &by(&pace, None), "w-2").unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains(
            "not taking w-2 down: the alert gate still holds after 3s: alerts firing: EtcdNoLeader"
        ) && text.contains("Nothing was changed on w-2")
            && text.contains("run `fleetctl apply` again"),
        "{text}"
    );
    assert!(w.t <= S(3), "never waits past the timeout: {:?}", w.t);

    let pace = Pace {
        alert_gate: Some(gate(
            Filter {
                firing_only: true,
                ..Filter::default()
            },
            3,
        )),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        alerts: w.alerts.clone(),
        ..FakeHolds::default()
    };
    hold(&mut w, &by(&pace, None), "w-2").unwrap();
    assert!(w.said.is_empty());
}

#[test]
fn an_alert_gate_that_cannot_be_read_holds_as_kureds_does() {
    let pace = Pace {
        alert_gate: Some(gate(Filter::default(), 5)),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        alerts: vec![
            (0, Err("curl: (7) Failed to connect".into())),
            (2, alerts(&[])),
        ],
        ..FakeHolds::default()
    };
    hold(&mut w, &by(&pace, None), "w-1").unwrap();
    assert_eq!(w.t, S(2));
    assert!(
        w.said[0].contains("could not be read: curl: (7) Failed to connect"),
        "{:?}",
        w.said
    );
}

/// Kured's gates as its DaemonSet's flags set them.
fn kured(argv: &[&str]) -> KuredTakeover {
    let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    KuredTakeover::from_argv("kube-system/kured", &argv, S(60)).unwrap()
}

#[test]
fn kureds_prometheus_is_the_alert_gate_unless_the_operator_gives_one() {
    let k = kured(&[
        "/usr/bin/kured",
        &format!("--prometheus-url={PROMETHEUS}"),
        "--alert-filter-regexp=^(Watchdog|InfoInhibitor)$",
    ]);
    let firing = alerts(&[("Watchdog", "firing"), ("KubeNodeNotReady", "firing")]);
    let pace = Pace::default();
    let mut w = FakeHolds {
        alerts: vec![(0, firing.clone()), (3, alerts(&[("Watchdog", "firing")]))],
        ..FakeHolds::default()
    };
    hold(&mut w, &by(&pace, Some(&k)), "cp-1").unwrap();
    // Read again after one of the gate's 30 s intervals: resolved.
    assert_eq!(w.t, S(30), "held until KubeNodeNotReady resolved");
    assert!(w.said[0].starts_with("  alert gate holds cp-1: alerts firing: KubeNodeNotReady ("));
    assert!(
        !w.said.iter().any(|l| l.contains("Watchdog")),
        "{:?}",
        w.said
    );
    assert!(w.reads[0].1.starts_with(&format!("alerts {PROMETHEUS}/")));

    // The operator's own gate is read instead.
    let own = "http://alertmanager.monitoring:9093/api/v2/alerts";
    let pace = Pace {
        alert_gate: Some(AlertGate::new(own, Filter::default(), S(60)).unwrap()),
        ..Pace::default()
    };
    let mut w = FakeHolds {
        alerts: vec![(0, Ok("[]".into()))],
        ..FakeHolds::default()
    };
    hold(&mut w, &by(&pace, Some(&k)), "cp-1").unwrap();
    assert_eq!(w.reads.len(), 1);
    assert!(
        w.reads[0].1.starts_with(&format!("alerts {own}?")),
        "{:?}",
        w.reads
    );
}

#[test]
fn a_pod_matching_kureds_blocking_pod_selector_holds_its_node_and_only_it_until_it_is_gone() {
    let k = kured(&["/usr/bin/kured", "--blocking-pod-selector=app=backup"]);
    let pace = Pace::default();
    let none = Ok(String::new());
    let mut w = FakeHolds::default();
    w.pods.insert("w-1".into(), vec![(0, none.clone())]);
    w.pods.insert(
        "w-2".into(),
        vec![(0, Ok("pod/backup-29104\n".into())), (20, none.clone())],
    );
    w.pods.insert("w-3".into(), vec![(0, none)]);
    for node in ["w-1", "w-2", "w-3"] {
        hold(&mut w, &by(&pace, Some(&k)), node).unwrap();
    }
    assert_eq!(w.t, S(20), "w-2 held until its pod was gone");
    assert_eq!(
        w.said,
        [
            "  Kured's blocking pods hold w-2: pods backup-29104 on w-2 match Kured's \
             --blocking-pod-selector=app=backup (held 0s, waiting up to 15m; it releases once \
             they are gone, as Kured would wait)",
            "  Kured's pod selector: no pod holds w-2 any more (held 20s)",
        ]
    );
    // Each node is judged by its own pods, as Kured does.
    assert!(
        w.reads
            .iter()
            .all(|(t, r)| *t == 0 && r == "pods app=backup w-1"
                || r == "pods app=backup w-2"
                || *t == 20 && r == "pods app=backup w-3"),
        "{:?}",
        w.reads
    );
    assert_eq!(w.kinds(), ["kured-pods", "kured-pods-released"]);
}

#[test]
fn kureds_pods_that_cannot_be_listed_hold_and_past_the_node_timeout_stop_the_run() {
    let k = kured(&["/usr/bin/kured", "--blocking-pod-selector=app=backup"]);
    let pace = Pace::default();
    let mut w = FakeHolds::default();
    w.pods
        .insert("w-1".into(), vec![(0, Err("pods is forbidden".into()))]);
    let mut b = by(&pace, Some(&k));
    b.node_timeout = S(30);
    let text = format!("{:#}", hold(&mut w, &b, "w-1").unwrap_err());
    assert!(
        text.contains("not taking w-1 down: Kured's blocking pods still hold it after 30s")
            && text.contains("could not be listed: pods is forbidden")
            && text.contains("--no-kured-gates"),
        "{text}"
    );
    assert!(w.t <= S(30));
}

/// The soak after a hop, then the gates, whose problems are `problems`.
fn after_hop(
    w: &mut FakeHolds,
    since_back: Option<Duration>,
    problems: Vec<String>,
) -> (anyhow::Result<()>, Option<Duration>) {
    let mut judged = None;
    let gates = async |w: &mut FakeHolds| {
        judged = Some(w.t);
        Ok(problems)
    };
    let r = soak_then_gates(w, S(4), since_back, "after hop 1/1", Rerun::Apply, gates)
        .now_or_never()
        .expect("the fake world never waits");
    (r, judged)
}

#[test]
fn after_the_hop_the_soak_then_the_gates_judge_the_fleet_as_it_is_after_it() {
    let mut w = FakeHolds::default();
    let (r, judged) = after_hop(&mut w, Some(S(1)), vec!["w-1 is not Ready".into()]);
    let text = format!("{:#}", r.unwrap_err());
    assert!(
        text.contains("after hop 1/1, the fleet is not healthy:\n  - w-1 is not Ready"),
        "{text}"
    );
    assert_eq!(
        judged,
        Some(S(3)),
        "the gates judged once the soak was over"
    );
    assert_eq!(w.kinds(), ["soak", "soak-done", "gates"]);

    let mut w = FakeHolds::default();
    let (r, judged) = after_hop(&mut w, Some(S(1)), vec![]);
    r.unwrap();
    assert_eq!(judged, Some(S(3)));

    // No node came back in this run: nothing to watch, nothing judged.
    let mut w = FakeHolds::default();
    let (r, judged) = after_hop(&mut w, None, vec!["x".into()]);
    r.unwrap();
    assert!(judged.is_none() && w.journaled.is_empty());
}

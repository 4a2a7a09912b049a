//! Tests of the lock's clock: their own file, so the clock's code reads as one
//! piece under the 500-line bound.

use super::*;

fn at(secs: u64, millis: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
}

#[test]
fn the_remote_reading_is_parsed_to_the_nanosecond_and_nothing_else_is_accepted() {
    assert_eq!(
        parse_remote_clock("1796000000.123456789\n").unwrap(),
        UNIX_EPOCH + Duration::new(1_796_000_000, 123_456_789)
    );
    assert_eq!(
        parse_remote_clock("1796000000.N\n").unwrap(),
        UNIX_EPOCH + Duration::from_secs(1_796_000_000)
    );
    assert_eq!(
        parse_remote_clock("1796000000.5").unwrap(),
        UNIX_EPOCH + Duration::new(1_796_000_000, 500_000_000)
    );
    for bad in ["", "yesterday", "17960.1\n17961.2", "-5.0", &"9".repeat(50)] {
        assert!(parse_remote_clock(bad).is_err(), "{bad:?}");
    }
}

/// Issue 38: `date` answering `u64::MAX` seconds panicked fleetctl.
#[test]
fn a_clock_past_what_a_system_time_holds_is_an_error_not_a_panic() {
    for hostile in [
        "18446744073709551615",
        "18446744073709551615.999999999",
        "18446744073709551616",
        "9223372036854775807.5",
        "-1",
        "1e30",
        "+1796000000",
        "1796000000.-5",
    ] {
        let _ = parse_remote_clock(hostile);
    }
    let err = parse_remote_clock("18446744073709551615\n").unwrap_err();
    assert!(
        format!("{err:#}").contains("not a time this machine can represent"),
        "{err:#}"
    );
}

mod clock_properties {
    use super::super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_answer_to_date_parses_or_fails_without_panicking(text in "\\PC{0,48}") {
            let _ = parse_remote_clock(&text);
        }

        #[test]
        fn any_number_of_seconds_parses_or_fails_without_panicking(
            secs in any::<u64>(), frac in "[0-9N]{0,12}",
        ) {
            let _ = parse_remote_clock(&format!("{secs}.{frac}"));
            let read = parse_remote_clock(&secs.to_string());
            if let Ok(t) = read {
                prop_assert_eq!(t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).ok(), Some(secs));
            }
        }
    }
}

fn clock<'a>(node: &'a str, answer: &'a str) -> NodeClock<'a> {
    NodeClock {
        node,
        sent: at(1000, 0),
        answer: Ok(answer),
        received: at(1000, 20),
    }
}

/// Issue 38: a node whose clock is 4 minutes ahead sets the lease's
/// margin; one 6 minutes off is refused by name.
#[test]
fn a_node_four_minutes_ahead_sets_the_margin_and_one_six_minutes_off_is_refused() {
    let fleet = [
        clock("cp-1", "1000.010"),
        clock("w-1", "1240.010"),
        clock("w-2", "990.0"),
    ];
    let skew = fleet_skew(&fleet, "cp-1").unwrap();
    assert_eq!(skew.node.as_deref(), Some("w-1"));
    // 4 minutes, plus both readings' 20 ms round trips.
    assert_eq!(skew.worst_ahead, Duration::from_millis(240_040));

    let level = fleet_skew(&[clock("cp-1", "1000.010"), clock("w-1", "1000.0")], "cp-1");
    assert_eq!(level.unwrap().worst_ahead, Duration::ZERO);

    for far in ["1360.5", "600.0"] {
        let err = fleet_skew(&[clock("cp-1", "1000.010"), clock("w-2", far)], "cp-1")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("w-2's clock is 6m"), "{err}");
        assert!(err.contains("Set the clock that is wrong"), "{err}");
    }
    let unread = NodeClock {
        answer: Err("connection reset"),
        ..clock("w-3", "")
    };
    let err = fleet_skew(&[clock("cp-1", "1000.0"), unread], "cp-1").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("w-3: its clock could not be read"),
        "{err}"
    );
    let hostile = fleet_skew(
        &[
            clock("cp-1", "1000.0"),
            clock("w-4", "18446744073709551615"),
        ],
        "cp-1",
    );
    assert!(format!("{:#}", hostile.unwrap_err()).starts_with("w-4: reading its clock"));
}

#[test]
fn a_laptop_behind_the_cluster_writes_the_clusters_time_never_earlier() {
    // Sent at 100.000, the node read 1900.050 (30 minutes ahead), the
    // answer came back at 100.100.
    let offset = ClockOffset::measured(at(100, 0), at(1900, 50), at(100, 100));
    assert!(offset.cluster_ahead);
    assert_eq!(offset.by, Duration::from_millis(1_800_050));
    assert_eq!(offset.within, Duration::from_millis(100));
    // The laptop's 100.100 (when the answer came) is at least the
    // cluster's 1900.050 + 0: never earlier than the cluster's time.
    assert_eq!(offset.cluster_time(at(100, 100)), at(1900, 150));
    assert!(offset.cluster_time(at(100, 100)) >= at(1900, 50));

    let behind = ClockOffset::measured(at(1000, 0), at(700, 0), at(1000, 20));
    assert!(!behind.cluster_ahead);
    assert_eq!(behind.by, Duration::from_secs(300));
    assert_eq!(behind.cluster_time(at(1000, 0)), at(700, 0));
}

#[test]
fn beyond_five_minutes_apart_nothing_runs_and_the_message_says_which_clock() {
    let fine = ClockOffset::measured(at(100, 0), at(399, 0), at(100, 40));
    assert!(fine.within_bound("cp-1").is_ok());
    let far = ClockOffset::measured(at(100, 0), at(1900, 0), at(100, 40));
    assert_eq!(
        far.within_bound("cp-1").unwrap_err().to_string(),
        "this machine's clock is 30m behind cp-1's (measured over SSH, to within 40ms), more \
             than the 5m fleetctl accepts: Kured judges its reboot lock's TTL by the nodes' \
             clocks, and the maintenance window and the journal go by this machine's. Nothing \
             was changed. Set the clock that is wrong (`timedatectl`, NTP) and run again"
    );
    let ahead = ClockOffset::measured(at(1900, 0), at(100, 0), at(1900, 40));
    assert!(
        ahead
            .within_bound("cp-1")
            .unwrap_err()
            .to_string()
            .starts_with("this machine's clock is 30m ahead of cp-1's")
    );
}

//! Issue 38: the lock's parsers of what kubectl and the nodes print (the
//! lock ConfigMap, Kured's annotation, the DaemonSet and pod listings, a
//! `date` reading, RFC 3339 times) never panic on any input and stay
//! linear on a large one. See [`crate::fuzzkit`].

use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;

use super::clock::parse_remote_clock;
use super::listing::{parse_pods, parse_settings};
use super::*;
use crate::fuzzkit::{config, json_soup, json_value, linear, text};

const KEYS: &[&str] = &[
    "metadata",
    "annotations",
    "data",
    "holder",
    "nodeID",
    "created",
    "ttl",
    "items",
    "resourceVersion",
    "weave.works/kured-node-lock",
    "maxOwners",
    "locks",
    "name",
    "spec",
    "containers",
    "args",
    "command",
    "image",
    "env",
    "value",
];

fn marker() -> Marker {
    Marker::fixed("0123456789abcdef")
}

/// A listing's fields between markers, as `kubectl -o jsonpath` prints them.
fn listing() -> impl Strategy<Value = String> {
    let field = prop_oneof![
        Just("daemonset".to_string()),
        Just("pod".to_string()),
        Just("container".to_string()),
        Just("true".to_string()),
        "[a-z0-9/ .=:-]{0,16}",
        text(),
    ];
    prop::collection::vec(field, 0..24).prop_map(|f| {
        let m = marker();
        f.iter().map(|x| format!("{}{x}", m.as_str())).collect()
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_lock_configmap_parser_never_panics(
        a in text(), b in json_soup(KEYS), c in json_value(KEYS),
    ) {
        for t in [a, b, c] {
            let _ = parse_lock_configmap(&t);
        }
    }

    #[test]
    fn kureds_annotation_is_judged_without_panicking(
        a in text(), b in json_soup(KEYS), c in json_value(KEYS), secs in any::<u64>(),
    ) {
        let now = UNIX_EPOCH.checked_add(Duration::from_secs(secs >> 20)).unwrap_or(UNIX_EPOCH);
        for t in [a, b, c] {
            let _ = kured_lock_state(Some(&t), now);
        }
    }

    #[test]
    fn listings_parse_or_fail_without_panicking(l in listing(), t in text()) {
        let m = marker();
        let _ = parse_daemonsets(&l, &m);
        let _ = parse_pods(&l, &m);
        let _ = parse_daemonsets(&t, &m);
        let _ = parse_settings(&t);
        let _ = parse_settings(&l);
    }

    #[test]
    fn times_and_clocks_parse_or_fail_without_panicking(t in text(), n in any::<u64>()) {
        let _ = parse_time(&t);
        let _ = parse_remote_clock(&t);
        let _ = parse_time(&format!("{n}-01-01T00:00:00Z"));
        let _ = parse_remote_clock(&format!("{n}.{n}"));
    }
}

#[test]
fn the_lock_parsers_are_linear_on_a_mebibyte() {
    let limit = Duration::from_secs(3);
    let m = marker();
    let unit = format!("{}container{}x", m.as_str(), m.as_str());
    linear(&unit, limit, |t| {
        let _ = parse_daemonsets(t, &m);
    });
    linear(&unit, limit, |t| {
        let _ = parse_pods(t, &m);
    });
    linear("{\"created\":\"2026-", limit, |t| {
        let _ = kured_lock_state(Some(t), UNIX_EPOCH);
    });
    linear("[{\"a\":", limit, |t| {
        let _ = parse_lock_configmap(t);
    });
}

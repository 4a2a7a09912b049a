//! Kured's lock against Kured's real formats, manifests and flag rules, and
//! finding, taking, refreshing and releasing it against the fake API server.

use std::time::{Duration, SystemTime};

use super::*;
use crate::steps::lock::lock_testkit::*;
use crate::steps::lock::{
    Holder, Identity, KURED_ANNOTATION, LocalProcesses, LockLost, LockOptions, acquire,
};

mod kured_heartbeat;
mod taking_kured_lock;

// ---------------------------------------------------------------------------
// Kured's annotation, both forms

const TTL: Duration = Duration::from_secs(15 * 60);

#[test]
fn single_form_is_kureds_with_fleetctls_details_under_metadata() {
    let value = kured_lock_value(&me(), at("2026-11-29T19:00:00Z"), at(NOW), TTL, 1).unwrap();
    assert_eq!(
        value,
        r#"{"nodeID":"fleetctl/alice@laptop","metadata":{"unschedulable":false,"fleetctl":{"host":"laptop","pid":4242,"process":"b00t/4242000","started":"2026-11-29T19:00:00Z"}},"created":"2026-11-29T19:30:12Z","TTL":900000000000}"#
    );
    // Kured's LockAnnotationValue has exactly these four fields; everything
    // of fleetctl's is inside `metadata`, which Kured decodes into NodeMeta
    // (only `unschedulable`), ignoring the rest as encoding/json does.
    let json: serde_json::Value = serde_json::from_str(&value).unwrap();
    let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["TTL", "created", "metadata", "nodeID"]);
    assert_eq!(json["metadata"]["unschedulable"], false);
}

#[test]
fn multi_form_takes_every_slot() {
    let value = kured_lock_value(&me(), at(NOW), at(NOW), TTL, 2).unwrap();
    let entry = kured_lock_value(&me(), at(NOW), at(NOW), TTL, 1).unwrap();
    assert_eq!(
        value,
        format!(r#"{{"maxOwners":2,"locks":[{entry},{entry}]}}"#)
    );
}

/// Kured's own decision (pkg/daemonsetlock `Acquire`, `canAcquireMultiple`):
/// may a Kured pod configured with `concurrency` take the lock whose
/// annotation is `value`?
fn kured_would_acquire(value: Option<&str>, concurrency: usize, now: SystemTime) -> bool {
    let Some(value) = value else { return true };
    let entries = kured_entries(value).unwrap();
    if concurrency > 1 {
        entries.len() < concurrency || entries.iter().any(|e| e.expired(now))
    } else {
        entries.iter().all(|e| e.expired(now))
    }
}

#[test]
fn kured_waits_for_fleetctls_lock_until_its_ttl_runs_out_after_the_last_heartbeat() {
    for concurrency in [1, 2, 5] {
        let beat = at(NOW);
        let value = kured_lock_value(&me(), at(NOW), beat, TTL, concurrency).unwrap();
        assert!(!kured_would_acquire(Some(&value), concurrency, beat));
        let just_before = beat + TTL - Duration::from_secs(1);
        assert!(!kured_would_acquire(Some(&value), concurrency, just_before));
        // Kured's ttlExpired: time.Since(created) >= ttl.
        assert!(kured_would_acquire(Some(&value), concurrency, beat + TTL));
        assert!(kured_would_acquire(None, concurrency, beat));
    }
}

#[test]
fn reads_what_kured_writes_with_nanoseconds_and_a_ttl() {
    // Go's time.Time marshals as RFC 3339 with nanoseconds; TTL is nanoseconds.
    let kured = r#"{"nodeID":"w-2","metadata":{"unschedulable":true},"created":"2026-11-29T19:00:00.123456789Z","TTL":3600000000000}"#;
    assert_eq!(
        kured_lock_state(Some(kured), at(NOW)),
        LockState::Held(vec![Holder {
            ttl: Some(Duration::from_secs(3600)),
            ..kured_node("w-2", "2026-11-29T19:00:00.123456789Z")
        }])
    );
    // One hour after `created` the TTL has run out: Kured itself would take it.
    assert_eq!(
        kured_lock_state(Some(kured), at("2026-11-29T20:00:01Z")),
        LockState::Free
    );
    // Kured 1.4 and older: no created, no TTL, metadata any JSON.
    let old = r#"{"nodeID":"w-3","metadata":null}"#;
    let LockState::Held(holders) = kured_lock_state(Some(old), at(NOW)) else {
        panic!("held")
    };
    assert_eq!(holders[0].id, "w-3");
}

#[test]
fn reads_the_multi_form_skipping_expired_entries() {
    let value = r#"{"maxOwners":2,"locks":[
        {"nodeID":"w-1","metadata":{"unschedulable":false},"created":"2026-11-29T10:00:00Z","TTL":60000000000},
        {"nodeID":"w-3","metadata":{"unschedulable":false},"created":"2026-11-29T19:29:00Z","TTL":0}]}"#;
    let LockState::Held(holders) = kured_lock_state(Some(value), at(NOW)) else {
        panic!("held")
    };
    let ids: Vec<&str> = holders.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, ["w-3"]);
}

#[test]
fn absent_empty_and_released_annotations_are_free() {
    for value in [
        None,
        Some(""),
        Some("  "),
        Some(r#"{"maxOwners":2,"locks":[]}"#),
        Some(r#"{"maxOwners":2,"locks":null}"#),
    ] {
        assert_eq!(
            kured_lock_state(value, at(NOW)),
            LockState::Free,
            "{value:?}"
        );
    }
}

#[test]
fn values_in_neither_form_are_unreadable_not_free() {
    for value in ["locked", "{}", r#"{"nodeID":5}"#, "[1,2]"] {
        assert!(
            matches!(
                kured_lock_state(Some(value), at(NOW)),
                LockState::Unreadable { .. }
            ),
            "{value}"
        );
    }
}

#[test]
fn our_own_value_reads_back_with_host_pid_start_and_heartbeat() {
    let value = kured_lock_value(&me(), at("2026-11-29T19:00:00Z"), at(NOW), TTL, 3).unwrap();
    let LockState::Held(holders) = kured_lock_state(Some(&value), at(NOW)) else {
        panic!("held")
    };
    assert_eq!(holders.len(), 3);
    assert_eq!(
        holders[0],
        Holder {
            id: "fleetctl/alice@laptop".into(),
            host: Some("laptop".into()),
            pid: Some("4242".into()),
            process: Some("b00t/4242000".into()),
            started: Some("2026-11-29T19:00:00Z".into()),
            heartbeat: Some(NOW.into()),
            ttl: Some(TTL),
            gone: false,
        }
    );
}

#[test]
fn an_entry_from_a_fleetctl_before_heartbeats_has_no_heartbeat() {
    let old = r#"{"nodeID":"fleetctl/bob@ops-1","metadata":{"unschedulable":false},"created":"2026-11-29T17:18:07Z","TTL":0}"#;
    let LockState::Held(holders) = kured_lock_state(Some(old), at(NOW)) else {
        panic!("held")
    };
    assert_eq!(holders[0].heartbeat, None);
    assert_eq!(holders[0].started.as_deref(), Some("2026-11-29T17:18:07Z"));
}

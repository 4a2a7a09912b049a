//! Kured's lock against Kured's real formats, manifests and flag rules, and
//! finding, taking, refreshing and releasing it against the fake API server.

use std::time::{Duration, SystemTime};

use super::*;
use crate::steps::lock::lock_testkit::*;
use crate::steps::lock::{Identity, LocalProcesses, LockLost, LockOptions, acquire};

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

// ---------------------------------------------------------------------------
// Taking Kured's lock

#[tokio::test]
async fn a_free_lock_is_taken_at_the_version_read_and_released() {
    let api = Api::with_kured(&["--period=1h"]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(lock.holder(), "fleetctl/alice@laptop");
    assert_eq!(lock.ttl(), TTL);
    assert!(lock.forced().is_none());
    let [(annotate, _)] = api.calls_of("annotate daemonset").try_into().unwrap();
    assert!(
        annotate.contains(&"--resource-version=1".to_string()),
        "{annotate:?}"
    );
    assert!(annotate.contains(&"--overwrite".to_string()));

    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION),
        None
    );
    assert_eq!(lock.release(&api).await.unwrap(), Released::AlreadyGone);
    assert_eq!(
        api.notes(),
        ["lock-acquired", "lock-released", "lock-released"]
    );
}

#[tokio::test]
async fn with_concurrency_every_slot_is_taken() {
    let api = Api::with_kured(&["--concurrency=3"]);
    acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let value = api
        .state()
        .annotation("kube-system", "kured", KURED_ANNOTATION)
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&value).unwrap();
    assert_eq!(parsed["maxOwners"], 3);
    assert_eq!(parsed["locks"].as_array().unwrap().len(), 3);
    assert!(!kured_would_acquire(Some(&value), 3, at(NOW)));
}

#[tokio::test]
async fn a_lock_kured_released_in_multi_form_or_one_expired_is_replaced() {
    let api = Api::with_kured(&["--concurrency=2"]);
    api.state().annotate(
        "kube-system",
        "kured",
        KURED_ANNOTATION,
        r#"{"maxOwners":2,"locks":[]}"#,
    );
    acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .unwrap()
            .contains("fleetctl/alice@laptop")
    );
    // A dead fleetctl's entry whose TTL ran out is free, for Kured and for us.
    let api = Api::with_kured(&[]);
    let stale = kured_lock_value(
        &bob(),
        at("2026-11-29T18:00:00Z"),
        at("2026-11-29T19:10:00Z"),
        TTL,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &stale);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert!(lock.forced().is_none(), "no --force-unlock needed");
}

#[tokio::test]
async fn a_lock_held_by_a_kured_node_stops_apply_and_changes_nothing() {
    let api = Api::with_kured(&[]);
    let kured = r#"{"nodeID":"w-2","metadata":{"unschedulable":false},"created":"2026-11-29T19:25:00Z","TTL":0}"#;
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, kured);
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        held(&err).to_string(),
        "Kured's reboot lock on daemonset kube-system/kured is held by node w-2 since \
         2026-11-29T19:25:00Z (5m 12s ago). Kured is rebooting node w-2: wait until it is back and \
         Kured releases the lock, then retry. If you are sure it is not (its machine is gone, Kured was \
         removed mid-reboot), run `fleetctl apply --force-unlock --yes`."
    );
    assert_eq!(
        api.verbs(),
        ["get daemonsets", "get daemonset", "get daemonset"]
    );
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .as_deref(),
        Some(kured)
    );
}

#[tokio::test]
async fn force_unlock_refuses_a_kured_node_mid_reboot_unless_asked_twice() {
    let api = Api::with_kured(&[]);
    let kured = r#"{"nodeID":"w-2","metadata":{"unschedulable":false},"created":"2026-11-29T19:25:00Z","TTL":0}"#;
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, kured);
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(held(&err).refused_force);
    assert!(
        err.to_string()
            .contains("--force-unlock alone does not remove a lock whose holder may be alive."),
        "{err}"
    );
    assert!(api.calls_of("annotate daemonset").is_empty());

    let lock = acquire(&api, &force_yes(), &me(), at(NOW)).await.unwrap();
    assert!(
        lock.forced()
            .unwrap()
            .contains("held by node w-2 since 2026-11-29T19:25:00Z")
    );
    assert!(
        lock.warnings()[0].contains("for w-2: if Kured was rebooting it"),
        "{:?}",
        lock.warnings()
    );
    assert_eq!(api.notes(), ["lock-force-unlocked", "lock-acquired"]);
    // The removal named the version it judged.
    let calls = api.calls_of("annotate daemonset");
    let removal = &calls[0].0;
    assert_eq!(removal[5], format!("{KURED_ANNOTATION}-"));
    assert!(removal[6].starts_with("--resource-version="));
}

#[tokio::test]
async fn a_quiet_fleetctl_within_its_ttl_is_alive_and_one_whose_process_is_gone_is_dead() {
    // Bob's heartbeat stopped 20 minutes ago, but his lock is valid for 1h
    // without one: he may be waiting for a node to boot. Alive.
    let api = Api::with_kured(&[]);
    let hour = Duration::from_secs(3600);
    let quiet = kured_lock_value(
        &bob(),
        at("2026-11-29T18:00:00Z"),
        at("2026-11-29T19:10:12Z"),
        hour,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &quiet);
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "Kured's reboot lock on daemonset kube-system/kured is held by fleetctl/bob@ops-1 (pid 77 on \
         ops-1), started 2026-11-29T18:00:00Z, last heartbeat 2026-11-29T19:10:12Z (20m ago). That \
         apply is alive as far as fleetctl can tell (its last heartbeat is 20m old, and its lock stays \
         valid for 1h without one, which a node it waits for may take): wait for it to finish. \
         --force-unlock alone does not remove a lock whose holder may be alive. If you are sure it is \
         not (its machine is gone, Kured was removed mid-reboot), run `fleetctl apply --force-unlock \
         --yes`."
    );
    assert!(api.calls_of("annotate daemonset").is_empty());

    // The same lock taken by a fleetctl on this very machine whose process
    // has exited: dead, whatever its heartbeat says.
    let api = Api::with_kured(&[]);
    let earlier = Identity {
        pid: 999,
        process: Some("b00t/1234".into()),
        ..me()
    };
    let orphan = kured_lock_value(
        &earlier,
        at("2026-11-29T18:00:00Z"),
        at("2026-11-29T19:30:00Z"),
        hour,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &orphan);
    let here = |force_unlock| LockOptions {
        force_unlock,
        local: LocalProcesses::Fixed {
            host: "laptop".into(),
            boot: "b00t".into(),
            running: [(999, "b00t/5678".to_string())].into_iter().collect(),
        },
        ..LockOptions::default()
    };
    let err = acquire(&api, &here(false), &me(), at(NOW))
        .await
        .unwrap_err();
    assert!(
        err.to_string().ends_with(
            "That fleetctl looks dead: fleetctl/alice@laptop ran on this machine as pid 999, which no \
             longer runs. Run `fleetctl apply --force-unlock` to remove its lock."
        ),
        "{err}"
    );
    let lock = acquire(&api, &here(true), &me(), at(NOW)).await.unwrap();
    assert!(
        lock.forced()
            .unwrap()
            .contains("fleetctl/alice@laptop (pid 999 on laptop)")
    );

    // The same record, but this machine booted as another boot id: the
    // holder ran on another machine with this host name (or before a
    // reboot), so its pid says nothing here and --force-unlock alone does
    // not take the shortcut.
    let api = Api::with_kured(&[]);
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &orphan);
    let twin = LockOptions {
        force_unlock: true,
        local: LocalProcesses::Fixed {
            host: "laptop".into(),
            boot: "another-b00t".into(),
            running: Default::default(),
        },
        ..LockOptions::default()
    };
    let err = acquire(&api, &twin, &me(), at(NOW)).await.unwrap_err();
    assert!(held(&err).refused_force, "{err}");
    assert!(
        err.to_string()
            .contains("That apply is alive as far as fleetctl can tell"),
        "{err}"
    );
    assert!(api.calls_of("annotate daemonset").is_empty());

    // A live one: heartbeat 12 s ago.
    let api = Api::with_kured(&[]);
    let live = kured_lock_value(
        &bob(),
        at("2026-11-29T18:00:00Z"),
        at("2026-11-29T19:30:00Z"),
        TTL,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &live);
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(
        err.to_string().contains(
            "That apply is alive as far as fleetctl can tell (its last heartbeat is 12s old, and its \
             lock stays valid for 15m without one, which a node it waits for may take): wait for it to \
             finish. --force-unlock alone does not remove"
        ),
        "{err}"
    );
    assert!(api.calls_of("annotate daemonset").is_empty());
    acquire(&api, &force_yes(), &me(), at(NOW)).await.unwrap();
}

#[tokio::test]
async fn force_unlock_removes_once_and_never_fights_kured_for_the_lock() {
    let api = Api::with_kured(&[]);
    let stale = r#"{"nodeID":"w-2","metadata":{"unschedulable":false},"created":"2026-11-28T08:00:00Z","TTL":0}"#;
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, stale);
    let fresh = r#"{"nodeID":"w-4","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":0}"#;
    // The removal goes through; Kured on w-4 takes the lock before our write.
    api.after_next_write(move |state| {
        state.annotate("kube-system", "kured", KURED_ANNOTATION, fresh)
    });
    let err = acquire(&api, &force_yes(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert!(held(&err).to_string().contains("held by node w-4"), "{err}");
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .as_deref(),
        Some(fresh)
    );
    assert_eq!(api.notes(), ["lock-force-unlocked"]);
}

#[tokio::test]
async fn a_holder_that_changes_between_judging_and_removing_is_judged_again() {
    // Bob looks dead; his apply wakes up and beats just before our removal.
    let api = Api::with_kured(&[]);
    let dead = kured_lock_value(
        &bob(),
        at("2026-11-29T18:00:00Z"),
        at("2026-11-29T19:10:12Z"),
        TTL,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &dead);
    let alive = kured_lock_value(
        &bob(),
        at("2026-11-29T18:00:00Z"),
        at("2026-11-29T19:30:11Z"),
        TTL,
        1,
    )
    .unwrap();
    let beat = alive.clone();
    api.before_next_write(move |state| {
        state.annotate("kube-system", "kured", KURED_ANNOTATION, &beat)
    });
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(held(&err).refused_force, "{err}");
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION),
        Some(alive),
        "the removal's resourceVersion no longer matched: nothing removed"
    );
    assert!(api.notes().is_empty());
}

#[tokio::test]
async fn force_unlock_yes_also_clears_an_unreadable_value() {
    let api = Api::with_kured(&[]);
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, "locked-by-hand");
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(matches!(held(&err).state, LockState::Unreadable { .. }));
    let lock = acquire(&api, &force_yes(), &me(), at(NOW)).await.unwrap();
    assert!(lock.warnings().is_empty());
    assert!(lock.forced().unwrap().contains("locked-by-hand"));
}

#[tokio::test]
async fn kured_taking_the_lock_between_read_and_write_conflicts_and_is_reported() {
    let api = Api::with_kured(&[]);
    let kured = r#"{"nodeID":"w-3","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:11Z","TTL":0}"#;
    api.before_next_write(move |state| {
        state.annotate("kube-system", "kured", KURED_ANNOTATION, kured)
    });
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert!(
        held(&err)
            .to_string()
            .contains("held by node w-3 since 2026-11-29T19:30:11Z (1s ago)")
    );
    // Kured's value survived: nothing was overwritten.
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .as_deref(),
        Some(kured)
    );
    assert_eq!(
        api.verbs(),
        [
            "get daemonsets",
            "get daemonset",
            "get daemonset",
            "annotate daemonset",
            "get daemonset"
        ]
    );
}

#[tokio::test]
async fn a_status_update_between_read_and_write_is_retried() {
    let api = Api::with_kured(&[]);
    api.before_next_write(|state| state.touch("kube-system", "kured"));
    acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(
        api.verbs(),
        [
            "get daemonsets",
            "get daemonset",
            "get daemonset",
            "annotate daemonset",
            "get daemonset",
            "annotate daemonset"
        ]
    );
}

#[tokio::test]
async fn a_daemonset_that_never_stops_changing_gives_up_with_a_clear_error() {
    let api = Api::with_kured(&[]);
    for _ in 0..ATTEMPTS {
        api.before_next_write(|state| state.touch("kube-system", "kured"));
    }
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: daemonset kube-system/kured changed 3 times while fleetctl was taking Kured's lock \
         (Kured or a controller keeps writing to it); retry in a moment"
    );
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION),
        None
    );
}

#[tokio::test]
async fn the_lock_goes_where_kureds_flags_say() {
    let api = Api::with_kured(&[
        "--ds-namespace=ops",
        "--ds-name=kured-lock",
        "--lock-annotation=example.com/reboot-lock",
    ]);
    api.add_ds("ops", "kured-lock", Vec::new());
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert!(
        api.state()
            .annotation("ops", "kured-lock", "example.com/reboot-lock")
            .is_some()
    );
    assert!(
        api.state().daemonsets[&("kube-system".into(), "kured".into())]
            .annotations
            .is_empty()
    );
    assert_eq!(
        lock.describe(),
        "Kured's reboot lock on daemonset ops/kured-lock (annotation example.com/reboot-lock); Kured \
         runs as daemonset kube-system/kured"
    );
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert!(
        api.state()
            .annotation("ops", "kured-lock", "example.com/reboot-lock")
            .is_none()
    );
}

// ---------------------------------------------------------------------------
// Heartbeat

#[tokio::test]
async fn a_heartbeat_moves_created_keeps_the_rest_and_names_the_version_it_read() {
    let api = Api::with_kured(&[]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let later = at("2026-11-29T19:31:12Z");
    lock.heartbeat(&api, later).await.unwrap();
    let value = api
        .state()
        .annotation("kube-system", "kured", KURED_ANNOTATION)
        .unwrap();
    assert_eq!(
        value,
        kured_lock_value(&me(), at(NOW), later, TTL, 1).unwrap()
    );
    let calls = api.calls_of("annotate daemonset");
    let beat = &calls[1].0;
    let rv_read = api.state().daemonsets[&("kube-system".into(), "kured".into())].rv - 1;
    assert!(
        beat.contains(&format!("--resource-version={rv_read}")),
        "{beat:?}"
    );
    // Kured still waits a full TTL after this beat.
    assert!(!kured_would_acquire(
        Some(&value),
        1,
        later + TTL - Duration::from_secs(1)
    ));
    // A status update in between is retried, not mistaken for a lost lock.
    api.before_next_write(|state| state.touch("kube-system", "kured"));
    lock.heartbeat(&api, at("2026-11-29T19:31:42Z"))
        .await
        .unwrap();
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
}

#[tokio::test]
async fn a_heartbeat_finds_the_lock_lost_when_removed_or_taken() {
    let api = Api::with_kured(&[]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    // Someone ran --force-unlock --yes elsewhere.
    {
        let mut state = api.state();
        let rv = state.bump();
        let ds = state.ds("kube-system", "kured");
        ds.annotations.clear();
        ds.rv = rv;
    }
    let err = lock
        .heartbeat(&api, at("2026-11-29T19:31:12Z"))
        .await
        .unwrap_err();
    let lost = err
        .chain()
        .find_map(|e| e.downcast_ref::<LockLost>())
        .unwrap();
    assert_eq!(lost.held_by, None);
    assert_eq!(api.notes(), ["lock-acquired", "lock-lost"]);

    // Our heartbeat stalled past the TTL and Kured on w-3 took the lock.
    let kured = r#"{"nodeID":"w-3","metadata":{"unschedulable":false},"created":"2026-11-29T19:50:00Z","TTL":0}"#;
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, kured);
    let err = lock
        .heartbeat(&api, at("2026-11-29T19:50:30Z"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Kured's reboot lock on daemonset kube-system/kured is no longer held by this apply: it is now \
         held by node w-3 since 2026-11-29T19:50:00Z (30s ago). Stopping before anything else \
         changes: find out who is working on this cluster before running `fleetctl apply` again"
    );
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .as_deref(),
        Some(kured),
        "Kured's lock is left alone"
    );
    // Release leaves it alone too.
    assert!(matches!(
        lock.release(&api).await.unwrap(),
        Released::TakenOver { .. }
    ));
}

// ---------------------------------------------------------------------------
// Release

#[tokio::test]
async fn a_lock_someone_else_took_over_is_not_released() {
    let api = Api::with_kured(&[]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let other = kured_lock_value(
        &bob(),
        at("2026-11-29T20:00:00Z"),
        at("2026-11-29T20:00:00Z"),
        TTL,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &other);
    let Released::TakenOver { by } = lock.release(&api).await.unwrap() else {
        panic!("taken over")
    };
    assert!(
        by.starts_with(
            "fleetctl/bob@ops-1 (pid 77 on ops-1), started 2026-11-29T20:00:00Z, last heartbeat \
             2026-11-29T20:00:00Z"
        ),
        "{by}"
    );
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION),
        Some(other)
    );
}

#[tokio::test]
async fn same_user_same_host_but_another_run_is_not_ours_to_release() {
    let api = Api::with_kured(&[]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    // A forced unlock from a second terminal of the same user re-took it later.
    let again = Identity { pid: 5151, ..me() };
    let later = kured_lock_value(
        &again,
        at("2026-11-29T20:00:00Z"),
        at("2026-11-29T20:00:00Z"),
        TTL,
        1,
    )
    .unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &later);
    assert!(matches!(
        lock.release(&api).await.unwrap(),
        Released::TakenOver { .. }
    ));
}

#[tokio::test]
async fn release_retries_after_a_conflict() {
    let api = Api::with_kured(&[]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    api.before_next_write(|state| state.touch("kube-system", "kured"));
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION),
        None
    );
}

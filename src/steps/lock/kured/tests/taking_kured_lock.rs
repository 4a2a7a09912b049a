//! Taking Kured's lock against the fake API server: free, held by Kured or
//! by another fleetctl, forced, raced, and where Kured's flags put it.

use super::*;

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
         removed mid-reboot), run fleetctl again with `--force-unlock --yes`."
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
         ops-1), started 2026-11-29T18:00:00Z, last heartbeat 2026-11-29T19:10:12Z (20m ago). That fleetctl (an apply or a reboot) is alive as far as it can tell (its last heartbeat is 20m old, and its lock stays \
         valid for 1h without one, which a node it waits for may take): wait for it to finish. \
         --force-unlock alone does not remove a lock whose holder may be alive. If you are sure it is \
         not (its machine is gone, Kured was removed mid-reboot), run fleetctl again with \
         `--force-unlock --yes`."
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
             longer runs. Run fleetctl again with `--force-unlock` to remove its lock."
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
            .contains("That fleetctl (an apply or a reboot) is alive as far as it can tell"),
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
            "That fleetctl (an apply or a reboot) is alive as far as it can tell (its last heartbeat is 12s old, and its \
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

//! Refreshing and releasing Kured's lock: what a heartbeat rewrites, when the
//! lock is found lost, and a release that gives back only what is ours.

use super::*;

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
        "Kured's reboot lock on daemonset kube-system/kured is no longer held by this fleetctl run: it is now \
         held by node w-3 since 2026-11-29T19:50:00Z (30s ago). Stopping before anything else \
         changes: find out who is working on this cluster before running fleetctl again"
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

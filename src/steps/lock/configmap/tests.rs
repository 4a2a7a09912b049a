//! fleetctl's configmap lock: its parser, and taking, refreshing, forcing
//! and releasing it against the fake API server, preconditions included.

use std::collections::BTreeMap;

use super::*;
use crate::steps::lock::lock_testkit::*;
use crate::steps::lock::{LockLost, LockOptions, acquire};

#[test]
fn parses_the_lock_configmap_read() {
    let text = "9\t6f1d8f2e-0c1a-4a56\t{\"heartbeat\":\"2026-11-29T19:29:40Z\",\"holder\":\"fleetctl/bob@ops-1\",\"host\":\"ops-1\",\"pid\":\"77\",\"started\":\"2026-11-29T18:00:00Z\"}";
    assert_eq!(
        parse_lock_configmap(text).unwrap(),
        LockConfigMap {
            resource_version: "9".into(),
            uid: "6f1d8f2e-0c1a-4a56".into(),
            holder: fleetctl(
                "fleetctl/bob@ops-1",
                "2026-11-29T18:00:00Z",
                "2026-11-29T19:29:40Z"
            ),
        }
    );
    // A configmap without data (made by hand): held by someone unknown.
    let empty = parse_lock_configmap("9\tuid-1\t").unwrap();
    assert_eq!(empty.holder.id, "an unknown holder");
    assert_eq!(empty.holder.heartbeat, None);
    let err = parse_lock_configmap("9\t\t{}").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("kubectl printed no resourceVersion or uid"),
        "{err}"
    );
    let err = parse_lock_configmap("9\tuid-1\tmap[holder:x]").unwrap_err();
    assert!(err.to_string().contains("not a JSON map"), "{err}");
}

fn data(api: &Api) -> BTreeMap<String, String> {
    api.state().lock_configmap().unwrap().data.clone()
}

#[tokio::test]
async fn without_kured_anywhere_the_lock_is_a_configmap_with_a_heartbeat() {
    let api = Api::default();
    api.add_ds(
        "kube-system",
        "cilium",
        vec![Container::other(
            "cilium-agent",
            "quay.io/cilium/cilium:v1.18.1",
        )],
    );
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(
        api.verbs(),
        ["get daemonsets", "get pods", "create configmap"]
    );
    assert_eq!(
        data(&api),
        BTreeMap::from([
            ("heartbeat".to_string(), NOW.to_string()),
            ("holder".to_string(), "fleetctl/alice@laptop".to_string()),
            ("host".to_string(), "laptop".to_string()),
            ("pid".to_string(), "4242".to_string()),
            ("process".to_string(), "b00t/4242000".to_string()),
            ("started".to_string(), NOW.to_string()),
            ("ttl".to_string(), "900".to_string()),
        ])
    );
    assert_eq!(
        lock.describe(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock); no Kured DaemonSet or pod in any namespace"
    );
    let uid = api.state().lock_configmap().unwrap().uid.clone();
    let rv = api.state().lock_configmap().unwrap().rv;
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert!(api.state().configmaps.is_empty());
    // The removal named the uid and version it read.
    let deletes = api.calls_of("delete --raw");
    let [(args, Some(body))] = deletes.as_slice() else {
        panic!("one delete with a body: {deletes:?}")
    };
    assert_eq!(
        args[2],
        "/api/v1/namespaces/kube-system/configmaps/fleetctl-lock"
    );
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(body["preconditions"]["uid"], uid);
    assert_eq!(body["preconditions"]["resourceVersion"], rv.to_string());
    assert_eq!(lock.release(&api).await.unwrap(), Released::AlreadyGone);
}

#[tokio::test]
async fn a_live_holder_is_refused_even_with_force_unlock_and_removed_with_yes() {
    let api = Api::default();
    let bobs = acquire(
        &api,
        &LockOptions::default(),
        &bob(),
        at("2026-11-29T18:30:12Z"),
    )
    .await
    .unwrap();
    bobs.heartbeat(&api, at("2026-11-29T19:29:42Z"))
        .await
        .unwrap();

    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        held(&err).to_string(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by fleetctl/bob@ops-1 (pid 77 \
         on ops-1), started 2026-11-29T18:30:12Z, last heartbeat 2026-11-29T19:29:42Z (30s ago). That fleetctl (an apply or a reboot) is alive as far as it can tell (its last heartbeat is 30s old, and its lock stays valid for 15m without one, which a node it waits for may take): wait for it to finish. If you are \
         sure it is not (its machine is gone, Kured was removed mid-reboot), run fleetctl again \
         with `--force-unlock --yes`."
    );
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(held(&err).refused_force);
    assert!(api.calls_of("delete --raw").is_empty(), "nothing removed");

    let mine = acquire(&api, &force_yes(), &me(), at(NOW)).await.unwrap();
    assert!(
        mine.forced()
            .unwrap()
            .contains("fleetctl/bob@ops-1 (pid 77 on ops-1)")
    );
    assert_eq!(data(&api)["holder"], "fleetctl/alice@laptop");
    // Bob's late heartbeat finds it lost, and his release leaves Alice's lock.
    let err = bobs.heartbeat(&api, at(NOW)).await.unwrap_err();
    let lost = err
        .chain()
        .find_map(|e| e.downcast_ref::<LockLost>())
        .unwrap();
    assert_eq!(
        lost.held_by.as_deref(),
        Some(
            "fleetctl/alice@laptop (pid 4242 on laptop), started 2026-11-29T19:30:12Z, last heartbeat \
             2026-11-29T19:30:12Z (0s ago)"
        )
    );
    assert!(matches!(
        bobs.release(&api).await.unwrap(),
        Released::TakenOver { .. }
    ));
    assert_eq!(api.state().configmaps.len(), 1);
}

#[tokio::test]
async fn a_dead_holder_is_removed_with_one_force_unlock() {
    let api = Api::default();
    acquire(
        &api,
        &LockOptions::default(),
        &bob(),
        at("2026-11-29T18:30:12Z"),
    )
    .await
    .unwrap();
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert!(
        err.to_string().ends_with(
            "(1h ago). That fleetctl looks dead: no heartbeat for over 15m, the time its lock stays valid without one, while a running apply or reboot \
             refreshes it every 30s. Run fleetctl again with `--force-unlock` to remove its lock."
        ),
        "{err}"
    );
    let lock = acquire(&api, &force(), &me(), at(NOW)).await.unwrap();
    assert!(lock.forced().is_some());
    assert_eq!(
        api.notes(),
        ["lock-acquired", "lock-force-unlocked", "lock-acquired"]
    );
}

#[tokio::test]
async fn a_holder_is_judged_by_the_ttl_it_recorded_not_a_fixed_five_minutes() {
    // Bob took the lock with a TTL of 1h (a long --node-timeout) and has
    // been waiting 20 minutes for a node: --force-unlock alone leaves it.
    let api = Api::default();
    let long = LockOptions {
        ttl: std::time::Duration::from_secs(3600),
        ..LockOptions::default()
    };
    acquire(&api, &long, &bob(), at("2026-11-29T19:10:12Z"))
        .await
        .unwrap();
    assert_eq!(data(&api)["ttl"], "3600");
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("its last heartbeat is 20m old, and its lock stays valid for 1h without one"),
        "{err}"
    );
    assert!(api.verbs().iter().all(|v| !v.starts_with("delete")));
    // Past its own TTL it is dead.
    let later = at("2026-11-29T20:10:13Z");
    let lock = acquire(&api, &force(), &me(), later).await.unwrap();
    assert!(lock.forced().is_some());
}

#[tokio::test]
async fn a_configmap_from_a_fleetctl_before_heartbeats_needs_yes() {
    let api = Api::default();
    acquire(
        &api,
        &LockOptions::default(),
        &bob(),
        at("2026-11-29T18:30:12Z"),
    )
    .await
    .unwrap();
    api.state()
        .lock_configmap_mut()
        .unwrap()
        .data
        .remove("heartbeat");
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("It records no heartbeat (an older fleetctl)"),
        "{err}"
    );
    acquire(&api, &force_yes(), &me(), at(NOW)).await.unwrap();
}

#[tokio::test]
async fn a_heartbeat_between_judging_and_removing_saves_the_lock() {
    // Bob looks dead, but beats right before our removal: the removal's
    // resourceVersion precondition fails and Bob is judged again, alive.
    let api = Api::default();
    acquire(
        &api,
        &LockOptions::default(),
        &bob(),
        at("2026-11-29T18:30:12Z"),
    )
    .await
    .unwrap();
    api.before_next_write(|_| {}); // our create
    api.before_next_write(|state| state.set_lock_data("heartbeat", "2026-11-29T19:30:10Z"));
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(held(&err).refused_force, "{err}");
    assert_eq!(data(&api)["holder"], "fleetctl/bob@ops-1");
    assert_eq!(
        api.verbs()[3..],
        [
            "get daemonsets",
            "get pods",
            "create configmap",
            "get configmap",
            "delete --raw",
            "create configmap",
            "get configmap"
        ]
    );
    assert_eq!(api.notes(), ["lock-acquired"], "nothing was force-unlocked");
}

#[tokio::test]
async fn a_configmap_deleted_and_recreated_is_not_removed_by_its_old_uid() {
    let api = Api::default();
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    // Someone replaced it with a copy of ours: same data, another uid.
    api.before_next_write(|state| {
        let cm = state.lock_configmap_mut().unwrap();
        cm.uid = "uid-recreated".into();
    });
    api.before_next_write(|state| {
        state.lock_configmap_mut().unwrap().uid = "uid-recreated-again".into();
    });
    api.before_next_write(|state| {
        state.lock_configmap_mut().unwrap().uid = "uid-recreated-thrice".into();
    });
    let err = lock.release(&api).await.unwrap_err();
    assert!(
        err.to_string().starts_with(
            "cp-1: configmap kube-system/fleetctl-lock changed 3 times while fleetctl was releasing its lock"
        ),
        "{err}"
    );
    assert_eq!(api.state().configmaps.len(), 1, "never deleted blindly");
}

#[tokio::test]
async fn a_heartbeat_patches_only_the_heartbeat_at_the_version_read() {
    let api = Api::default();
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let rv = api.state().lock_configmap().unwrap().rv;
    lock.heartbeat(&api, at("2026-11-29T19:30:42Z"))
        .await
        .unwrap();
    assert_eq!(data(&api)["heartbeat"], "2026-11-29T19:30:42Z");
    assert_eq!(data(&api)["started"], NOW);
    let patches = api.calls_of("patch configmap");
    let [(args, None)] = patches.as_slice() else {
        panic!("one patch: {patches:?}")
    };
    assert_eq!(
        args[7],
        format!(
            r#"{{"data":{{"heartbeat":"2026-11-29T19:30:42Z"}},"metadata":{{"resourceVersion":"{rv}"}}}}"#
        )
    );
    // A change in between is retried.
    api.before_next_write(|state| state.set_lock_data("note", "x"));
    lock.heartbeat(&api, at("2026-11-29T19:31:12Z"))
        .await
        .unwrap();
    assert_eq!(data(&api)["heartbeat"], "2026-11-29T19:31:12Z");
}

#[tokio::test]
async fn a_heartbeat_finds_a_deleted_lock_lost() {
    let api = Api::default();
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    api.state().configmaps.clear();
    let err = lock.heartbeat(&api, at(NOW)).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is no longer held by this fleetctl run: it was \
         removed (a fleetctl run with `--force-unlock` elsewhere, or by hand). Stopping before anything \
         else changes: find out who is working on this cluster before running fleetctl again"
    );
    assert_eq!(api.notes(), ["lock-acquired", "lock-lost"]);
    assert_eq!(lock.release(&api).await.unwrap(), Released::AlreadyGone);
}

#[tokio::test]
async fn a_configmap_released_between_create_and_read_is_retried() {
    let api = Api::default();
    acquire(&api, &LockOptions::default(), &bob(), at(NOW))
        .await
        .unwrap();
    api.calls.lock().unwrap().clear();
    // Bob releases right after our create failed: our read finds nothing.
    api.after_next_write(|state| state.configmaps.clear());
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(
        api.verbs(),
        [
            "get daemonsets",
            "get pods",
            "create configmap",
            "get configmap",
            "create configmap"
        ]
    );
    assert_eq!(lock.holder(), "fleetctl/alice@laptop");
    assert_eq!(data(&api)["holder"], "fleetctl/alice@laptop");
}

//! fleetctl's configmap lock: its parser, and acquire and release against
//! the fake API server.

use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::steps::lock::testkit::*;
use crate::steps::lock::{Identity, LockOptions, acquire};

// ---------------------------------------------------------------------------
// fleetctl's configmap and the messages

#[test]
fn parses_the_lock_configmap() {
    let text = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleetctl-lock", "namespace": "kube-system", "resourceVersion": "9"},
        "data": {"holder": "fleetctl/bob@ops-1", "host": "ops-1", "pid": "77", "started": "2026-11-29T18:00:00Z"},
    })
    .to_string();
    assert_eq!(
        parse_lock_configmap(&text).unwrap(),
        Holder {
            id: "fleetctl/bob@ops-1".into(),
            since: "2026-11-29T18:00:00Z".into(),
            pid: Some("77".into()),
            host: Some("ops-1".into()),
        }
    );
    let empty = parse_lock_configmap(r#"{"metadata":{"name":"fleetctl-lock"}}"#).unwrap();
    assert_eq!(empty.id, "an unknown holder");
}

#[tokio::test]
async fn without_kured_the_lock_is_a_configmap_with_holder_host_pid_and_start() {
    let api = Api::default();
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(api.verbs(), ["get daemonset", "create configmap"]);
    let data = api.state().configmaps[&("kube-system".into(), "fleetctl-lock".into())]
        .1
        .clone();
    assert_eq!(
        data,
        BTreeMap::from([
            ("holder".to_string(), "fleetctl/alice@laptop".to_string()),
            ("host".to_string(), "laptop".to_string()),
            ("pid".to_string(), "4242".to_string()),
            ("started".to_string(), NOW.to_string()),
        ])
    );
    assert_eq!(
        lock.describe(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock)"
    );
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert!(api.state().configmaps.is_empty());
    assert_eq!(lock.release(&api).await.unwrap(), Released::AlreadyGone);
}

#[tokio::test]
async fn a_configmap_lock_held_by_another_fleetctl_says_who_and_force_replaces_it() {
    let api = Api::default();
    let bob = Identity {
        user: "bob".into(),
        host: "ops-1".into(),
        pid: 77,
    };
    let bobs = acquire(
        &api,
        &LockOptions::default(),
        &bob,
        at("2026-11-29T18:30:12Z"),
    )
    .await
    .unwrap();

    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        held(&err).to_string(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by fleetctl/bob@ops-1 (pid 77) \
         since 2026-11-29T18:30:12Z (1h ago). If that holder is dead (e.g. a fleetctl that was killed), \
         run `fleetctl apply --force-unlock`."
    );

    let mine = acquire(&api, &force(), &me(), at(NOW)).await.unwrap();
    assert!(
        mine.forced()
            .unwrap()
            .contains("fleetctl/bob@ops-1 (pid 77)")
    );
    let data = api.state().configmaps[&("kube-system".into(), "fleetctl-lock".into())]
        .1
        .clone();
    assert_eq!(data["holder"], "fleetctl/alice@laptop");
    // Bob's late release must not remove Alice's lock.
    assert!(matches!(
        bobs.release(&api).await.unwrap(),
        Released::TakenOver { .. }
    ));
    assert_eq!(api.state().configmaps.len(), 1);
}

#[tokio::test]
async fn a_configmap_released_between_create_and_read_is_retried() {
    let api = Api::default();
    let bob = Identity {
        user: "bob".into(),
        host: "ops-1".into(),
        pid: 77,
    };
    acquire(&api, &LockOptions::default(), &bob, at(NOW))
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
            "get daemonset",
            "create configmap",
            "get configmap",
            "create configmap"
        ]
    );
    assert_eq!(lock.holder(), "fleetctl/alice@laptop");
    let data = api.state().configmaps[&("kube-system".into(), "fleetctl-lock".into())]
        .1
        .clone();
    assert_eq!(data["holder"], "fleetctl/alice@laptop");
}

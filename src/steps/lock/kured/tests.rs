//! Kured's lock against Kured's real formats and flags, and its acquire and
//! release logic against the fake API server.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::json;

use super::*;
use crate::steps::lock::testkit::*;
use crate::steps::lock::{LockOptions, acquire};

fn info(argv: &[&str], env: &[(&str, &str)]) -> KuredInfo {
    KuredInfo {
        namespace: "kube-system".into(),
        name: "kured".into(),
        resource_version: "1".into(),
        annotations: BTreeMap::new(),
        argv: strings(argv),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

// ---------------------------------------------------------------------------
// Kured's flags

// ---------------------------------------------------------------------------
// Kured's flags

#[test]
fn kured_defaults_without_flags() {
    let config = info(&["/usr/bin/kured"], &[]).config().unwrap();
    assert_eq!(
        config,
        KuredConfig {
            ds_namespace: "kube-system".into(),
            ds_name: "kured".into(),
            annotation: "weave.works/kured-node-lock".into(),
            concurrency: 1,
            lock_ttl: None,
        }
    );
}

#[test]
fn kured_flags_in_both_forms_last_one_wins_and_dash_dash_ends_them() {
    let argv = [
        "/usr/bin/kured",
        "--ds-name=first",
        "--period",
        "1h",
        "--ds-namespace",
        "kured",
        "--force-reboot",
        "--lock-annotation=example.com/lock",
        "--concurrency",
        "3",
        "--ds-name",
        "kured-lock",
        "--lock-ttl=30m",
        "--",
        "--ds-name=ignored",
    ];
    let config = info(&argv, &[]).config().unwrap();
    assert_eq!(config.ds_name, "kured-lock");
    assert_eq!(config.ds_namespace, "kured");
    assert_eq!(config.annotation, "example.com/lock");
    assert_eq!(config.concurrency, 3);
    assert_eq!(config.lock_ttl.as_deref(), Some("30m"));
}

#[test]
fn kured_env_vars_override_flags_as_newer_kured_does() {
    let config = info(
        &["/usr/bin/kured", "--ds-name=from-flag", "--concurrency=2"],
        &[("KURED_DS_NAME", "from-env"), ("KURED_LOCK_TTL", "0")],
    )
    .config()
    .unwrap();
    assert_eq!(config.ds_name, "from-env");
    assert_eq!(config.concurrency, 2);
    assert_eq!(config.lock_ttl, None, "a zero TTL is no TTL");
}

#[test]
fn a_non_numeric_concurrency_is_reported_and_zero_means_one() {
    let err = info(&["--concurrency=two"], &[]).config().unwrap_err();
    assert_eq!(
        err.to_string(),
        "Kured's daemonset kube-system/kured sets --concurrency to `two`, which is not a number; fix Kured's configuration"
    );
    assert_eq!(
        info(&["--concurrency=0"], &[])
            .config()
            .unwrap()
            .concurrency,
        1
    );
}

/// The shape `kubectl get daemonset kured -o json` prints for Kured's
/// upstream manifest (trimmed to what matters plus some noise).
fn kured_ds_json(
    command: &[&str],
    args: Option<&[&str]>,
    annotations: serde_json::Value,
) -> String {
    let mut container = json!({
        "name": "kured",
        "image": "ghcr.io/kubereboot/kured:1.17.1",
        "command": command,
        "env": [
            {"name": "KURED_NODE_ID", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}
        ],
        "securityContext": {"privileged": true},
    });
    if let Some(args) = args {
        container["args"] = json!(args);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "kured",
            "namespace": "kube-system",
            "resourceVersion": "48213",
            "generation": 1,
            "annotations": annotations,
        },
        "spec": {
            "selector": {"matchLabels": {"name": "kured"}},
            "template": {"spec": {
                "serviceAccountName": "kured",
                "hostPID": true,
                "containers": [container],
            }},
        },
        "status": {"numberReady": 3},
    })
    .to_string()
}

#[test]
fn parses_kured_daemonset_json_with_args_split_between_command_and_args() {
    let text = kured_ds_json(
        &["/usr/bin/kured", "--ds-name=kured"],
        Some(&["--ds-namespace=kube-system", "--concurrency", "2"]),
        json!({"deprecated.daemonset.template.generation": "1", KURED_ANNOTATION: ""}),
    );
    let ds = parse_daemonset(&text).unwrap();
    assert_eq!(ds.namespace, "kube-system");
    assert_eq!(ds.name, "kured");
    assert_eq!(ds.resource_version, "48213");
    assert_eq!(
        ds.annotations.get(KURED_ANNOTATION).map(String::as_str),
        Some("")
    );
    assert_eq!(
        ds.argv,
        [
            "/usr/bin/kured",
            "--ds-name=kured",
            "--ds-namespace=kube-system",
            "--concurrency",
            "2"
        ]
    );
    assert!(
        ds.env.is_empty(),
        "valueFrom env vars have no literal value"
    );
    assert_eq!(ds.config().unwrap().concurrency, 2);
}

#[test]
fn a_daemonset_without_annotations_or_args_parses() {
    let text = json!({
        "metadata": {"name": "kured", "namespace": "kube-system", "resourceVersion": "7"},
        "spec": {"template": {"spec": {"containers": [{"name": "kured", "image": "kured"}]}}},
    })
    .to_string();
    let ds = parse_daemonset(&text).unwrap();
    assert!(ds.annotations.is_empty() && ds.argv.is_empty());
    assert_eq!(ds.config().unwrap().ds_name, "kured");
}

#[test]
fn the_kured_container_is_found_by_name_among_sidecars() {
    let text = json!({
        "metadata": {"name": "kured", "namespace": "kube-system", "resourceVersion": "7"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "proxy", "args": ["--ds-name=wrong"]},
            {"name": "kured", "command": ["/usr/bin/kured"], "args": ["--ds-name=right"],
             "env": [{"name": "KURED_CONCURRENCY", "value": "4"}]},
        ]}}},
    })
    .to_string();
    let config = parse_daemonset(&text).unwrap().config().unwrap();
    assert_eq!(config.ds_name, "right");
    assert_eq!(config.concurrency, 4);
}

#[test]
fn not_a_daemonset_or_no_resource_version_is_an_error() {
    let err = parse_daemonset("daemonset.apps/kured").unwrap_err();
    assert!(err.to_string().contains("not a DaemonSet in JSON"), "{err}");
    let no_rv = json!({"metadata": {"name": "kured", "namespace": "kube-system"}}).to_string();
    assert_eq!(
        parse_daemonset(&no_rv).unwrap_err().to_string(),
        "daemonset kube-system/kured has no metadata.resourceVersion, so it cannot be updated safely"
    );
}

// ---------------------------------------------------------------------------
// Kured's annotation, both forms

// ---------------------------------------------------------------------------
// Kured's annotation, both forms

#[test]
fn single_form_is_byte_for_byte_what_kured_writes() {
    let value = kured_lock_value("fleetctl/alice@laptop", NOW, 1).unwrap();
    assert_eq!(
        value,
        r#"{"nodeID":"fleetctl/alice@laptop","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":0}"#
    );
}

#[test]
fn multi_form_takes_every_slot() {
    let value = kured_lock_value("fleetctl/alice@laptop", NOW, 2).unwrap();
    let entry = r#"{"nodeID":"fleetctl/alice@laptop","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":0}"#;
    assert_eq!(
        value,
        format!(r#"{{"maxOwners":2,"locks":[{entry},{entry}]}}"#)
    );
}

/// Kured's own decision (pkg/daemonsetlock): may a Kured pod configured
/// with `concurrency` take the lock whose annotation is `value`?
fn kured_would_acquire(value: Option<&str>, concurrency: usize, now: SystemTime) -> bool {
    let Some(value) = value else { return true };
    let entries = kured_entries(value).unwrap();
    if concurrency > 1 {
        entries.len() < concurrency || entries.iter().any(|e| expired(e, now))
    } else {
        entries.iter().all(|e| expired(e, now))
    }
}

#[test]
fn kured_cannot_take_a_lock_fleetctl_holds_in_either_form() {
    for concurrency in [1, 2, 5] {
        let value = kured_lock_value("fleetctl/alice@laptop", NOW, concurrency).unwrap();
        // A year later still: TTL 0 never expires.
        assert!(!kured_would_acquire(
            Some(&value),
            concurrency,
            at("2027-11-29T19:30:12Z")
        ));
        assert!(kured_would_acquire(None, concurrency, at(NOW)));
    }
}

#[test]
fn reads_what_kured_writes_with_nanoseconds_and_a_ttl() {
    // Go's time.Time marshals as RFC 3339 with nanoseconds; TTL is nanoseconds.
    let kured = r#"{"nodeID":"w-2","metadata":{"unschedulable":true},"created":"2026-11-29T19:00:00.123456789Z","TTL":3600000000000}"#;
    let held = kured_lock_state(Some(kured), at(NOW));
    assert_eq!(
        held,
        LockState::Held(vec![Holder {
            id: "w-2".into(),
            since: "2026-11-29T19:00:00.123456789Z".into(),
            pid: None,
            host: None,
        }])
    );
    // One hour after `created` the TTL has run out: Kured itself would take it.
    assert_eq!(
        kured_lock_state(Some(kured), at("2026-11-29T20:00:01Z")),
        LockState::Free
    );
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
fn our_own_value_reads_back_as_held_by_us() {
    let value = kured_lock_value(&me().holder(), NOW, 3).unwrap();
    let LockState::Held(holders) = kured_lock_state(Some(&value), at(NOW)) else {
        panic!("held")
    };
    assert_eq!(holders.len(), 3);
    assert!(
        holders
            .iter()
            .all(|h| h.id == "fleetctl/alice@laptop" && h.since == NOW)
    );
}

// ---------------------------------------------------------------------------
// Acquire and release against the fake

// ---------------------------------------------------------------------------
// Acquire and release against the fake

#[tokio::test]
async fn a_free_kured_lock_is_taken_in_kureds_format_and_released() {
    let api = Api::with_kured(&["--period=1h"]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let value = api
        .state()
        .annotation("kube-system", "kured", KURED_ANNOTATION)
        .unwrap();
    assert_eq!(
        value,
        kured_lock_value("fleetctl/alice@laptop", NOW, 1).unwrap()
    );
    assert!(!kured_would_acquire(Some(&value), 1, at(NOW)));
    assert_eq!(lock.holder(), "fleetctl/alice@laptop");
    assert_eq!(
        lock.describe(),
        "Kured's reboot lock on daemonset kube-system/kured (annotation weave.works/kured-node-lock)"
    );
    assert!(lock.forced().is_none() && lock.warnings().is_empty());
    // The write names the resourceVersion it read and does not overwrite.
    let calls = api.calls.lock().unwrap().clone();
    let annotate = calls.iter().find(|c| c[2] == "annotate").unwrap();
    assert!(
        annotate
            .iter()
            .any(|a| a.starts_with("--resource-version="))
    );
    assert!(!annotate.iter().any(|a| a == "--overwrite"));

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
async fn a_lock_kured_released_in_multi_form_is_replaced_with_overwrite() {
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
    let calls = api.calls.lock().unwrap().clone();
    let annotate = calls.iter().find(|c| c[2] == "annotate").unwrap();
    assert!(annotate.iter().any(|a| a == "--overwrite"));
    let value = api
        .state()
        .annotation("kube-system", "kured", KURED_ANNOTATION)
        .unwrap();
    assert!(value.contains("fleetctl/alice@laptop"));
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
        "Kured's reboot lock on daemonset kube-system/kured is held by w-2 since 2026-11-29T19:25:00Z \
         (5m 12s ago). Kured is rebooting node w-2: wait until it is back and Kured releases the lock, \
         then retry. If the lock is stale (the node is gone, Kured was removed mid-reboot), run \
         `fleetctl apply --force-unlock`."
    );
    assert_eq!(api.verbs(), ["get daemonset"]);
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .as_deref(),
        Some(kured)
    );
}

#[tokio::test]
async fn force_unlock_removes_any_holder_journals_it_and_warns_about_its_node() {
    let api = Api::with_kured(&[]);
    let kured = r#"{"nodeID":"w-2","metadata":{"unschedulable":false},"created":"2026-11-29T19:25:00Z","TTL":0}"#;
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, kured);
    let lock = acquire(&api, &force(), &me(), at(NOW)).await.unwrap();
    assert!(
        lock.forced()
            .unwrap()
            .contains("held by w-2 since 2026-11-29T19:25:00Z")
    );
    assert_eq!(lock.warnings().len(), 1);
    assert!(
        lock.warnings()[0].contains("for w-2: if Kured was rebooting it"),
        "{:?}",
        lock.warnings()
    );
    assert_eq!(api.notes(), ["lock-force-unlocked", "lock-acquired"]);
    assert_eq!(
        api.verbs(),
        [
            "get daemonset",
            "annotate daemonset",
            "get daemonset",
            "annotate daemonset"
        ]
    );
    let value = api
        .state()
        .annotation("kube-system", "kured", KURED_ANNOTATION)
        .unwrap();
    assert!(value.contains("fleetctl/alice@laptop"));
}

#[tokio::test]
async fn force_unlock_removes_once_and_never_fights_kured_for_the_lock() {
    let api = Api::with_kured(&[]);
    let stale = r#"{"nodeID":"w-2","metadata":{"unschedulable":false},"created":"2026-11-28T08:00:00Z","TTL":0}"#;
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, stale);
    let fresh = r#"{"nodeID":"w-4","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":0}"#;
    // The removal goes through; Kured on w-4 takes the lock before our write.
    api.before_next_write(|_| {});
    api.before_next_write(move |state| {
        state.annotate("kube-system", "kured", KURED_ANNOTATION, fresh)
    });
    let err = acquire(&api, &force(), &me(), at(NOW)).await.unwrap_err();
    assert!(held(&err).to_string().contains("held by w-4"), "{err}");
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION)
            .as_deref(),
        Some(fresh)
    );
    assert_eq!(api.notes(), ["lock-force-unlocked"]);
}

#[tokio::test]
async fn force_unlock_also_clears_an_unreadable_value() {
    let api = Api::with_kured(&[]);
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, "locked-by-hand");
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert!(matches!(held(&err).state, LockState::Unreadable { .. }));
    let lock = acquire(&api, &force(), &me(), at(NOW)).await.unwrap();
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
            .contains("held by w-3 since 2026-11-29T19:30:11Z (1s ago)")
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
        ["get daemonset", "annotate daemonset", "get daemonset"]
    );
}

#[tokio::test]
async fn a_status_update_between_read_and_write_is_retried() {
    let api = Api::with_kured(&[]);
    api.before_next_write(|state| {
        let rv = state.bump();
        state.ds("kube-system", "kured").rv = rv;
    });
    acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(
        api.verbs(),
        [
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
        api.before_next_write(|state| {
            let rv = state.bump();
            state.ds("kube-system", "kured").rv = rv;
        });
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
        "--lock-ttl=30m",
    ]);
    api.add_ds("ops", "kured-lock", &[]);
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
        "Kured's reboot lock on daemonset ops/kured-lock (annotation example.com/reboot-lock)"
    );
    assert!(
        lock.warnings()[0].starts_with("Kured runs with --lock-ttl=30m:"),
        "{:?}",
        lock.warnings()
    );
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert!(
        api.state()
            .annotation("ops", "kured-lock", "example.com/reboot-lock")
            .is_none()
    );
}

#[tokio::test]
async fn kured_flags_naming_a_missing_daemonset_stop_apply() {
    let api = Api::with_kured(&["--ds-name=gone"]);
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: Kured (daemonset kube-system/kured) keeps its reboot lock on daemonset kube-system/gone \
         (--ds-namespace/--ds-name), which does not exist, so Kured cannot lock either; fix Kured's flags before applying"
    );
}

#[tokio::test]
async fn a_lock_someone_else_took_over_is_not_released() {
    let api = Api::with_kured(&[]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let other = kured_lock_value("fleetctl/bob@ops-1", "2026-11-29T20:00:00Z", 1).unwrap();
    api.state()
        .annotate("kube-system", "kured", KURED_ANNOTATION, &other);
    assert_eq!(
        lock.release(&api).await.unwrap(),
        Released::TakenOver {
            by: "fleetctl/bob@ops-1".into()
        }
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
    let later = kured_lock_value("fleetctl/alice@laptop", "2026-11-29T20:00:00Z", 1).unwrap();
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
    api.before_next_write(|state| {
        let rv = state.bump();
        state.ds("kube-system", "kured").rv = rv;
    });
    assert_eq!(lock.release(&api).await.unwrap(), Released::Removed);
    assert_eq!(
        api.state()
            .annotation("kube-system", "kured", KURED_ANNOTATION),
        None
    );
}

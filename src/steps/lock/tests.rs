//! The lock's messages, its identity, and what acquire does when the API
//! itself fails.

use super::testkit::*;
use super::*;

#[test]
fn the_holder_id_is_never_a_node_name() {
    assert_eq!(me().holder(), "fleetctl/alice@laptop");
    let local = Identity::local();
    assert!(local.holder().starts_with("fleetctl/") && local.holder().contains('@'));
    assert_eq!(local.pid, std::process::id());
}

#[test]
fn held_by_a_dead_fleetctl_says_who_since_when_and_how_to_unlock() {
    let held = LockHeld {
        lock: "Kured's reboot lock on daemonset kube-system/kured".into(),
        state: LockState::Held(vec![holder("fleetctl/bob@ops-1", "2026-11-29T17:18:07Z")]),
        now: at(NOW),
    };
    assert_eq!(
        held.to_string(),
        "Kured's reboot lock on daemonset kube-system/kured is held by fleetctl/bob@ops-1 since \
         2026-11-29T17:18:07Z (2h 12m 5s ago). If that holder is dead (e.g. a fleetctl that was killed), \
         run `fleetctl apply --force-unlock`."
    );
}

#[test]
fn held_by_kured_nodes_says_kured_is_rebooting() {
    let held = LockHeld {
        lock: "Kured's reboot lock on daemonset kube-system/kured".into(),
        state: LockState::Held(vec![
            holder("w-1", "2026-11-29T19:29:12.5Z"),
            holder("w-2", "yesterday"),
            holder("", ""),
        ]),
        now: at(NOW),
    };
    assert_eq!(
        held.to_string(),
        "Kured's reboot lock on daemonset kube-system/kured is held by w-1 since 2026-11-29T19:29:12.5Z \
         (59s ago), w-2 since yesterday and an entry with no nodeID. Kured is rebooting node w-1: wait \
         until it is back and Kured releases the lock, then retry. If the lock is stale (the node is gone, \
         Kured was removed mid-reboot), run `fleetctl apply --force-unlock`."
    );
}

#[test]
fn held_configmap_names_the_pid_and_unreadable_values_are_quoted() {
    let held = LockHeld {
        lock: "fleetctl's lock (configmap kube-system/fleetctl-lock)".into(),
        state: LockState::Held(vec![Holder {
            pid: Some("77".into()),
            host: Some("ops-1".into()),
            ..holder("fleetctl/bob@ops-1", "2026-11-29T19:30:00Z")
        }]),
        now: at(NOW),
    };
    assert_eq!(
        held.to_string(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by fleetctl/bob@ops-1 (pid 77) \
         since 2026-11-29T19:30:00Z (12s ago). If that holder is dead (e.g. a fleetctl that was killed), \
         run `fleetctl apply --force-unlock`."
    );
    let LockState::Unreadable { value, why } = kured_lock_state(Some("locked"), at(NOW)) else {
        panic!("unreadable")
    };
    let held = LockHeld {
        lock: "Kured's reboot lock on daemonset kube-system/kured".into(),
        state: LockState::Unreadable { value, why },
        now: at(NOW),
    };
    let text = held.to_string();
    assert!(
        text.starts_with("Kured's reboot lock on daemonset kube-system/kured holds a value fleetctl cannot read as a lock (not JSON: "),
        "{text}"
    );
    assert!(
        text.ends_with(
            "): locked. If nothing uses it, run `fleetctl apply --force-unlock` to remove it."
        ),
        "{text}"
    );
}

#[tokio::test]
async fn an_api_failure_names_the_node_the_step_and_kubectls_words() {
    struct Unauthorized;
    impl Kubectl for Unauthorized {
        async fn kubectl(&self, _label: &str, _args: &[String]) -> anyhow::Result<Output> {
            Ok(fail(
                "error: You must be logged in to the server (Unauthorized)",
            ))
        }
        fn note(&self, _kind: &str, _detail: &str) {}
        fn node(&self) -> &str {
            "cp-1"
        }
    }
    let err = acquire(&Unauthorized, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: lock: read daemonset kube-system/kured failed (exit status 1); last lines of its stderr:\n    \
         error: You must be logged in to the server (Unauthorized)"
    );
}

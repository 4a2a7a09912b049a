//! What both locks share: who we are, naming Kured, judging a holder alive
//! or dead, the messages an operator reads, and what acquire does when the
//! API itself fails.

use super::lock_testkit::*;
use super::*;

mod finding_kured;

#[test]
fn the_holder_id_is_never_a_node_name() {
    assert_eq!(me().holder(), "fleetctl/alice@laptop");
    let local = Identity::local();
    assert!(local.holder().starts_with("fleetctl/") && local.holder().contains('@'));
    assert_eq!(local.pid, std::process::id());
}

#[test]
fn a_kured_daemonset_is_named_namespace_slash_name() {
    assert_eq!(
        "kured/kured".parse::<KuredRef>(),
        Ok(KuredRef {
            namespace: "kured".into(),
            name: "kured".into()
        })
    );
    let named: KuredRef = " ops/reboots.kured-1 ".parse().unwrap();
    assert_eq!(named.to_string(), "ops/reboots.kured-1");
    for bad in [
        "kured",
        "/kured",
        "kured/",
        "Kube-System/kured",
        "a/b/c",
        "ns/-x",
    ] {
        let err = bad.parse::<KuredRef>().unwrap_err();
        assert!(err.contains("write NAMESPACE/NAME"), "{bad}: {err}");
    }
}

#[test]
fn liveness_comes_from_the_heartbeat_and_kured_nodes_are_never_judged_dead() {
    let now = at(NOW);
    let five = Duration::from_secs(300);
    let live = fleetctl(
        "fleetctl/bob@ops-1",
        "2026-11-29T18:00:00Z",
        "2026-11-29T19:29:50Z",
    );
    assert_eq!(
        live.liveness(now, five),
        Liveness::Alive {
            age: Duration::from_secs(22),
            ttl: five
        }
    );
    let dead = fleetctl(
        "fleetctl/bob@ops-1",
        "2026-11-29T18:00:00Z",
        "2026-11-29T19:25:11Z",
    );
    assert_eq!(
        dead.liveness(now, five),
        Liveness::Dead {
            age: Duration::from_secs(301),
            ttl: five
        }
    );
    let ahead = fleetctl(
        "fleetctl/bob@ops-1",
        "2026-11-29T18:00:00Z",
        "2026-11-29T19:31:00Z",
    );
    assert_eq!(
        ahead.liveness(now, five),
        Liveness::Alive {
            age: Duration::ZERO,
            ttl: five
        },
        "a clock ahead of ours is not a dead holder"
    );
    let no_beat = Holder {
        heartbeat: None,
        ..live.clone()
    };
    assert_eq!(no_beat.liveness(now, five), Liveness::Unknown);
    let garbled = Holder {
        heartbeat: Some("yesterday".into()),
        ..live
    };
    assert_eq!(garbled.liveness(now, five), Liveness::Unknown);
    let node = kured_node("w-2", "2026-11-28T08:00:00Z");
    assert_eq!(node.liveness(now, five), Liveness::KuredNode);
    assert_eq!(kured_node("", "").liveness(now, five), Liveness::Unknown);
}

#[test]
fn a_holder_is_dead_only_after_its_own_ttl_without_a_heartbeat() {
    // A fleetctl waiting 6 minutes for a node to boot (--node-timeout 15m)
    // recorded a TTL of 20 minutes: it is alive, whatever the fallback.
    let now = at(NOW);
    let waiting = Holder {
        ttl: Some(Duration::from_secs(20 * 60)),
        ..fleetctl(
            "fleetctl/bob@ops-1",
            "2026-11-29T18:00:00Z",
            "2026-11-29T19:24:12Z",
        )
    };
    assert_eq!(
        waiting.liveness(now, Duration::from_secs(300)),
        Liveness::Alive {
            age: Duration::from_secs(360),
            ttl: Duration::from_secs(20 * 60)
        }
    );
    let gone_quiet = Holder {
        heartbeat: Some("2026-11-29T19:10:11Z".into()),
        ..waiting.clone()
    };
    assert!(matches!(
        gone_quiet.liveness(now, Duration::from_secs(300)),
        Liveness::Dead { .. }
    ));
    // One that recorded none is judged by the TTL fleetctl itself writes.
    let old = fleetctl(
        "fleetctl/bob@ops-1",
        "2026-11-29T18:00:00Z",
        "2026-11-29T19:24:12Z",
    );
    assert!(matches!(
        old.liveness(now, DEFAULT_DEAD_AFTER),
        Liveness::Alive { .. }
    ));
    assert!(DEFAULT_DEAD_AFTER >= DEFAULT_TTL);
}

#[test]
fn a_holder_on_this_machine_whose_process_is_gone_is_dead_at_once() {
    let now = at(NOW);
    let fresh = Holder {
        id: "fleetctl/alice@laptop".into(),
        host: Some("laptop".into()),
        pid: Some("4242".into()),
        process: Some("b00t/4242000".into()),
        started: Some("2026-11-29T19:00:00Z".into()),
        heartbeat: Some("2026-11-29T19:30:00Z".into()),
        ..Holder::default()
    };
    let running = |pid: u32, process: &str| LocalProcesses::Fixed {
        host: "laptop".into(),
        boot: "b00t".into(),
        running: [(pid, process.to_string())].into_iter().collect(),
    };
    let judged = |local: LocalProcesses, holder: &Holder| {
        let mut state = LockState::Held(vec![holder.clone()]);
        local.mark_gone(&mut state);
        let LockState::Held(h) = state else {
            unreachable!()
        };
        h[0].liveness(now, DEFAULT_DEAD_AFTER)
    };
    // Still running: alive.
    assert!(matches!(
        judged(running(4242, "b00t/4242000"), &fresh),
        Liveness::Alive { .. }
    ));
    // No such pid, or the pid is another process now (reused, or a reboot).
    assert_eq!(judged(running(1, "b00t/1"), &fresh), Liveness::Exited);
    assert_eq!(
        judged(running(4242, "b00t/9999999"), &fresh),
        Liveness::Exited
    );
    // Recorded on another boot: this machine rebooted since, or another
    // machine with the same host name (a cloned VM, a second laptop called
    // `laptop`) holds it. Its pid says nothing here: judged by its TTL.
    let other_boot = Holder {
        process: Some("other-boot/4242000".into()),
        ..fresh.clone()
    };
    assert!(matches!(
        judged(running(1, "b00t/1"), &other_boot),
        Liveness::Alive { .. }
    ));
    let no_boot = Holder {
        process: Some("4242000".into()),
        ..fresh.clone()
    };
    assert!(matches!(
        judged(running(1, "b00t/1"), &no_boot),
        Liveness::Alive { .. }
    ));
    // Another machine's holder, or one that recorded no process: not judged.
    let elsewhere = Holder {
        host: Some("ops-1".into()),
        ..fresh.clone()
    };
    assert!(matches!(
        judged(running(1, "b00t/1"), &elsewhere),
        Liveness::Alive { .. }
    ));
    let unrecorded = Holder {
        process: None,
        ..fresh.clone()
    };
    assert!(matches!(
        judged(running(1, "b00t/1"), &unrecorded),
        Liveness::Alive { .. }
    ));
    assert!(matches!(
        judged(LocalProcesses::Unjudged, &fresh),
        Liveness::Alive { .. }
    ));
}

#[test]
fn this_process_is_identified_by_boot_id_and_start_time() {
    let me = process_identity(std::process::id()).expect("/proc is readable");
    let (boot, start) = me.split_once('/').unwrap();
    assert_eq!(boot.len(), 36, "a boot id: {boot}");
    assert!(start.parse::<u64>().is_ok(), "{start}");
    assert_eq!(process_identity(std::process::id()), Some(me));
    // A child that has exited is gone; pid 0 never names a process.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    assert_eq!(process_identity(pid), None);
    assert_eq!(process_identity(0), None);
}

fn held_by(holders: Vec<Holder>, refused_force: bool) -> String {
    LockHeld {
        lock: "Kured's reboot lock on daemonset kured/kured".into(),
        state: LockState::Held(holders),
        now: at(NOW),
        dead_after: DEFAULT_DEAD_AFTER,
        refused_force,
    }
    .to_string()
}

#[test]
fn a_live_holder_is_named_with_host_pid_and_heartbeat_age() {
    let live = fleetctl(
        "fleetctl/bob@ops-1",
        "2026-11-29T18:30:12Z",
        "2026-11-29T19:29:50Z",
    );
    assert_eq!(
        held_by(vec![live.clone()], false),
        "Kured's reboot lock on daemonset kured/kured is held by fleetctl/bob@ops-1 (pid 77 on ops-1), \
         started 2026-11-29T18:30:12Z, last heartbeat 2026-11-29T19:29:50Z (22s ago). That fleetctl (an apply or a reboot) \
         is alive as far as it can tell (its last heartbeat is 22s old, and its lock stays valid for 15m without one, which a node it waits for may take): wait for it to finish. If you are sure it is \
         not (its machine is gone, Kured was removed mid-reboot), run fleetctl again with `--force-unlock --yes`."
    );
    assert_eq!(
        held_by(vec![live], true),
        "Kured's reboot lock on daemonset kured/kured is held by fleetctl/bob@ops-1 (pid 77 on ops-1), \
         started 2026-11-29T18:30:12Z, last heartbeat 2026-11-29T19:29:50Z (22s ago). That fleetctl (an apply or a reboot) \
         is alive as far as it can tell (its last heartbeat is 22s old, and its lock stays valid for 15m without one, which a node it waits for may take): wait for it to finish. --force-unlock alone \
         does not remove a lock whose holder may be alive. If you are sure it is not (its machine is \
         gone, Kured was removed mid-reboot), run fleetctl again with `--force-unlock --yes`."
    );
}

#[test]
fn a_dead_holder_needs_one_force_unlock() {
    let dead = fleetctl(
        "fleetctl/bob@ops-1",
        "2026-11-29T17:18:07Z",
        "2026-11-29T19:10:12Z",
    );
    assert_eq!(
        held_by(vec![dead], false),
        "Kured's reboot lock on daemonset kured/kured is held by fleetctl/bob@ops-1 (pid 77 on ops-1), \
         started 2026-11-29T17:18:07Z, last heartbeat 2026-11-29T19:10:12Z (20m ago). That fleetctl \
         looks dead: no heartbeat for over 15m, the time its lock stays valid without one, while a running apply or reboot refreshes it every 30s. Run \
         fleetctl again with `--force-unlock` to remove its lock."
    );
}

#[test]
fn a_kured_node_is_rebooting_and_entries_without_heartbeat_cannot_be_judged() {
    assert_eq!(
        held_by(
            vec![
                kured_node("w-1", "2026-11-29T19:29:12.5Z"),
                kured_node("w-2", "yesterday"),
                kured_node("", ""),
            ],
            false
        ),
        "Kured's reboot lock on daemonset kured/kured is held by node w-1 since 2026-11-29T19:29:12.5Z \
         (59s ago), node w-2 since yesterday and an entry with no nodeID. Kured is rebooting node w-1: \
         wait until it is back and Kured releases the lock, then retry. If you are sure it is not (its \
         machine is gone, Kured was removed mid-reboot), run fleetctl again with `--force-unlock --yes`."
    );
    let older = Holder {
        id: "fleetctl/bob@ops-1".into(),
        started: Some("2026-11-29T17:18:07Z".into()),
        ..Holder::default()
    };
    assert_eq!(
        held_by(vec![older], false),
        "Kured's reboot lock on daemonset kured/kured is held by fleetctl/bob@ops-1 since \
         2026-11-29T17:18:07Z (2h 12m 5s ago). It records no heartbeat (an older fleetctl), so fleetctl \
         cannot tell whether it still runs. If you are sure it is not (its machine is gone, Kured was \
         removed mid-reboot), run fleetctl again with `--force-unlock --yes`."
    );
}

#[test]
fn an_unreadable_value_is_quoted_and_needs_yes() {
    let held = LockHeld {
        lock: "Kured's reboot lock on daemonset kured/kured".into(),
        state: LockState::Unreadable {
            value: "locked".into(),
            why: "not JSON: expected value at line 1 column 1".into(),
        },
        now: at(NOW),
        dead_after: DEFAULT_DEAD_AFTER,
        refused_force: true,
    };
    assert_eq!(
        held.to_string(),
        "Kured's reboot lock on daemonset kured/kured holds a value fleetctl cannot read as a lock \
         (not JSON: expected value at line 1 column 1): locked. fleetctl cannot tell whether whatever \
         wrote it still relies on it. --force-unlock alone does not remove it: if nothing uses it, run \
         fleetctl again with `--force-unlock --yes`."
    );
}

#[test]
fn a_lost_lock_says_who_took_it_and_to_stop() {
    let taken = LockLost {
        lock: "fleetctl's lock (configmap kube-system/fleetctl-lock)".into(),
        held_by: Some("fleetctl/bob@ops-1 (pid 77 on ops-1)".into()),
    };
    assert_eq!(
        taken.to_string(),
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is no longer held by this fleetctl run: it is \
         now held by fleetctl/bob@ops-1 (pid 77 on ops-1). Stopping before anything else changes: find \
         out who is working on this cluster before running fleetctl again"
    );
    let gone = LockLost {
        held_by: None,
        ..taken
    };
    assert!(
        gone.to_string().contains(
            "it was removed (a fleetctl run with `--force-unlock` elsewhere, or by hand)"
        ),
        "{gone}"
    );
    // The caller finds it through any context added on the way up.
    let err = anyhow::Error::new(gone.clone()).context("cp-1: lock heartbeat");
    assert_eq!(
        err.chain().find_map(|e| e.downcast_ref::<LockLost>()),
        Some(&gone)
    );
}

#[tokio::test]
async fn an_api_failure_names_the_node_the_step_and_kubectls_words() {
    struct Unauthorized;
    impl Kubectl for Unauthorized {
        async fn kubectl(
            &self,
            _label: &str,
            _args: &[String],
            _stdin: Option<&str>,
        ) -> anyhow::Result<Output> {
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
        "cp-1: lock: find Kured (the containers of every DaemonSet) failed (exit status 1); last lines \
         of its stderr:\n    error: You must be logged in to the server (Unauthorized)"
    );
}

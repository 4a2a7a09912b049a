//! apply's lock against a fleet where someone else wants it too: Kured
//! installed by its Helm chart with its own loop running, Kured's lock that
//! RBAC will not let fleetctl write, a second `fleetctl apply` while one
//! runs, a holder whose heartbeat stopped; and what must survive around
//! it: SIGTERM mid-drain, the SSH connection cut while `kubeadm upgrade
//! apply` works, and an image tampered with on the hub after the plan.
//!
//! Each is judged on the fleet's event log and the API server's state
//! (who took which lock when, what ran on which node), not only on what
//! fleetctl printed.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use fleetctl::plan::Plan;
use fleetctl::version::Version;

use super::support::{
    self, Event, Fleet, LOCK_CONFIGMAP, Run, Running, Scenario, apply, assert_consistent,
    assert_has, assert_on_target, deletes_lock_configmap, describe, is_ok, is_reboot,
    is_unit_start, journal_records, kubeadm_upgrade, kubectl_words, schedulability,
};

/// 1 control plane and 1 worker, reached as `core` through sudo.
const PAIR: [&str; 2] = ["cp-1", "w-1"];
const FROM: &str = "v1.34.2";
/// Kured's default lock annotation.
const KURED_LOCK: &str = "weave.works/kured-node-lock";
/// kubectl as root on cp-1, the way an operator would type it there.
const KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf";

/// cp-1 + w-1 at v1.34.2, w-1 reached as `core`, with the simulator's
/// short delays; `more` adds Kured, faults…
fn pair(more: impl FnOnce(Scenario) -> Scenario) -> Fleet {
    support::start(more(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes(FROM)
            .with_node("w-1", |n| n.user = Some("core".into())),
    ))
}

fn fleetctl(fleet: &Fleet, args: &[&str]) -> Run {
    support::run(&fleet.inventory(), args)
}

/// `fleetctl plan TARGET`, which must succeed; returns the hop's patch.
fn plan(fleet: &Fleet, target: &str) -> Version {
    fleetctl(fleet, &["plan", target]).expect_code(0);
    let saved: Plan = fleetctl::plan::load(&fleet.dir().join(".fleetctl/plan.yaml")).unwrap();
    let [hop] = &saved.hops[..] else {
        panic!("expected one hop to {target}: {:?}", saved.hops);
    };
    hop.version
        .clone()
        .expect("the hub was readable: the hop has its patch")
}

fn events(fleet: &Fleet) -> Vec<Event> {
    fleet.events().unwrap()
}

/// `fleetctl apply ARGS` in the background (`support::Running`).
fn spawn_apply(fleet: &Fleet, args: &[&str]) -> Running {
    let mut all = vec!["apply"];
    all.extend_from_slice(args);
    Running::spawn(&fleet.inventory(), &all)
}

// ---------------------------------------------------------------------------
// Reading the log

/// The upgrade's own actions, as opposed to the lock and the supervisor.
fn is_upgrade_action(e: &Event) -> bool {
    schedulability(e).is_some()
        || is_reboot(e)
        || kubeadm_upgrade(e).is_some()
        || is_unit_start(e)
        || e.argv
            .first()
            .is_some_and(|a| a.ends_with("systemd-sysupdate"))
}

/// The node an event acted on: kubectl's cordon/drain/uncordon act on the
/// node they name; the lock, the supervisor and a unit's start on none.
fn subject(e: &Event) -> Option<&str> {
    if e.node == "(fleetsim)" || support::is_lock(e) || is_unit_start(e) || is_kured(e) {
        return None;
    }
    if e.argv.first().is_some_and(|a| a == "kubectl") {
        let at = e
            .argv
            .iter()
            .position(|a| matches!(a.as_str(), "cordon" | "drain" | "uncordon"))?;
        return e.argv.get(at + 1).map(String::as_str);
    }
    Some(&e.node)
}

/// What an event did: `reboot`, `sysupdate`, `drain`, `upgrade apply
/// v1.35.3`, `upgrade node`, `(boot)`, …
fn what(e: &Event) -> String {
    // A real-OS node's reboot is recorded by a unit, not the tool.
    if is_reboot(e) {
        return "reboot".into();
    }
    let argv: Vec<&str> = e.argv.iter().map(String::as_str).collect();
    match argv.as_slice() {
        ["kubeadm", "upgrade", "apply", v, ..] => format!("upgrade apply {v}"),
        ["kubeadm", "upgrade", "node", ..] => "upgrade node".into(),
        [first, ..] if first.ends_with("systemd-sysupdate") => "sysupdate".into(),
        ["kubectl", rest @ ..] => rest
            .iter()
            .find(|a| matches!(**a, "cordon" | "drain" | "uncordon"))
            .map_or_else(|| "kubectl".into(), |a| a.to_string()),
        [first, ..] => first.to_string(),
        [] => String::new(),
    }
}

fn count(events: &[Event], node: &str, action: &str) -> usize {
    events
        .iter()
        .filter(|e| subject(e) == Some(node) && what(e) == action)
        .count()
}

fn count_ok(events: &[Event], node: &str, action: &str) -> usize {
    events
        .iter()
        .filter(|e| subject(e) == Some(node) && what(e) == action && is_ok(e))
        .count()
}

/// A Kured pod's own step: `(kured) acquire|cordon|drain|reboot|…`.
fn is_kured(e: &Event) -> bool {
    e.argv.first().is_some_and(|a| a == "(kured)")
}

/// The lock configmap deleted the only way that carries preconditions.
fn creates_lock_configmap(e: &Event) -> bool {
    kubectl_words(e).is_some_and(|w| w == ["create", "configmap", "fleetctl-lock"])
}

/// `(index of the first, index of the last)` upgrade action of `log`.
fn upgrade_span(log: &[Event]) -> (usize, usize) {
    let actions: Vec<usize> = (0..log.len())
        .filter(|&i| is_upgrade_action(&log[i]))
        .collect();
    match (actions.first(), actions.last()) {
        (Some(&a), Some(&b)) => (a, b),
        _ => panic!("no upgrade happened:\n{}", describe(log)),
    }
}

/// The configmap lock was created (ok) before the first upgrade action of
/// `log` and deleted (ok, preconditioned) after the last, exactly once
/// each, and is gone; nothing was annotated.
fn assert_configmap_lock_brackets_the_run(fleet: &Fleet, log: &[Event]) {
    let created: Vec<usize> = (0..log.len())
        .filter(|&i| is_ok(&log[i]) && creates_lock_configmap(&log[i]))
        .collect();
    let deleted: Vec<usize> = (0..log.len())
        .filter(|&i| is_ok(&log[i]) && deletes_lock_configmap(&log[i]))
        .collect();
    let ([c], [d]) = (&created[..], &deleted[..]) else {
        panic!(
            "the lock must be created once and deleted once (created at {created:?}, deleted at \
             {deleted:?}):\n{}",
            describe(log)
        );
    };
    let (first, last) = upgrade_span(log);
    assert!(
        *c < first && last < *d,
        "the lock (taken at {c}, released at {d}) must cover every upgrade action ({first}..={last}):\n{}",
        describe(log)
    );
    assert!(
        !log.iter()
            .any(|e| kubectl_words(e).is_some_and(|w| w.first() == Some(&"annotate"))),
        "without Kured nothing is annotated:\n{}",
        describe(log)
    );
    assert!(
        !fleet
            .cluster()
            .unwrap()
            .configmaps
            .contains_key(LOCK_CONFIGMAP),
        "the lock configmap is still there"
    );
}

// ---------------------------------------------------------------------------
// The fleet's state

/// Over `all`, the hop happened once: one successful `upgrade apply` on
/// cp-1, one `upgrade node` on w-1, one download and one reboot per node,
/// and the simulator's invariants hold.
fn done_once(all: &[Event], patch: &Version) {
    let apply = format!("upgrade apply {patch}");
    assert_eq!(count_ok(all, "cp-1", &apply), 1, "\n{}", describe(all));
    assert_eq!(
        count_ok(all, "w-1", "upgrade node"),
        1,
        "\n{}",
        describe(all)
    );
    for n in PAIR {
        assert_eq!(count_ok(all, n, "sysupdate"), 1, "{n}\n{}", describe(all));
        assert_eq!(count(all, n, "reboot"), 1, "{n}\n{}", describe(all));
    }
    support::assert_invariants_hold(all);
    support::assert_one_node_out_at_a_time(all);
    support::assert_reboots_drained_then_uncordoned(all);
}

/// Per node its sysupdate configs, staged link, downloaded images, reboot
/// flag and boot id; and the API server's objects.
#[derive(Debug, PartialEq)]
struct Snapshot {
    nodes: BTreeMap<String, String>,
    cluster: serde_json::Value,
}

const NODE_STATE: &str = r#"
for f in /etc/sysupdate.kubernetes.d/*; do echo "== $f"; cat "$f"; done
echo "link $(readlink /etc/extensions/kubernetes.raw)"
ls -a /opt/extensions/kubernetes
test -e /run/reboot-required && echo reboot-required
echo "boot $(cat /proc/sys/kernel/random/boot_id)"
"#;

fn snapshot(fleet: &Fleet) -> Snapshot {
    Snapshot {
        nodes: PAIR
            .iter()
            .map(|n| (n.to_string(), fleet.ssh_ok(n, "root", NODE_STATE).unwrap()))
            .collect(),
        cluster: {
            let mut c = serde_json::to_value(fleet.cluster().unwrap()).unwrap();
            // Taking and giving back the lock moves the API server's
            // resourceVersion counter, and nothing else.
            if let Some(map) = c.as_object_mut() {
                map.remove("resource_version");
            }
            c
        },
    }
}

/// `RFC 3339` UTC, `ago` before now.
fn rfc3339_ago(ago: Duration) -> String {
    humantime::format_rfc3339_seconds(SystemTime::now() - ago).to_string()
}

// ---------------------------------------------------------------------------
// 1. Kured from its Helm chart, its loop running

#[test]
fn kured_from_its_helm_chart_is_found_held_off_for_the_whole_run_and_released() {
    let fleet = pair(|s| {
        s.kured_with(|k| {
            k.helm = Some("kured/kured".into());
            k.run = true;
            k.period = 0.2;
        })
    });
    let kured = fleet.cluster().unwrap().kured.expect("Kured is installed");
    assert_eq!(
        (kured.namespace.as_str(), kured.name.as_str()),
        ("kured", "kured")
    );
    let inventory = std::fs::read_to_string(fleet.inventory()).unwrap();
    assert!(
        !inventory.contains("kured"),
        "apply must find Kured without being told:\n{inventory}"
    );
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let mut running = spawn_apply(&fleet, &["--yes"]);
    running.wait_for("holding Kured's reboot lock");
    // Now every node wants a reboot: Kured's pods, ticking every 0.2 s,
    // try to take their lock for the rest of the run. fleetctl reboots
    // both nodes, and a fresh /run has no sentinel, so none is left after.
    let at_touch = events(&fleet).len();
    for n in PAIR {
        fleet
            .ssh_ok(n, "root", "touch /run/reboot-required")
            .unwrap();
    }
    let run = running.finish().expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "holding Kured's reboot lock on daemonset kured/kured (annotation weave.works/kured-node-lock); \
             Kured runs as daemonset kured/kured",
            "done: 2 nodes upgraded",
        ],
    );
    let log = &events(&fleet)[start..];

    // Kured's lock, in Kured's namespace, taken before the first upgrade
    // action and removed after the last, both guarded by a resourceVersion.
    let annotates = |e: &Event, value: &dyn Fn(&str) -> bool| {
        is_ok(e)
            && kubectl_words(e).is_some_and(|w| {
                w.len() == 4 && w[..3] == ["annotate", "daemonset", "kured"] && value(w[3])
            })
            && e.argv.windows(2).any(|w| w == ["-n", "kured"])
            && e.argv
                .iter()
                .any(|a| a.starts_with("--resource-version=") && a.len() > 19)
    };
    let set = format!("{KURED_LOCK}=");
    let removal = format!("{KURED_LOCK}-");
    let takes: Vec<usize> = (0..log.len())
        .filter(|&i| annotates(&log[i], &|w| w.starts_with(&set)))
        .collect();
    let removals: Vec<usize> = (0..log.len())
        .filter(|&i| annotates(&log[i], &|w| w == removal))
        .collect();
    let (Some(&taken), [released]) = (takes.first(), &removals[..]) else {
        panic!(
            "Kured's lock in namespace kured was not taken (at {takes:?}) and removed once (at {removals:?}):\n{}",
            describe(log)
        );
    };
    let (first, last) = upgrade_span(log);
    assert!(
        taken < first && last < *released,
        "Kured's lock (taken at {taken}, removed at {released}) must cover every upgrade action \
         ({first}..={last}):\n{}",
        describe(log)
    );
    let value = log[taken]
        .argv
        .iter()
        .find_map(|a| a.strip_prefix(&set))
        .unwrap();
    let lock: serde_json::Value = serde_json::from_str(value).unwrap();
    let holder = lock["nodeID"].as_str().unwrap_or_default().to_string();
    assert!(holder.starts_with("fleetctl/"), "{value}");
    assert!(
        lock["TTL"].as_u64().is_some_and(|ttl| ttl > 0),
        "fleetctl's entry must expire by itself: {value}"
    );
    assert!(
        !log.iter()
            .any(|e| support::is_lock(e) && e.argv.iter().any(|a| a.contains("fleetctl-lock"))),
        "with Kured there is no configmap lock:\n{}",
        describe(log)
    );

    // Kured competed and lost every time: each pod found the lock held by
    // fleetctl, and none took it, cordoned, drained or rebooted anything.
    for n in PAIR {
        assert!(
            log[at_touch - start..].iter().any(|e| e.node == n
                && e.argv == ["(kured)", "acquire"]
                && e.result == format!("held by {holder}")),
            "Kured on {n} never tried to take its lock while fleetctl held it:\n{}",
            describe(log)
        );
    }
    let kured_acted: Vec<&Event> = log
        .iter()
        .filter(|e| is_kured(e) && !(e.argv[1] == "acquire" && e.result.starts_with("held by")))
        .collect();
    assert!(
        kured_acted.is_empty(),
        "Kured acted during the run: {kured_acted:?}\n{}",
        describe(log)
    );

    // The upgrade itself, once, and Kured's lock free at the end.
    done_once(log, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
    let kured = fleet.cluster().unwrap().kured.unwrap();
    assert!(
        !kured.annotations.contains_key(KURED_LOCK),
        "Kured's DaemonSet still carries the lock: {:?}",
        kured.annotations
    );
}

// ---------------------------------------------------------------------------
// 2. Kured's pods are there, but its lock may not be written

#[test]
fn kureds_lock_forbidden_by_rbac_stops_apply_without_falling_back_to_the_configmap() {
    let fleet = pair(|s| s.kured(true).faults(|f| f.kured_lock_forbidden = true));
    plan(&fleet, "v1.35");
    let before = snapshot(&fleet);
    let start = events(&fleet).len();

    // A runtime refusal, not a usage error (README: exit 1 is a runtime
    // failure; docs/apply.md: a Kured lock that cannot be had "stops apply
    // with the reason").
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "Error from server (Forbidden)",
            "cannot patch resource \"daemonsets\"",
            "kube-system",
        ],
    );
    assert!(!run.stderr.contains("holding"), "{}", run.stderr);
    assert!(!run.stderr.contains("done:"), "{}", run.stderr);

    let log = &events(&fleet)[start..];
    // The one write it tried: Kured's annotation, refused.
    let attempts: Vec<&Event> = log
        .iter()
        .filter(|e| kubectl_words(e).is_some_and(|w| w.first() == Some(&"annotate")))
        .collect();
    assert!(
        !attempts.is_empty()
            && attempts
                .iter()
                .all(|e| !is_ok(e) && e.result.contains("Forbidden")),
        "apply should have tried Kured's lock and been refused:\n{}",
        describe(log)
    );
    // Never fleetctl's own lock instead, and nothing else at all.
    assert!(
        !log.iter()
            .any(|e| e.argv.iter().any(|a| a.contains("fleetctl-lock"))),
        "apply fell back to the configmap lock:\n{}",
        describe(log)
    );
    assert!(
        log.iter()
            .all(|e| e.node == "cp-1" && !is_ok(e) && kubectl_words(e).is_some()),
        "a refused apply must change nothing:\n{}",
        describe(log)
    );
    assert_eq!(
        snapshot(&fleet),
        before,
        "a refused apply changed the fleet"
    );
}

// ---------------------------------------------------------------------------
// 3. A second apply while one runs

#[test]
fn a_second_apply_is_refused_naming_the_live_holder_and_the_first_finishes() {
    // w-1 is held down after its reboot, so the first apply is surely
    // alive, mid-run, and cp-1 (where the lock lives) is up, while the
    // second one tries.
    let fleet = pair(|s| s.faults(|f| f.hang_on_reboot = vec!["w-1".into()]));
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let mut first = spawn_apply(&fleet, &["--yes"]);
    first.wait_for("w-1: rebooting");
    let held = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    let data = |k: &str| held.data.get(k).cloned().unwrap_or_default();
    assert_eq!(
        data("pid"),
        first.pid().to_string(),
        "the lock names the first apply: {:?}",
        held.data
    );
    let at_second = events(&fleet).len();

    let second = apply(&fleet, &["--yes"]).expect_code(1);
    // Who, where, which pid, since when, and how old its heartbeat is (the
    // heartbeat itself may have been refreshed since it was read here).
    let who = format!(
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by {} (pid {} on {}), \
         started {}, last heartbeat ",
        data("holder"),
        data("pid"),
        data("host"),
        data("started"),
    );
    let at = second
        .stderr
        .find(&who)
        .unwrap_or_else(|| panic!("no `{who}` in:\n{}", second.stderr));
    let beat = &second.stderr[at + who.len()..];
    let (when, age) = beat
        .split_once(" (")
        .and_then(|(when, rest)| Some((when, rest.split_once(" ago)")?.0)))
        .unwrap_or_else(|| panic!("no heartbeat and age after `{who}`:\n{}", second.stderr));
    assert!(
        humantime::parse_rfc3339(when).is_ok() && humantime::parse_duration(age).is_ok(),
        "heartbeat `{when}`, age `{age}`:\n{}",
        second.stderr
    );
    assert_has(
        &second.stderr,
        &[
            "That fleetctl (an apply or a reboot) is alive as far as it can tell (its last heartbeat is ",
            " old, and its lock stays valid for 23m without one, which a node it waits for may take): wait for it to finish.",
        ],
    );
    // Nor does --force-unlock alone remove a live holder's lock.
    let forced = apply(&fleet, &["--force-unlock"]).expect_code(1);
    assert_has(
        &forced.stderr,
        &[
            &format!("is held by {} (pid {} on ", data("holder"), data("pid")),
            "That fleetctl (an apply or a reboot) is alive",
            "--force-unlock alone does not remove a lock whose holder may be alive",
        ],
    );
    let now = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    assert_eq!(
        (
            &now.uid,
            &now.data["holder"],
            &now.data["pid"],
            &now.data["started"]
        ),
        (
            &held.uid,
            &held.data["holder"],
            &held.data["pid"],
            &held.data["started"]
        ),
        "the second apply must leave the first's lock alone"
    );
    // What the second apply did: one create, refused as AlreadyExists.
    let during = &events(&fleet)[at_second..];
    let creates: Vec<&Event> = during
        .iter()
        .filter(|e| creates_lock_configmap(e))
        .collect();
    assert!(
        !creates.is_empty() && creates.iter().all(|e| !is_ok(e)),
        "{}",
        describe(during)
    );
    assert!(
        !during.iter().any(deletes_lock_configmap),
        "{}",
        describe(during)
    );

    fleet.release("w-1").unwrap();
    let run = first.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 2 nodes upgraded"]);
    assert!(!run.stderr.contains("no longer held"), "{}", run.stderr);
    assert!(!run.stderr.contains("could not release"), "{}", run.stderr);
    let log = &events(&fleet)[start..];
    assert_configmap_lock_brackets_the_run(&fleet, log);
    done_once(log, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// 4. A holder whose heartbeat stopped

#[test]
fn a_dead_holder_is_named_removed_by_force_unlock_alone_and_the_upgrade_completes() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    // Past the 23m TTL this run would give it (it recorded none of its own).
    let then = rfc3339_ago(Duration::from_secs(30 * 60));
    let bob = format!(
        "{KUBECTL} -n kube-system create configmap fleetctl-lock \
         --from-literal=holder=fleetctl/bob@ops-1 --from-literal=host=ops-1 --from-literal=pid=77 \
         --from-literal=started={then} --from-literal=heartbeat={then}"
    );
    fleet.ssh_ok("cp-1", "root", &bob).unwrap();
    let bobs = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    let before = snapshot(&fleet);
    let start = events(&fleet).len();

    // Refused, saying whose, since when, and that it looks dead.
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert!(
        run.stderr.contains(&format!("last heartbeat {then} (30m"))
            || run.stderr.contains(&format!("last heartbeat {then} (31m")),
        "the heartbeat's age should be about 30 minutes:\n{}",
        run.stderr
    );
    assert_has(
        &run.stderr,
        &[
            &format!(
                "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by fleetctl/bob@ops-1 \
                 (pid 77 on ops-1), started {then}, last heartbeat {then} (3"
            ),
            "That fleetctl looks dead: no heartbeat for over 23m, the time its lock stays valid without one",
            "Run fleetctl again with `--force-unlock` to remove its lock.",
        ],
    );
    assert_eq!(
        snapshot(&fleet),
        before,
        "a refused apply changed the fleet"
    );
    let refused = &events(&fleet)[start..];
    assert!(
        refused
            .iter()
            .all(|e| e.node == "cp-1" && !is_ok(e) && kubectl_words(e).is_some()),
        "a refused apply must change nothing:\n{}",
        describe(refused)
    );

    // `--force-unlock` alone (no --yes) removes a dead holder. Without a
    // terminal apply then cannot ask for confirmation and stops (exit 2)
    // before touching a node, giving back the lock it took.
    let at = events(&fleet).len();
    let run = apply(&fleet, &["--force-unlock"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "--force-unlock removed fleetctl's lock (configmap kube-system/fleetctl-lock) held by fleetctl/bob@ops-1 (pid 77 on ops-1)",
            "no terminal",
        ],
    );
    let log = &events(&fleet)[at..];
    let removed = log
        .iter()
        .position(|e| is_ok(e) && deletes_lock_configmap(e))
        .unwrap_or_else(|| panic!("bob's lock was not removed:\n{}", describe(log)));
    let mine = log
        .iter()
        .position(|e| is_ok(e) && creates_lock_configmap(e))
        .unwrap_or_else(|| panic!("apply never took the lock:\n{}", describe(log)));
    assert!(removed < mine, "{}", describe(log));
    assert!(
        !log.iter().any(is_upgrade_action),
        "nothing is done without confirmation:\n{}",
        describe(log)
    );
    assert!(
        !fleet
            .cluster()
            .unwrap()
            .configmaps
            .contains_key(LOCK_CONFIGMAP),
        "neither bob's lock nor this run's may be left"
    );

    // Bob's lock again, then `--force-unlock --yes`: removed by the
    // preconditioned delete before anything else, then the whole upgrade.
    fleet.ssh_ok("cp-1", "root", &bob).unwrap();
    let again = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    assert_ne!(again.uid, bobs.uid, "a new object");
    let at = events(&fleet).len();
    let run = apply(&fleet, &["--force-unlock", "--yes"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "--force-unlock removed fleetctl's lock (configmap kube-system/fleetctl-lock) held by fleetctl/bob@ops-1 (pid 77 on ops-1)",
            "done: 2 nodes upgraded",
        ],
    );
    let log = &events(&fleet)[at..];
    let removed = log
        .iter()
        .position(|e| is_ok(e) && deletes_lock_configmap(e))
        .unwrap_or_else(|| panic!("bob's lock was not removed:\n{}", describe(log)));
    let (first, _) = upgrade_span(log);
    assert!(
        removed < first,
        "bob's lock must go (event {removed}) before any upgrade action ({first}):\n{}",
        describe(log)
    );
    assert!(
        log[..removed].iter().all(|e| !is_ok(e)),
        "nothing may be written before bob's lock is removed:\n{}",
        describe(log)
    );
    // What was deleted is bob's second configmap, by its uid, as the API's
    // answer to the DELETE (in the journal) says.
    assert_eq!(
        force_unlocked_uids(&fleet),
        [bobs.uid.clone(), again.uid.clone()],
        "--force-unlock must remove exactly bob's locks, once each"
    );
    assert_configmap_lock_brackets_the_run(&fleet, &log[removed + 1..]);
    done_once(&events(&fleet)[start..], &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// 5. SIGTERM mid-drain

#[test]
fn sigterm_during_a_drain_stops_at_a_safe_point_releases_the_lock_and_a_rerun_finishes() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let mut running = spawn_apply(&fleet, &["--yes"]);
    running.wait_for("w-1: gates, then drain");
    let at = events(&fleet).len();
    running.signal("TERM");
    let run = running.finish();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_has(
        &run.stderr,
        &[
            "SIGTERM: finishing the step in progress, then stopping at a safe point",
            "stopped by SIGTERM at a safe point",
            "Run `fleetctl apply` again to continue",
        ],
    );
    assert!(!run.stderr.contains("fix the cause"), "{}", run.stderr);
    let first = events(&fleet);
    // Nothing but w-1 was touched once the signal came.
    let strays: Vec<&Event> = first[at..]
        .iter()
        .filter(|e| subject(e).is_some_and(|n| n != "w-1"))
        .collect();
    assert!(
        strays.is_empty(),
        "{strays:?}\n{}",
        describe(&first[start..])
    );

    // Consistent: w-1 cordoned only if the message says so (it must not
    // be: a drained node that did not reboot is uncordoned again), on the
    // new version if it rebooted, on the old one if not; the lock gone.
    let cordoned = run
        .stderr
        .contains("w-1 IS STILL CORDONED")
        .then_some("w-1");
    let c = assert_consistent(&fleet, &PAIR, cordoned);
    assert_eq!(cordoned, None, "{}", run.stderr);
    if count(&first[start..], "w-1", "reboot") > 0 {
        assert_eq!(c.nodes["w-1"].kubelet_version, patch.to_string());
    } else {
        assert_eq!(c.nodes["w-1"].kubelet_version, FROM);
        if count_ok(&first[start..], "w-1", "drain") > 0 {
            assert_has(
                &run.stderr,
                &["w-1 was drained but not rebooted, and was uncordoned again"],
            );
        }
    }
    assert_eq!(c.nodes["cp-1"].kubelet_version, patch.to_string());
    let released = first[start..]
        .iter()
        .rposition(|e| is_ok(e) && deletes_lock_configmap(e));
    assert!(
        released.is_some_and(|r| r + start >= at),
        "the lock must be given back after the signal:\n{}",
        describe(&first[start..])
    );

    // A plain rerun finishes without repeating what is done.
    let second_start = events(&fleet).len();
    let rerun = apply(&fleet, &["--yes"]).expect_code(0);
    assert_has(&rerun.stderr, &["done: 2 nodes upgraded"]);
    let second = &events(&fleet)[second_start..];
    for (node, step) in [
        ("cp-1", format!("upgrade apply {patch}")),
        ("cp-1", "reboot".to_string()),
        ("cp-1", "sysupdate".to_string()),
        ("w-1", "sysupdate".to_string()),
        ("w-1", "upgrade node".to_string()),
    ] {
        assert_eq!(
            count(second, node, &step),
            0,
            "{node}: `{step}` was done already\n{}",
            describe(second)
        );
    }
    assert_configmap_lock_brackets_the_run(&fleet, second);
    done_once(&events(&fleet)[start..], &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// 6. The SSH connection cut while kubeadm upgrade apply works

/// The uids the API server reported deleted by `--force-unlock` (its
/// Status answer to the preconditioned DELETE), in the order of the runs.
fn force_unlocked_uids(fleet: &Fleet) -> Vec<String> {
    journal_records(fleet)
        .iter()
        .filter(|r| {
            r["kind"] == "command"
                && r["exit"] == 0
                && r["detail"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("lock: force-unlock"))
        })
        .map(|r| {
            let status: serde_json::Value =
                serde_json::from_str(r["stdout"].as_str().unwrap_or_default().trim())
                    .unwrap_or_else(|e| panic!("not the API's Status ({e}): {r}"));
            assert_eq!(status["status"], "Success", "{r}");
            status["details"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[test]
fn ssh_cut_during_upgrade_apply_does_not_stop_kubeadm_and_it_runs_once() {
    // The step is a real systemd-run unit.
    let fleet = pair(|s| s.faults(|f| f.drop_ssh_during_upgrade_apply = vec!["cp-1".into()]));
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let run = apply(&fleet, &["--yes"]);
    // The fault fired: consumed, and kubeadm (in its unit) says it cut
    // fleetctl's sessions, in the step's log on the node.
    assert!(
        fleet
            .shared()
            .faults()
            .unwrap()
            .drop_ssh_during_upgrade_apply
            .is_empty(),
        "kubeadm upgrade apply never ran with the fault armed"
    );
    let step_log = fleet
        .ssh_ok(
            "cp-1",
            "root",
            &format!("cat /var/lib/fleetctl/steps/kubeadm-upgrade-apply-{patch}.log"),
        )
        .unwrap();
    let cut: usize = step_log
        .lines()
        .find_map(|l| {
            l.strip_prefix("fleetsim: fault drop_ssh_during_upgrade_apply: cut ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no cut in the step's log:\n{step_log}"));
    assert!(cut > 0, "the fault cut no session:\n{step_log}");
    // fleetctl saw its connection go: a command on cp-1 failed with it.
    let dropped = journal_records(&fleet).into_iter().any(|r| {
        r["node"] == "cp-1"
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("the SSH connection dropped"))
    });
    assert!(dropped, "fleetctl never noticed the cut:\n{}", run.stderr);

    let log_after_first = events(&fleet);
    let applies = |log: &[Event]| -> Vec<String> {
        log.iter()
            .filter(|e| e.node == "cp-1" && what(e) == format!("upgrade apply {patch}"))
            .map(|e| e.result.clone())
            .collect()
    };
    // kubeadm ran detached, so the cut did not kill it: it finished once.
    assert_eq!(
        applies(&log_after_first[start..]),
        ["ok"],
        "\n{}",
        describe(&log_after_first[start..])
    );
    // What really happens: apply reconnects, keeps polling the unit, and
    // finishes the run. Should it ever stop instead (the cut landing on
    // the unit's start), a rerun must finish without a second upgrade apply.
    if run.code != Some(0) {
        assert_eq!(run.code, Some(1), "{}", run.stderr);
        assert_has(&run.stderr, &["run `fleetctl apply` again"]);
        assert_consistent(&fleet, &PAIR, None);
        let second_start = events(&fleet).len();
        apply(&fleet, &["--yes"]).expect_code(0);
        assert!(
            applies(&events(&fleet)[second_start..]).is_empty(),
            "the rerun ran upgrade apply again:\n{}",
            describe(&events(&fleet)[second_start..])
        );
    } else {
        assert_has(&run.stderr, &["done: 2 nodes upgraded"]);
        assert!(!run.stderr.contains("could not release"), "{}", run.stderr);
    }
    let all = &events(&fleet)[start..];
    assert_eq!(applies(all), ["ok"], "\n{}", describe(all));
    done_once(all, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
    assert_eq!(
        fleet
            .ssh_ok("cp-1", "root", "cat /var/lib/fleetctl/kubeadm-step")
            .unwrap()
            .trim(),
        patch.to_string(),
        "the step's marker"
    );
}

// ---------------------------------------------------------------------------
// 7. An image tampered with on the hub after the plan

const IMAGES: &str = "/opt/extensions/kubernetes";

/// `ls -a` of the images directory on `node`.
fn images_on(fleet: &Fleet, node: &str) -> Vec<String> {
    fleet
        .ssh_ok(node, "root", &format!("ls -a {IMAGES}/"))
        .unwrap()
        .lines()
        .filter(|l| *l != "." && *l != "..")
        .map(String::from)
        .collect()
}

/// Replaces `path` by `bytes` through a rename, so a file shared by a hard
/// link (the image cache) could never be changed in place.
fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tampered.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// No kubeadm, no drain or cordon, no reboot, no unit, nothing staged in `log`.
fn assert_nothing_but_downloads(log: &[Event]) {
    let acted: Vec<String> = log
        .iter()
        .filter(|e| is_upgrade_action(e) && what(e) != "sysupdate")
        .map(|e| format!("{}: {}", e.node, what(e)))
        .collect();
    assert!(
        acted.is_empty(),
        "apply went past the downloads: {acted:?}\n{}",
        describe(log)
    );
}

#[test]
fn a_tampered_image_stops_apply_before_any_kubeadm_or_reboot_and_never_stays_on_a_node() {
    // The real systemd-pull's refusal.
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    let image = format!("kubernetes-{patch}-x86-64.raw");
    let on_hub = fleet.layout().hub().join("kubernetes").join(&image);
    let sums = fleet.layout().hub().join("kubernetes/SHA256SUMS");
    let sums_before = std::fs::read(&sums).unwrap();
    let good = std::fs::read(&on_hub).unwrap();
    let mut bad = good.clone();
    bad.extend_from_slice(b"\0tampered on the hub\n");
    replace_file(&on_hub, &bad);
    let before = snapshot(&fleet);

    // (a) The hub serves a file whose sum is not the one SHA256SUMS (and
    // the plan) give. systemd-sysupdate checks every download against
    // SHA256SUMS itself (systemd-pull --verify=<sum>) and refuses it, so it
    // never reaches the node, and apply stops at the downloads.
    let start = events(&fleet).len();
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "before any kubeadm step or reboot",
            "file did not check out, file has been tampered with",
            "the hub serves a corrupted or tampered file",
            "Nothing was staged or rebooted",
        ],
    );
    let log = &events(&fleet)[start..];
    assert_nothing_but_downloads(log);
    for n in PAIR {
        assert_eq!(count(log, n, "sysupdate"), 1, "{n}\n{}", describe(log));
        assert_eq!(count_ok(log, n, "sysupdate"), 0, "{n}\n{}", describe(log));
        let there = images_on(&fleet, n);
        assert!(
            !there.iter().any(|f| f.contains("v1.35")),
            "{n}: a v1.35 image (or part of one) is on the node: {there:?}"
        );
    }
    assert_consistent(&fleet, &PAIR, None);
    assert_eq!(
        snapshot(&fleet),
        before,
        "a refused download changed the fleet"
    );
    assert_eq!(
        std::fs::read(&sums).unwrap(),
        sums_before,
        "SHA256SUMS untouched"
    );

    // (b) The hub fixed, a plain rerun downloads the real image and
    // finishes: the refused download left nothing behind in the way.
    replace_file(&on_hub, &good);
    let rerun_start = events(&fleet).len();
    apply(&fleet, &["--yes"]).expect_code(0);
    let log = &events(&fleet)[rerun_start..];
    for n in PAIR {
        assert_eq!(count_ok(log, n, "sysupdate"), 1, "{n}\n{}", describe(log));
    }
    done_once(log, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

/// A worker that already holds a file under the hop's image name that is
/// not the image (corrupted on its disk, or put there by hand). The planner
/// trusts an image that is present ("already in /opt/extensions/kubernetes/
/// → no download", docs/upgrade-path.md), so the worker gets no download;
/// apply checks such files against the plan's sha256 when the hop starts,
/// before anything runs from the image anywhere, and removes a bad one so
/// that the rerun downloads it.
#[test]
fn a_corrupt_image_already_on_a_worker_is_caught_with_the_downloads_and_removed() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    let image = format!("kubernetes-{patch}-x86-64.raw");
    fleet
        .ssh_ok(
            "w-1",
            "root",
            &format!("printf 'not the image\\n' > {IMAGES}/{image}"),
        )
        .unwrap();
    let start = events(&fleet).len();
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    let log = &events(&fleet)[start..];
    assert_nothing_but_downloads(log);
    assert_has(
        &run.stderr,
        &[&format!(
            "w-1: the already downloaded kubernetes {patch} image has sha256 "
        )],
    );
    let there = images_on(&fleet, "w-1");
    assert!(
        !there.contains(&image),
        "w-1: the bad file is still there: {there:?}"
    );
}

// ---------------------------------------------------------------------------
// A lock that cannot lapse (issue 15, item 2)

#[test]
fn a_holder_on_this_machine_whose_process_is_gone_is_dead_despite_a_fresh_heartbeat() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    // An apply that ran here and was killed: its pid no longer runs.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string();
    let now = rfc3339_ago(Duration::ZERO);
    let orphan = format!(
        "{KUBECTL} -n kube-system create configmap fleetctl-lock \
         --from-literal=holder=fleetctl/carol@{host} --from-literal=host={host} \
         --from-literal=pid={pid} --from-literal=process={boot}/1 \
         --from-literal=started={now} --from-literal=heartbeat={now} --from-literal=ttl=3600"
    );
    fleet.ssh_ok("cp-1", "root", &orphan).unwrap();

    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            &format!("held by fleetctl/carol@{host} (pid {pid} on {host})"),
            &format!(
                "That fleetctl looks dead: fleetctl/carol@{host} ran on this machine as pid {pid}, \
                 which no longer runs. Run fleetctl again with `--force-unlock` to remove its lock."
            ),
        ],
    );
    assert!(
        !events(&fleet).iter().any(is_upgrade_action),
        "nothing was done"
    );

    let run = apply(&fleet, &["--yes", "--force-unlock"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[&format!(
            "--force-unlock removed fleetctl's lock (configmap kube-system/fleetctl-lock) held by \
             fleetctl/carol@{host} (pid {pid} on {host})"
        )],
    );
    assert_on_target(&fleet, &PAIR, &patch);
}

#[test]
fn in_ha_the_heartbeat_goes_through_another_control_plane_while_cp_1_reboots() {
    let fleet = support::start(
        support::scenario()
            .control_planes(3)
            .workers(1)
            .kubernetes(FROM),
    );
    let patch = plan(&fleet, "v1.35");
    // cp-1 stays down for longer than two heartbeats.
    fleet
        .faults(|f| f.hang_on_reboot = vec!["cp-1".into()])
        .unwrap();
    // Heartbeats every 2 s (a test build's FLEETCTL_TEST_HEARTBEAT), so
    // that several fall due while cp-1 is down without waiting minutes.
    let mut cmd = support::fleetctl(
        &fleet.inventory(),
        &["apply", "--yes", "--node-timeout", "5m"],
    );
    cmd.env("FLEETCTL_TEST_HEARTBEAT", "2s");
    let mut running = Running::spawn_command(cmd);
    running.wait_for("cp-1: rebooting");
    std::thread::sleep(TEST_BEAT * 3 + Duration::from_secs(4));
    fleet.faults(|f| f.hang_on_reboot.clear()).unwrap();
    let run = running.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 4 nodes upgraded"]);
    assert_on_target(&fleet, &["cp-1", "cp-2", "cp-3", "w-1"], &patch);

    let log = events(&fleet);
    let down = log
        .iter()
        .position(|e| e.node == "cp-1" && support::is_shutdown(e))
        .unwrap_or_else(|| panic!("cp-1 never went down:\n{}", describe(&log)));
    let up = down
        + log[down..]
            .iter()
            .position(|e| e.node == "cp-1" && support::is_boot(e))
            .unwrap_or_else(|| panic!("cp-1 never came back:\n{}", describe(&log)));
    let beats: Vec<&Event> = log[down..up]
        .iter()
        .filter(|e| {
            is_ok(e)
                && kubectl_words(e)
                    .is_some_and(|w| w.starts_with(&["patch", "configmap", "fleetctl-lock"]))
        })
        .collect();
    assert!(
        !beats.is_empty() && beats.iter().all(|e| e.node != "cp-1"),
        "while cp-1 was down the heartbeat must land through cp-2 or cp-3:\n{}",
        describe(&log[down..up])
    );
}

/// How often apply refreshes its lock when a test sets
/// `FLEETCTL_TEST_HEARTBEAT=2s`.
const TEST_BEAT: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// The lock in the cluster's time (issue 24, item 2)

/// `fleetctl ARGS` with this machine's clock moved by `shift` (`-30m`) as
/// fleetctl reads it: a test build's `FLEETCTL_TEST_CLOCK_OFFSET`.
fn with_clock(fleet: &Fleet, shift: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = support::fleetctl(&fleet.inventory(), args);
    cmd.env("FLEETCTL_TEST_CLOCK_OFFSET", shift);
    cmd
}

#[test]
fn a_laptop_clock_30_minutes_behind_the_fleet_is_refused_before_any_lock_is_written() {
    // Kured runs and w-1 wants a reboot: a lock whose `created` was 30
    // minutes old would be expired to Kured (23m TTL) the moment it is
    // written.
    let fleet = pair(|s| {
        s.kured_with(|k| {
            k.run = true;
            k.period = 0.2;
        })
    });
    plan(&fleet, "v1.35");
    let start = events(&fleet).len();
    let run = Run::of(
        with_clock(&fleet, "-30m", &["apply", "--yes"])
            .output()
            .unwrap(),
    )
    .expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "this machine's clock is 30m behind cp-1's (measured over SSH, to within",
            "more than the 5m fleetctl accepts: Kured judges its reboot lock's TTL by the nodes' \
             clocks, and the maintenance window and the journal go by this machine's. Nothing was \
             changed. Set the clock that is wrong (`timedatectl`, NTP) and run again",
        ],
    );
    let log = &events(&fleet)[start..];
    assert!(
        !log.iter().any(|e| support::is_lock(e)
            || kubectl_words(e).is_some_and(|w| w.first() == Some(&"annotate"))),
        "no lock was written:\n{}",
        describe(log)
    );
    assert!(!log.iter().any(is_upgrade_action), "{}", describe(log));
    let kured = fleet.cluster().unwrap().kured.unwrap();
    assert!(
        !kured.annotations.contains_key(KURED_LOCK),
        "{:?}",
        kured.annotations
    );
}

#[test]
fn a_laptop_clock_minutes_behind_writes_the_lock_in_the_clusters_time_and_multi_owner_kured_waits()
{
    // Kured with --concurrency=2 (the multi-owner lock), its loop ticking
    // every 0.2 s; this machine's clock 4 minutes behind the fleet's.
    let fleet = pair(|s| {
        s.kured_with(|k| {
            k.run = true;
            k.period = 0.2;
            k.concurrency = 2;
        })
    });
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();
    let mut running = Running::spawn_command(with_clock(&fleet, "-4m", &["apply", "--yes"]));
    running.wait_for("holding Kured's reboot lock");
    let at_touch = events(&fleet).len();
    for n in PAIR {
        fleet
            .ssh_ok(n, "root", "touch /run/reboot-required")
            .unwrap();
    }
    let run = running.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 2 nodes upgraded"]);
    let log = &events(&fleet)[start..];

    // Every value fleetctl wrote (the take and each heartbeat) is the
    // multi-owner form with both slots taken, each `created` within
    // seconds of the fleet's clock when the API server took it, never
    // 4 minutes behind.
    let set = format!("{KURED_LOCK}=");
    let writes: Vec<(&Event, serde_json::Value)> = log
        .iter()
        .filter(|e| is_ok(e))
        .filter_map(|e| {
            let words = kubectl_words(e)?;
            if words.len() != 4 || words[..2] != ["annotate", "daemonset"] {
                return None;
            }
            let value = words[3].strip_prefix(&set)?;
            Some((e, serde_json::from_str(value).unwrap()))
        })
        .collect();
    assert!(!writes.is_empty(), "no lock written:\n{}", describe(log));
    for (e, value) in &writes {
        assert_eq!(value["maxOwners"], 2, "{value}");
        let locks = value["locks"].as_array().unwrap();
        assert_eq!(locks.len(), 2, "every slot taken: {value}");
        for entry in locks {
            let created = humantime::parse_rfc3339_weak(entry["created"].as_str().unwrap())
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert!(
                (created - e.t).abs() < 10.0,
                "created {created} is {:.0} s from the fleet's clock at the write ({}): {value}",
                created - e.t,
                e.t
            );
        }
    }

    // Kured's pods tried and never got a slot, never cordoned or rebooted.
    for n in PAIR {
        assert!(
            log[at_touch - start..].iter().any(|e| e.node == n
                && e.argv == ["(kured)", "acquire"]
                && e.result.starts_with("held by fleetctl/")),
            "Kured on {n} never tried its lock while fleetctl held it:\n{}",
            describe(log)
        );
    }
    let kured_acted: Vec<&Event> = log
        .iter()
        .filter(|e| is_kured(e) && !(e.argv[1] == "acquire" && e.result.starts_with("held by")))
        .collect();
    assert!(kured_acted.is_empty(), "Kured acted: {kured_acted:?}");
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// Which Kured counts (issue 24, item 3)

#[test]
fn a_decoy_pod_with_a_kured_image_in_a_user_namespace_does_not_block_apply() {
    // No Kured; a user who may create Deployments in `dev` runs a pod whose
    // image is called kured. It cannot reboot a node (no hostPID, not
    // privileged).
    let fleet = pair(|mut s| {
        s.pods = vec![fleetsim::state::PodSpec {
            namespace: "dev".into(),
            name: "decoy-7c9d5b-x2kq4".into(),
            node: "w-1".into(),
            labels: Default::default(),
            annotations: Default::default(),
            owner: Some("ReplicaSet/decoy-7c9d5b".into()),
            phase: "Running".into(),
            image: Some("evil.example/kured:1".into()),
        }];
        s
    });
    let patch = plan(&fleet, "v1.35");
    let run = apply(&fleet, &["--yes"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "pod dev/decoy-7c9d5b-x2kq4 (owned by a ReplicaSet) runs Kured's program or image but \
             cannot reboot a node (Kured needs hostPID and a privileged container): not taken for \
             Kured",
            "holding fleetctl's lock (configmap kube-system/fleetctl-lock)",
            "done: 2 nodes upgraded",
        ],
    );
    assert_configmap_lock_brackets_the_run(&fleet, &events(&fleet));
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// reboot under the same lock harness as apply (issue 24, item 9)

#[test]
fn reboot_stops_at_once_when_its_lease_is_about_to_lapse() {
    // cp-1 and two workers that want a reboot, Kured installed (its loop
    // off): `fleetctl reboot` holds Kured's lock, with a TTL of 130 s (a
    // test build's FLEETCTL_TEST_LOCK_TTL) refreshed every 2 s.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes(FROM)
            .kured(true),
    );
    for n in ["w-1", "w-2"] {
        fleet
            .ssh_ok(n, "root", "touch /run/reboot-required")
            .unwrap();
    }
    let start = events(&fleet).len();
    let mut cmd = support::fleetctl(
        &fleet.inventory(),
        &[
            "reboot",
            "--yes",
            "--soak",
            "10m",
            "--drain-timeout",
            "5s",
            "--node-timeout",
            "60s",
        ],
    );
    cmd.env("FLEETCTL_TEST_LOCK_TTL", "130s")
        .env("FLEETCTL_TEST_HEARTBEAT", "2s");
    let mut running = Running::spawn_command(cmd);
    // The first worker is back; the soak before the second begins. From
    // now on no heartbeat lands (the API server refuses the lock's writes).
    running.wait_for("soak (10m)");
    let cut = std::time::Instant::now();
    fleet.faults(|f| f.kured_lock_forbidden = true).unwrap();
    let run = running.finish().expect_code(1);
    // 130 s less the 60 s margin after the last heartbeat: not the 10
    // minutes of the soak.
    assert!(
        cut.elapsed() < Duration::from_secs(180),
        "reboot went on for {:?} after its heartbeats stopped",
        cut.elapsed()
    );
    // The lease's own verdict, at once, as apply ends on it: not a stop
    // "at a safe point" that the heartbeat asked for, as reboot used to.
    assert_has(
        &run.stderr,
        &[
            "fleetctl: error: stopped at once: Kured's reboot lock on daemonset kube-system/kured",
            "lapses 2m 10s after its last heartbeat, so fleetctl no longer relies on it",
        ],
    );
    assert!(
        !run.stderr.contains("stopped at a safe point"),
        "{}",
        run.stderr
    );
    let log = &events(&fleet)[start..];
    let rebooted = support::rebooted_nodes(log);
    assert_eq!(
        rebooted.len(),
        1,
        "one worker rebooted before the soak, the other never:\n{}",
        describe(log)
    );
}

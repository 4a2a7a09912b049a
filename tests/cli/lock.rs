//! apply's lock against a fleet where someone else wants it too, and what
//! must survive around it, where the real thing is the subject: Kured
//! installed by its real Helm chart's objects with its own loop running,
//! held off for the whole run; the SSH connection cut while `kubeadm
//! upgrade apply` works in its detached unit ([`survives`]); an image
//! tampered with on the hub (the real sysupdate's refusal) or corrupt on a
//! node (the sha256 check on the node).
//!
//! The lock's rules themselves (holders alive or dead, `--force-unlock`,
//! RBAC refusals, the cluster's time, the lease, the heartbeat through
//! another control plane, a stop at a safe point) are tested on the fake
//! API server under `src/steps/lock/` (docs/rules-on-the-fake.md, "The
//! lock").
//!
//! Each is judged on the fleet's event log and the API server's state
//! (who took which lock when, what ran on which node), not only on what
//! fleetctl printed.

use std::collections::BTreeMap;

use fleetctl::plan::Plan;
use fleetctl::version::Version;

use super::support::{
    self, Event, Fleet, Run, Running, Scenario, apply, assert_consistent, assert_has,
    assert_on_target, describe, is_ok, is_reboot, is_unit_start, journal_records, kubeadm_upgrade,
    kubectl_words, schedulability,
};

mod survives;

const PAIR: [&str; 2] = ["cp-1", "w-1"];
const FROM: &str = "v1.34.2";
/// Kured's default lock annotation.
const KURED_LOCK: &str = "weave.works/kured-node-lock";

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

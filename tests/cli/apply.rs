//! `fleetctl apply` against the simulated fleet (issue 5's "Done means"):
//! whole upgrades on 1 + 2 and 3 + 3 nodes judged by the fleet's event log
//! and the API server's final state, and the checks that keep apply from
//! touching anything when it should not run (dry run, no confirmation, no or
//! stale plan, a lock held by someone else). Every fleet has a node reached
//! as `core` through sudo, as real Flatcar fleets often do.

use std::collections::BTreeMap;

use fleetctl::version::{Minor, Version};

use super::support::{
    self, Cluster, Event, Fleet, KubeadmUpgrade, Run, Seat, SharedFleet, apply,
    deletes_lock_configmap, is_boot, is_ok, is_reboot, kubeadm_upgrade, kubectl_words, m,
    newest_on_hub, pinned_pattern, schedulability, skips_kube_proxy, v,
};

const CONFIG: &str = "/etc/sysupdate.kubernetes.d/kubernetes.conf";
/// Kured's default lock annotation, which fleetctl takes as Kured's own lock.
const KURED_LOCK: &str = "weave.works/kured-node-lock";
/// fleetctl's own lock when Kured is not installed.
const LOCK_CONFIGMAP: &str = "kube-system/fleetctl-lock";

/// One hop per minor after `from` up to `to`, each staging the hub's newest patch.
fn hops(fleet: &Fleet, from: &str, to: &str) -> Vec<Version> {
    let (from, to) = (m(from), m(to));
    let mut minor = from.next();
    let mut out = Vec::new();
    while minor <= to {
        out.push(newest_on_hub(fleet, &minor.to_string()));
        minor = minor.next();
    }
    out
}

fn fleetctl(fleet: &impl Seat, args: &[&str]) -> Run {
    support::run(&fleet.inventory(), args)
}

/// These tests check the one-minor-per-reboot order; tests/cli/jump.rs
/// checks the default, `--workers jump`.
fn plan(fleet: &impl Seat, target: &str) -> Run {
    fleetctl(fleet, &["plan", target, "--workers", "every-hop"]).expect_code(0)
}

fn events(fleet: &Fleet) -> Vec<Event> {
    fleet.events().unwrap()
}

fn names(nodes: &[&str]) -> Vec<String> {
    nodes.iter().map(|n| n.to_string()).collect()
}

// ---------------------------------------------------------------------------
// What a finished upgrade looks like

/// The upgrade's own actions, as opposed to the lock and the supervisor.
fn is_upgrade_action(e: &Event) -> bool {
    schedulability(e).is_some()
        || is_reboot(e)
        || kubeadm_upgrade(e).is_some()
        || e.argv
            .first()
            .is_some_and(|a| a.ends_with("systemd-sysupdate"))
}

/// Issue 8's rules over the events of one apply run, in kubeadm's own
/// order: `kubeadm upgrade apply` once per hop, in order, only on `first`,
/// always skipping kube-proxy; in every hop, each node's kubeadm step (by
/// the hop's kubeadm binary) before its reboot, every control plane's
/// before any node reboots, every worker's only after every control plane
/// booted the new minor; no node carrying the hop's pin before its kubeadm
/// step; every node rebooted once per hop; images downloaded without
/// staging; never two nodes out at once; every reboot drained before and
/// uncordoned after; and the simulator's own invariants (no kubelet newer
/// than a running kube-apiserver, none booted before its kubeadm step,
/// none crashed).
fn assert_upgrade_log(events: &[Event], first: &str, others: &[&str], hops: &[Version]) {
    let roles = |n: &str| n.starts_with("cp-");
    let applies = kubeadm_applies(events, first);
    let applied: Vec<&str> = applies.iter().map(|(_, v)| v.as_str()).collect();
    let expected: Vec<String> = hops.iter().map(|v| v.to_string()).collect();
    assert_eq!(
        applied,
        expected,
        "upgrade apply must run once per hop, one minor at a time, with the hub's newest patch:\n{}",
        support::describe(events)
    );
    let at: Vec<usize> = applies.iter().map(|(i, _)| *i).collect();
    let nodes: Vec<&str> = std::iter::once(first)
        .chain(others.iter().copied())
        .collect();
    for (h, hop) in hops.iter().enumerate() {
        let range = at[h]..at.get(h + 1).copied().unwrap_or(events.len());
        let pattern = pinned_pattern(&hop.minor().to_string());
        let mut steps = BTreeMap::new();
        let mut boots = BTreeMap::new();
        for node in &nodes {
            let step = kubeadm_step(events, node, hop, range.clone());
            let reboot = match reboots(events, node, range.clone())[..] {
                [r] => r,
                ref found => panic!(
                    "{node} must reboot exactly once in hop {hop} (reboots at {found:?}):\n{}",
                    support::describe(events)
                ),
            };
            assert!(
                step < reboot,
                "{node} rebooted (event {reboot}) before its kubeadm step (event {step}):\n{}",
                support::describe(events)
            );
            assert_no_pin_before(events, node, &pattern, step);
            let boot = (reboot..range.end)
                .find(|&i| is_boot(&events[i]) && events[i].node == *node)
                .unwrap_or_else(|| panic!("{node} never came back in hop {hop}"));
            steps.insert(*node, step);
            boots.insert(*node, (reboot, boot));
        }
        let last_cp_step = nodes.iter().filter(|n| roles(n)).map(|n| steps[n]).max();
        let first_reboot = boots.values().map(|(r, _)| *r).min();
        if let (Some(s), Some(r)) = (last_cp_step, first_reboot) {
            assert!(
                s < r,
                "a node rebooted (event {r}) before every control plane's kubeadm step (last at {s}):\n{}",
                support::describe(events)
            );
        }
        let last_cp_boot = nodes.iter().filter(|n| roles(n)).map(|n| boots[n].1).max();
        for w in nodes.iter().filter(|n| !roles(n)) {
            if let Some(b) = last_cp_boot {
                assert!(
                    steps[w] > b,
                    "{w}'s kubeadm step (event {}) ran before every control plane booted {hop} (event {b}):\n{}",
                    steps[w],
                    support::describe(events)
                );
            }
        }
    }
    assert_downloads_do_not_stage(events);
    assert_kube_proxy_untouched(events);
    support::assert_one_node_out_at_a_time(events);
    support::assert_reboots_drained_then_uncordoned(events);
    support::assert_invariants_hold(events);
}

/// Every `kubeadm upgrade apply` (index, version), having checked that each
/// kubeadm call succeeded, skipped kube-proxy, and that apply ran only on
/// `first` and `upgrade node` never did.
fn kubeadm_applies(events: &[Event], first: &str) -> Vec<(usize, String)> {
    let log = || support::describe(events);
    let mut applies = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let Some(call) = kubeadm_upgrade(e) else {
            continue;
        };
        assert!(is_ok(e), "kubeadm failed at event {i}:\n{}", log());
        assert!(
            skips_kube_proxy(&e.argv),
            "event {i} runs kubeadm without --skip-phases addon/kube-proxy:\n{}",
            log()
        );
        match call {
            KubeadmUpgrade::Apply(version) => {
                assert_eq!(
                    e.node,
                    first,
                    "upgrade apply ran on another node than the first control plane:\n{}",
                    log()
                );
                applies.push((i, version));
            }
            KubeadmUpgrade::Node => assert_ne!(
                e.node,
                first,
                "upgrade node ran on the first control plane, which runs upgrade apply:\n{}",
                log()
            ),
        }
    }
    applies
}

/// `node`'s one kubeadm step of the hop to `hop` within `range`: `upgrade
/// apply` or `upgrade node`, by a kubeadm binary of the hop's version.
fn kubeadm_step(
    events: &[Event],
    node: &str,
    hop: &Version,
    range: std::ops::Range<usize>,
) -> usize {
    let steps: Vec<usize> = range
        .filter(|&i| events[i].node == node && kubeadm_upgrade(&events[i]).is_some())
        .collect();
    let [i] = steps[..] else {
        panic!(
            "{node} must run its kubeadm step once in hop {hop} (kubeadm at {steps:?}):\n{}",
            support::describe(events)
        );
    };
    assert_eq!(
        events[i].version.as_deref(),
        Some(hop.to_string().as_str()),
        "{node}'s kubeadm step at event {i} ran another kubeadm than the hop's (the staged image's):\n{}",
        support::describe(events)
    );
    i
}

/// The successful reboots of `node` among `range`.
fn reboots(events: &[Event], node: &str, range: std::ops::Range<usize>) -> Vec<usize> {
    range
        .filter(|&i| is_reboot(&events[i]) && is_ok(&events[i]) && events[i].node == node)
        .collect()
}

/// No event of `node` before `step` (its kubeadm step) shows `pattern`:
/// nothing could stage the new minor on it, not even its own sysupdate
/// timer, before the kubelet config was ready for it.
fn assert_no_pin_before(events: &[Event], node: &str, pattern: &str, step: usize) {
    if let Some((i, _)) = events[..step]
        .iter()
        .enumerate()
        .find(|(_, e)| e.node == node && e.pins.iter().any(|p| p == pattern))
    {
        panic!(
            "{node} had {pattern} at event {i}, before its kubeadm step (event {step}):\n{}",
            support::describe(events)
        );
    }
}

/// Every sysupdate run downloads with a private definition and stages
/// nothing (`--definitions=`, never `--component=kubernetes` or the node's
/// own systemd-sysupdate.service, whose drop-in arms Kured).
fn assert_downloads_do_not_stage(events: &[Event]) {
    for (i, e) in events.iter().enumerate() {
        let argv = e.argv.join(" ");
        let staging = (argv.contains("systemd-sysupdate")
            && argv.contains("--component=kubernetes"))
            || argv.contains("start systemd-sysupdate");
        assert!(
            !staging,
            "event {i} stages kubernetes with sysupdate itself:\n{}",
            support::describe(events)
        );
    }
}

/// Nothing mentions kube-proxy except to skip its addon phase: no one
/// deployed it, deleted it or hid it.
fn assert_kube_proxy_untouched(events: &[Event]) {
    if let Some((i, _)) = events.iter().enumerate().find(|(_, e)| {
        !support::is_unit_start(e)
            && e.argv
                .iter()
                .any(|a| a.contains("kube-proxy") && a != "addon/kube-proxy")
    }) {
        panic!(
            "event {i} touches kube-proxy other than skipping its phase:\n{}",
            support::describe(events)
        );
    }
}

/// The API server's view at the end: every node up, schedulable, on
/// `version` (control planes' static pods too), kubeadm-config at
/// `version`, no kube-proxy; and each node booted the sysext of `version`.
fn assert_cluster_at(fleet: &Fleet, nodes: &[&str], version: &Version) {
    let c: Cluster = fleet.cluster().unwrap();
    let want = version.to_string();
    assert_eq!(c.version, want, "kubeadm-config's kubernetesVersion");
    assert!(!c.kube_proxy, "kube-proxy appeared");
    assert_eq!(
        c.nodes.keys().cloned().collect::<Vec<_>>(),
        names(nodes),
        "the cluster's nodes"
    );
    for (name, n) in &c.nodes {
        assert!(n.up, "{name} is not up");
        assert!(!n.unschedulable, "{name} is still cordoned");
        assert_eq!(n.kubelet_version, want, "{name}'s kubelet");
        if n.control_plane_version.is_some() {
            assert_eq!(
                n.control_plane_version.as_deref(),
                Some(want.as_str()),
                "{name}'s control plane"
            );
        }
        assert_eq!(
            fleet.boot(name).unwrap().kubernetes,
            want,
            "{name}'s sysext"
        );
    }
}

/// Each pin the nodes still have on disk (the config, and the previous one
/// fleetctl kept as `.fleetctl-backup` with its timestamps) was written
/// after that node's own kubeadm step for its minor. This closes the gap the
/// event log leaves: a pin written early but not used until later would
/// carry no event of its own.
fn assert_pins_written_after_their_kubeadm_step(fleet: &Fleet, events: &[Event], nodes: &[&str]) {
    let script = format!(
        "for f in {CONFIG} {CONFIG}.fleetctl-backup; do \
         [ -f \"$f\" ] && echo \"$f $(stat -c %.9Y \"$f\") $(grep '^MatchPattern=' \"$f\")\"; done; true"
    );
    for node in nodes {
        let steps: BTreeMap<Minor, f64> = events
            .iter()
            .filter(|e| e.node == *node && kubeadm_upgrade(e).is_some())
            .filter_map(|e| Some((v(e.version.as_deref()?).minor(), e.t)))
            .collect();
        let out = fleet.ssh_ok(node, "root", &script).unwrap();
        let mut seen = 0;
        for line in out.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [file, mtime, pattern] = fields[..] else {
                panic!("{node}: unexpected line `{line}`");
            };
            let minor = pattern
                .strip_prefix("MatchPattern=kubernetes-")
                .and_then(|p| p.strip_suffix(".@v-%a.raw"))
                .unwrap_or_else(|| panic!("{node}: {file} is not pinned: {pattern}"));
            let Some(step) = steps.get(&m(minor)) else {
                continue; // the pin the fleet started with
            };
            seen += 1;
            // The file system stamps with the kernel's coarse clock, which
            // may trail the event's clock by a tick; fleetctl needs far
            // longer than that between a kubeadm step and the next pin.
            let written: f64 = mtime.parse().unwrap();
            assert!(
                written > step - 0.05,
                "{node}: {file} ({minor}) was written at {written}, before its kubeadm step at {step}"
            );
        }
        assert!(seen > 0, "{node}: no pin from this run on disk:\n{out}");
    }
}

/// The lock configmap deleted the only way that carries preconditions:
/// `kubectl delete --raw /api/v1/namespaces/kube-system/configmaps/fleetctl-lock -f -`.
/// fleetctl's configmap lock was created before the first upgrade action,
/// deleted after the last, and is gone; Kured's lock was never touched.
fn assert_configmap_lock_taken_and_released(fleet: &Fleet, events: &[Event]) {
    let log = || support::describe(events);
    let created_at = |e: &Event| {
        is_ok(e) && kubectl_words(e).is_some_and(|w| w == ["create", "configmap", "fleetctl-lock"])
    };
    let (Some(created), Some(deleted)) = (
        events.iter().position(created_at),
        events
            .iter()
            .rposition(|e| is_ok(e) && deletes_lock_configmap(e)),
    ) else {
        panic!("the configmap lock was not created and deleted:\n{}", log());
    };
    assert_lock_brackets_the_upgrade(events, created, deleted);
    assert!(
        !events
            .iter()
            .any(|e| kubectl_words(e).is_some_and(|w| w.first() == Some(&"annotate"))),
        "without Kured nothing is annotated:\n{}",
        log()
    );
    let c = fleet.cluster().unwrap();
    assert!(
        !c.configmaps.contains_key(LOCK_CONFIGMAP),
        "the lock configmap is still there: {:?}",
        c.configmaps
    );
}

/// fleetctl took Kured's lock (annotation in Kured's format, holder
/// `fleetctl/…`, guarded by the resourceVersion it read) before the first
/// upgrade action and removed it (also guarded) after the last; the
/// DaemonSet has no lock now and no configmap lock was made.
fn assert_kured_lock_taken_and_released(fleet: &Fleet, events: &[Event]) {
    let log = || support::describe(events);
    let set_prefix = format!("{KURED_LOCK}=");
    let remove = format!("{KURED_LOCK}-");
    let annotates = |e: &Event, want: &dyn Fn(&str) -> bool| {
        is_ok(e)
            && kubectl_words(e).is_some_and(|w| {
                w.len() == 4 && w[..3] == ["annotate", "daemonset", "kured"] && want(w[3])
            })
    };
    // The first lock taken and the last removal: a --force-unlock run
    // removes someone else's lock first.
    let (Some(taken), Some(released)) = (
        events
            .iter()
            .position(|e| annotates(e, &|w| w.starts_with(&set_prefix))),
        events.iter().rposition(|e| annotates(e, &|w| w == remove)),
    ) else {
        panic!("Kured's lock was not taken and released:\n{}", log());
    };
    for at in [taken, released] {
        assert!(
            events[at]
                .argv
                .iter()
                .any(|a| a.starts_with("--resource-version=") && a.len() > 19),
            "event {at} changes Kured's DaemonSet without a resourceVersion precondition:\n{}",
            log()
        );
    }
    let value = events[taken]
        .argv
        .iter()
        .find_map(|a| a.strip_prefix(&set_prefix))
        .unwrap();
    let lock: serde_json::Value = serde_json::from_str(value)
        .unwrap_or_else(|e| panic!("the lock annotation is not JSON ({e}): {value}"));
    let holder = lock["nodeID"].as_str().unwrap_or_default();
    assert!(
        holder.starts_with("fleetctl/"),
        "Kured's lock should name fleetctl, not a node: {value}"
    );
    assert_lock_brackets_the_upgrade(events, taken, released);
    assert!(
        !events
            .iter()
            .any(|e| kubectl_words(e).is_some_and(|w| w.contains(&"fleetctl-lock"))),
        "with Kured there is no configmap lock:\n{}",
        log()
    );
    let c = fleet.cluster().unwrap();
    let kured = c.kured.expect("the scenario installs Kured");
    assert!(
        !kured.annotations.contains_key(KURED_LOCK),
        "Kured's DaemonSet still carries the lock: {:?}",
        kured.annotations
    );
}

fn assert_lock_brackets_the_upgrade(events: &[Event], taken: usize, released: usize) {
    let actions: Vec<usize> = (0..events.len())
        .filter(|&i| is_upgrade_action(&events[i]))
        .collect();
    let (Some(first), Some(last)) = (actions.first(), actions.last()) else {
        panic!("no upgrade happened:\n{}", support::describe(events));
    };
    assert!(
        taken < *first && *last < released,
        "the lock (taken at {taken}, released at {released}) must cover every upgrade action \
         ({first}..={last}):\n{}",
        support::describe(events)
    );
}

// ---------------------------------------------------------------------------
// What "changes nothing" means

/// Per node its sysupdate configs, staged symlink, downloaded images,
/// reboot flag and boot id; the API server's state; the event log.
#[derive(Debug, PartialEq)]
struct Snapshot {
    nodes: BTreeMap<String, String>,
    cluster: serde_json::Value,
    events: Vec<String>,
}

const NODE_STATE: &str = r#"
for f in /etc/sysupdate.kubernetes.d/*; do echo "== $f"; cat "$f"; done
echo "link $(readlink /etc/extensions/kubernetes.raw)"
ls /opt/extensions/kubernetes
test -e /run/reboot-required && echo reboot-required
echo "boot $(cat /proc/sys/kernel/random/boot_id)"
"#;

fn snapshot(fleet: &Fleet, nodes: &[&str]) -> Snapshot {
    Snapshot {
        nodes: nodes
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
        events: events(fleet)
            .iter()
            .map(|e| format!("{} {} → {}", e.node, e.argv.join(" "), e.result))
            .collect(),
    }
}

/// Nothing changed but the lock, which apply takes before it looks at the
/// fleet and gives back on every path (the cluster state shows it gone).
fn assert_unchanged(fleet: &Fleet, nodes: &[&str], before: &Snapshot, what: &str) {
    let after = snapshot(fleet, nodes);
    let lock_events: Vec<String> = events(fleet)
        .iter()
        .filter(|e| support::is_lock(e))
        .map(|e| format!("{} {} → {}", e.node, e.argv.join(" "), e.result))
        .collect();
    let without_lock = |events: &[String]| -> Vec<String> {
        events
            .iter()
            .filter(|e| !lock_events.contains(e))
            .cloned()
            .collect()
    };
    let (other, was) = (without_lock(&after.events), without_lock(&before.events));
    assert_eq!(other, was, "{what} ran something on a node");
    assert_eq!(
        after.cluster, before.cluster,
        "{what} changed the API server"
    );
    assert_eq!(after.nodes, before.nodes, "{what} changed a node");
}

// ---------------------------------------------------------------------------
// Whole upgrades

/// 1 control plane + 2 workers at v1.34.2, w-2 reached as core through sudo.
const SMALL: [&str; 3] = ["cp-1", "w-1", "w-2"];

fn small_scenario(kubernetes: &str) -> support::Scenario {
    support::scenario()
        .control_planes(1)
        .workers(2)
        .kubernetes(kubernetes)
        .with_node("w-2", |n| n.user = Some("core".into()))
}

/// [`small_scenario`] at v1.34.2, shared by the tests of an apply that
/// must not run and changes nothing (no plan, `--dry-run`: neither takes
/// the lock).
pub(crate) static SMALL_V1_34_2: SharedFleet =
    SharedFleet::new("apply: 1 + 2 at v1.34.2", || small_scenario("v1.34.2"));

fn small_fleet(kubernetes: &str) -> Fleet {
    support::start(small_scenario(kubernetes))
}

/// With one control plane the API is down only while cp-1 reboots:
/// every outage in `log` lies between one of cp-1's shutdowns and the start
/// of its static pods after that boot; at most one per hop.
fn assert_api_down_only_while_cp_1_reboots(log: &[Event], hops: &[Version]) {
    let outages = fleetsim::invariants::api_outages(log);
    let reboots: Vec<(f64, f64)> = log
        .iter()
        .enumerate()
        .filter(|(_, e)| e.node == "cp-1" && support::is_shutdown(e))
        .map(|(i, e)| {
            let up = log[i..]
                .iter()
                .find(|x| x.node == "cp-1" && x.argv == ["(static-pods)"] && is_ok(x))
                .map_or(f64::INFINITY, |x| x.t);
            (e.t, up)
        })
        .collect();
    assert_eq!(reboots.len(), hops.len(), "cp-1 rebooted once per hop");
    assert!(
        reboots.iter().all(|(_, up)| up.is_finite()),
        "cp-1's static pods came back after every reboot: {reboots:?}"
    );
    assert!(
        !outages.is_empty(),
        "a single control plane's reboot is an outage"
    );
    for (from, to) in &outages {
        assert!(
            reboots
                .iter()
                .any(|(down, up)| *from >= *down - 1e-6 && *to <= *up + 1e-6),
            "the API was down from {from} to {to}, outside cp-1's reboots {reboots:?}:\n{}",
            support::describe(log)
        );
    }
    assert!(
        outages.len() <= hops.len(),
        "{outages:?}\n{}",
        support::describe(log)
    );
}

#[test]
fn v1_34_to_v1_37_on_one_control_plane_and_two_workers() {
    // Three hops of real sysupdate downloads,
    // systemd-run steps and systemd reboots.
    let fleet = support::start(small_scenario("v1.34.2"));
    let hops = hops(&fleet, "v1.34", "v1.37");
    assert_eq!(hops.len(), 3);
    plan(&fleet, "v1.37");
    let start = events(&fleet).len();

    let run = apply(&fleet, &["--yes"]).expect_code(0);
    assert!(
        run.stderr.contains("done: 3 nodes upgraded"),
        "{}",
        run.stderr
    );

    let log = &events(&fleet)[start..];
    assert_upgrade_log(log, "cp-1", &["w-1", "w-2"], &hops);
    assert_configmap_lock_taken_and_released(&fleet, log);
    assert_api_down_only_while_cp_1_reboots(log, &hops);
    assert_cluster_at(&fleet, &SMALL, &hops[2]);
    assert_pins_written_after_their_kubeadm_step(&fleet, log, &SMALL);
    for node in SMALL {
        let config = fleet
            .ssh_ok(node, "root", &format!("cat {CONFIG}"))
            .unwrap();
        assert!(
            config.contains(&format!("MatchPattern={}\n", pinned_pattern("v1.37"))),
            "{node} should end pinned to v1.37:\n{config}"
        );
    }

    // Done is done: a second apply finds nothing to do and runs nothing.
    let before = snapshot(&fleet, &SMALL);
    let again = apply(&fleet, &["--yes"]).expect_code(0);
    assert!(
        again.stderr.contains("nothing to do"),
        "{}\n{}",
        again.stdout,
        again.stderr
    );
    assert_unchanged(&fleet, &SMALL, &before, "a second apply");
}

#[test]
fn v1_35_to_v1_36_on_three_control_planes_and_three_workers_under_kureds_lock() {
    let nodes = ["cp-1", "cp-2", "cp-3", "w-1", "w-2", "w-3"];
    let fleet = support::start(
        support::scenario()
            .control_planes(3)
            .workers(3)
            .kubernetes("v1.35.1")
            .kured(true)
            .hub(|h| {
                h.patches_for = BTreeMap::from([("v1.36".to_string(), 3)]);
            })
            .with_node("cp-2", |n| n.user = Some("core".into()))
            .with_node("w-3", |n| n.user = Some("core".into())),
    );
    let hops = hops(&fleet, "v1.35", "v1.36");
    assert_eq!(hops, [v("v1.36.2")]);
    plan(&fleet, "v1.36");
    let start = events(&fleet).len();

    let run = apply(&fleet, &["--yes"]).expect_code(0);
    assert!(
        run.stderr.contains("done: 6 nodes upgraded"),
        "{}",
        run.stderr
    );

    let log = &events(&fleet)[start..];
    let others = &nodes[1..];
    assert_upgrade_log(log, "cp-1", others, &hops);
    assert_kured_lock_taken_and_released(&fleet, log);
    assert_cluster_at(&fleet, &nodes, &hops[0]);
    assert_pins_written_after_their_kubeadm_step(&fleet, log, &nodes);
    // Where etcd lives is read once in the run, not before each control
    // plane's drain and again after its return (six reads here before).
    assert_eq!(
        support::times_run(
            &fleet,
            "cp-1",
            "etcd gate: where etcd lives (kubeadm-config)"
        ),
        1
    );
}

// ---------------------------------------------------------------------------
// Apply that must not run

#[test]
fn without_a_saved_plan_apply_says_to_run_plan_first() {
    let fleet = SMALL_V1_34_2.get();
    let before = snapshot(&fleet, &SMALL);
    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert!(
        run.stderr.contains("run `fleetctl plan` first"),
        "{}",
        run.stderr
    );
    assert_unchanged(&fleet, &SMALL, &before, "apply without a plan");
}

/// One line per command the dry run announces that changes something:
/// `node download`, `node etcd-snapshot`, `node apply VERSION`, `node upgrade-node VERSION`,
/// `node pin`, `node stage VERSION`, `node drain X`, `node reboot`,
/// `node uncordon X`, `node remove-images`.
fn dry_run_outline(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let (node, cmd) = line.strip_prefix('[')?.split_once("] ")?;
            // The uncordon runs once the node is Ready, in one remote command.
            let cmd = cmd.strip_prefix("(until Ready) ").unwrap_or(cmd);
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let what = if cmd.contains("etcdctl") && cmd.contains(" snapshot save ") {
                "etcd-snapshot".to_string()
            } else if cmd.contains("<etcd.local.dataDir>") {
                return None; // the snapshot's status, copy and removal
            } else if cmd.starts_with(&format!("# write {CONFIG} ")) {
                "pin".to_string()
            } else if cmd.contains("systemd-sysupdate --definitions=") {
                assert!(!cmd.contains("--component"), "{line}");
                "download".to_string()
            } else if cmd == "systemctl reboot" {
                "reboot".to_string()
            } else if let Some(at) = cmd.find("/usr/bin/kubeadm\" upgrade apply ") {
                assert!(cmd.contains(" --skip-phases addon/kube-proxy"), "{line}");
                assert!(cmd.contains("losetup --read-only --find --show "), "{line}");
                assert!(cmd.contains("umount"), "{line}");
                let rest = &cmd[at + "/usr/bin/kubeadm\" upgrade apply ".len()..];
                format!("apply {}", rest.split_whitespace().next()?)
            } else if cmd.contains("/usr/bin/kubeadm\" upgrade node") {
                assert!(cmd.contains(" --skip-phases addon/kube-proxy"), "{line}");
                assert!(cmd.contains("losetup --read-only --find --show "), "{line}");
                let image = cmd.split("kubernetes-").nth(1)?.split("-x86-64").next()?;
                format!("upgrade-node {image}")
            } else if cmd.contains("ln -sfn ") && cmd.contains("/etc/extensions/kubernetes.raw") {
                let image = cmd.split("kubernetes-").nth(1)?.split("-x86-64").next()?;
                format!("stage {image}")
            } else if cmd.contains("systemd-run --unit=fleetctl-drain-") {
                // A detached step: the kubectl drain inside the unit's script.
                assert!(cmd.contains("kubectl "), "{line}");
                let at = words.iter().rposition(|w| *w == "drain")?;
                format!("drain {}", words.get(at + 1)?)
            } else if cmd.starts_with("kubectl ") && words.contains(&"uncordon") {
                format!("uncordon {}", words.last()?)
            } else if cmd.contains("rm -f --") {
                "remove-images".to_string()
            } else {
                return None;
            };
            Some(format!("{node} {what}"))
        })
        .collect()
}

/// The dry run of [`small_fleet`] from v1.34 through `hops`, in kubeadm's order.
fn expected_dry_run(hops: &[Version]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, hop) in hops.iter().enumerate() {
        out.extend(SMALL.iter().map(|n| format!("{n} download")));
        out.extend([
            "cp-1 etcd-snapshot".to_string(),
            format!("cp-1 apply {hop}"),
            "cp-1 pin".into(),
            format!("cp-1 stage {hop}"),
            "cp-1 drain cp-1".into(),
            "cp-1 reboot".into(),
            "cp-1 uncordon cp-1".into(),
        ]);
        for w in ["w-1", "w-2"] {
            out.extend([
                format!("{w} upgrade-node {hop}"),
                format!("{w} pin"),
                format!("{w} stage {hop}"),
            ]);
        }
        for w in ["w-1", "w-2"] {
            out.extend([
                format!("cp-1 drain {w}"),
                format!("{w} reboot"),
                format!("cp-1 uncordon {w}"),
            ]);
        }
        if i > 0 {
            out.extend(SMALL.iter().map(|n| format!("{n} remove-images")));
        }
    }
    out
}

#[test]
fn dry_run_prints_every_command_in_order_and_changes_nothing() {
    let fleet = SMALL_V1_34_2.get();
    let hops = hops(&fleet, "v1.34", "v1.36");
    plan(&fleet, "v1.36");
    let before = snapshot(&fleet, &SMALL);

    let run = apply(&fleet, &["--dry-run"]).expect_code(0);
    assert_eq!(
        dry_run_outline(&run.stdout),
        expected_dry_run(&hops),
        "{}",
        run.stdout
    );
    // The kubeadm step runs the downloaded image's kubeadm from a private
    // read-only mount under /run, and leaves its marker.
    let apply_line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("[cp-1] ") && l.contains("upgrade apply v1.35.3"))
        .unwrap_or_else(|| panic!("no upgrade apply line in\n{}", run.stdout));
    // It runs as a detached unit: `sh -c '<script>'`, single-quoted once more.
    assert!(
        apply_line.contains("systemd-run --unit=fleetctl-kubeadm-upgrade-apply-v1.35.3.service "),
        "{apply_line}"
    );
    let apply_line = apply_line.replace("'\\''", "'");
    for part in [
        "'/opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw'",
        "mktemp -d '/run'/fleetctl-kubeadm.XXXXXX",
        "losetup --read-only --find --show ",
        "mount -o ro \"$dev\" \"$dir\"",
        "version -o short",
        "upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes",
        "/var/lib/fleetctl/kubeadm-step",
    ] {
        assert!(apply_line.contains(part), "no `{part}` in {apply_line}");
    }
    // kubectl runs on the first control-plane node, whichever node it drains.
    let drain = "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s drain w-2 --ignore-daemonsets --delete-emptydir-data";
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("[cp-1] ") && l.contains(drain)),
        "no `{drain}` run on cp-1 in\n{}",
        run.stdout
    );
    assert_unchanged(&fleet, &SMALL, &before, "--dry-run");
}

#[test]
fn without_yes_and_without_a_terminal_apply_refuses() {
    let fleet = small_fleet("v1.34.2");
    plan(&fleet, "v1.35");
    let before = snapshot(&fleet, &SMALL);
    let run = apply(&fleet, &[]).expect_code(2);
    assert!(
        run.stderr.contains("no terminal") && run.stderr.contains("--yes"),
        "{}",
        run.stderr
    );
    assert_unchanged(&fleet, &SMALL, &before, "apply without --yes");
}

/// 1 control plane + 1 worker at v1.34.2, the worker reached as core.
const PAIR: [&str; 2] = ["cp-1", "w-1"];

fn pair(kured: bool) -> Fleet {
    support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kured(kured)
            .with_node("w-1", |n| n.user = Some("core".into())),
    )
}

#[test]
fn a_stale_plan_is_refused_until_planned_again() {
    let fleet = pair(false);

    // Rebooted by hand after the plan.
    plan(&fleet, "v1.35");
    let boot_id = fleet.boot("w-1").unwrap().boot_id;
    let _ = fleet.ssh("w-1", "root", "reboot");
    fleet.wait_rebooted("w-1", &boot_id).unwrap();
    let before = snapshot(&fleet, &PAIR);
    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert!(
        run.stderr.contains("stale") && run.stderr.contains("w-1: rebooted since the plan"),
        "{}",
        run.stderr
    );
    assert_unchanged(&fleet, &PAIR, &before, "apply of a stale plan");

    // A config changed by hand after the plan.
    plan(&fleet, "v1.35");
    fleet
        .ssh_ok(
            "w-1",
            "root",
            &format!("echo '# tuned by hand' >> {CONFIG}"),
        )
        .unwrap();
    let before = snapshot(&fleet, &PAIR);
    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert!(
        run.stderr.contains(&format!("w-1: {CONFIG} changed")),
        "{}",
        run.stderr
    );
    assert_unchanged(&fleet, &PAIR, &before, "apply of a stale plan");

    // Planned again, it is accepted: the dry run re-checks the plan as the
    // run does under the lock (`commands/apply.rs`, `replan`), and a whole
    // upgrade of this pair is what the other tests here carry out.
    plan(&fleet, "v1.35");
    let before = snapshot(&fleet, &PAIR);
    let dry = apply(&fleet, &["--dry-run"]).expect_code(0);
    assert!(!dry.stderr.contains("stale"), "{}", dry.stderr);
    assert_unchanged(&fleet, &PAIR, &before, "a dry run");
}

// ---------------------------------------------------------------------------
// The rules above must be able to fail: a correct one-hop log passes them,
// and each way of breaking issue 5's rules is caught. No fleet needed.

mod rules {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use super::*;

    const P34: &str = "kubernetes-v1.34.@v-%a.raw";
    const P35: &str = "kubernetes-v1.35.@v-%a.raw";
    const KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s";

    fn ev(node: &str, cmd: &str, pin: &str) -> Event {
        Event {
            t: 0.0,
            node: node.into(),
            argv: cmd.split_whitespace().map(String::from).collect(),
            result: "ok".into(),
            pins: vec![pin.into()],
            ..Default::default()
        }
    }

    /// An event carrying the version of the binary or boot it records.
    fn at(node: &str, cmd: &str, pin: &str, version: &str) -> Event {
        Event {
            version: Some(version.into()),
            ..ev(node, cmd, pin)
        }
    }

    /// A kubelet start, with the version of the kubeadm that wrote its config.
    fn kubelet(node: &str, pin: &str, version: &str) -> Event {
        Event {
            config: Some(version.into()),
            ..at(node, "(kubelet)", pin, version)
        }
    }

    /// cp-1 + w-1 from v1.34.2 to v1.35.3, as fleetctl does it now.
    fn good_log() -> Vec<Event> {
        let k = |args: &str| format!("{KUBECTL} {args}");
        let mut log = vec![
            at("w-1", "(boot)", P34, "v1.34.2"),
            kubelet("w-1", P34, "v1.34.2"),
            at("cp-1", "(boot)", P34, "v1.34.2"),
            kubelet("cp-1", P34, "v1.34.2"),
            at("cp-1", "(static-pods)", P34, "v1.34.2"),
            ev(
                "cp-1",
                "systemd-sysupdate --definitions=/run/fleetctl-download.a update",
                P34,
            ),
            ev(
                "w-1",
                "systemd-sysupdate --definitions=/run/fleetctl-download.b update",
                P34,
            ),
            at(
                "cp-1",
                "kubeadm upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes",
                P34,
                "v1.35.3",
            ),
            at("cp-1", "(static-pods)", P34, "v1.35.3"),
            ev("cp-1", &k("cordon cp-1"), P35),
            ev(
                "cp-1",
                &k("drain cp-1 --ignore-daemonsets --timeout=300s"),
                P35,
            ),
            ev("cp-1", "reboot", P35),
            ev("cp-1", "(shutdown)", P35),
            at("cp-1", "(boot)", P35, "v1.35.3"),
            kubelet("cp-1", P35, "v1.35.3"),
            at("cp-1", "(static-pods)", P35, "v1.35.3"),
            ev("cp-1", &k("uncordon cp-1"), P35),
            at(
                "w-1",
                "kubeadm upgrade node --skip-phases addon/kube-proxy",
                P34,
                "v1.35.3",
            ),
            ev("cp-1", &k("cordon w-1"), P35),
            ev(
                "cp-1",
                &k("drain w-1 --ignore-daemonsets --timeout=300s"),
                P35,
            ),
            ev("w-1", "reboot", P35),
            ev("w-1", "(shutdown)", P35),
            at("w-1", "(boot)", P35, "v1.35.3"),
            kubelet("w-1", P35, "v1.35.3"),
            ev("cp-1", &k("uncordon w-1"), P35),
        ];
        for (i, e) in log.iter_mut().enumerate() {
            e.t = i as f64;
        }
        log
    }

    /// The panic message of the rules on `log`, `None` when it passes.
    fn verdict(log: &[Event]) -> Option<String> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            assert_upgrade_log(log, "cp-1", &["w-1"], &[v("v1.35.3")])
        }));
        let panic = result.err()?;
        Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        )
    }

    fn find(log: &[Event], node: &str, cmd: &str) -> usize {
        log.iter()
            .position(|e| e.node == node && e.argv.join(" ").contains(cmd))
            .unwrap_or_else(|| panic!("no `{cmd}` on {node}"))
    }

    /// Moves the event at `from` to just before the event now at `to`.
    fn move_before(log: &mut Vec<Event>, from: usize, to: usize) {
        let e = log.remove(from);
        let to = if from < to { to - 1 } else { to };
        log.insert(to, e);
    }

    #[test]
    fn a_correct_upgrade_passes() {
        assert_eq!(verdict(&good_log()), None);
    }

    #[test]
    fn each_broken_rule_is_caught() {
        type Break = fn(&mut Vec<Event>);
        let breaks: [(&str, &str, Break); 13] = [
            (
                "the old order: the worker's kubeadm step after its reboot",
                "before its kubeadm step",
                |log| {
                    let step = find(log, "w-1", "upgrade node");
                    let uncordon = find(log, "cp-1", "uncordon w-1");
                    move_before(log, step, uncordon);
                },
            ),
            (
                "the worker's kubeadm step before cp-1 booted the new minor",
                "before every control plane booted",
                |log| {
                    let step = find(log, "w-1", "upgrade node");
                    let drain = find(log, "cp-1", "cordon cp-1");
                    move_before(log, step, drain);
                },
            ),
            (
                "the worker pinned to the new minor before its kubeadm step",
                "before its kubeadm step",
                |log| {
                    let download = find(log, "w-1", "systemd-sysupdate");
                    log[download].pins = vec![P35.into()];
                },
            ),
            (
                "the kubeadm step by the booted (old) kubeadm",
                "another kubeadm than the hop's",
                |log| {
                    let at = find(log, "w-1", "upgrade node");
                    log[at].version = Some("v1.34.2".into());
                },
            ),
            (
                "kubernetes staged by sysupdate itself",
                "stages kubernetes with sysupdate itself",
                |log| {
                    let at = find(log, "w-1", "systemd-sysupdate");
                    log[at].argv = ["systemd-sysupdate", "--component=kubernetes", "update"]
                        .map(String::from)
                        .to_vec();
                },
            ),
            (
                "apply without skipping kube-proxy",
                "without --skip-phases",
                |log| {
                    let at = find(log, "cp-1", "upgrade apply");
                    log[at]
                        .argv
                        .retain(|a| a != "--skip-phases" && a != "addon/kube-proxy");
                },
            ),
            (
                "upgrade node without skipping kube-proxy",
                "without --skip-phases",
                |log| {
                    let at = find(log, "w-1", "upgrade node");
                    log[at].argv.truncate(3);
                },
            ),
            (
                "apply on the worker",
                "another node than the first",
                |log| {
                    let at = find(log, "cp-1", "upgrade apply");
                    log[at].node = "w-1".into();
                },
            ),
            ("a skipped minor", "one minor at a time", |log| {
                let at = find(log, "cp-1", "upgrade apply");
                log[at].argv[3] = "v1.36.3".into();
            }),
            (
                "two nodes cordoned at once",
                "cordoned or down at once",
                |log| {
                    let uncordon = log.remove(find(log, "cp-1", "uncordon cp-1"));
                    let at = find(log, "cp-1", "drain w-1") + 1;
                    log.insert(at, uncordon);
                },
            ),
            ("a reboot without a drain", "without being drained", |log| {
                log.remove(find(log, "cp-1", "drain w-1"));
                log.remove(find(log, "cp-1", "cordon w-1"));
            }),
            (
                "a reboot never followed by an uncordon",
                "uncordon",
                |log| {
                    log.remove(find(log, "cp-1", "uncordon w-1"));
                },
            ),
            (
                "a kubelet that failed to start",
                "kubelet failed to start",
                |log| {
                    let at = log.iter().rposition(|e| e.argv == ["(kubelet)"]).unwrap();
                    log[at].result =
                        "failed: failed to parse kubelet flag: unknown flag: --pod-infra-container-image"
                            .into();
                },
            ),
        ];
        for (what, why, break_it) in breaks {
            let mut log = good_log();
            break_it(&mut log);
            let verdict = verdict(&log).unwrap_or_else(|| panic!("not caught: {what}"));
            assert!(
                verdict.contains(why),
                "{what}: caught, but not for `{why}`:\n{verdict}"
            );
        }
    }
}

//! Issue 36, Kured's own blockers kept while fleetctl holds Kured's lock:
//! a pod matching Kured's `--blocking-pod-selector` on w-2 holds w-2, and
//! only w-2, until it is gone; an alert firing at Kured's
//! `--prometheus-url` holds every drain, while one Kured's
//! `--alert-filter-regexp` excludes never does. All with plain `apply
//! --yes`: nothing but Kured's own flags asks for it.

use fleetsim::state::PodSpec;

use super::support::{self, Running, assert_has};

fn drained(fleet: &support::Fleet) -> Vec<String> {
    fleet
        .events()
        .unwrap()
        .iter()
        .filter_map(support::schedulability)
        .filter(|(verb, _)| *verb == "drain")
        .map(|(_, n)| n.to_string())
        .collect()
}

#[test]
fn a_pod_matching_kureds_blocking_pod_selector_holds_its_node_and_only_it_until_it_is_gone() {
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(3)
        .kubernetes("v1.34.2")
        .kured_with(|k| k.blocking_pod_selectors = vec!["app=backup".into()]);
    scenario.pods.push(PodSpec {
        namespace: "default".into(),
        name: "backup-29104".into(),
        node: "w-2".into(),
        labels: [("app".to_string(), "backup".to_string())].into(),
        annotations: Default::default(),
        owner: Some("Job/backup".into()),
        phase: "Running".into(),
        image: None,
    });
    let fleet = support::start(scenario);
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let mut running = Running::spawn(&fleet.inventory(), &["apply", "--yes"]);
    running.wait_for("Kured's blocking pods hold w-2: pods backup-29104 on w-2");
    let before = drained(&fleet);
    assert!(
        before.contains(&"w-1".to_string()) && !before.contains(&"w-2".to_string()),
        "w-1 went, w-2 is held: {before:?}"
    );
    // Still held a while later.
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(!drained(&fleet).contains(&"w-2".to_string()));
    fleet
        .shared()
        .update_cluster(|c| {
            c.pods.retain(|p| p.name != "backup-29104");
            c.resource_version += 1;
            Ok(())
        })
        .unwrap();
    let run = running.finish().expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "keeping Kured's gates (daemonset kube-system/kured)",
            "--blocking-pod-selector=app=backup",
            "Kured's pod selector: no pod holds w-2 any more",
        ],
    );
    assert!(
        !run.stderr.contains("hold w-1") && !run.stderr.contains("hold w-3"),
        "only w-2 was held:\n{}",
        run.stderr
    );
    assert_eq!(drained(&fleet), ["cp-1", "w-1", "w-2", "w-3"]);
    support::assert_invariants_hold(&fleet.events().unwrap());
}

#[test]
fn an_alert_at_kureds_prometheus_holds_every_drain_and_an_excluded_one_never_does() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kured_with(|k| {
                k.prometheus = true;
                k.alert_filter_regexp = Some("^(Watchdog|InfoInhibitor)$".into());
            })
            .faults(|f| {
                f.alerts.insert("Watchdog".into(), "firing".into());
                f.alerts.insert("KubeNodeNotReady".into(), "firing".into());
            }),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let mut running = Running::spawn(&fleet.inventory(), &["apply", "--yes"]);
    running.wait_for("alert gate holds cp-1: alerts firing: KubeNodeNotReady (");
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        drained(&fleet).is_empty(),
        "a node was drained while Kured's alert fired"
    );
    fleet
        .faults(|f| {
            f.alerts.remove("KubeNodeNotReady");
        })
        .unwrap();
    let run = running.finish().expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "keeping Kured's gates (daemonset kube-system/kured)",
            "Prometheus at http://127.0.0.1:",
            "but not alerts matching ^(Watchdog|InfoInhibitor)$",
        ],
    );
    assert!(
        !run.stderr.contains("firing: Watchdog") && !run.stderr.contains(", Watchdog"),
        "the excluded alert never held a drain:\n{}",
        run.stderr
    );
    assert_eq!(drained(&fleet), ["cp-1", "w-1"]);
}

#[test]
fn with_window_kured_apply_holds_to_kureds_own_reboot_window() {
    // A one-hour window that opens two hours from now (UTC): closed now.
    let hour = (fleetsim::state::now() as u64 / 3600 + 2) % 24;
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kured_with(|k| {
                k.extra_args = vec![
                    format!("--start-time={hour:02}:00"),
                    format!("--end-time={:02}:00", (hour + 1) % 24),
                    "--time-zone=UTC".into(),
                ];
            }),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let run = support::apply(&fleet, &["--yes", "--window", "kured"]).expect_code(75);
    assert_has(
        &run.stderr,
        &[
            "holding each node to Kured's reboot window: ",
            "outside the maintenance window",
        ],
    );
    assert!(drained(&fleet).is_empty(), "nothing was drained");
}

/// Where a successful `kubectl label node NODE LABEL` ran, in the log.
fn labelled(log: &[fleetsim::state::Event], node: &str, label: &str) -> Option<usize> {
    log.iter().position(|e| {
        support::is_ok(e)
            && support::kubectl_words(e).is_some_and(|w| w == ["label", "node", node, label])
    })
}

#[test]
fn kureds_pre_reboot_labels_are_on_the_node_while_it_is_down_and_its_post_labels_after() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .kured_with(|k| {
                k.extra_args = vec![
                    "--pre-reboot-node-labels=kured=rebooting".into(),
                    "--post-reboot-node-labels=kured=done".into(),
                ];
            }),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let run = support::apply(&fleet, &["--yes"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "--pre-reboot-node-labels=kured=rebooting: set on each node before its drain",
            "w-1: labelled kured=rebooting (Kured's --pre-reboot-node-labels)",
            "w-1: labelled kured=done (Kured's --post-reboot-node-labels)",
        ],
    );
    let log = fleet.events().unwrap();
    for node in ["cp-1", "w-1"] {
        let at = |verb: &str| {
            log.iter()
                .position(|e| support::schedulability(e) == Some((verb, node)))
                .unwrap_or_else(|| panic!("no {verb} of {node}"))
        };
        let pre = labelled(&log, node, "kured=rebooting")
            .unwrap_or_else(|| panic!("{node} never got Kured's pre-reboot label"));
        let reboot = log
            .iter()
            .position(|e| support::is_reboot(e) && support::is_ok(e) && e.node == node)
            .unwrap_or_else(|| panic!("{node} was not rebooted"));
        let post = labelled(&log, node, "kured=done")
            .unwrap_or_else(|| panic!("{node} never got Kured's post-reboot label"));
        // As Kured: pre label, drain, reboot (the label on the node while
        // it is down), uncordon, post label.
        assert!(
            pre < at("drain")
                && at("drain") < reboot
                && reboot < at("uncordon")
                && at("uncordon") < post,
            "{node}: pre {pre}, drain {}, reboot {reboot}, uncordon {}, post {post}",
            at("drain"),
            at("uncordon")
        );
    }
    let cluster = fleet.shared().cluster().unwrap();
    for node in ["cp-1", "w-1"] {
        assert_eq!(
            cluster.nodes[node].labels.get("kured").map(String::as_str),
            Some("done"),
            "the API server keeps the post label on {node}"
        );
    }
    let journaled: Vec<String> = support::journal_records(&fleet)
        .iter()
        .filter(|r| {
            r["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("kured-labels"))
        })
        .map(|r| format!("{} {}", r["kind"], r["node"]))
        .collect();
    assert_eq!(
        journaled,
        [
            "\"kured-labels-pre\" \"cp-1\"",
            "\"kured-labels-post\" \"cp-1\"",
            "\"kured-labels-pre\" \"w-1\"",
            "\"kured-labels-post\" \"w-1\"",
        ]
    );
}

#[test]
fn status_shows_a_kured_blocker_active_now() {
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.2")
        .kured_with(|k| k.blocking_pod_selectors = vec!["app=backup".into()]);
    scenario.pods.push(PodSpec {
        namespace: "default".into(),
        name: "backup-29104".into(),
        node: "w-1".into(),
        labels: [("app".to_string(), "backup".to_string())].into(),
        annotations: Default::default(),
        owner: Some("Job/backup".into()),
        phase: "Running".into(),
        image: None,
    });
    let fleet = support::start(scenario);
    let run = support::run(&fleet.inventory(), &["status"]).expect_code(0);
    assert_has(
        &run.stdout,
        &[
            "kured kube-system/kured: blockers active now",
            "w-1: pods backup-29104 (--blocking-pod-selector=app=backup)",
        ],
    );
    assert!(!run.stdout.contains("cp-1: pods"), "{}", run.stdout);
    let json = support::run(&fleet.inventory(), &["status", "-o", "json"]).expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["kured"]["blockers"][0]["node"], "w-1");
    assert_eq!(v["kured"]["blockers"][0]["what"], "pods backup-29104");
}

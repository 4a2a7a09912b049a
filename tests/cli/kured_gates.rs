//! Issue 36, Kured's own gates kept while fleetctl holds Kured's lock,
//! where they need the real thing: Kured's reboot window read from its
//! DaemonSet once its lock is held (`--window kured`), and its
//! `--blocking-pod-selector` read through the real kubectl (the same
//! listing the hold before each drain makes). What the holds decide (a
//! pod holding its node and only it, Kured's alerts, its pre- and
//! post-reboot labels around each reboot) is tested on the fakes
//! (`src/steps/hold_tests.rs`, `src/steps/roll/flow_tests.rs`,
//! docs/rules-on-the-fake.md).

use fleetsim::state::PodSpec;

use super::support::{self, assert_has};

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
fn kureds_blocking_pods_show_in_status_and_its_own_reboot_window_holds_apply() {
    // A one-hour window that opens two hours from now (UTC): closed now.
    let hour = (fleetsim::state::now() as u64 / 3600 + 2) % 24;
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.2")
        .kured_with(|k| {
            k.blocking_pod_selectors = vec!["app=backup".into()];
            k.extra_args = vec![
                format!("--start-time={hour:02}:00"),
                format!("--end-time={:02}:00", (hour + 1) % 24),
                "--time-zone=UTC".into(),
            ];
        });
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

    // The pods Kured's selector matches, listed by the real kubectl on
    // each node, as the hold before each drain lists them.
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

    // `--window kured`: Kured's window, read from its DaemonSet once its
    // lock is held, holds the run (exit 75), nothing drained.
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

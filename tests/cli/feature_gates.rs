//! Issue 23 (part B) against the simulated fleet: a feature gate the target
//! minor removed, set for kube-apiserver in kubeadm-config's
//! ClusterConfiguration `extraArgs`, blocks `plan` before anything changes,
//! naming the gate; `--ignore-check feature-gates` lets it through, and then
//! kubeadm's `upgrade apply` fails and puts the old manifests back, as the
//! real one does, and apply stops with kubeadm's words. The other gates
//! (the kubelet's, kubeadm's own, locked ones) and apply's re-check are
//! proven on pure code (docs/rules-on-the-fake.md).

use std::collections::BTreeMap;

use fleetctl::checks::{CheckName, Verdict};
use fleetctl::plan::Plan;

use super::support::{self, Fleet};

use super::support::pair;

use super::support::run_on as run;

fn plan_saved(fleet: &Fleet) -> bool {
    fleet.dir().join(".fleetctl/plan.yaml").exists()
}

fn plan_json(fleet: &Fleet, args: &[&str]) -> Plan {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let out = run(fleet, &all).expect_code(0);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", out.stdout))
}

fn gates_verdict(plan: &Plan) -> Verdict {
    plan.hops[0]
        .checks
        .iter()
        .find(|c| c.name == CheckName::FeatureGates)
        .expect("the plan has a feature-gates check")
        .verdict
}

fn assert_blocked(fleet: &Fleet, line: &str) {
    assert_blocked_at(fleet, "v1.35", line)
}

fn assert_blocked_at(fleet: &Fleet, target: &str, line: &str) {
    let before = fleet.events().unwrap().len();
    let blocked = run(fleet, &["plan", target]).expect_code(2);
    for text in [
        "BLOCK   feature-gates",
        line,
        "--ignore-check feature-gates",
    ] {
        assert!(
            blocked.stdout.contains(text) || blocked.stderr.contains(text),
            "no `{text}` in\n{}\n{}",
            blocked.stdout,
            blocked.stderr
        );
    }
    assert!(!plan_saved(fleet), "a blocked plan is not saved");
    let after = fleet.events().unwrap();
    assert!(
        after[before..]
            .iter()
            .all(|e| !e.argv[0].starts_with("kubeadm") && e.argv[0] != "systemd-sysupdate"),
        "plan changed something:\n{}",
        support::describe(&after[before..])
    );
}

#[test]
fn a_kube_apiserver_gate_the_target_removed_in_extra_args_blocks_and_ignored_kubeadm_rolls_back() {
    let mut scenario = pair();
    scenario.control_plane_args = BTreeMap::from([(
        "apiServer".to_string(),
        BTreeMap::from([(
            "feature-gates".to_string(),
            "LoadBalancerIPMode=true".to_string(),
        )]),
    )]);
    let fleet = support::start(scenario);
    assert_blocked(
        &fleet,
        "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration apiServer.extraArgs feature-gates): \
         feature gate LoadBalancerIPMode (kube-apiserver), removed in v1.35",
    );

    // Past the check on purpose, the hop fails where the check said it
    // would: kubeadm's new kube-apiserver never comes up, and kubeadm puts
    // the old manifests back.
    let ignored = plan_json(&fleet, &["v1.35", "--ignore-check", "feature-gates"]);
    assert_eq!(gates_verdict(&ignored), Verdict::Ignored);
    let failed = run(&fleet, &["apply", "--yes"]);
    assert_ne!(failed.code, Some(0), "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains("kubeadm has tried to recover everything into the earlier state"),
        "{}",
        failed.stderr
    );
    let cluster = fleet.cluster().unwrap();
    assert_eq!(cluster.version, "v1.34.2");
    assert_eq!(
        cluster.nodes["cp-1"].control_plane_version.as_deref(),
        Some("v1.34.2")
    );
}

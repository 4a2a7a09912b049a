//! Issue 23 (part B) against the simulated fleet: a feature gate the target
//! minor removed, set for the kubelet in the kubelet-config ConfigMap or for
//! kube-apiserver in kubeadm-config's ClusterConfiguration `extraArgs`,
//! blocks `plan` before anything changes, naming the gate; `--ignore-check
//! feature-gates` lets it through, and then the control plane's gate makes
//! kubeadm's `upgrade apply` fail and put the old manifests back, as the
//! real one does.

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
fn a_kubelet_gate_the_target_removed_in_the_kubelet_config_configmap_blocks_plan() {
    // kubeadm's kubelet-config ConfigMap with a gate v1.35 removed: the
    // hop's kubeadm writes it into every node's config.yaml.
    let mut scenario = pair();
    scenario.kubelet_config = Some("featureGates:\n  SizeMemoryBackedVolumes: true\n".into());
    let fleet = support::start(scenario);
    assert_blocked(
        &fleet,
        "w-1: the kube-system/kubelet-config ConfigMap (featureGates): feature gate SizeMemoryBackedVolumes (kubelet), removed in v1.35",
    );
    let ignored = plan_json(&fleet, &["v1.35", "--ignore-check", "feature-gates"]);
    assert_eq!(ignored.ignored_checks, [CheckName::FeatureGates]);
    assert_eq!(gates_verdict(&ignored), Verdict::Ignored);
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

#[test]
fn apply_checks_again_and_refuses_a_gate_set_after_the_plan() {
    let fleet = support::start(pair());
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    // After the plan, someone adds a gate v1.35 removed to the scheduler's
    // extraArgs in kubeadm-config.
    fleet
        .shared()
        .update_cluster(|c| {
            c.control_plane_args.insert(
                "scheduler".into(),
                BTreeMap::from([(
                    "feature-gates".to_string(),
                    "ComponentSLIs=true".to_string(),
                )]),
            );
            c.resource_version += 1;
            Ok(())
        })
        .unwrap();
    let before = fleet.events().unwrap().len();
    let refused = run(&fleet, &["apply", "--yes"]).expect_code(2);
    assert!(
        refused.stderr.contains("the checks block this plan")
            && refused.stderr.contains("feature-gates"),
        "{}",
        refused.stderr
    );
    let after = fleet.events().unwrap();
    assert!(
        after[before..].iter().all(support::is_lock),
        "a blocked apply touches nothing but its lock:\n{}",
        support::describe(&after[before..])
    );
    assert_eq!(fleet.cluster().unwrap().version, "v1.34.2");
}

#[test]
fn a_kubeadm_gate_the_target_kubeadm_removed_blocks_plan_and_ignored_kubeadm_refuses_it() {
    // kubeadm-config's own `featureGates` (not a component's extraArgs):
    // NodeLocalCRISocket, which kubeadm v1.37 removed
    // (kubernetes/kubernetes#138645). kubeadm's upgrade refuses a gate it
    // does not know before it changes anything.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.36.2"),
    );
    fleet
        .shared()
        .update_cluster(|c| {
            c.kubeadm_feature_gates
                .insert("NodeLocalCRISocket".into(), true);
            c.resource_version += 1;
            Ok(())
        })
        .unwrap();
    let before = fleet.events().unwrap().len();
    let blocked = run(&fleet, &["plan", "v1.37"]).expect_code(2);
    for text in [
        "BLOCK   feature-gates",
        "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration featureGates): kubeadm feature \
         gate NodeLocalCRISocket, removed from kubeadm in v1.37",
        "Unknown feature gate flag: NodeLocalCRISocket",
        "`kubectl -n kube-system edit cm kubeadm-config`",
    ] {
        assert!(
            blocked.stdout.contains(text) || blocked.stderr.contains(text),
            "no `{text}` in\n{}\n{}",
            blocked.stdout,
            blocked.stderr
        );
    }
    assert!(!plan_saved(&fleet), "a blocked plan is not saved");
    let after = fleet.events().unwrap();
    assert!(
        after[before..]
            .iter()
            .all(|e| !e.argv[0].starts_with("kubeadm") && e.argv[0] != "systemd-sysupdate"),
        "plan changed something:\n{}",
        support::describe(&after[before..])
    );

    // Past the check on purpose, the simulated kubeadm refuses as the real
    // one does, and the control plane stays where it was.
    let ignored = plan_json(&fleet, &["v1.37", "--ignore-check", "feature-gates"]);
    assert_eq!(gates_verdict(&ignored), Verdict::Ignored);
    let failed = run(&fleet, &["apply", "--yes"]);
    assert_ne!(failed.code, Some(0), "{}", failed.stderr);
    assert!(
        failed
            .stderr
            .contains("Unable to upgrade a cluster using deprecated feature-gate flags"),
        "{}",
        failed.stderr
    );
    let cluster = fleet.cluster().unwrap();
    assert_eq!(cluster.version, "v1.36.2");
    assert_eq!(
        cluster.nodes["cp-1"].control_plane_version.as_deref(),
        Some("v1.36.2")
    );
}

fn api_server_gates(scenario: &mut fleetsim::scenario::Scenario, gates: &str) {
    scenario.control_plane_args = BTreeMap::from([(
        "apiServer".to_string(),
        BTreeMap::from([("feature-gates".to_string(), gates.to_string())]),
    )]);
}

#[test]
fn any_volume_data_source_in_extra_args_blocks_the_hop_to_1_37() {
    // Removed in v1.37 (kubernetes/kubernetes#135336), though its website
    // page still shows it stable with no end.
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.36.2");
    api_server_gates(&mut scenario, "AnyVolumeDataSource=true");
    let fleet = support::start(scenario);
    assert_blocked_at(
        &fleet,
        "v1.37",
        "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration apiServer.extraArgs feature-gates): \
         feature gate AnyVolumeDataSource (kube-apiserver), removed in v1.37",
    );
}

#[test]
fn a_gate_set_against_the_value_the_target_locks_it_to_blocks_and_ignored_kubeadm_rolls_back() {
    // VolumeAttributesClass: GA in v1.34, locked on from v1.36; a v1.35
    // cluster may still turn it off, a v1.36 kube-apiserver refuses that.
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.35.1");
    api_server_gates(&mut scenario, "VolumeAttributesClass=false");
    let fleet = support::start(scenario);
    assert_blocked_at(
        &fleet,
        "v1.36",
        "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration apiServer.extraArgs feature-gates): \
         feature gate VolumeAttributesClass=false (kube-apiserver), locked to true from v1.36 \
         (\"cannot set feature gate VolumeAttributesClass to false, feature is locked to true\")",
    );
    // Past the check, the simulated kube-apiserver refuses as
    // component-base does and kubeadm puts the old manifests back.
    let ignored = plan_json(&fleet, &["v1.36", "--ignore-check", "feature-gates"]);
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
    assert_eq!(
        cluster.nodes["cp-1"].control_plane_version.as_deref(),
        Some("v1.35.1")
    );
}

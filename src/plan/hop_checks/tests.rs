//! Tests of each hop's checks: their own file, so the checks' code reads as one
//! piece under the 500-line bound.

use super::*;
use crate::checks::{parse_check_expiration, parse_deprecated_apis, parse_pdbs, parse_pods};
use crate::plan::{HopKind, Phase, PhaseKind, Step};
use crate::version::Version;

fn fixture(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
    std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
}

fn hop(minor: &str, rolled: &[&str]) -> Hop {
    let minor: Minor = minor.parse().unwrap();
    Hop {
        kind: HopKind::Upgrade,
        minor,
        version: Some(minor.with_patch(3)),
        kubeadm: true,
        sha256: None,
        checks: vec![],
        skip_system_verification: vec![],
        phases: vec![Phase {
            kind: PhaseKind::WorkerReboots,
            steps: rolled.iter().map(|n| Step::new(n, Action::Roll)).collect(),
        }],
    }
}

fn inputs() -> Inputs {
    Inputs {
        deprecated_apis: Ok(vec![crate::checks::InstanceMetrics {
            instance: "cp-1 (10.0.0.1:6443)".into(),
            node: "cp-1".into(),
            apis: parse_deprecated_apis(&fixture("apiserver-metrics.txt"))
                .map_err(|e| e.to_string()),
        }]),
        budgets: parse_pdbs(&fixture("kubectl-get-pdb.json")).map_err(|e| e.to_string()),
        pods: parse_pods(&fixture("kubectl-get-pods.json")).map_err(|e| e.to_string()),
        certificates: parse_check_expiration(&fixture("kubeadm-certs-check-expiration.txt"))
            .map_err(|e| e.to_string()),
        kubelet_files: vec![NodeKubeletFiles {
            node: "w-9".into(),
            files: [(
                "/etc/sysconfig/kubelet".to_string(),
                "KUBELET_EXTRA_ARGS=--pod-infra-container-image=registry.k8s.io/pause:3.10\n"
                    .to_string(),
            )]
            .into(),
            ..Default::default()
        }],
        hub_images: Some(vec![HubImage {
            version: Version::new(1, 35, 3),
            arch: "x86-64".into(),
        }]),
        arches: vec![("w-9".into(), "x86_64".into())],
        cgroups: vec![NodeCgroup {
            node: "w-9".into(),
            v2: Some(true),
            kubelet_config: None,
            instance_config: None,
        }],
        cluster_configs: Default::default(),
    }
}

fn verdict(checks: &[Check], name: CheckName) -> Verdict {
    checks.iter().find(|c| c.name == name).unwrap().verdict
}

#[test]
fn every_check_once_in_a_stable_order() {
    let checks = evaluate(
        &inputs(),
        &hop("v1.35", &["w-9"]),
        "v1.37".parse().unwrap(),
        &[],
    );
    let names: Vec<CheckName> = checks.iter().map(|c| c.name).collect();
    assert_eq!(names, CheckName::ALL);
}

#[test]
fn a_node_the_hop_does_not_restart_is_not_judged_on_its_flags() {
    let target = "v1.37".parse().unwrap();
    let with = evaluate(&inputs(), &hop("v1.35", &["w-9"]), target, &[]);
    assert_eq!(verdict(&with, CheckName::KubeletFlags), Verdict::Block);
    assert!(
        blocking(&with)
            .iter()
            .any(|c| c.details[0].starts_with("w-9:"))
    );
    let without = evaluate(&inputs(), &hop("v1.35", &["w-1"]), target, &[]);
    assert_eq!(verdict(&without, CheckName::KubeletFlags), Verdict::Pass);
}

#[test]
fn an_ignored_block_lets_the_hop_go() {
    let target = "v1.37".parse().unwrap();
    let checks = evaluate(
        &inputs(),
        &hop("v1.35", &["w-9"]),
        target,
        &[CheckName::KubeletFlags],
    );
    assert_eq!(verdict(&checks, CheckName::KubeletFlags), Verdict::Ignored);
    assert!(
        blocking(&checks)
            .iter()
            .all(|c| c.name != CheckName::KubeletFlags)
    );
}

#[test]
fn an_unreadable_source_warns_with_its_error() {
    let mut inputs = inputs();
    inputs.certificates = Err("kubeadm: command not found".into());
    inputs.pods = Err("Error from server (Forbidden)".into());
    let checks = evaluate(
        &inputs,
        &hop("v1.35", &["w-9"]),
        "v1.35".parse().unwrap(),
        &[],
    );
    for name in [CheckName::Certificates, CheckName::Pdb] {
        let check = checks.iter().find(|c| c.name == name).unwrap();
        assert_eq!(check.verdict, Verdict::Warn, "{check:?}");
        assert!(check.summary.contains("could not read"), "{check:?}");
    }
}

#[test]
fn the_hub_is_judged_for_the_architectures_of_drained_nodes() {
    let mut inputs = inputs();
    inputs.arches.push(("w-arm".into(), "aarch64".into()));
    let target = "v1.35".parse().unwrap();
    let x86 = evaluate(&inputs, &hop("v1.35", &["w-9"]), target, &[]);
    assert_eq!(verdict(&x86, CheckName::Hub), Verdict::Pass);
    let arm = evaluate(&inputs, &hop("v1.35", &["w-9", "w-arm"]), target, &[]);
    assert_eq!(verdict(&arm, CheckName::Hub), Verdict::Block);
}

#[test]
fn a_flag_an_earlier_hop_strips_does_not_block_the_later_ones() {
    let flags = "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";
    let mut inputs = inputs();
    inputs.kubelet_files = vec![NodeKubeletFiles {
        node: "w-9".into(),
        files: [(
            crate::checks::KUBEADM_FLAGS_ENV.to_string(),
            flags.to_string(),
        )]
        .into(),
        ..Default::default()
    }];
    let with_kubeadm = |minor: &str| {
        let mut h = hop(minor, &["w-9"]);
        h.phases.insert(
            0,
            Phase {
                kind: PhaseKind::WorkerPreparation,
                steps: vec![Step::new(
                    "w-9",
                    Action::UpgradeNode {
                        minor: minor.parse().unwrap(),
                        version: None,
                    },
                )],
            },
        );
        h
    };
    let target = "v1.37".parse().unwrap();
    let hops = [
        with_kubeadm("v1.35"),
        with_kubeadm("v1.36"),
        with_kubeadm("v1.37"),
    ];
    let all = evaluate_all(&inputs, &hops, target, &[]);
    let flags: Vec<Verdict> = all
        .iter()
        .map(|checks| verdict(checks, CheckName::KubeletFlags))
        .collect();
    assert_eq!(flags, [Verdict::Warn, Verdict::Pass, Verdict::Pass]);
    // Without v1.35's kubeadm on the node, v1.36 would start with it.
    let skipped = [hop("v1.35", &["w-9"]), with_kubeadm("v1.36")];
    let all = evaluate_all(&inputs, &skipped, target, &[]);
    assert_eq!(verdict(&all[1], CheckName::KubeletFlags), Verdict::Block);
}

//! Tests of the projection of a node's files through the hops: their own file,
//! beside the other tests, so the checks' code stays under the 500-line bound.

use super::*;
use crate::checks::{KUBEADM_FLAGS_ENV, KubeletConfigDoc};
use crate::plan::{HopKind, Phase, PhaseKind, Step};

fn kubeadm_hop(minor: &str) -> Hop {
    let m: Minor = minor.parse().unwrap();
    Hop {
        kind: HopKind::Upgrade,
        minor: m,
        version: Some(m.with_patch(2)),
        kubeadm: true,
        sha256: None,
        checks: vec![],
        skip_system_verification: vec![],
        phases: vec![Phase {
            kind: PhaseKind::WorkerPreparation,
            steps: vec![Step::new(
                "w-1",
                Action::UpgradeNode {
                    minor: m,
                    version: None,
                },
            )],
        }],
    }
}

#[test]
fn a_later_hop_sees_the_instance_config_an_earlier_kubeadm_wrote() {
    let cm = "kind: KubeletConfiguration\ncgroupDriver: systemd\n";
    let inputs = Inputs {
        deprecated_apis: Ok(vec![]),
        budgets: Ok(vec![]),
        pods: Ok(vec![]),
        certificates: Ok(vec![]),
        kubelet_files: vec![NodeKubeletFiles {
            node: "w-1".into(),
            files: [(
                KUBEADM_FLAGS_ENV.to_string(),
                "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///x.sock\"\n"
                    .to_string(),
            )]
            .into(),
            ..Default::default()
        }],
        hub_images: None,
        arches: vec![],
        cgroups: vec![NodeCgroup {
            node: "w-1".into(),
            v2: Some(true),
            kubelet_config: Some(cm.into()),
            instance_config: None,
        }],
        cluster_configs: crate::checks::ClusterConfigs {
            kubelet: Ok(Some(KubeletConfigDoc::parse(cm).unwrap())),
            cluster: Ok(None),
        },
    };
    let target = "v1.37".parse().unwrap();
    let verdict = |checks: &[Check]| {
        checks
            .iter()
            .find(|c| c.name == CheckName::KubeletConfig)
            .unwrap()
            .clone()
    };
    // Alone, v1.37's kubeadm would fail: no instance-config.yaml.
    let alone = evaluate(&inputs, &kubeadm_hop("v1.37"), target, &[]);
    assert_eq!(verdict(&alone).verdict, Verdict::Block, "{alone:?}");
    // After v1.36's kubeadm created it, v1.37's finds it.
    let all = evaluate_all(
        &inputs,
        &[kubeadm_hop("v1.36"), kubeadm_hop("v1.37")],
        target,
        &[],
    );
    for checks in &all {
        let c = verdict(checks);
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
    }
}

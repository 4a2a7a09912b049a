use super::*;
use crate::checks::flags::{NodeKubeletFiles, kubelet_flags};
use crate::checks::{KubeletConfigDoc, Predicted, Unforeseen};

fn m(minor: u64) -> Minor {
    Minor::new(1, minor)
}

/// A node whose kubelet starts with `current` (no kubeadm in the hop), or
/// with what the hop's kubeadm writes from the ConfigMap (`predicted`).
fn view(
    node: &str,
    current: Option<&str>,
    predicted: Option<&str>,
    files: &[(&str, &str)],
) -> KubeletView {
    let files = NodeKubeletFiles {
        node: node.into(),
        files: files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect(),
        ..Default::default()
    };
    KubeletView {
        node: node.into(),
        v2: Some(true),
        current: current.map(str::to_string),
        predicted: predicted.map(|doc| {
            Ok(Predicted {
                config: KubeletConfigDoc::parse(doc).unwrap(),
                instance: None,
                flags_env: None,
            })
        }),
        flags: files
            .files
            .iter()
            .flat_map(|(p, c)| kubelet_flags(p, c))
            .collect(),
    }
}

fn check(
    kubelets: &[KubeletView],
    cluster: &Result<Option<ClusterConfiguration>, String>,
    hop: u64,
    restarted: &[&str],
    control_plane: bool,
) -> Check {
    let restarted: Vec<String> = restarted.iter().map(|s| s.to_string()).collect();
    check_feature_gates(
        GateSources { kubelets, cluster },
        m(hop),
        &restarted,
        control_plane,
    )
}

const GATED: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  SizeMemoryBackedVolumes: true\n  NodeSwap: true\n";

#[test]
fn a_gate_list_is_split_as_component_base_splits_it() {
    assert_eq!(
        parse_gate_list(" A=true, B=false,,C"),
        ["A", "B", "C"].map(String::from)
    );
    assert!(parse_gate_list("").is_empty());
}

#[test]
fn the_configmap_kubeadm_writes_blocks_a_hop_to_the_minor_that_removed_its_gate() {
    let kubelets = [view(
        "w-1",
        Some("kind: KubeletConfiguration\n"),
        Some(GATED),
        &[],
    )];
    let none = Ok(None);
    assert_eq!(
        check(&kubelets, &none, 34, &["w-1"], true).verdict,
        Verdict::Pass
    );
    let blocked = check(&kubelets, &none, 35, &["w-1"], true);
    assert_eq!(blocked.verdict, Verdict::Block, "{blocked:?}");
    assert_eq!(
        blocked.details,
        [
            "w-1: the kube-system/kubelet-config ConfigMap (featureGates): feature gate SizeMemoryBackedVolumes (kubelet), removed in v1.35"
        ]
    );
    // A node the hop does not restart is not judged.
    assert_eq!(
        check(&kubelets, &none, 35, &[], false).verdict,
        Verdict::Pass
    );
}

#[test]
fn a_node_config_and_its_flag_files_name_the_node_and_the_file() {
    let kubelets = [
        view(
            "w-1",
            Some("featureGates:\n  PodDisruptionConditions: true\n"),
            None,
            &[(
                "/etc/sysconfig/kubelet",
                "KUBELET_EXTRA_ARGS=\"--feature-gates=MemoryManager=true,NodeSwap=true --v=2\"\n",
            )],
        ),
        view(
            "w-2",
            Some("featureGates:\n  PodDisruptionConditions: true\n"),
            None,
            &[],
        ),
    ];
    let c = check(&kubelets, &Ok(None), 36, &["w-1"], false);
    assert_eq!(c.verdict, Verdict::Block);
    assert_eq!(
        c.details,
        [
            "w-1: /var/lib/kubelet/config.yaml (featureGates): feature gate PodDisruptionConditions (kubelet), removed in v1.34",
            "w-1: /etc/sysconfig/kubelet (KUBELET_EXTRA_ARGS --feature-gates): feature gate MemoryManager (kubelet), removed in v1.36",
        ],
        "w-2 is not restarted by this hop"
    );
}

#[test]
fn control_plane_extra_args_block_in_both_kubeadm_api_forms() {
    let v1beta3 = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    feature-gates: LoadBalancerIPMode=true\n";
    let v1beta4 = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer: {}\ncontrollerManager:\n  extraArgs:\n  - name: bind-address\n    value: 0.0.0.0\n  - name: feature-gates\n    value: ComponentSLIs=true\nscheduler: {}\n";
    for (yaml, line) in [
        (
            v1beta3,
            "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration apiServer.extraArgs feature-gates): feature gate LoadBalancerIPMode (kube-apiserver), removed in v1.35",
        ),
        (
            v1beta4,
            "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration controllerManager.extraArgs feature-gates): feature gate ComponentSLIs (kube-controller-manager), removed in v1.35",
        ),
    ] {
        let cluster = Ok(Some(ClusterConfiguration::parse(yaml).unwrap()));
        assert_eq!(
            check(&[], &cluster, 34, &["w-1"], true).verdict,
            Verdict::Pass
        );
        let c = check(&[], &cluster, 35, &["w-1"], true);
        assert_eq!(c.verdict, Verdict::Block, "{c:?}");
        assert_eq!(c.details, [line]);
        // A hop that runs no kubeadm on a control plane renders no new pods.
        assert_eq!(
            check(&[], &cluster, 35, &["w-1"], false).verdict,
            Verdict::Pass
        );
    }
}

#[test]
fn an_unreadable_source_warns_and_never_passes_silently() {
    let mut w1 = view("w-1", None, None, &[]);
    w1.predicted = Some(Err(Unforeseen::Unread(
        "kube-system/kubelet-config: Error from server (Forbidden)".into(),
    )));
    let cluster = Err("cp-1: the ClusterConfiguration is not YAML".into());
    let c = check(&[w1], &cluster, 35, &["w-1"], true);
    assert_eq!(c.verdict, Verdict::Warn, "{c:?}");
    assert_eq!(c.details.len(), 2, "{c:?}");
    assert!(c.details[0].contains("Forbidden"), "{c:?}");
}

#[test]
fn a_gate_set_against_its_lock_blocks_the_minor_that_locks_it_and_its_value_passes() {
    assert_eq!(
        parse_gate_pairs("A=true, B=False,C,D=maybe"),
        [
            ("A".to_string(), Some(true)),
            ("B".to_string(), Some(false)),
            ("C".to_string(), None),
            ("D".to_string(), None)
        ]
    );
    let off = "kind: KubeletConfiguration\nfeatureGates:\n  VolumeAttributesClass: false\n";
    let kubelets = [view("w-1", None, Some(off), &[])];
    assert_eq!(
        check(&kubelets, &Ok(None), 35, &["w-1"], false).verdict,
        Verdict::Pass
    );
    let c = check(&kubelets, &Ok(None), 36, &["w-1"], false);
    assert_eq!(c.verdict, Verdict::Block);
    assert!(
        c.details[0].contains(
            "feature gate VolumeAttributesClass=false (kubelet), locked to true from v1.36"
        ),
        "{c:?}"
    );
    let on = "kind: KubeletConfiguration\nfeatureGates:\n  VolumeAttributesClass: true\n";
    let kubelets = [view("w-1", None, Some(on), &[])];
    assert_eq!(
        check(&kubelets, &Ok(None), 36, &["w-1"], false).verdict,
        Verdict::Pass
    );
}

/// tests/cli/feature_gates.rs proved these on fleets: in kubeadm-config, a
/// kube-apiserver gate the target removed (AnyVolumeDataSource, v1.37,
/// kubernetes/kubernetes#135336) or locked (VolumeAttributesClass=false,
/// v1.36), and kubeadm's own gate kubeadm v1.37 removed
/// (NodeLocalCRISocket, #138645), each block the hop that runs kubeadm on
/// a control plane, naming where it is set.
#[test]
fn kubeadm_config_gates_the_target_removed_or_locked_or_kubeadm_refuses_block_naming_them() {
    let at = "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration apiServer.extraArgs \
              feature-gates): ";
    for (gates, hop, line) in [
        (
            "AnyVolumeDataSource=true",
            37,
            "feature gate AnyVolumeDataSource (kube-apiserver), removed in v1.37",
        ),
        (
            "VolumeAttributesClass=false",
            36,
            "feature gate VolumeAttributesClass=false (kube-apiserver), locked to true from v1.36",
        ),
    ] {
        let yaml = format!(
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  \
             extraArgs:\n    feature-gates: {gates}\n"
        );
        let cluster = Ok(Some(ClusterConfiguration::parse(&yaml).unwrap()));
        assert_eq!(
            check(&[], &cluster, hop - 1, &[], true).verdict,
            Verdict::Pass,
            "{gates}"
        );
        let c = check(&[], &cluster, hop, &[], true);
        assert_eq!(c.verdict, Verdict::Block, "{c:?}");
        assert!(c.details[0].starts_with(&format!("{at}{line}")), "{c:?}");
    }
    let yaml = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nfeatureGates:\n  \
                NodeLocalCRISocket: true\n";
    let cluster = Ok(Some(ClusterConfiguration::parse(yaml).unwrap()));
    assert_eq!(check(&[], &cluster, 36, &[], true).verdict, Verdict::Pass);
    let c = check(&[], &cluster, 37, &[], true);
    assert_eq!(c.verdict, Verdict::Block, "{c:?}");
    assert!(
        c.details.iter().any(|d| d.starts_with(
            "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration featureGates): \
             kubeadm feature gate NodeLocalCRISocket, removed from kubeadm in v1.37"
        ) && d.contains("Unknown feature gate flag: NodeLocalCRISocket")),
        "{c:?}"
    );
}

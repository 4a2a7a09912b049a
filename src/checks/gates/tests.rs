use super::*;

fn m(minor: u64) -> Minor {
    Minor::new(1, minor)
}

fn configmap(key: &str, yaml: &str) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {key: yaml}}).to_string()
}

struct Fixture {
    kubelet_configmap: Result<Option<String>, String>,
    kubeadm_config: Result<String, String>,
    node_configs: Vec<(String, Option<String>)>,
    kubelet_files: Vec<NodeKubeletFiles>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            kubelet_configmap: Ok(None),
            kubeadm_config: Ok(configmap(
                "ClusterConfiguration",
                "kind: ClusterConfiguration\n",
            )),
            node_configs: vec![("w-1".into(), Some("kind: KubeletConfiguration\n".into()))],
            kubelet_files: Vec::new(),
        }
    }

    fn check(&self, hop: u64, restarted: &[&str], control_plane: bool) -> Check {
        let restarted: Vec<String> = restarted.iter().map(|s| s.to_string()).collect();
        check_feature_gates(
            GateSources {
                kubelet_configmap: &self.kubelet_configmap,
                kubeadm_config: &self.kubeadm_config,
                node_configs: &self.node_configs,
                kubelet_files: &self.kubelet_files,
            },
            m(hop),
            &restarted,
            control_plane,
        )
    }
}

#[test]
fn a_gate_list_is_split_as_component_base_splits_it() {
    assert_eq!(
        parse_gate_list(" A=true, B=false,,C"),
        ["A", "B", "C"].map(String::from)
    );
    assert!(parse_gate_list("").is_empty());
}

#[test]
fn the_kubelet_configmap_blocks_a_hop_to_the_minor_that_removed_its_gate() {
    let mut f = Fixture::new();
    f.kubelet_configmap = Ok(Some(configmap(
        "kubelet",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  SizeMemoryBackedVolumes: true\n  NodeSwap: true\n",
    )));
    assert_eq!(f.check(34, &["w-1"], true).verdict, Verdict::Pass);
    let blocked = f.check(35, &["w-1"], true);
    assert_eq!(blocked.verdict, Verdict::Block, "{blocked:?}");
    assert_eq!(
        blocked.details,
        [
            "ConfigMap kube-system/kubelet-config (featureGates): feature gate SizeMemoryBackedVolumes (kubelet), removed in v1.35"
        ]
    );
    // A hop that restarts no kubelet does not judge the kubelets' gates.
    assert_eq!(f.check(35, &[], false).verdict, Verdict::Pass);
}

#[test]
fn a_node_config_and_its_flag_files_name_the_node_and_the_file() {
    let mut f = Fixture::new();
    f.node_configs = vec![
        (
            "w-1".into(),
            Some("featureGates:\n  PodDisruptionConditions: true\n".into()),
        ),
        (
            "w-2".into(),
            Some("featureGates:\n  PodDisruptionConditions: true\n".into()),
        ),
    ];
    f.kubelet_files = vec![NodeKubeletFiles {
        node: "w-1".into(),
        files: [(
            "/etc/sysconfig/kubelet".to_string(),
            "KUBELET_EXTRA_ARGS=\"--feature-gates=MemoryManager=true,NodeSwap=true --v=2\"\n"
                .to_string(),
        )]
        .into(),
        ..Default::default()
    }];
    let c = f.check(36, &["w-1"], false);
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
            "ConfigMap kube-system/kubeadm-config (ClusterConfiguration apiServer.extraArgs feature-gates): feature gate LoadBalancerIPMode (kube-apiserver), removed in v1.35",
        ),
        (
            v1beta4,
            "ConfigMap kube-system/kubeadm-config (ClusterConfiguration controllerManager.extraArgs feature-gates): feature gate ComponentSLIs (kube-controller-manager), removed in v1.35",
        ),
    ] {
        let mut f = Fixture::new();
        f.kubeadm_config = Ok(configmap("ClusterConfiguration", yaml));
        assert_eq!(f.check(34, &["w-1"], true).verdict, Verdict::Pass);
        let c = f.check(35, &["w-1"], true);
        assert_eq!(c.verdict, Verdict::Block, "{c:?}");
        assert_eq!(c.details, [line]);
        // A hop that runs no kubeadm on a control plane renders no new pods.
        assert_eq!(f.check(35, &["w-1"], false).verdict, Verdict::Pass);
    }
}

#[test]
fn an_unreadable_source_warns_and_never_passes_silently() {
    let mut f = Fixture::new();
    f.kubelet_configmap = Err("cp-1: Error from server (Forbidden)".into());
    f.kubeadm_config = Ok("not json".into());
    let c = f.check(35, &["w-1"], true);
    assert_eq!(c.verdict, Verdict::Warn, "{c:?}");
    assert_eq!(c.details.len(), 2, "{c:?}");
    assert!(c.details[0].contains("Forbidden"), "{c:?}");
}

#[test]
fn a_config_without_gates_or_empty_has_none() {
    assert_eq!(kubelet_config_gates(""), Ok(vec![]));
    assert_eq!(
        kubelet_config_gates("kind: KubeletConfiguration\n"),
        Ok(vec![])
    );
    assert!(kubelet_config_gates("featureGates: [1, 2]\n").is_err());
}

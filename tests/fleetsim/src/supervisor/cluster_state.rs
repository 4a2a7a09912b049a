//! The cluster as the API server first describes it (`cluster.json`), from
//! the scenario: the nodes and their versions, kubeadm's ConfigMaps (the
//! kubelet-config document, the ClusterConfiguration's version, etcd and
//! control-plane `extraArgs`), Kured, workloads, budgets and certificates.

use super::*;

pub(super) fn init_cluster(fleet: &FleetDir, scenario: &Scenario, subnet: &Subnet) -> Result<()> {
    fs::create_dir_all(fleet.cluster()).context("creating the cluster directory")?;
    let version = scenario.cluster_version()?.to_string();
    let mut nodes = std::collections::BTreeMap::new();
    for (i, spec) in scenario.nodes.iter().enumerate() {
        let cp = spec.role == Role::ControlPlane;
        nodes.insert(
            spec.name.clone(),
            ClusterNode {
                role: spec.role,
                up: false,
                booted_at: 0.0,
                kubelet_version: scenario.running(spec)?.to_string(),
                unschedulable: false,
                control_plane_version: cp.then(|| version.clone()),
                os: String::new(),
                boot_id: String::new(),
                kubelet: None,
                address: subnet.address(i).to_string(),
                labels: Default::default(),
            },
        );
    }
    let cluster = Cluster {
        version,
        kubelet_delay: scenario.kubelet_delay,
        api_delay: scenario.api_delay,
        api_latency: scenario.api_latency,
        kubeadm_duration: scenario.kubeadm_duration,
        nodes,
        kube_proxy: false,
        kured: scenario.kured.spec().map(|k| k.daemonset()),
        configmaps: [(
            crate::kubelet_files::CONFIGMAP.to_string(),
            crate::state::ConfigMap {
                data: [(
                    crate::kubelet_files::CONFIGMAP_KEY.to_string(),
                    crate::kubelet_files::cluster_config(
                        scenario.kubelet_config.as_deref().unwrap_or_default(),
                    ),
                )]
                .into(),
                resource_version: 1,
                created: now(),
                uid: "kubelet-config".into(),
            },
        )]
        .into(),
        resource_version: 1,
        pods: crate::ceph::with_toolbox(scenario),
        pdbs: scenario.pdbs.clone(),
        deprecated_apis: scenario.deprecated_apis.clone(),
        certs_expire: scenario
            .nodes
            .iter()
            .filter(|n| n.role == Role::ControlPlane)
            .map(|n| (n.name.clone(), now() + scenario.cert_expiry_days * 86_400.0))
            .collect(),
        external_etcd: scenario.external_etcd.clone(),
        ceph: scenario.ceph.clone().map(|mut c| {
            c.created = now();
            c
        }),
        control_plane_args: scenario.control_plane_args.clone(),
        kubeadm_feature_gates: Default::default(),
        etcd_images: scenario
            .nodes
            .iter()
            .filter(|n| n.role == Role::ControlPlane)
            .filter_map(|n| Some((n.name.clone(), scenario.etcd.clone()?)))
            .collect(),
    };
    let shared = Shared::new(fleet.cluster());
    shared.update_cluster(|c| {
        *c = cluster;
        Ok(())
    })?;
    let faults = scenario.faults.clone();
    shared.update_faults(|f| *f = faults)?;
    Ok(())
}

//! The object model as clients read it (the real kubectl's view of it runs
//! against a fleet in `tests/sim/api.rs`).

use crate::state::Role;
use crate::tools::testutil::Fleet;

#[test]
fn kubeadm_config_keeps_proxy_empty_and_carries_extra_args_as_v1beta4_lists() {
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    cp.update_cluster(|c| {
        c.control_plane_args.insert(
            "controllerManager".into(),
            [(
                "feature-gates".to_string(),
                "ComponentSLIs=true".to_string(),
            )]
            .into(),
        );
    });
    let c = cp.cluster();
    let cms = super::configmaps::configmaps_in(&c, Some("kube-system"));
    let v = cms
        .iter()
        .map(super::configmaps::cm_json)
        .find(|v| v["metadata"]["name"] == "kubeadm-config")
        .expect("kubeadm-config in kube-system");
    let text = v["data"]["ClusterConfiguration"].as_str().unwrap();
    assert!(text.starts_with("apiServer: {}\n"), "{text}");
    assert!(text.contains("kubernetesVersion: v1.34.2\n"), "{text}");
    assert!(text.contains("proxy: {}\n"), "{text}");
    assert!(
        text.contains(
            "controllerManager:\n  extraArgs:\n  - name: feature-gates\n    value: \"ComponentSLIs=true\"\n"
        ),
        "{text}"
    );
    assert!(
        !super::configmaps::configmaps_in(&c, Some("default"))
            .iter()
            .map(super::configmaps::cm_json)
            .any(|v| v["metadata"]["name"] == "kubeadm-config"),
        "not in another namespace"
    );
}

#[test]
fn the_etcd_mirror_pod_runs_kubeadms_etcd_image() {
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    let c = cp.cluster();
    let pods = super::pods::all_pods(&c, crate::state::now() + 60.0);
    let etcd = pods
        .iter()
        .find(|p| p.name == "etcd-cp1")
        .expect("etcd-cp1 runs");
    assert_eq!(
        etcd.json["spec"]["containers"][0]["image"],
        "registry.k8s.io/etcd:3.6.5-0"
    );
    assert_eq!(etcd.owner_kind.as_deref(), Some("Node"));
}

/// What the API server watches to bump the resourceVersion when a node's
/// Ready condition changes with the clock (`super::nodes::ready_statuses`):
/// "False" while its kubelet starts, "True" once the kubelet's delay is
/// over, "Unknown" with no kubelet.
#[test]
fn a_nodes_ready_status_follows_its_kubelet_and_the_clock() {
    let fleet = Fleet::new();
    let cp = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
    cp.update_cluster(|c| c.kubelet_delay = 5.0);
    let c = cp.cluster();
    let started = c.nodes["cp1"]
        .kubelet_running()
        .expect("its kubelet runs")
        .started_at;
    assert_eq!(
        super::nodes::ready_statuses(&c, started + 1.0)["cp1"],
        "False"
    );
    assert_eq!(
        super::nodes::ready_statuses(&c, started + 6.0)["cp1"],
        "True"
    );
    cp.update_cluster(|c| {
        if let Some(n) = c.nodes.get_mut("cp1") {
            n.kubelet = None;
        }
    });
    assert_eq!(
        super::nodes::ready_statuses(&cp.cluster(), started + 6.0)["cp1"],
        "Unknown"
    );
}

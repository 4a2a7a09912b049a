//! The checks script run for real against a fake root
//! (`remote::fake_root`): what it prints splits into the probes
//! (`node::parse_check_outputs`) and each probe parses with the checks'
//! own parsers.

use crate::node::{parse_check_outputs, parse_check_outputs_after_cluster};
use crate::remote::fake_root::FakeRoot;
use crate::remote::{CHECKS_AFTER_CLUSTER_SCRIPT, CHECKS_SCRIPT, CLUSTER_SCRIPT};

use super::{parse_check_expiration, parse_deprecated_apis};

const CHECK_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures");

#[test]
fn checks_script_keeps_only_the_gauge_and_reports_each_probe() {
    let fake = FakeRoot::new();
    fake.tool(
        "kubectl",
        &format!(
            r#"case "$*" in
*"get --raw /metrics"*) cat {dir}/apiserver-metrics.txt ;;
*"get pdb -A -o json"*) echo "Error from server (Forbidden): poddisruptionbudgets.policy is forbidden" >&2; exit 1 ;;
*"-n kube-system get configmap kubelet-config kubeadm-config --ignore-not-found -o json"*)
  echo '{{"kind":"List","items":[{{"kind":"ConfigMap","metadata":{{"name":"kubeadm-config"}},"data":{{"ClusterConfiguration":"kind: ClusterConfiguration"}}}}]}}' ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
            dir = CHECK_FIXTURES
        ),
    )
    .tool(
        "kubeadm",
        &format!(
            r#"[ "$*" = "certs check-expiration" ] || exit 2; cat {CHECK_FIXTURES}/kubeadm-certs-check-expiration.txt"#
        ),
    );
    let out = parse_check_outputs(&fake.run(CHECKS_SCRIPT)).unwrap();
    let metrics = out.metrics.unwrap();
    assert!(
        metrics
            .lines()
            .all(|l| l.starts_with("apiserver_requested_deprecated_apis{")
                || l.starts_with("process_start_time_seconds ")),
        "{metrics}"
    );
    let apis = parse_deprecated_apis(&metrics).unwrap();
    assert_eq!(apis.len(), 2, "{apis:?}");
    assert!(out.pdbs.unwrap_err().contains("(Forbidden)"));
    let certs = parse_check_expiration(&out.certs.unwrap()).unwrap();
    assert!(!certs.is_empty());
    assert_eq!(out.kubelet_configmap, Ok(None), "NotFound is no ConfigMap");
    assert!(
        out.kubeadm_configmap
            .unwrap()
            .is_some_and(|c| c.contains("ClusterConfiguration"))
    );
}

/// Right after the cluster script (a plan, apply's re-plan), the checks
/// script asks the API server only for what that script did not read: the
/// `/metrics` gauge and the budgets. The nodes, kube-system's
/// kube-apiserver pods and both ConfigMaps come from the cluster script's
/// output, and every check reads the same from them as from the whole
/// checks script's own reads.
#[test]
fn after_the_cluster_script_the_checks_ask_only_what_it_did_not_read() {
    let fake = FakeRoot::new();
    let log = fake.root().join("kubectl.log");
    let control_plane = r#""labels":{"node-role.kubernetes.io/control-plane":""}"#;
    let cp_1 = format!(
        r#"{{"metadata":{{"name":"cp-1",{control_plane}}},"status":{{"addresses":[{{"type":"InternalIP","address":"10.0.0.1"}}]}}}}"#
    );
    let w_1 = r#"{"metadata":{"name":"w-1"},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.9"}]}}"#;
    let apiserver = r#"{"metadata":{"name":"kube-apiserver-cp-1","namespace":"kube-system","labels":{"component":"kube-apiserver"},"annotations":{"kubernetes.io/config.mirror":"x"},"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"cp-1","uid":"u","controller":true}]},"spec":{"nodeName":"cp-1","containers":[{"name":"kube-apiserver","image":"registry.k8s.io/kube-apiserver:v1.36.4","command":["kube-apiserver","--advertise-address=10.0.0.1"]}]}}"#;
    let coredns = r#"{"metadata":{"name":"coredns-1","namespace":"kube-system","labels":{"k8s-app":"kube-dns"}},"spec":{"nodeName":"w-1"}}"#;
    let configmaps = r#"{"kind":"ConfigMap","metadata":{"name":"kubeadm-config"},"data":{"ClusterConfiguration":"kind: ClusterConfiguration\nkubernetesVersion: v1.36.4\n"}},{"kind":"ConfigMap","metadata":{"name":"kubelet-config"},"data":{"kubelet":"kind: KubeletConfiguration\n"}}"#;
    let list = |items: &[&str]| format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(","));
    fake.file("/answers/all-nodes", &list(&[&cp_1, w_1]))
        .file("/answers/control-planes", &list(&[&cp_1]))
        .file("/answers/all-pods", &list(&[apiserver, coredns]))
        .file("/answers/apiservers", &list(&[apiserver]))
        .file("/answers/configmaps", &list(&[configmaps]))
        .tool(
            "kubectl",
            &format!(
                r#"echo "$*" >> {log}
case "$*" in
*"get --raw /metrics"*) cat {dir}/apiserver-metrics.txt ;;
*"get pdb -A -o json"*) cat {dir}/kubectl-get-pdb.json ;;
*"get nodes -o json"*) cat {root}/answers/all-nodes ;;
*"get nodes -l node-role.kubernetes.io/control-plane -o json"*) cat {root}/answers/control-planes ;;
*"-n kube-system get pods -o json"*) cat {root}/answers/all-pods ;;
*"-n kube-system get pods -l component=kube-apiserver -o json"*) cat {root}/answers/apiservers ;;
*"-n kube-system get configmap/kubeadm-config configmap/kubelet-config daemonset/kube-proxy --ignore-not-found -o json"*) cat {root}/answers/configmaps ;;
*"-n kube-system get configmap kubelet-config kubeadm-config --ignore-not-found -o json"*) cat {root}/answers/configmaps ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
                log = log.display(),
                root = fake.root().display(),
                dir = CHECK_FIXTURES
            ),
        )
        .tool(
            "kubeadm",
            &format!(r#"cat {CHECK_FIXTURES}/kubeadm-certs-check-expiration.txt"#),
        );
    let whole = parse_check_outputs(&fake.run(CHECKS_SCRIPT)).unwrap();
    let cluster = fake.run(CLUSTER_SCRIPT);
    std::fs::remove_file(&log).unwrap();
    let after = parse_check_outputs_after_cluster(&fake.run(CHECKS_AFTER_CLUSTER_SCRIPT), &cluster)
        .unwrap();

    let asked = std::fs::read_to_string(&log).unwrap();
    let asked: Vec<&str> = asked.lines().collect();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(asked[0].ends_with("get --raw /metrics"), "{asked:#?}");
    assert!(asked[1].ends_with("get pdb -A -o json"), "{asked:#?}");

    for (what, a, w) in [
        ("metrics", &after.metrics, &whole.metrics),
        ("pdbs", &after.pdbs, &whole.pdbs),
        ("certs", &after.certs, &whole.certs),
    ] {
        assert!(a.is_ok() && a == w, "{what}: {a:?} against {w:?}");
    }
    assert!(after.kubelet_configmap.as_ref().unwrap().is_some());
    assert_eq!(after.kubelet_configmap, whole.kubelet_configmap);
    assert_eq!(after.kubeadm_configmap, whole.kubeadm_configmap);
    // Every node's list: only cp-1, the control plane, has addresses.
    let ips = |o: &crate::node::CheckOutputs| {
        super::parse_internal_ips(o.control_plane_nodes.as_ref().unwrap()).unwrap()
    };
    assert_eq!(ips(&after).keys().collect::<Vec<_>>(), ["cp-1"]);
    assert_eq!(ips(&after), ips(&whole));
    let control_planes = [super::ControlPlane {
        name: "cp-1".into(),
        addresses: vec!["10.0.0.1".parse().unwrap()],
    }];
    let instances = |o: &crate::node::CheckOutputs| {
        super::parse_apiserver_instances(o.apiservers.as_ref().unwrap(), &control_planes).unwrap()
    };
    assert_eq!(instances(&after).0.len(), 1);
    assert_eq!(instances(&after), instances(&whole));
}

/// The Ceph gate's first read, with a kubectl that answers as the real one
/// does for each way of naming CephClusters; `v1_served`: the API server
/// serves ceph.rook.io/v1. Returns what the script printed, parsed, and
/// every kubectl command line it ran.
fn ceph_discovery(v1_served: bool, cluster_health: &str) -> (super::ceph::Discovery, String) {
    ceph_discovery_of(Rook::Installed { v1_served }, cluster_health)
}

/// Whether the fake API server serves Rook's CephCluster, and at which
/// versions.
enum Rook {
    Installed { v1_served: bool },
    Absent,
}

fn ceph_discovery_of(rook: Rook, cluster_health: &str) -> (super::ceph::Discovery, String) {
    let (v1_served, group_served) = match rook {
        Rook::Installed { v1_served } => (v1_served, true),
        Rook::Absent => (false, false),
    };
    let fake = FakeRoot::new();
    fake.file("/run/.keep", "");
    let log = fake.root().join("kubectl.log");
    let list = format!(
        r#"{{"kind":"List","items":[{{"kind":"CephCluster","metadata":{{"namespace":"rook-ceph","name":"rook-ceph"}},"status":{{"ceph":{{"health":"{cluster_health}","lastChecked":"2026-12-07T10:00:00Z"}}}}}}]}}"#
    );
    fake.tool(
        "kubectl",
        &format!(
            r#"echo "$*" >>{log}
case "$*" in
*"get pods --all-namespaces -l app=rook-ceph-tools -o json"*) echo '{{"kind":"List","items":[]}}' ;;
*"get cephclusters.v1.ceph.rook.io "*)
  if {v1_served}; then echo '{list}'; else echo 'error: the server doesn'"'"'t have a resource type "cephclusters"' >&2; exit 1; fi ;;
*"get cephclusters.ceph.rook.io "*)
  if {group_served}; then echo '{list}'; else echo 'error: the server doesn'"'"'t have a resource type "cephclusters"' >&2; exit 1; fi ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
            log = log.display(),
        ),
    );
    let discovery =
        super::ceph::read_discovery(&fake.run(crate::remote::rook::DISCOVER_SCRIPT)).unwrap();
    (discovery, std::fs::read_to_string(&log).unwrap())
}

/// Issue 40: CephClusters are named with their version, which kubectl
/// finds in its discovery cache, and never by group alone, which drops that
/// cache on every gate (`remote/ceph.sh`).
#[test]
fn ceph_clusters_are_listed_by_version_and_group_without_a_second_try() {
    let (discovery, ran) = ceph_discovery(true, "HEALTH_WARN");
    let clusters = discovery.clusters.unwrap();
    assert_eq!(clusters.len(), 1, "{clusters:?}");
    assert_eq!(clusters[0].name, "rook-ceph/rook-ceph");
    assert_eq!(clusters[0].health.as_ref().unwrap().status, "HEALTH_WARN");
    assert!(ran.contains("get cephclusters.v1.ceph.rook.io "), "{ran}");
    assert!(!ran.contains("get cephclusters.ceph.rook.io "), "{ran}");
}

/// A server without ceph.rook.io/v1 is asked again by group alone, so a
/// CephCluster of another version is still judged, not taken for no Ceph.
#[test]
fn ceph_clusters_of_another_version_are_still_found() {
    let (discovery, ran) = ceph_discovery(false, "HEALTH_ERR");
    let clusters = discovery.clusters.unwrap();
    assert_eq!(clusters.len(), 1, "{clusters:?}");
    assert_eq!(clusters[0].health.as_ref().unwrap().status, "HEALTH_ERR");
    assert!(ran.contains("get cephclusters.ceph.rook.io "), "{ran}");
}

/// Rook's toolbox pods are listed where there is a CephCluster to read
/// through them.
#[test]
fn the_toolbox_is_looked_for_where_there_is_a_ceph_cluster() {
    let (discovery, ran) = ceph_discovery(true, "HEALTH_OK");
    assert_eq!(discovery.clusters.unwrap().len(), 1);
    assert!(ran.contains("-l app=rook-ceph-tools"), "{ran}");
}

/// A cluster without Rook is asked for its CephClusters and nothing else:
/// no toolbox list before every drain, and no Ceph to judge.
#[test]
fn without_rook_no_toolbox_is_looked_for() {
    let (discovery, ran) = ceph_discovery_of(Rook::Absent, "HEALTH_OK");
    assert_eq!(discovery.clusters.unwrap().len(), 0);
    assert!(discovery.toolboxes.is_empty());
    assert!(!ran.contains("rook-ceph-tools"), "{ran}");
    assert!(ran.contains("get cephclusters.v1.ceph.rook.io "), "{ran}");
}

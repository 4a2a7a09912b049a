//! The cluster script's output (nodes, kube-proxy, kubeadm's config): what
//! is found, what is missing, and which command failed.

use super::*;

#[test]
fn whole_cluster_output() {
    let cluster = parse_cluster(&fixture("cluster.txt")).unwrap();
    assert_eq!(
        cluster,
        ClusterFacts {
            nodes: vec![
                ClusterNode {
                    name: "cp-1".into(),
                    ready: true,
                    cordoned: false,
                    kubelet_version: Some(v("v1.36.4")),
                    control_plane: true,
                },
                ClusterNode {
                    name: "w-1".into(),
                    ready: true,
                    cordoned: true,
                    kubelet_version: Some(v("v1.36.4")),
                    control_plane: false,
                },
                ClusterNode {
                    name: "w-2".into(),
                    ready: false,
                    cordoned: false,
                    kubelet_version: Some(v("v1.35.9")),
                    control_plane: false,
                },
            ],
            version: Some(v("v1.24.0")),
            kube_proxy: false,
        }
    );
}

fn cluster_output(nodes: &str, kubeadm: &str, proxy: &str) -> String {
    format!("@@fleetctl:cluster 1@@\n{nodes}{kubeadm}{proxy}@@fleetctl:done@@\n")
}

fn ok_nodes() -> String {
    section(
        "nodes",
        r#"{"apiVersion":"v1","items":[],"kind":"List"}"#,
        "",
        0,
    )
}

fn ok_kubeadm() -> String {
    section(
        "kubeadm-config",
        fixture("kubeadm-config.json").trim_end(),
        "",
        0,
    )
}

#[test]
fn kube_proxy_found_or_not() {
    let found = section("kube-proxy", "daemonset.apps/kube-proxy", "", 0);
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &ok_kubeadm(), &found)).unwrap();
    assert!(facts.kube_proxy);
    assert!(facts.nodes.is_empty());

    let denied = section(
        "kube-proxy",
        "",
        "Error from server (Forbidden): daemonsets.apps \"kube-proxy\" is forbidden",
        1,
    );
    let err = parse_cluster(&cluster_output(&ok_nodes(), &ok_kubeadm(), &denied)).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "`kubectl get daemonset kube-proxy` failed: exit status 1: Error from server \
         (Forbidden): daemonsets.apps \"kube-proxy\" is forbidden"
    );
}

#[test]
fn kubeadm_config_absent_or_without_version() {
    let proxy = section("kube-proxy", "", "Error from server (NotFound): x", 1);
    let not_found = section(
        "kubeadm-config",
        "",
        "Error from server (NotFound): configmaps \"kubeadm-config\" not found",
        1,
    );
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &not_found, &proxy)).unwrap();
    assert_eq!(facts.version, None);

    let no_version = section(
        "kubeadm-config",
        r#"{"data":{"ClusterConfiguration":"apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"}}"#,
        "",
        0,
    );
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &no_version, &proxy)).unwrap();
    assert_eq!(facts.version, None);

    let quoted = no_version.replace("kind:", "kubernetesVersion: \\\"v1.37.2\\\"\\nkind:");
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &quoted, &proxy)).unwrap();
    assert_eq!(facts.version, Some(v("v1.37.2")));

    let bad = no_version.replace("kind:", "kubernetesVersion: latest\\nkind:");
    let err = parse_cluster(&cluster_output(&ok_nodes(), &bad, &proxy)).unwrap_err();
    assert_eq!(
        format!("{err}"),
        "kubeadm-config says kubernetesVersion `latest`, which is not a version"
    );
}

#[test]
fn cluster_failures_say_which_command_failed() {
    let proxy = section("kube-proxy", "", "Error from server (NotFound): x", 1);
    let refused = section(
        "nodes",
        "",
        "The connection to the server 10.0.0.11:6443 was refused - did you specify the right host or port?",
        1,
    );
    let err = parse_cluster(&cluster_output(&refused, &ok_kubeadm(), &proxy)).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "`kubectl get nodes` failed: exit status 1: The connection to the server \
         10.0.0.11:6443 was refused - did you specify the right host or port?"
    );

    let garbage = section("nodes", "<html>", "", 0);
    let err = parse_cluster(&cluster_output(&garbage, &ok_kubeadm(), &proxy)).unwrap_err();
    assert!(
        format!("{err:#}").starts_with(
            "`kubectl get nodes -o json` printed something that is not a node list: `<html>`: "
        ),
        "{err:#}"
    );

    let err = parse_cluster(&cluster_output(&ok_nodes(), &ok_kubeadm(), "")).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "the output has no `kube-proxy` section, so `kubectl get daemonset kube-proxy` never ran"
    );

    let err =
        parse_cluster("error: You must be logged in to the server (Unauthorized)").unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "the cluster script printed no sections, so it did not run as expected; its output \
         began with: `error: You must be logged in to the server (Unauthorized)`"
    );
}

#[test]
fn node_without_conditions_or_version_is_not_ready_and_unversioned() {
    let nodes = section(
        "nodes",
        r#"{"items":[{"metadata":{"name":"new"},"status":{"nodeInfo":{"kubeletVersion":"garbage"}}}]}"#,
        "",
        0,
    );
    let proxy = section("kube-proxy", "", "(NotFound)", 1);
    let facts = parse_cluster(&cluster_output(&nodes, &ok_kubeadm(), &proxy)).unwrap();
    assert_eq!(
        facts.nodes,
        vec![ClusterNode {
            name: "new".into(),
            ready: false,
            cordoned: false,
            kubelet_version: None,
            control_plane: false,
        }]
    );
}

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
            apiservers: vec![v("v1.36.4")],
        }
    );
}

fn cluster_output(nodes: &str, kube_system: &str) -> String {
    format!("@@fleetctl:cluster 1@@\n{nodes}{kube_system}@@fleetctl:done@@\n")
}

fn ok_nodes() -> String {
    section(
        "nodes",
        r#"{"apiVersion":"v1","items":[],"kind":"List"}"#,
        "",
        0,
    )
}

/// What kubectl prints for `get configmap/kubeadm-config
/// configmap/kubelet-config daemonset/kube-proxy --ignore-not-found -o
/// json`: a List of the objects found (`items`, JSON).
fn kube_system(items: &[&str]) -> String {
    let body = match items {
        [] => String::new(),
        _ => format!(
            r#"{{"apiVersion":"v1","items":[{}],"kind":"List","metadata":{{"resourceVersion":""}}}}"#,
            items.join(",")
        ),
    };
    section("kube-system", &body, "", 0)
}

fn kubeadm_config() -> String {
    fixture("kubeadm-config.json").trim_end().to_string()
}

const KUBE_PROXY: &str = r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"kube-proxy","namespace":"kube-system"}}"#;

fn kubeadm_config_with(cluster_configuration: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"kubeadm-config"}},"data":{{"ClusterConfiguration":"{cluster_configuration}"}}}}"#
    )
}

#[test]
fn kube_proxy_found_or_not() {
    let both = kube_system(&[&kubeadm_config(), KUBE_PROXY]);
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &both)).unwrap();
    assert!(facts.kube_proxy);
    assert_eq!(facts.version, Some(v("v1.24.0")));
    assert!(facts.nodes.is_empty());

    let config_only = kube_system(&[&kubeadm_config()]);
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &config_only)).unwrap();
    assert!(!facts.kube_proxy);
    // A ConfigMap named kube-proxy is not the DaemonSet.
    let impostor = KUBE_PROXY.replace("DaemonSet", "ConfigMap");
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &kube_system(&[&impostor]))).unwrap();
    assert!(!facts.kube_proxy);

    // Any error but NotFound fails the whole call, even with a List printed.
    let denied = section(
        "kube-system",
        &kubeadm_config(),
        "Error from server (Forbidden): daemonsets.apps \"kube-proxy\" is forbidden",
        1,
    );
    let err = parse_cluster(&cluster_output(&ok_nodes(), &denied)).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "`kubectl -n kube-system get configmap/kubeadm-config configmap/kubelet-config \
         daemonset/kube-proxy` failed: exit status 1: Error from server (Forbidden): daemonsets.apps \"kube-proxy\" is forbidden"
    );
}

#[test]
fn kubeadm_config_absent_or_without_version() {
    // Neither exists: kubectl prints nothing at all.
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &kube_system(&[]))).unwrap();
    assert_eq!(facts.version, None);
    assert!(!facts.kube_proxy);
    let proxy_only = kube_system(&[KUBE_PROXY]);
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &proxy_only)).unwrap();
    assert_eq!((facts.version, facts.kube_proxy), (None, true));

    let plain = r"apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n";
    let no_version = kube_system(&[&kubeadm_config_with(plain)]);
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &no_version)).unwrap();
    assert_eq!(facts.version, None);

    let quoted = no_version.replace("kind:", "kubernetesVersion: \\\"v1.37.2\\\"\\nkind:");
    let facts = parse_cluster(&cluster_output(&ok_nodes(), &quoted)).unwrap();
    assert_eq!(facts.version, Some(v("v1.37.2")));

    let bad = no_version.replace("kind:", "kubernetesVersion: latest\\nkind:");
    let err = parse_cluster(&cluster_output(&ok_nodes(), &bad)).unwrap_err();
    assert_eq!(
        format!("{err}"),
        "kubeadm-config says kubernetesVersion `latest`, which is not a version"
    );
}

#[test]
fn cluster_failures_say_which_command_failed() {
    let none = kube_system(&[]);
    let refused = section(
        "nodes",
        "",
        "The connection to the server 10.0.0.11:6443 was refused - did you specify the right host or port?",
        1,
    );
    let err = parse_cluster(&cluster_output(&refused, &none)).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "`kubectl get nodes` failed: exit status 1: The connection to the server \
         10.0.0.11:6443 was refused - did you specify the right host or port?"
    );

    let garbage = section("nodes", "<html>", "", 0);
    let err = parse_cluster(&cluster_output(&garbage, &none)).unwrap_err();
    assert!(
        format!("{err:#}").starts_with(
            "`kubectl get nodes -o json` printed something that is not a node list: `<html>`: "
        ),
        "{err:#}"
    );

    let err = parse_cluster(&cluster_output(&ok_nodes(), "")).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "the output has no `kube-system` section, so `kubectl -n kube-system get \
         configmap/kubeadm-config configmap/kubelet-config daemonset/kube-proxy` never ran"
    );

    let html = section("kube-system", "<html>", "", 0);
    let err = parse_cluster(&cluster_output(&ok_nodes(), &html)).unwrap_err();
    assert!(
        format!("{err:#}").starts_with(
            "`kubectl -n kube-system get configmap/kubeadm-config configmap/kubelet-config \
             daemonset/kube-proxy` printed something that is not a List: `<html>`"
        ),
        "{err:#}"
    );
    let nameless = kube_system(&[r#"{"kind":"ConfigMap","metadata":{}}"#]);
    let err = parse_cluster(&cluster_output(&ok_nodes(), &nameless)).unwrap_err();
    assert!(
        format!("{err:#}").contains("printed an object without a kind or a name"),
        "{err:#}"
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
    let facts = parse_cluster(&cluster_output(&nodes, &kube_system(&[]))).unwrap();
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

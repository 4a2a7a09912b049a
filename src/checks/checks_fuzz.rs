//! Issue 38: the checks' parsers of what the API server, kubeadm, etcdctl
//! and the hub send (pod, node and PDB lists, the kubeadm-config and
//! kubelet-config ConfigMaps, a kubelet's config.yaml, `etcdctl snapshot
//! status`, `kubeadm certs check-expiration`, the API server's metrics,
//! SHA256SUMS, and the node's facts with their sysupdate listings) never panic on any input and stay linear on a large one.
//! See [`crate::fuzzkit`].

use std::time::Duration;

use proptest::prelude::*;

use super::apiservers::{ControlPlane, parse_apiserver_instances, parse_internal_ips};
use super::certs::parse_check_expiration;
use super::configmaps::{
    ClusterConfiguration, KubeletConfigDoc, parse_kubeadm_configmap, parse_kubelet_configmap,
};
use super::etcd_health::parse_snapshot_status;
use super::hub_images::HubImage;
use super::metrics::parse_deprecated_apis;
use super::node_cgroup::fail_cgroup_v1;
use super::pdb::{parse_pdbs, parse_pods};
use crate::fuzzkit::{config, json_soup, json_value, linear, text, yaml_soup};

const KEYS: &[&str] = &[
    "items",
    "metadata",
    "name",
    "namespace",
    "labels",
    "component",
    "spec",
    "nodeName",
    "status",
    "podIP",
    "addresses",
    "type",
    "address",
    "data",
    "kubelet",
    "ClusterConfiguration",
    "kubernetesVersion",
    "etcd",
    "local",
    "imageTag",
    "selector",
    "matchLabels",
    "minAvailable",
    "maxUnavailable",
    "ownerReferences",
    "kind",
    "conditions",
    "phase",
    "featureGates",
    "failCgroupV1",
    "cgroupDriver",
    "apiServer",
    "extraArgs",
];

fn control_planes() -> Vec<ControlPlane> {
    vec![ControlPlane {
        name: "cp-1".into(),
        addresses: vec!["10.0.0.1".parse().unwrap()],
    }]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn kubectl_json_parsers_never_panic(
        a in text(), b in json_soup(KEYS), c in json_value(KEYS),
    ) {
        for t in [a, b, c] {
            let _ = parse_internal_ips(&t);
            let _ = parse_apiserver_instances(&t, &control_planes());
            let _ = parse_pdbs(&t);
            let _ = parse_pods(&t);
            let _ = crate::node::parse_mirror_pods(&t);
            let _ = parse_kubelet_configmap(&t);
            let _ = parse_kubeadm_configmap(&t);
        }
    }

    #[test]
    fn yaml_parsers_never_panic(a in text(), b in yaml_soup(KEYS)) {
        for t in [a, b] {
            let _ = KubeletConfigDoc::parse(&t);
            let _ = ClusterConfiguration::parse(&t);
            let _ = fail_cgroup_v1(&t);
        }
    }

    #[test]
    fn tool_output_parsers_never_panic(t in text(), n in any::<u64>(), x in any::<i64>()) {
        let _ = parse_snapshot_status(&t);
        let _ = parse_snapshot_status(&format!("| {n} | {x} | {n} | {x} |\n{t}"));
        let _ = parse_check_expiration(&t);
        let _ = parse_deprecated_apis(&t);
        let _ = parse_deprecated_apis(&format!(
            "apiserver_requested_deprecated_apis{{group=\"{t}\",version=\"v{n}\"}} {x}\n"
        ));
        let _ = HubImage::parse_sha256sums(&t);
        let _ = crate::hub::parse_sha256sums(&t);
        let _ = crate::node::parse_facts(&t);
        let _ = HubImage::parse_sha256sums(&format!("{n:064x}  kubernetes-v{n}.{x}.{n}-x86-64.raw\n"));
    }
}

#[test]
fn the_checks_parsers_are_linear_on_a_mebibyte() {
    let limit = Duration::from_secs(3);
    linear("[{\"items\":", limit, |t| {
        let _ = parse_pdbs(t);
        let _ = parse_internal_ips(t);
    });
    linear("a: [", limit, |t| {
        let _ = KubeletConfigDoc::parse(t);
    });
    linear("- a: &x b\n", limit, |t| {
        let _ = ClusterConfiguration::parse(t);
    });
    linear("apiserver_requested_deprecated_apis{group=\"", limit, |t| {
        let _ = parse_deprecated_apis(t);
    });
    linear("0000  kubernetes-v1.", limit, |t| {
        let _ = HubImage::parse_sha256sums(t);
    });
    linear("0000  kubernetes-v1.2.3-x86-64.raw\n", limit, |t| {
        let _ = crate::hub::parse_sha256sums(t);
    });
    linear("@@fleetctl:begin nodes@@\n{\"items\":[", limit, |t| {
        let _ = crate::node::parse_facts(t);
        let _ = crate::node::parse_cluster(t);
    });
    linear("| 1 | 2 |", limit, |t| {
        let _ = parse_snapshot_status(t);
    });
}

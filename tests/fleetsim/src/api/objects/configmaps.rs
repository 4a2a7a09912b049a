//! ConfigMaps as the API serves them: kubeadm's kubeadm-config (its
//! ClusterConfiguration, generated from the cluster state: the version, the
//! etcd, the control plane's `extraArgs`, and the fateful `proxy: {}`) and
//! the plain ConfigMaps of the cluster state (fleetctl's lock, the
//! kubelet-config a test creates).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{KUBE_SYSTEM, KUBEADM_CONFIG, cluster_created};
use crate::state::Cluster;
use crate::tools::util::{rfc3339, uid_of};

/// A ConfigMap as the API would return it.
pub(crate) struct Cm {
    name: String,
    namespace: String,
    data: BTreeMap<String, String>,
    resource_version: u64,
    created: f64,
    uid: String,
}

/// kubeadm's stored ClusterConfiguration: `proxy: {}` because the cluster
/// predates `proxy.disabled`, which is why upgrades must skip the addon.
fn cluster_configuration(c: &Cluster) -> String {
    let (version, external_etcd) = (&c.version, &c.external_etcd);
    let section = |key: &str| match c.control_plane_args.get(key) {
        Some(args) if !args.is_empty() => {
            // kubeadm.k8s.io/v1beta4's list of {name, value}; the values
            // JSON-quoted, which YAML reads as the same string.
            let list: String = args
                .iter()
                .map(|(name, value)| {
                    format!(
                        "  - name: {name}\n    value: {}\n",
                        serde_json::Value::String(value.clone())
                    )
                })
                .collect();
            format!("{key}:\n  extraArgs:\n{list}")
        }
        _ => format!("{key}: {{}}\n"),
    };
    let etcd = if external_etcd.is_empty() {
        "etcd:\n  local:\n    dataDir: /var/lib/etcd\n".to_string()
    } else {
        let endpoints: String = external_etcd
            .iter()
            .map(|e| format!("    - {e}\n"))
            .collect();
        format!(
            "etcd:\n  external:\n    caFile: /etc/kubernetes/pki/etcd/ca.crt\n    \
             certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt\n    endpoints:\n{endpoints}    \
             keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key\n"
        )
    };
    let feature_gates = match c.kubeadm_feature_gates.is_empty() {
        true => String::new(),
        false => {
            let gates: String = c
                .kubeadm_feature_gates
                .iter()
                .map(|(g, v)| format!("  {g}: {v}\n"))
                .collect();
            format!("featureGates:\n{gates}")
        }
    };
    format!(
        "{api_server}\
         apiVersion: kubeadm.k8s.io/v1beta4\n\
         caCertificateValidityPeriod: 87600h0m0s\n\
         certificateValidityPeriod: 8760h0m0s\n\
         certificatesDir: /etc/kubernetes/pki\n\
         clusterName: kubernetes\n\
         {controller_manager}\
         dns: {{}}\n\
         encryptionAlgorithm: RSA-2048\n\
         {etcd}\
         {feature_gates}\
         imageRepository: registry.k8s.io\n\
         kind: ClusterConfiguration\n\
         kubernetesVersion: {version}\n\
         networking:\n  dnsDomain: cluster.local\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n\
         proxy: {{}}\n\
         {scheduler}",
        api_server = section("apiServer"),
        controller_manager = section("controllerManager"),
        scheduler = section("scheduler"),
    )
}

pub(crate) fn configmaps_in(c: &Cluster, ns: Option<&str>) -> Vec<Cm> {
    let mut list = Vec::new();
    if ns.is_none_or(|ns| ns == KUBE_SYSTEM) {
        list.push(Cm {
            name: KUBEADM_CONFIG.to_string(),
            namespace: KUBE_SYSTEM.to_string(),
            data: BTreeMap::from([("ClusterConfiguration".to_string(), cluster_configuration(c))]),
            resource_version: c.resource_version,
            created: cluster_created(c, crate::state::now()),
            uid: uid_of("configmap/kube-system/kubeadm-config"),
        });
    }
    for (key, cm) in &c.configmaps {
        if let Some((cm_ns, name)) = key.split_once('/')
            && ns.is_none_or(|ns| ns == cm_ns)
        {
            list.push(Cm {
                name: name.to_string(),
                namespace: cm_ns.to_string(),
                data: cm.data.clone(),
                resource_version: cm.resource_version,
                created: cm.created,
                uid: cm.uid.clone(),
            });
        }
    }
    list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    list
}

pub(crate) fn cm_json(cm: &Cm) -> Value {
    json!({
        "apiVersion": "v1",
        "data": cm.data,
        "kind": "ConfigMap",
        "metadata": {
            "creationTimestamp": rfc3339(cm.created),
            "name": cm.name,
            "namespace": cm.namespace,
            "resourceVersion": cm.resource_version.to_string(),
            "uid": cm.uid,
        },
    })
}

//! ConfigMaps as kubectl and the API serve them: kubeadm's kubeadm-config
//! (its ClusterConfiguration, generated from the cluster state: the version,
//! the etcd, the control plane's `extraArgs`, and the fateful `proxy: {}`)
//! and the plain ConfigMaps of the cluster state (fleetctl's lock, the
//! kubelet-config a test creates); `create` and `delete` for the lock.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{Value, json};

use super::nodes::not_found;
use super::objects::*;
use super::{Cli, Env, Kind, Res, connect, resource};
use crate::state::{Cluster, ConfigMap};
use crate::tools::say;
use crate::tools::util::{human_age, rfc3339, table, uid_of};

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

/// A YAML scalar: block literal for multi-line text, plain when unambiguous, else quoted.
fn yaml_scalar(v: &str, indent: usize) -> String {
    if v.contains('\n') {
        let chomp = if v.ends_with('\n') { "|" } else { "|-" };
        let pad = " ".repeat(indent);
        let body: String = v.lines().map(|l| format!("\n{pad}{l}")).collect();
        return format!("{chomp}{body}");
    }
    let reserved = [
        "", "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n",
    ];
    let plain = !reserved.contains(&v.to_ascii_lowercase().as_str())
        && v.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/')
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if plain {
        v.to_string()
    } else {
        serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"))
    }
}

fn cm_yaml(cm: &Cm) -> String {
    let mut out = String::from("apiVersion: v1\n");
    if !cm.data.is_empty() {
        out.push_str("data:\n");
        for (k, v) in &cm.data {
            out.push_str(&format!("  {}: {}\n", yaml_scalar(k, 0), yaml_scalar(v, 4)));
        }
    }
    out.push_str(&format!(
        "kind: ConfigMap\nmetadata:\n  creationTimestamp: \"{}\"\n  name: {}\n  namespace: {}\n  \
         resourceVersion: \"{}\"\n  uid: {}\n",
        rfc3339(cm.created),
        cm.name,
        cm.namespace,
        cm.resource_version,
        cm.uid
    ));
    out
}

pub(super) fn get_configmaps(
    env: &mut Env,
    args: &[String],
    cli: &Cli,
    name: Option<&str>,
) -> Result<Res> {
    if name.is_none() && cli.output() == Some("yaml") {
        return Ok(Res::unsupported(env, args));
    }
    let c = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    let ns = (!cli.all_namespaces()).then(|| cli.namespace());
    let selected: Vec<Cm> = configmaps_in(&c, ns)
        .into_iter()
        .filter(|cm| name.is_none_or(|want| want == cm.name))
        .collect();
    if let Some(want) = name
        && selected.is_empty()
    {
        if cli.switch("ignore-not-found") {
            return Ok(Res::ok());
        }
        return Ok(Res::fail(env, &not_found("configmaps", want)));
    }
    let items: Vec<Value> = selected.iter().map(cm_json).collect();
    let doc = get_doc(name.is_some(), items);
    if let Some(res) = print_doc(env, cli, &doc)? {
        return Ok(res);
    }
    match cli.output() {
        Some("yaml") => {
            for cm in selected.iter().take(1) {
                let _ = std::io::Write::write_all(&mut *env.out, cm_yaml(cm).as_bytes());
            }
            Ok(Res::ok())
        }
        Some("name") => {
            for cm in &selected {
                say!(env, "configmap/{}", cm.name);
            }
            Ok(Res::ok())
        }
        _ if selected.is_empty() => Ok(no_resources(env, cli)),
        _ => {
            let now = crate::state::now();
            let all = cli.all_namespaces();
            let mut header = Vec::new();
            if all {
                header.push("NAMESPACE".to_string());
            }
            header.extend(["NAME", "DATA", "AGE"].map(String::from));
            let mut rows = vec![header];
            rows.extend(selected.iter().map(|cm| {
                let mut row = Vec::new();
                if all {
                    row.push(cm.namespace.clone());
                }
                row.extend([
                    cm.name.clone(),
                    cm.data.len().to_string(),
                    human_age(now - cm.created),
                ]);
                row
            }));
            let _ = std::io::Write::write_all(&mut *env.out, table(&rows, 3).as_bytes());
            Ok(Res::ok())
        }
    }
}

/// `create configmap NAME --from-literal=k=v…`; AlreadyExists like the real API.
pub(super) fn create(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let [_, kind, name] = cli.words.as_slice() else {
        return Ok(Res::unsupported(env, args));
    };
    if super::kind_of(kind) != Some(Kind::ConfigMap) || cli.output().is_some() {
        return Ok(Res::unsupported(env, args));
    }
    let mut data = BTreeMap::new();
    for literal in cli.all("from-literal") {
        let Some((k, v)) = literal.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            let msg = format!("error: invalid literal source {literal}, expected key=value");
            return Ok(Res::fail(env, &msg));
        };
        if data.insert(k.to_string(), v.to_string()).is_some() {
            let msg = format!(
                "error: cannot add key {k}, another key by that name already exists in Data for ConfigMap \"{name}\""
            );
            return Ok(Res::fail(env, &msg));
        }
    }
    if let Err(msg) = connect(env, cli)? {
        return Ok(Res::fail(env, &msg));
    }
    let ns = cli.namespace().to_string();
    let key = format!("{ns}/{name}");
    let created = env.shared().update_cluster(|c| {
        if c.configmaps.contains_key(&key) || (ns == KUBE_SYSTEM && name == KUBEADM_CONFIG) {
            return Ok(false);
        }
        c.resource_version += 1;
        let created = crate::state::now();
        let cm = ConfigMap {
            data,
            resource_version: c.resource_version,
            created,
            // Unique per object: a ConfigMap created again gets a new one.
            uid: uid_of(&format!("configmap/{key}/{created}/{}", c.resource_version)),
        };
        c.configmaps.insert(key.clone(), cm);
        Ok(true)
    })?;
    if !created {
        let msg =
            format!("error: failed to create configmap: configmaps \"{name}\" already exists");
        return Ok(Res::fail(env, &msg));
    }
    say!(env, "configmap/{name} created");
    Ok(Res::ok())
}

/// `delete configmap NAME [--ignore-not-found]`.
pub(super) fn delete(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let Some((Kind::ConfigMap, Some(name))) = resource(&cli.words[1..]) else {
        return Ok(Res::unsupported(env, args));
    };
    let ns = cli.namespace().to_string();
    if ns == KUBE_SYSTEM && name == KUBEADM_CONFIG {
        return Ok(Res::unsupported(env, args));
    }
    if let Err(msg) = connect(env, cli)? {
        return Ok(Res::fail(env, &msg));
    }
    let key = format!("{ns}/{name}");
    let removed = env.shared().update_cluster(|c| {
        let removed = c.configmaps.remove(&key).is_some();
        if removed {
            c.resource_version += 1;
        }
        Ok(removed)
    })?;
    if removed {
        say!(env, "configmap \"{name}\" deleted");
        Ok(Res::ok())
    } else if cli.switch("ignore-not-found") {
        Ok(Res::ok())
    } else {
        Ok(Res::fail(env, &not_found("configmaps", name)))
    }
}

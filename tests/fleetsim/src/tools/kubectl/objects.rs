//! The namespaced objects fleetctl touches: the kube-proxy DaemonSet (whose
//! absence is the point), Kured's DaemonSet (whose lock annotation fleetctl
//! takes with a resource-version precondition), the kubeadm-config
//! ConfigMap (`kubernetesVersion` and the fateful `proxy: {}`), and plain
//! ConfigMaps for fleetctl's own lock. Every change happens inside one
//! `update_cluster` call, so preconditions hold under concurrent callers.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{Value, json};

use super::nodes::{Readiness, not_found, readiness};
use super::{Cli, Env, Kind, Res, connect, resource};
use crate::state::{Cluster, ConfigMap, DaemonSet};
use crate::tools::util::{human_age, rfc3339, table, uid_of};
use crate::tools::{complain, say};

const KUBEADM_CONFIG: &str = "kubeadm-config";
const KUBE_SYSTEM: &str = "kube-system";

/// When the cluster was created, as far as the state knows: its oldest boot.
fn cluster_created(c: &Cluster) -> f64 {
    c.nodes
        .values()
        .map(|n| n.booted_at)
        .fold(f64::INFINITY, f64::min)
        .min(crate::state::now())
}

// ---------------------------------------------------------------- DaemonSets

/// A DaemonSet the API would list.
enum Ds<'a> {
    /// The CNI, always there: it is why kube-proxy must stay away.
    Cilium,
    KubeProxy,
    Kured(&'a DaemonSet),
}

fn daemonsets_in<'a>(c: &'a Cluster, ns: &str) -> Vec<(String, Ds<'a>)> {
    let mut list = Vec::new();
    if ns == KUBE_SYSTEM {
        list.push(("cilium".to_string(), Ds::Cilium));
    }
    if c.kube_proxy && ns == KUBE_SYSTEM {
        list.push(("kube-proxy".to_string(), Ds::KubeProxy));
    }
    if let Some(k) = c.kured.as_ref().filter(|k| k.namespace == ns) {
        list.push((k.name.clone(), Ds::Kured(k)));
    }
    list.sort_by(|a, b| a.0.cmp(&b.0));
    list
}

/// (desired, ready) pods: one per node, ready where the node is Ready.
fn ds_counts(c: &Cluster) -> (usize, usize) {
    let now = crate::state::now();
    let ready = c
        .nodes
        .values()
        .filter(|n| matches!(readiness(c, n, now), Readiness::Ready { .. }))
        .count();
    (c.nodes.len(), ready)
}

fn ds_json(c: &Cluster, ns: &str, name: &str, ds: &Ds) -> Value {
    let (desired, ready) = ds_counts(c);
    let (command, image, annotations, rv) = match ds {
        Ds::Cilium => (
            vec![
                "cilium-agent".to_string(),
                "--config-dir=/tmp/cilium/config-map".to_string(),
            ],
            "quay.io/cilium/cilium:v1.16.5".to_string(),
            BTreeMap::from([(
                "deprecated.daemonset.template.generation".to_string(),
                "1".to_string(),
            )]),
            1,
        ),
        Ds::KubeProxy => (
            vec![
                "/usr/local/bin/kube-proxy".to_string(),
                "--config=/var/lib/kube-proxy/config.conf".to_string(),
                "--hostname-override=$(NODE_NAME)".to_string(),
            ],
            format!("registry.k8s.io/kube-proxy:{}", c.version),
            BTreeMap::from([(
                "deprecated.daemonset.template.generation".to_string(),
                "1".to_string(),
            )]),
            c.resource_version,
        ),
        Ds::Kured(k) => {
            let mut command = k.args.clone();
            if command.first().is_none_or(|a| !a.starts_with('/')) {
                command.insert(0, "/usr/bin/kured".to_string());
            }
            (
                command,
                "ghcr.io/kubereboot/kured:1.17.1".to_string(),
                k.annotations.clone(),
                k.resource_version,
            )
        }
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": rfc3339(cluster_created(c)),
            "generation": 1,
            "labels": {"k8s-app": name},
            "name": name,
            "namespace": ns,
            "resourceVersion": rv.to_string(),
            "uid": uid_of(&format!("daemonset/{ns}/{name}")),
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": {
                    "containers": [{
                        "command": command,
                        "image": image,
                        "imagePullPolicy": "IfNotPresent",
                        "name": name,
                    }],
                    "hostPID": matches!(ds, Ds::Kured(_)),
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "serviceAccountName": name,
                    "tolerations": [{"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"}],
                },
            },
            "updateStrategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}, "type": "RollingUpdate"},
        },
        "status": {
            "currentNumberScheduled": desired,
            "desiredNumberScheduled": desired,
            "numberAvailable": ready,
            "numberMisscheduled": 0,
            "numberReady": ready,
            "observedGeneration": 1,
            "updatedNumberScheduled": desired,
        },
    })
}

fn ds_row(c: &Cluster, name: &str) -> Vec<String> {
    let (desired, ready) = ds_counts(c);
    vec![
        name.to_string(),
        desired.to_string(),
        desired.to_string(),
        ready.to_string(),
        desired.to_string(),
        ready.to_string(),
        "kubernetes.io/os=linux".to_string(),
        human_age(crate::state::now() - cluster_created(c)),
    ]
}

fn no_resources(env: &mut Env, ns: &str) -> Res {
    complain!(env, "No resources found in {ns} namespace.");
    Res::ok()
}

fn print_json(env: &mut Env, doc: &Value) -> Result<Res> {
    say!(env, "{}", serde_json::to_string_pretty(doc)?);
    Ok(Res::ok())
}

fn list_doc(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}})
}

pub(super) fn get_daemonsets(
    env: &mut Env,
    args: &[String],
    cli: &Cli,
    name: Option<&str>,
) -> Result<Res> {
    if cli.output() == Some("yaml") {
        return Ok(Res::unsupported(env, args));
    }
    let c = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    let ns = cli.namespace();
    let all = daemonsets_in(&c, ns);
    let selected: Vec<&(String, Ds)> = all
        .iter()
        .filter(|(n, _)| name.is_none_or(|want| want == n))
        .collect();
    if let Some(want) = name
        && selected.is_empty()
    {
        if cli.switch("ignore-not-found") {
            return Ok(Res::ok());
        }
        return Ok(Res::fail(env, &not_found("daemonsets.apps", want)));
    }
    if selected.is_empty() && cli.output() != Some("json") {
        return Ok(no_resources(env, ns));
    }
    match cli.output() {
        Some("json") => {
            let items: Vec<Value> = selected
                .iter()
                .map(|(n, d)| ds_json(&c, ns, n, d))
                .collect();
            let doc = if name.is_some() && items.len() == 1 {
                items.into_iter().next().unwrap_or_default()
            } else {
                list_doc(items)
            };
            print_json(env, &doc)
        }
        Some("name") => {
            for (n, _) in &selected {
                say!(env, "daemonset.apps/{n}");
            }
            Ok(Res::ok())
        }
        _ => {
            let header = [
                "NAME",
                "DESIRED",
                "CURRENT",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "NODE SELECTOR",
                "AGE",
            ];
            let mut rows = vec![header.map(String::from).to_vec()];
            rows.extend(selected.iter().map(|(n, _)| ds_row(&c, n)));
            let _ = std::io::Write::write_all(&mut *env.out, table(&rows, 3).as_bytes());
            Ok(Res::ok())
        }
    }
}

// ---------------------------------------------------------------- ConfigMaps

/// A ConfigMap as the API would return it.
struct Cm {
    name: String,
    namespace: String,
    data: BTreeMap<String, String>,
    resource_version: u64,
    created: f64,
}

/// kubeadm's stored ClusterConfiguration: `proxy: {}` because the cluster
/// predates `proxy.disabled`, which is why upgrades must skip the addon.
fn cluster_configuration(version: &str) -> String {
    format!(
        "apiServer: {{}}\n\
         apiVersion: kubeadm.k8s.io/v1beta4\n\
         caCertificateValidityPeriod: 87600h0m0s\n\
         certificateValidityPeriod: 8760h0m0s\n\
         certificatesDir: /etc/kubernetes/pki\n\
         clusterName: kubernetes\n\
         controllerManager: {{}}\n\
         dns: {{}}\n\
         encryptionAlgorithm: RSA-2048\n\
         etcd:\n  local:\n    dataDir: /var/lib/etcd\n\
         imageRepository: registry.k8s.io\n\
         kind: ClusterConfiguration\n\
         kubernetesVersion: {version}\n\
         networking:\n  dnsDomain: cluster.local\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n\
         proxy: {{}}\n\
         scheduler: {{}}\n"
    )
}

fn configmaps_in(c: &Cluster, ns: &str) -> Vec<Cm> {
    let mut list = Vec::new();
    if ns == KUBE_SYSTEM {
        list.push(Cm {
            name: KUBEADM_CONFIG.to_string(),
            namespace: KUBE_SYSTEM.to_string(),
            data: BTreeMap::from([(
                "ClusterConfiguration".to_string(),
                cluster_configuration(&c.version),
            )]),
            resource_version: c.resource_version,
            created: cluster_created(c),
        });
    }
    for (key, cm) in &c.configmaps {
        if let Some((cm_ns, name)) = key.split_once('/')
            && cm_ns == ns
        {
            list.push(Cm {
                name: name.to_string(),
                namespace: ns.to_string(),
                data: cm.data.clone(),
                resource_version: cm.resource_version,
                created: cm.created,
            });
        }
    }
    list.sort_by(|a, b| a.name.cmp(&b.name));
    list
}

fn cm_json(cm: &Cm) -> Value {
    json!({
        "apiVersion": "v1",
        "data": cm.data,
        "kind": "ConfigMap",
        "metadata": {
            "creationTimestamp": rfc3339(cm.created),
            "name": cm.name,
            "namespace": cm.namespace,
            "resourceVersion": cm.resource_version.to_string(),
            "uid": uid_of(&format!("configmap/{}/{}", cm.namespace, cm.name)),
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
        uid_of(&format!("configmap/{}/{}", cm.namespace, cm.name))
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
    let ns = cli.namespace();
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
    if selected.is_empty() && cli.output() != Some("json") {
        return Ok(no_resources(env, ns));
    }
    match cli.output() {
        Some("json") => {
            let items: Vec<Value> = selected.iter().map(cm_json).collect();
            let doc = if name.is_some() && items.len() == 1 {
                items.into_iter().next().unwrap_or_default()
            } else {
                list_doc(items)
            };
            print_json(env, &doc)
        }
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
        _ => {
            let now = crate::state::now();
            let mut rows = vec![["NAME", "DATA", "AGE"].map(String::from).to_vec()];
            rows.extend(selected.iter().map(|cm| {
                vec![
                    cm.name.clone(),
                    cm.data.len().to_string(),
                    human_age(now - cm.created),
                ]
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
        let cm = ConfigMap {
            data,
            resource_version: c.resource_version,
            created: crate::state::now(),
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

// ---------------------------------------------------------------- annotate

enum Change {
    Set(String, String),
    Remove(String),
}

enum Annotated {
    Done,
    NotFound,
    NotEmulated,
    Overwrite(String),
    Conflict,
}

fn parse_changes(words: &[String]) -> Result<Vec<Change>, String> {
    words
        .iter()
        .map(|w| {
            if let Some((k, v)) = w.split_once('=').filter(|(k, _)| !k.is_empty()) {
                Ok(Change::Set(k.to_string(), v.to_string()))
            } else if let Some(k) = w.strip_suffix('-').filter(|k| !k.is_empty()) {
                Ok(Change::Remove(k.to_string()))
            } else {
                Err(format!("error: invalid annotation format: {w}"))
            }
        })
        .collect()
}

/// kubectl refuses, client-side, to change an existing value without --overwrite.
fn overwrite_refusal(ds: &DaemonSet, changes: &[Change]) -> Option<String> {
    let clashes: Vec<String> = changes
        .iter()
        .filter_map(|ch| match ch {
            Change::Set(k, v) => ds
                .annotations
                .get(k)
                .filter(|cur| *cur != v)
                .map(|cur| format!("'{k}' already has a value ({cur})")),
            Change::Remove(_) => None,
        })
        .collect();
    (!clashes.is_empty()).then(|| {
        format!(
            "error: --overwrite is false but found the following declared annotation(s): {}",
            clashes.join("; ")
        )
    })
}

/// `annotate daemonset NAME K=V… [K-] [--overwrite] [--resource-version=N]`.
pub(super) fn annotate(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let words = &cli.words[1..];
    let (target, rest) = match words {
        [one, rest @ ..] if one.contains('/') => (resource(std::slice::from_ref(one)), rest),
        [_, _, rest @ ..] => (resource(&words[..2]), rest),
        _ => (None, words),
    };
    let Some((Kind::DaemonSet, Some(name))) = target else {
        return Ok(Res::unsupported(env, args));
    };
    let changes = match parse_changes(rest) {
        Ok(c) if c.is_empty() => {
            return Ok(Res::fail(
                env,
                "error: at least one annotation update is required",
            ));
        }
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    if let Err(msg) = connect(env, cli)? {
        return Ok(Res::fail(env, &msg));
    }
    let ns = cli.namespace().to_string();
    let overwrite = cli.switch("overwrite");
    let precondition = cli.flag("resource-version").map(str::to_string);
    let outcome = env.shared().update_cluster(|c| {
        let built_in = name == "cilium" || (name == "kube-proxy" && c.kube_proxy);
        if built_in && ns == KUBE_SYSTEM {
            return Ok(Annotated::NotEmulated);
        }
        let next = c.resource_version + 1;
        let Some(ds) = c
            .kured
            .as_mut()
            .filter(|k| k.namespace == ns && k.name == name)
        else {
            return Ok(Annotated::NotFound);
        };
        if !overwrite && let Some(msg) = overwrite_refusal(ds, &changes) {
            return Ok(Annotated::Overwrite(msg));
        }
        if precondition
            .as_ref()
            .is_some_and(|rv| *rv != ds.resource_version.to_string())
        {
            return Ok(Annotated::Conflict);
        }
        for ch in &changes {
            match ch {
                Change::Set(k, v) => {
                    ds.annotations.insert(k.clone(), v.clone());
                }
                Change::Remove(k) => {
                    ds.annotations.remove(k);
                }
            }
        }
        ds.resource_version = next;
        c.resource_version = next;
        Ok(Annotated::Done)
    })?;
    Ok(match outcome {
        Annotated::Done => {
            say!(env, "daemonset.apps/{name} annotated");
            Res::ok()
        }
        Annotated::NotFound => Res::fail(env, &not_found("daemonsets.apps", name)),
        Annotated::NotEmulated => Res::unsupported(env, args),
        Annotated::Overwrite(msg) => Res::fail(env, &msg),
        Annotated::Conflict => Res::fail(
            env,
            &format!(
                "Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps \"{name}\": \
                 the object has been modified; please apply your changes to the latest version and try again"
            ),
        ),
    })
}

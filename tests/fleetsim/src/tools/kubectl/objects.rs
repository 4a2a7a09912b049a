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
/// The user kubeadm's admin.conf authenticates as.
const ADMIN_USER: &str = "kubernetes-admin";
const KUBE_SYSTEM: &str = "kube-system";

/// When the cluster was created, as far as the state knows: its oldest boot
/// (never after `now`).
pub(crate) fn cluster_created(c: &Cluster, now: f64) -> f64 {
    c.nodes
        .values()
        .map(|n| n.booted_at)
        .fold(f64::INFINITY, f64::min)
        .min(now)
}

// ---------------------------------------------------------------- DaemonSets

/// A DaemonSet the API would list.
enum Ds<'a> {
    /// The CNI, always there: it is why kube-proxy must stay away.
    Cilium,
    KubeProxy,
    Kured(&'a DaemonSet),
}

/// One listed DaemonSet: namespace, name, which.
pub(crate) struct Listed<'a> {
    pub namespace: String,
    pub name: String,
    ds: Ds<'a>,
}

/// The DaemonSets in `ns` (every namespace when `None`), sorted by
/// namespace then name, as the API lists them (by etcd key).
pub(crate) fn daemonsets<'a>(c: &'a Cluster, ns: Option<&str>) -> Vec<Listed<'a>> {
    let mut list = vec![Listed {
        namespace: KUBE_SYSTEM.into(),
        name: "cilium".into(),
        ds: Ds::Cilium,
    }];
    if c.kube_proxy {
        list.push(Listed {
            namespace: KUBE_SYSTEM.into(),
            name: "kube-proxy".into(),
            ds: Ds::KubeProxy,
        });
    }
    if let Some(k) = &c.kured {
        list.push(Listed {
            namespace: k.namespace.clone(),
            name: k.name.clone(),
            ds: Ds::Kured(k),
        });
    }
    list.retain(|l| ns.is_none_or(|ns| l.namespace == ns));
    list.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    list
}

impl Listed<'_> {
    /// The pod template's one container, as the API returns it.
    pub fn container(&self, c: &Cluster) -> Value {
        match self.ds {
            Ds::Cilium => json!({
                "args": ["--config-dir=/tmp/cilium/config-map"],
                "command": ["cilium-agent"],
                "env": [{"name": "K8S_NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "image": "quay.io/cilium/cilium:v1.16.5",
                "imagePullPolicy": "IfNotPresent",
                "name": "cilium-agent",
            }),
            Ds::KubeProxy => json!({
                "command": [
                    "/usr/local/bin/kube-proxy",
                    "--config=/var/lib/kube-proxy/config.conf",
                    "--hostname-override=$(NODE_NAME)",
                ],
                "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}],
                "image": format!("registry.k8s.io/kube-proxy:{}", c.version),
                "imagePullPolicy": "IfNotPresent",
                "name": "kube-proxy",
            }),
            Ds::Kured(k) => crate::kured::container_json(k),
        }
    }

    fn labels(&self) -> Value {
        match self.ds {
            Ds::Kured(k) if !k.labels.is_empty() => json!(k.labels),
            _ => json!({"k8s-app": self.name}),
        }
    }

    fn resource_version(&self, c: &Cluster) -> u64 {
        match self.ds {
            Ds::Cilium => 1,
            Ds::KubeProxy => c.resource_version,
            Ds::Kured(k) => k.resource_version,
        }
    }

    pub fn uid(&self) -> String {
        uid_of(&format!("daemonset/{}/{}", self.namespace, self.name))
    }

    pub fn is_kured(&self) -> bool {
        matches!(self.ds, Ds::Kured(_))
    }
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

pub(crate) fn ds_json(c: &Cluster, l: &Listed) -> Value {
    let (desired, ready) = ds_counts(c);
    let mut annotations = match l.ds {
        Ds::Kured(k) => k.annotations.clone(),
        _ => BTreeMap::new(),
    };
    annotations.insert(
        "deprecated.daemonset.template.generation".to_string(),
        "1".to_string(),
    );
    let labels = l.labels();
    let selector = match l.ds {
        Ds::Kured(k) if k.labels.contains_key("app.kubernetes.io/instance") => json!({
            "app.kubernetes.io/instance": k.labels["app.kubernetes.io/instance"],
            "app.kubernetes.io/name": "kured",
        }),
        _ => labels.clone(),
    };
    let account = if l.is_kured() {
        "kured"
    } else {
        l.name.as_str()
    };
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": rfc3339(cluster_created(c, crate::state::now())),
            "generation": 1,
            "labels": labels,
            "name": l.name,
            "namespace": l.namespace,
            "resourceVersion": l.resource_version(c).to_string(),
            "uid": l.uid(),
        },
        "spec": {
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [l.container(c)],
                    "hostPID": l.is_kured(),
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "serviceAccountName": account,
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

fn ds_row(c: &Cluster, l: &Listed, all: bool) -> Vec<String> {
    let (desired, ready) = ds_counts(c);
    let mut row = Vec::new();
    if all {
        row.push(l.namespace.clone());
    }
    row.extend([
        l.name.clone(),
        desired.to_string(),
        desired.to_string(),
        ready.to_string(),
        desired.to_string(),
        ready.to_string(),
        "kubernetes.io/os=linux".to_string(),
        human_age(crate::state::now() - cluster_created(c, crate::state::now())),
    ]);
    row
}

/// What a human-readable `get` prints when it found nothing.
pub(super) fn no_resources(env: &mut Env, cli: &Cli) -> Res {
    if cli.all_namespaces() {
        complain!(env, "No resources found");
    } else {
        complain!(env, "No resources found in {} namespace.", cli.namespace());
    }
    Res::ok()
}

fn print_json(env: &mut Env, doc: &Value) -> Result<Res> {
    say!(env, "{}", serde_json::to_string_pretty(doc)?);
    Ok(Res::ok())
}

/// What `kubectl get` prints: the object itself when one was asked for by
/// name and found, else a List of them.
pub(super) fn get_doc(by_name: bool, items: Vec<Value>) -> Value {
    if by_name && items.len() == 1 {
        items.into_iter().next().unwrap_or_default()
    } else {
        list_doc(items)
    }
}

pub(super) fn list_doc(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}})
}

/// Prints `doc` as `-o json` or `-o jsonpath=…` asked; `None` for other outputs.
pub(super) fn print_doc(env: &mut Env, cli: &Cli, doc: &Value) -> Result<Option<Res>> {
    if let Some(Ok(t)) = cli.jsonpath() {
        return Ok(Some(match t.render(doc) {
            Ok(text) => {
                let _ = std::io::Write::write_all(&mut *env.out, text.as_bytes());
                Res::ok()
            }
            Err(msg) => Res::fail(env, &msg),
        }));
    }
    if cli.output() == Some("json") {
        return print_json(env, doc).map(Some);
    }
    Ok(None)
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
    let ns = (!cli.all_namespaces()).then(|| cli.namespace());
    let selected: Vec<Listed> = daemonsets(&c, ns)
        .into_iter()
        .filter(|l| name.is_none_or(|want| want == l.name))
        .collect();
    if let Some(want) = name
        && selected.is_empty()
    {
        if cli.switch("ignore-not-found") {
            return Ok(Res::ok());
        }
        return Ok(Res::fail(env, &not_found("daemonsets.apps", want)));
    }
    let items: Vec<Value> = selected.iter().map(|l| ds_json(&c, l)).collect();
    let doc = get_doc(name.is_some(), items);
    if let Some(res) = print_doc(env, cli, &doc)? {
        return Ok(res);
    }
    if cli.output() == Some("name") {
        for l in &selected {
            say!(env, "daemonset.apps/{}", l.name);
        }
        return Ok(Res::ok());
    }
    if selected.is_empty() {
        return Ok(no_resources(env, cli));
    }
    let all = cli.all_namespaces();
    let mut header = Vec::new();
    if all {
        header.push("NAMESPACE".to_string());
    }
    header.extend(
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE SELECTOR",
            "AGE",
        ]
        .map(String::from),
    );
    let mut rows = vec![header];
    rows.extend(selected.iter().map(|l| ds_row(&c, l, all)));
    let _ = std::io::Write::write_all(&mut *env.out, table(&rows, 3).as_bytes());
    Ok(Res::ok())
}

// ---------------------------------------------------------------- ConfigMaps

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
fn cluster_configuration(version: &str, external_etcd: &[String]) -> String {
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
        "apiServer: {{}}\n\
         apiVersion: kubeadm.k8s.io/v1beta4\n\
         caCertificateValidityPeriod: 87600h0m0s\n\
         certificateValidityPeriod: 8760h0m0s\n\
         certificatesDir: /etc/kubernetes/pki\n\
         clusterName: kubernetes\n\
         controllerManager: {{}}\n\
         dns: {{}}\n\
         encryptionAlgorithm: RSA-2048\n\
         {etcd}\
         imageRepository: registry.k8s.io\n\
         kind: ClusterConfiguration\n\
         kubernetesVersion: {version}\n\
         networking:\n  dnsDomain: cluster.local\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\n\
         proxy: {{}}\n\
         scheduler: {{}}\n"
    )
}

pub(crate) fn configmaps_in(c: &Cluster, ns: Option<&str>) -> Vec<Cm> {
    let mut list = Vec::new();
    if ns.is_none_or(|ns| ns == KUBE_SYSTEM) {
        list.push(Cm {
            name: KUBEADM_CONFIG.to_string(),
            namespace: KUBE_SYSTEM.to_string(),
            data: BTreeMap::from([(
                "ClusterConfiguration".to_string(),
                cluster_configuration(&c.version, &c.external_etcd),
            )]),
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
    Forbidden,
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
    match connect(env, cli)? {
        // The GET of the object, then its PATCH.
        Ok(c) => super::round_trip(&c),
        Err(msg) => return Ok(Res::fail(env, &msg)),
    }
    let ns = cli.namespace().to_string();
    let overwrite = cli.switch("overwrite");
    let precondition = cli.flag("resource-version").map(str::to_string);
    let forbidden = env.shared().faults()?.kured_lock_forbidden;
    let outcome = env.shared().update_cluster(|c| {
        let built_in = name == "cilium" || (name == "kube-proxy" && c.kube_proxy);
        if built_in && ns == KUBE_SYSTEM {
            return Ok(Annotated::NotEmulated);
        }
        let next = c.next_resource_version();
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
        // kubectl GETs first (allowed), checks --overwrite, then PATCHes:
        // authorization refuses that before the object is compared.
        if forbidden {
            return Ok(Annotated::Forbidden);
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
        Annotated::Forbidden => Res::fail(
            env,
            &format!(
                "Error from server (Forbidden): daemonsets.apps \"{name}\" is forbidden: User \"{ADMIN_USER}\" \
                 cannot patch resource \"daemonsets\" in API group \"apps\" in the namespace \"{ns}\""
            ),
        ),
        Annotated::Conflict => Res::fail(
            env,
            &format!(
                "Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps \"{name}\": \
                 the object has been modified; please apply your changes to the latest version and try again"
            ),
        ),
    })
}

// ---------------------------------------------------------------- patch

/// What the API server's optimistic concurrency says when the
/// resourceVersion a write carries is not the stored one.
fn modified(resource: &str, name: &str) -> String {
    format!(
        "Error from server (Conflict): Operation cannot be fulfilled on {resource} \"{name}\": \
         the object has been modified; please apply your changes to the latest version and try again"
    )
}

enum Patched {
    Done(bool),
    NotFound,
    Conflict,
}

/// `patch configmap NAME --type=merge -p '{"data":{…},"metadata":{"resourceVersion":"N"}}'`:
/// a JSON merge patch of `data` (a null removes a key), refused with
/// Conflict when it carries a resourceVersion that is no longer the
/// object's. Other patch types and fields are not emulated.
pub(super) fn patch(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let Some((Kind::ConfigMap, Some(name))) = resource(&cli.words[1..]) else {
        return Ok(Res::unsupported(env, args));
    };
    let ns = cli.namespace().to_string();
    let body: Option<Value> = cli.flag("patch").and_then(|p| serde_json::from_str(p).ok());
    let Some(Value::Object(body)) = body else {
        return Ok(Res::unsupported(env, args));
    };
    let data = body.get("data").cloned().unwrap_or(Value::Null);
    let meta = body.get("metadata").cloned().unwrap_or(json!({}));
    let rv = meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .map(str::to_string);
    let understood = cli.flag("type") == Some("merge")
        && body.keys().all(|k| k == "data" || k == "metadata")
        && meta
            .as_object()
            .is_some_and(|m| m.keys().all(|k| k == "resourceVersion"))
        && (meta.get("resourceVersion").is_none() || rv.is_some())
        && (data.is_null()
            || data
                .as_object()
                .is_some_and(|d| d.values().all(|v| v.is_string() || v.is_null())))
        && !(ns == KUBE_SYSTEM && name == KUBEADM_CONFIG);
    if !understood {
        return Ok(Res::unsupported(env, args));
    }
    if let Err(msg) = connect(env, cli)? {
        return Ok(Res::fail(env, &msg));
    }
    let key = format!("{ns}/{name}");
    let outcome = env.shared().update_cluster(|c| {
        let next = c.next_resource_version();
        let Some(cm) = c.configmaps.get_mut(&key) else {
            return Ok(Patched::NotFound);
        };
        if rv
            .as_ref()
            .is_some_and(|rv| *rv != cm.resource_version.to_string())
        {
            return Ok(Patched::Conflict);
        }
        let before = cm.data.clone();
        if let Some(d) = data.as_object() {
            for (k, v) in d {
                match v.as_str() {
                    Some(v) => cm.data.insert(k.clone(), v.to_string()),
                    None => cm.data.remove(k),
                };
            }
        }
        let changed = cm.data != before;
        if changed {
            cm.resource_version = next;
            c.resource_version = next;
        }
        Ok(Patched::Done(changed))
    })?;
    Ok(match outcome {
        Patched::Done(true) => {
            say!(env, "configmap/{name} patched");
            Res::ok()
        }
        Patched::Done(false) => {
            say!(env, "configmap/{name} patched (no change)");
            Res::ok()
        }
        Patched::NotFound => Res::fail(env, &not_found("configmaps", name)),
        Patched::Conflict => Res::fail(env, &modified("configmaps", name)),
    })
}

// ---------------------------------------------------------------- delete --raw

enum Deleted {
    Done(String),
    NotFound,
    Refused(String),
}

/// `delete --raw /api/v1/namespaces/NS/configmaps/NAME -f -`: stdin is the
/// DELETE body (kubectl's rawhttp sends the file as is). The API server
/// checks `preconditions` before deleting (`rest.BeforeDelete`: the uid
/// first, then the resourceVersion, each a Conflict naming the kind) and
/// answers with a `Status` (configmaps do not return the deleted object),
/// which kubectl copies to stdout.
pub(super) fn delete_raw(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let path = cli.flag("raw").unwrap_or_default().to_string();
    let target = path
        .strip_prefix("/api/v1/namespaces/")
        .and_then(|r| r.split_once("/configmaps/"))
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
        .map(|(ns, name)| (ns.to_string(), name.to_string()));
    let Some((ns, name)) = target else {
        return Ok(Res::unsupported(env, args));
    };
    if cli.words.len() != 1 || !matches!(cli.flag("filename"), None | Some("-")) {
        return Ok(Res::unsupported(env, args));
    }
    if ns == KUBE_SYSTEM && name == KUBEADM_CONFIG {
        return Ok(Res::unsupported(env, args));
    }
    let mut body = String::new();
    if cli.flag("filename").is_some() {
        let _ = std::io::Read::read_to_string(&mut env.input, &mut body);
    }
    let options: Value = if body.trim().is_empty() {
        json!({})
    } else {
        match serde_json::from_str(&body) {
            Ok(v @ Value::Object(_)) => v,
            _ => return Ok(Res::unsupported(env, args)),
        }
    };
    let wanted = |field: &str| {
        options
            .get("preconditions")
            .and_then(|p| p.get(field))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (want_uid, want_rv) = (wanted("uid"), wanted("resourceVersion"));
    if let Err(msg) = connect(env, cli)? {
        return Ok(Res::fail(env, &msg));
    }
    let key = format!("{ns}/{name}");
    let outcome = env.shared().update_cluster(|c| {
        let Some(cm) = c.configmaps.get(&key) else {
            return Ok(Deleted::NotFound);
        };
        if let Some(uid) = want_uid.as_ref().filter(|u| **u != cm.uid) {
            return Ok(Deleted::Refused(format!(
                "Error from server (Conflict): Operation cannot be fulfilled on ConfigMap \"{name}\": \
                 the UID in the precondition ({uid}) does not match the UID in record ({}). \
                 The object might have been deleted and then recreated",
                cm.uid
            )));
        }
        if let Some(rv) = want_rv
            .as_ref()
            .filter(|rv| **rv != cm.resource_version.to_string())
        {
            return Ok(Deleted::Refused(format!(
                "Error from server (Conflict): Operation cannot be fulfilled on ConfigMap \"{name}\": \
                 the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). \
                 The object might have been modified",
                cm.resource_version
            )));
        }
        let uid = cm.uid.clone();
        c.configmaps.remove(&key);
        c.resource_version += 1;
        Ok(Deleted::Done(uid))
    })?;
    Ok(match outcome {
        Deleted::Done(uid) => {
            // Field order of metav1.Status as Go encodes it.
            let status = format!(
                "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Success\",\
                 \"details\":{{\"name\":{},\"kind\":\"configmaps\",\"uid\":{}}}}}\n",
                serde_json::to_string(&name)?,
                serde_json::to_string(&uid)?
            );
            let _ = std::io::Write::write_all(&mut *env.out, status.as_bytes());
            Res::ok()
        }
        Deleted::NotFound => Res::fail(env, &not_found("configmaps", &name)),
        Deleted::Refused(msg) => Res::fail(env, &msg),
    })
}

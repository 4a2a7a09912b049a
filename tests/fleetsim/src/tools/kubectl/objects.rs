//! The namespaced objects fleetctl touches: the kube-proxy DaemonSet (whose
//! absence is the point), Kured's DaemonSet (whose lock annotation fleetctl
//! takes with a resource-version precondition, `annotate.rs`), the
//! kubeadm-config ConfigMap and plain ConfigMaps for fleetctl's own lock
//! (`configmaps.rs`). Every change happens inside one `update_cluster`
//! call, so preconditions hold under concurrent callers.

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{Value, json};

use super::nodes::{Readiness, not_found, readiness};
use super::{Cli, Env, Kind, Res, connect, resource};
use crate::state::{Cluster, DaemonSet};
use crate::tools::util::{human_age, rfc3339, table, uid_of};
use crate::tools::{complain, say};

pub(super) use super::annotate::annotate;
pub(crate) use super::configmaps::{cm_json, configmaps_in};
pub(super) use super::configmaps::{create, delete, get_configmaps};

pub(super) const KUBEADM_CONFIG: &str = "kubeadm-config";
/// The user kubeadm's admin.conf authenticates as.
pub(super) const ADMIN_USER: &str = "kubernetes-admin";
pub(super) const KUBE_SYSTEM: &str = "kube-system";

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

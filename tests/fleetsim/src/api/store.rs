//! The objects the API serves, read from the one cluster state
//! (`cluster.json`, `faults.json`) through the renderers of `objects`
//! (nodes, pods, DaemonSets, ConfigMaps, PodDisruptionBudgets). What only the API does
//! lives here, in the supervisor's memory: pods deleted or evicted through
//! it (see [`Removed`]).
//!
//! Selectors follow `k8s.io/apimachinery/pkg/labels` (`=`, `==`, `!=`,
//! `in`, `notin`, `key`, `!key`) and `pkg/fields` (`=`, `==`, `!=` on the
//! fields each resource's registry declares selectable:
//! `pkg/registry/core/pod/strategy.go` `PodToSelectableFields`,
//! `pkg/registry/core/node/strategy.go` `NodeToSelectableFields`, and
//! `metadata.name`/`metadata.namespace` everywhere); another field is
//! refused as the apiserver does (`field label not supported: <f>`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::{Value, json};

use super::objects::{self, budgets, configmaps, daemonsets, nodes, pods};
use super::status::{self, Failure, Gr};
use crate::state::{Cluster, Faults, Role};
use crate::tools::util::{rfc3339, uid_of};

/// One served resource.
#[derive(Debug)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub name: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub verbs: &'static [&'static str],
    pub short: &'static [&'static str],
    /// Fields a field selector may name besides `metadata.name` and
    /// `metadata.namespace`.
    pub fields: &'static [&'static str],
}

impl Resource {
    pub fn gr(&self) -> Gr<'static> {
        Gr {
            group: self.group,
            resource: self.name,
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const ALL: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const NO_COLLECTION: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

pub const RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        name: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        verbs: ALL,
        short: &["cm"],
        fields: &[],
    },
    Resource {
        group: "",
        version: "v1",
        name: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        verbs: NO_COLLECTION,
        short: &["ns"],
        fields: &["status.phase"],
    },
    Resource {
        group: "",
        version: "v1",
        name: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        verbs: ALL,
        short: &["no"],
        fields: &["spec.unschedulable"],
    },
    Resource {
        group: "",
        version: "v1",
        name: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        verbs: ALL,
        short: &["po"],
        fields: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
    },
    Resource {
        group: "apps",
        version: "v1",
        name: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        namespaced: true,
        verbs: ALL,
        short: &["ds"],
        fields: &[],
    },
    Resource {
        group: "coordination.k8s.io",
        version: "v1",
        name: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        verbs: ALL,
        short: &[],
        fields: &[],
    },
    // Rook's CRD (deploy/examples/crds.yaml): read here, written only by
    // the emulated operator. Served whether or not the scenario has Ceph;
    // without it, the list is empty.
    Resource {
        group: "ceph.rook.io",
        version: "v1",
        name: "cephclusters",
        singular: "cephcluster",
        kind: "CephCluster",
        namespaced: true,
        verbs: &["get", "list", "watch"],
        short: &[],
        fields: &[],
    },
    Resource {
        group: "policy",
        version: "v1",
        name: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        verbs: ALL,
        short: &["pdb"],
        fields: &[],
    },
];

/// The resource served at `group/version` under `name`.
pub fn resource(group: &str, version: &str, name: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.name == name)
}

/// Pods deleted or evicted through the API. The sim has no scheduler: a
/// pod a controller owns comes back, as its controller's replacement (same
/// name, a new uid), once its node is schedulable and Ready again; a bare
/// pod stays gone.
#[derive(Debug, Default)]
pub struct Removed {
    /// `namespace/name` → (times removed, gone now).
    pods: Mutex<BTreeMap<String, (u32, bool)>>,
}

impl Removed {
    pub fn remove(&self, namespace: &str, name: &str) {
        if let Ok(mut m) = self.pods.lock() {
            let e = m.entry(format!("{namespace}/{name}")).or_insert((0, false));
            e.0 += 1;
            e.1 = true;
        }
    }

    /// The pods the API lists now, with the uid of their current incarnation.
    fn visible(&self, c: &Cluster, now: f64) -> Vec<pods::ApiPod> {
        let Ok(mut m) = self.pods.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for mut p in pods::all_pods(c, now) {
            let key = format!("{}/{}", p.namespace, p.name);
            if let Some((times, gone)) = m.get_mut(&key) {
                let schedulable = c.nodes.get(&p.node).is_some_and(|n| !n.unschedulable);
                let ready = c.node_ready(&p.node, now);
                // The kubelet recreates a mirror pod, a DaemonSet's pod
                // tolerates the cordon; other controllers wait for it to go.
                let back = match p.owner_kind.as_deref() {
                    Some("Node" | "DaemonSet") => ready,
                    Some(_) => ready && schedulable,
                    None => false,
                };
                if *gone && back {
                    *gone = false;
                }
                if *gone {
                    continue;
                }
                p.json["metadata"]["uid"] = json!(uid_of(&format!("pod/{key}/{times}")));
            }
            out.push(p);
        }
        out
    }
}

/// The cluster as one request sees it.
pub struct Snapshot {
    pub cluster: Cluster,
    pub faults: Faults,
    pub now: f64,
    pub(crate) pods: Vec<pods::ApiPod>,
}

impl Snapshot {
    pub fn new(cluster: Cluster, faults: Faults, removed: &Removed) -> Snapshot {
        let now = crate::state::now();
        let pods = removed.visible(&cluster, now);
        Snapshot {
            cluster,
            faults,
            now,
            pods,
        }
    }

    /// The list's resourceVersion: the cluster's.
    pub fn resource_version(&self) -> String {
        self.cluster.resource_version.to_string()
    }

    /// Every object of `r`, in etcd key order (namespace, then name).
    pub fn objects(&self, r: &Resource) -> Vec<Value> {
        let c = &self.cluster;
        match r.name {
            "nodes" => c
                .nodes
                .iter()
                .enumerate()
                .map(|(i, (name, n))| nodes::node_json(c, name, n, i, self.now))
                .collect(),
            "pods" => self.pods.iter().map(|p| p.json.clone()).collect(),
            "configmaps" => configmaps::configmaps_in(c, None)
                .iter()
                .map(configmaps::cm_json)
                .collect(),
            "daemonsets" => daemonsets::daemonsets(c, None)
                .iter()
                .map(|l| daemonsets::ds_json(c, l))
                .collect(),
            "poddisruptionbudgets" => {
                let created = objects::cluster_created(c, self.now);
                budgets::budgets(c, &self.faults, &self.pods)
                    .iter()
                    .map(|b| budgets::json(b, created, c.resource_version))
                    .collect()
            }
            "namespaces" => self.namespaces(),
            "cephclusters" => c
                .ceph
                .iter()
                .map(|spec| crate::ceph::cluster_json(c, &self.faults, spec, self.now))
                .collect(),
            "leases" => self.leases(),
            _ => Vec::new(),
        }
    }

    /// One object by namespace (empty for cluster-scoped) and name.
    pub fn get(&self, r: &Resource, namespace: &str, name: &str) -> Result<Value, Failure> {
        self.objects(r)
            .into_iter()
            .find(|o| meta(o, "name") == name && meta(o, "namespace") == namespace)
            .ok_or_else(|| status::not_found(r.gr(), name))
    }

    fn namespaces(&self) -> Vec<Value> {
        let c = &self.cluster;
        let mut names: BTreeSet<String> =
            ["default", "kube-node-lease", "kube-public", "kube-system"]
                .map(String::from)
                .into();
        names.extend(self.pods.iter().map(|p| p.namespace.clone()));
        names.extend(
            c.configmaps
                .keys()
                .filter_map(|k| k.split_once('/').map(|(ns, _)| ns.to_string())),
        );
        names.extend(c.pdbs.iter().map(|p| p.namespace.clone()));
        names.extend(c.kured.iter().map(|k| k.namespace.clone()));
        names.extend(c.ceph.iter().map(|k| k.namespace.clone()));
        let created = rfc3339(objects::cluster_created(c, self.now));
        names
            .into_iter()
            .map(|ns| {
                json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "creationTimestamp": created,
                        "labels": {"kubernetes.io/metadata.name": ns},
                        "name": ns,
                        "resourceVersion": "1",
                        "uid": uid_of(&format!("namespace/{ns}")),
                    },
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                })
            })
            .collect()
    }

    /// The kubelets' heartbeat leases (`kube-node-lease/<node>`, renewed
    /// while the kubelet runs) and the control-plane components' leader
    /// election leases in `kube-system`, held by the first control plane
    /// whose static pods run.
    fn leases(&self) -> Vec<Value> {
        let c = &self.cluster;
        let lease = |ns: &str, name: &str, holder: &str, renew: f64, duration: u64| {
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "creationTimestamp": rfc3339(objects::cluster_created(c, self.now)),
                    "name": name,
                    "namespace": ns,
                    "resourceVersion": c.resource_version.to_string(),
                    "uid": uid_of(&format!("lease/{ns}/{name}")),
                },
                "spec": {
                    "holderIdentity": holder,
                    "leaseDurationSeconds": duration,
                    "renewTime": rfc3339(renew),
                },
            })
        };
        let mut out = Vec::new();
        let leader = c.nodes.iter().find(|(name, n)| {
            n.role == Role::ControlPlane && c.static_pods_running(name, self.now)
        });
        if let Some((name, _)) = leader {
            for component in ["kube-controller-manager", "kube-scheduler"] {
                let holder = format!("{name}_{}", uid_of(&format!("{component}@{name}")));
                out.push(lease("kube-system", component, &holder, self.now, 15));
            }
        }
        for (name, n) in &c.nodes {
            let renew = if n.kubelet_running().is_some() {
                self.now
            } else {
                n.booted_at
            };
            out.push(lease("kube-node-lease", name, name, renew, 40));
        }
        // etcd key order: namespace, then name.
        out.sort_by(|a, b| {
            (meta(a, "namespace"), meta(a, "name")).cmp(&(meta(b, "namespace"), meta(b, "name")))
        });
        out
    }
}

/// `metadata.<field>` of an object as a string ("" when absent).
pub fn meta<'a>(o: &'a Value, field: &str) -> &'a str {
    o["metadata"][field].as_str().unwrap_or("")
}

/// A field of an object as a field selector compares it.
fn field_value(o: &Value, path: &str) -> String {
    let mut v = o;
    for part in path.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Null if path == "spec.unschedulable" || path == "spec.hostNetwork" => "false".into(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A parsed field selector: (field, negated, value) terms, ANDed.
pub struct Fields(Vec<(String, bool, String)>);

impl Fields {
    pub fn parse(r: &Resource, text: &str) -> Result<Fields, Failure> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (f, neg, v) = if let Some((f, v)) = term.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, false, v)
            } else {
                return Err(status::bad_request(&format!(
                    "invalid field selector: {term}"
                )));
            };
            let f = f.trim();
            let known = f == "metadata.name" || f == "metadata.namespace" || r.fields.contains(&f);
            if !known {
                return Err(status::bad_request(&format!(
                    "field label not supported: {f}"
                )));
            }
            terms.push((f.to_string(), neg, v.trim().to_string()));
        }
        Ok(Fields(terms))
    }

    pub fn matches(&self, o: &Value) -> bool {
        self.0
            .iter()
            .all(|(f, neg, v)| (field_value(o, f) == *v) != *neg)
    }

    /// The name a `metadata.name=` term pins, if any.
    pub fn name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(f, neg, _)| f == "metadata.name" && !neg)
            .map(|(_, _, v)| v.as_str())
    }
}

enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector, its requirements ANDed.
pub struct Labels(Vec<Req>);

/// Splits on commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, ch) in text.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

impl Labels {
    pub fn parse(text: &str) -> Result<Labels, Failure> {
        let bad = |t: &str| status::bad_request(&format!("unable to parse requirement: {t}"));
        let mut reqs = Vec::new();
        for term in split_top(text)
            .into_iter()
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let set = |rest: &str| -> Option<Vec<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                Some(inner.split(',').map(|v| v.trim().to_string()).collect())
            };
            let req = if let Some(k) = term.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = term.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = term.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = term.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set(rest).ok_or_else(|| bad(term))?)
            } else if let Some((k, rest)) = term.split_once(" in ") {
                Req::In(k.trim().into(), set(rest).ok_or_else(|| bad(term))?)
            } else if term
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            {
                Req::Exists(term.to_string())
            } else {
                return Err(bad(term));
            };
            reqs.push(req);
        }
        Ok(Labels(reqs))
    }

    pub fn matches(&self, o: &Value) -> bool {
        let labels = &o["metadata"]["labels"];
        let get = |k: &str| labels[k].as_str();
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v),
            Req::Ne(k, v) => get(k) != Some(v),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(labels: Value, node: &str) -> Value {
        json!({"metadata": {"name": "p", "namespace": "default", "labels": labels}, "spec": {"nodeName": node}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selectors_match_as_the_apiserver_does() {
        let p = pod(json!({"app": "web", "tier": "fe"}), "w-1");
        let ok = |s: &str| Labels::parse(s).unwrap().matches(&p);
        assert!(ok("app=web"));
        assert!(ok("app==web,tier"));
        assert!(!ok("app!=web"));
        assert!(ok("app in (web, db),!missing"));
        assert!(!ok("app notin (web)"));
        assert!(ok(""));
        assert!(Labels::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors_know_only_the_selectable_fields() {
        let pods = resource("", "v1", "pods").unwrap();
        let p = pod(json!({}), "w-1");
        assert!(
            Fields::parse(pods, "spec.nodeName=w-1")
                .unwrap()
                .matches(&p)
        );
        assert!(
            !Fields::parse(pods, "spec.nodeName!=w-1,status.phase=Running")
                .unwrap()
                .matches(&p)
        );
        let err = Fields::parse(pods, "spec.containers=x").err().unwrap();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.body["message"],
            "field label not supported: spec.containers"
        );
        let nodes = resource("", "v1", "nodes").unwrap();
        let n = json!({"metadata": {"name": "w-1"}, "spec": {}});
        assert!(
            Fields::parse(nodes, "spec.unschedulable=false")
                .unwrap()
                .matches(&n)
        );
    }
}

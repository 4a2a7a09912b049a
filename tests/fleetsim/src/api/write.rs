//! Changes through the API: update (PUT), patch, create, delete with
//! preconditions. Each runs inside one
//! `update_cluster` call, so the precondition, the check and the write see
//! one state, as etcd's compare-and-swap does.
//!
//! The sim stores only what fleetctl and Kured change: a Node's
//! `spec.unschedulable` and the labels `kubectl label` adds (checked as
//! the API server checks them: `labels.rs`), Kured's DaemonSet's annotations and labels, the
//! data of ConfigMaps other than kubeadm-config, pods' existence. A write
//! that changes anything else is refused with 422 naming the field, rather
//! than accepted and silently forgotten. `status` sent to the main resource
//! is ignored, as every registry's `PrepareForUpdate` does.
//!
//! Messages: `storage.OptimisticLockErrorMsg` on a stale resourceVersion;
//! `rest.BeforeDelete`'s precondition Conflicts. Evictions are `evict.rs`.

use serde_json::{Value, json};

use super::patch;
use super::status::{self, Failure, MODIFIED};
use super::store::{Removed, Resource, Snapshot, meta};
use crate::state::{Cluster, Faults, Shared};
use crate::tools::util::uid_of;

/// The answer to a successful write: status code and body.
pub type Written = (u16, Value);

/// How a request body patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            _ => None,
        }
    }
}

/// What a write wants done to the stored object.
pub enum Change {
    Update(Value),
    Patch(PatchType, Value),
}

/// Removes what the sim does not compare: server-managed metadata, status,
/// and the writable fields of the resource (compared separately).
fn comparable(r: &Resource, o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(m) = o["metadata"].as_object_mut() {
        for k in [
            "resourceVersion",
            "managedFields",
            "generation",
            "creationTimestamp",
            "selfLink",
        ] {
            m.remove(k);
        }
    }
    if let Some(m) = o.as_object_mut() {
        m.remove("status");
    }
    match r.name {
        "nodes" => {
            // Compared by `node_labels`.
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove("labels");
            }
            if let Some(spec) = o["spec"].as_object_mut() {
                spec.remove("unschedulable");
                if let Some(Value::Array(t)) = spec.get_mut("taints") {
                    t.retain(|t| t["key"] != "node.kubernetes.io/unschedulable");
                }
            }
        }
        "daemonsets" => {
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove("annotations");
                m.remove("labels");
            }
        }
        "configmaps" => {
            if let Some(m) = o.as_object_mut() {
                m.remove("data");
            }
        }
        _ => {}
    }
    o
}

/// The first path where `a` and `b` differ, for the refusal.
fn first_difference(a: &Value, b: &Value, at: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if va != vb {
                    let sub = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    return first_difference(va, vb, &sub);
                }
            }
            at.to_string()
        }
        _ => at.to_string(),
    }
}

fn kubeadm_config(ns: &str, name: &str) -> bool {
    ns == "kube-system" && name == "kubeadm-config"
}

/// The labels a write leaves on a Node beyond the kubelet's and kubeadm's
/// own (`set`: those stored now), refused as the API server refuses them:
/// 422 naming `metadata.labels` and the first key or value
/// `ValidateLabels` rejects (k8s.io/apimachinery
/// `pkg/apis/meta/v1/validation`: `IsQualifiedName` on the key,
/// `IsValidLabelValue` on the value, with their messages). Changing or
/// removing one of the kubelet's labels is not modelled, and refused so.
fn node_labels(
    r: &Resource,
    name: &str,
    set: &std::collections::BTreeMap<String, String>,
    current: &Value,
    new: &Value,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let strings = |v: &Value| -> Result<std::collections::BTreeMap<String, String>, Failure> {
        serde_json::from_value(if v.is_null() { json!({}) } else { v.clone() })
            .map_err(|e| status::bad_request(&format!("metadata.labels: {e}")))
    };
    let now = strings(&current["metadata"]["labels"])?;
    let mut want = strings(&new["metadata"]["labels"])?;
    for (k, v) in &want {
        if let Some(why) = super::labels::key_error(k).or_else(|| super::labels::value_error(v)) {
            let bad = if super::labels::key_error(k).is_some() {
                k
            } else {
                v
            };
            return Err(status::invalid(
                r.gr(),
                r.kind,
                name,
                &format!("metadata.labels: Invalid value: {bad:?}: {why}"),
            ));
        }
    }
    for (k, v) in now.iter().filter(|(k, _)| !set.contains_key(*k)) {
        if want.remove(k).as_ref() != Some(v) {
            return Err(status::invalid(
                r.gr(),
                r.kind,
                name,
                &format!("metadata.labels.{k}: fleetsim does not model changes to this label"),
            ));
        }
    }
    Ok(want)
}

/// Stores `new` over `current` of `r`; false when nothing changed.
fn store(
    c: &mut Cluster,
    r: &Resource,
    ns: &str,
    name: &str,
    current: &Value,
    new: &Value,
) -> Result<bool, Failure> {
    let (a, b) = (comparable(r, current), comparable(r, new));
    let fixed = (r.name == "daemonsets"
        && c.kured
            .as_ref()
            .is_none_or(|k| k.namespace != ns || k.name != name))
        || (r.name == "configmaps" && kubeadm_config(ns, name))
        || !matches!(r.name, "nodes" | "daemonsets" | "configmaps");
    if a != b || fixed && current != new {
        let at = if a != b {
            first_difference(&a, &b, "")
        } else {
            "metadata".into()
        };
        return Err(status::invalid(
            r.gr(),
            r.kind,
            name,
            &format!(
                "{at}: fleetsim does not model changes to this field of this {}",
                r.kind
            ),
        ));
    }
    let next = c.next_resource_version();
    let changed = match r.name {
        "nodes" => {
            let want = new["spec"]["unschedulable"].as_bool().unwrap_or(false);
            let Some(n) = c.nodes.get_mut(name) else {
                return Err(status::not_found(r.gr(), name));
            };
            let labels = node_labels(r, name, &n.labels, current, new)?;
            let changed = n.unschedulable != want || n.labels != labels;
            n.unschedulable = want;
            n.labels = labels;
            changed
        }
        "daemonsets" => {
            let strings =
                |v: &Value| -> Result<std::collections::BTreeMap<String, String>, Failure> {
                    serde_json::from_value(if v.is_null() { json!({}) } else { v.clone() })
                        .map_err(|e| status::bad_request(&format!("metadata: {e}")))
                };
            let annotations = strings(&new["metadata"]["annotations"])?;
            let labels = strings(&new["metadata"]["labels"])?;
            let Some(k) = c.kured.as_mut() else {
                return Err(status::not_found(r.gr(), name));
            };
            // The rendered object carries the template generation annotation.
            let mut annotations = annotations;
            annotations.remove("deprecated.daemonset.template.generation");
            let changed =
                k.annotations != annotations || (!k.labels.is_empty() && k.labels != labels);
            k.annotations = annotations;
            if !k.labels.is_empty() {
                k.labels = labels;
            }
            if changed {
                k.resource_version = next;
            }
            changed
        }
        _ => {
            let data: std::collections::BTreeMap<String, String> =
                serde_json::from_value(if new["data"].is_null() {
                    json!({})
                } else {
                    new["data"].clone()
                })
                .map_err(|e| status::bad_request(&format!("data: {e}")))?;
            let Some(cm) = c.configmaps.get_mut(&format!("{ns}/{name}")) else {
                return Err(status::not_found(r.gr(), name));
            };
            let changed = cm.data != data;
            cm.data = data;
            if changed {
                cm.resource_version = next;
            }
            changed
        }
    };
    if changed {
        c.resource_version = next;
    }
    Ok(changed)
}

pub(super) fn snapshot_of(c: &Cluster, faults: &Faults, removed: &Removed) -> Snapshot {
    Snapshot::new(c.clone(), faults.clone(), removed)
}

/// PUT or PATCH of `r`'s object `ns/name`.
pub fn modify(
    shared: &Shared,
    removed: &Removed,
    r: &Resource,
    ns: &str,
    name: &str,
    change: Change,
) -> Result<Written, Failure> {
    let faults = shared
        .faults()
        .map_err(|e| status::internal(&format!("{e:#}")))?;
    let outcome = shared.update_cluster(|c| {
        Ok((|| {
            let current = snapshot_of(c, &faults, removed).get(r, ns, name)?;
            let new = match &change {
                Change::Update(body) => {
                    if meta(body, "name") != name {
                        return Err(status::bad_request(&format!(
                            "the name of the object ({}) does not match the name on the URL ({name})",
                            meta(body, "name")
                        )));
                    }
                    body.clone()
                }
                Change::Patch(kind, body) => {
                    let mut doc = current.clone();
                    match kind {
                        PatchType::Json => patch::json_patch(&mut doc, body).map_err(|e| {
                            status::invalid(r.gr(), r.kind, name, &e)
                        })?,
                        PatchType::Strategic if patch::directive(body).is_some() => {
                            let d = patch::directive(body).unwrap_or_default();
                            return Err(status::invalid(
                                r.gr(),
                                r.kind,
                                name,
                                &format!("{d}: fleetsim does not model strategic merge directives"),
                            ));
                        }
                        _ => patch::merge(&mut doc, body),
                    }
                    doc
                }
            };
            let sent = meta(&new, "resourceVersion");
            if !sent.is_empty() && sent != meta(&current, "resourceVersion") {
                return Err(status::conflict(r.gr(), name, MODIFIED));
            }
            store(c, r, ns, name, &current, &new)?;
            snapshot_of(c, &faults, removed).get(r, ns, name)
        })())
    });
    match outcome {
        Ok(Ok(o)) => Ok((200, o)),
        Ok(Err(f)) => Err(f),
        Err(e) => Err(status::internal(&format!("{e:#}"))),
    }
}

/// POST of a ConfigMap (the only kind the sim creates).
pub fn create(shared: &Shared, r: &Resource, ns: &str, body: &Value) -> Result<Written, Failure> {
    let name = meta(body, "name").to_string();
    if r.name != "configmaps" {
        return Err(status::method_not_supported(r.gr(), "create"));
    }
    if name.is_empty() {
        return Err(status::invalid(
            r.gr(),
            r.kind,
            "",
            "metadata.name: Required value: name or generateName is required",
        ));
    }
    let body_ns = meta(body, "namespace");
    if !body_ns.is_empty() && body_ns != ns {
        return Err(status::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let data: std::collections::BTreeMap<String, String> =
        serde_json::from_value(if body["data"].is_null() {
            json!({})
        } else {
            body["data"].clone()
        })
        .map_err(|e| status::bad_request(&format!("data: {e}")))?;
    let key = format!("{ns}/{name}");
    let outcome = shared.update_cluster(|c| {
        if c.configmaps.contains_key(&key) || kubeadm_config(ns, &name) {
            return Ok(Err(status::already_exists(r.gr(), &name)));
        }
        let next = c.next_resource_version();
        let created = crate::state::now();
        let cm = crate::state::ConfigMap {
            data,
            resource_version: next,
            created,
            uid: uid_of(&format!("configmap/{key}/{created}/{next}")),
        };
        c.configmaps.insert(key.clone(), cm);
        c.resource_version = next;
        Ok(Ok(()))
    });
    match outcome {
        Ok(Ok(())) => {
            let c = shared
                .cluster()
                .map_err(|e| status::internal(&format!("{e:#}")))?;
            let o = Snapshot::new(c, Faults::default(), &Removed::default()).get(r, ns, &name)?;
            Ok((201, o))
        }
        Ok(Err(f)) => Err(f),
        Err(e) => Err(status::internal(&format!("{e:#}"))),
    }
}

/// `rest.BeforeDelete`'s preconditions: the uid, then the resourceVersion.
pub(super) fn preconditions(
    kind: &str,
    name: &str,
    options: &Value,
    current: &Value,
) -> Result<(), Failure> {
    let gr = status::Gr {
        group: "",
        resource: kind,
    };
    let pre = &options["preconditions"];
    if let Some(uid) = pre["uid"].as_str().filter(|u| *u != meta(current, "uid")) {
        return Err(status::conflict(
            gr,
            name,
            &format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                meta(current, "uid")
            ),
        ));
    }
    if let Some(rv) = pre["resourceVersion"]
        .as_str()
        .filter(|v| *v != meta(current, "resourceVersion"))
    {
        return Err(status::conflict(
            gr,
            name,
            &format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                meta(current, "resourceVersion")
            ),
        ));
    }
    Ok(())
}

/// DELETE of a ConfigMap (answered with a Status, as its registry does not
/// return the deleted object) or a pod (answered with the pod).
pub fn delete(
    shared: &Shared,
    removed: &Removed,
    r: &Resource,
    ns: &str,
    name: &str,
    options: &Value,
) -> Result<Written, Failure> {
    let faults = shared
        .faults()
        .map_err(|e| status::internal(&format!("{e:#}")))?;
    let outcome = shared.update_cluster(|c| {
        Ok((|| {
            let current = snapshot_of(c, &faults, removed).get(r, ns, name)?;
            match r.name {
                "configmaps" if !kubeadm_config(ns, name) => {
                    preconditions(r.kind, name, options, &current)?;
                    c.configmaps.remove(&format!("{ns}/{name}"));
                    c.resource_version = c.next_resource_version();
                    Ok((
                        200,
                        status::success(Some(
                            json!({"name": name, "kind": r.name, "uid": meta(&current, "uid")}),
                        )),
                    ))
                }
                "pods" => {
                    preconditions(r.kind, name, options, &current)?;
                    removed.remove(ns, name);
                    Ok((200, current))
                }
                _ => Err(status::method_not_supported(r.gr(), "delete")),
            }
        })())
    });
    match outcome {
        Ok(r) => r,
        Err(e) => Err(status::internal(&format!("{e:#}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Role;
    use crate::tools::testutil::Fleet;

    fn fleet() -> Fleet {
        let f = Fleet::new();
        f.node("cp-1", Role::ControlPlane, "v1.34.2");
        f.node("w-1", Role::Worker, "v1.34.2");
        f
    }

    #[test]
    fn patches_store_what_is_modelled_and_refuse_the_rest() {
        let f = fleet();
        let shared = f.shared();
        let removed = Removed::default();
        let nodes = super::super::store::resource("", "v1", "nodes").unwrap();
        let before = {
            let snap = Snapshot::new(shared.cluster().unwrap(), Faults::default(), &removed);
            meta(&snap.get(nodes, "", "w-1").unwrap(), "resourceVersion").to_string()
        };
        let cordon = Change::Patch(
            PatchType::Strategic,
            json!({"spec": {"unschedulable": true}}),
        );
        let (code, node) = modify(&shared, &removed, nodes, "", "w-1", cordon).unwrap();
        assert_eq!(code, 200);
        assert_eq!(node["spec"]["unschedulable"], true);
        assert!(shared.cluster().unwrap().nodes["w-1"].unschedulable);
        let stale = Change::Patch(
            PatchType::Merge,
            json!({"metadata": {"resourceVersion": before}, "spec": {"unschedulable": null}}),
        );
        let err = modify(&shared, &removed, nodes, "", "w-1", stale).unwrap_err();
        assert_eq!(err.code, 409);
        assert_eq!(
            err.body["message"],
            format!("Operation cannot be fulfilled on nodes \"w-1\": {MODIFIED}")
        );
        // `kubectl label node w-1 x=y --overwrite`: a merge patch of the
        // labels, stored and shown.
        let label = Change::Patch(
            PatchType::Merge,
            json!({"metadata": {"labels": {"x": "y"}}}),
        );
        let (_, node) = modify(&shared, &removed, nodes, "", "w-1", label).unwrap();
        assert_eq!(node["metadata"]["labels"]["x"], "y");
        assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], "w-1");
        assert_eq!(shared.cluster().unwrap().nodes["w-1"].labels["x"], "y");
        // A value the API server's ValidateLabels refuses: 422, nothing stored.
        let bad = Change::Patch(
            PatchType::Merge,
            json!({"metadata": {"labels": {"x": "not ok"}}}),
        );
        let err = modify(&shared, &removed, nodes, "", "w-1", bad).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(
            err.body["message"].as_str().unwrap().starts_with(
                "Node \"w-1\" is invalid: metadata.labels: Invalid value: \"not ok\": a valid label"
            ),
            "{}",
            err.body
        );
        assert_eq!(shared.cluster().unwrap().nodes["w-1"].labels["x"], "y");
        // The kubelet's own labels are not modelled: refused.
        let theirs = Change::Patch(
            PatchType::Merge,
            json!({"metadata": {"labels": {"kubernetes.io/hostname": null}}}),
        );
        assert_eq!(
            modify(&shared, &removed, nodes, "", "w-1", theirs)
                .unwrap_err()
                .code,
            422
        );
        let directive = Change::Patch(
            PatchType::Strategic,
            json!({"spec": {"taints": [{"$patch": "delete"}]}}),
        );
        assert_eq!(
            modify(&shared, &removed, nodes, "", "w-1", directive)
                .unwrap_err()
                .code,
            422
        );
        assert!(
            shared.cluster().unwrap().nodes["w-1"].unschedulable,
            "refused writes change nothing"
        );
    }
}

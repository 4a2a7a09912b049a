//! The eviction subresource, `POST pods/<name>/eviction`, as
//! `pkg/registry/core/pod/storage/eviction.go` decides it: a pod not
//! Running is deleted without a budget; a budget with an empty selector
//! selects nothing; more than one budget is a 500 ("This pod has more than
//! one PodDisruptionBudget, which the eviction subresource does not
//! support."); one whose `disruptionsAllowed` is 0 refuses with 429 "Cannot
//! evict pod as it would violate the pod's disruption budget." and the
//! `DisruptionBudget` cause "The disruption budget %s needs %d healthy pods
//! and has %d currently", unless the pod is not Ready and the budget has
//! its healthy pods without it. NodeRestriction lets a node evict only its
//! own pods ("node %s can only evict pods with spec.nodeName set to
//! itself").

use serde_json::{Value, json};

use super::identity::User;
use super::status::{self, Failure};
use super::store::{Removed, meta};
use super::write::{Written, preconditions, snapshot_of};
use crate::state::Shared;

/// POST `pods/<name>/eviction`.
pub fn evict(
    shared: &Shared,
    removed: &Removed,
    user: &User,
    ns: &str,
    name: &str,
    body: &Value,
) -> Result<Written, Failure> {
    let pods = super::store::resource("", "v1", "pods")
        .ok_or_else(|| status::internal("no pods resource"))?;
    if meta(body, "name") != name {
        return Err(status::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let faults = shared
        .faults()
        .map_err(|e| status::internal(&format!("{e:#}")))?;
    // One lock from the budget's check to the pod's removal, as the
    // registry's decrement of disruptionsAllowed is one compare-and-swap.
    let outcome = shared.update_cluster(|c| {
        Ok((|| {
    let snap = snapshot_of(c, &faults, removed);
    let pod = snap.get(pods, ns, name)?;
    if let Some(node) = user.node()
        && pod["spec"]["nodeName"].as_str() != Some(node)
    {
        return Err(status::forbidden(
            pods.gr(),
            name,
            &format!("node {node} can only evict pods with spec.nodeName set to itself"),
        ));
    }
    let options = body.get("deleteOptions").cloned().unwrap_or(json!({}));
    let phase = pod["status"]["phase"].as_str().unwrap_or("");
    let ignores_budgets = matches!(phase, "Succeeded" | "Failed" | "Pending");
    if !ignores_budgets {
        let api = snap.pods.iter().find(|p| p.namespace == ns && p.name == name);
        let budgets: Vec<_> = super::objects::budgets::budgets(&snap.cluster, &snap.faults, &snap.pods)
            .into_iter()
            .filter(|b| {
                let empty = b.spec.match_labels.is_empty() && b.spec.match_expressions.is_empty();
                !empty && api.is_some_and(|p| b.covers(p))
            })
            .collect();
        if budgets.len() > 1 {
            return Err(Failure {
                code: 500,
                body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.", "code": 500}),
            });
        }
        if let Some(b) = budgets.first() {
            let ready = api.is_some_and(|p| p.ready);
            let unready_spare = !ready && b.healthy >= b.desired && b.desired > 0;
            if !unready_spare && b.allowed <= 0 {
                return Err(status::too_many_requests(
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    0,
                    vec![json!({"reason": "DisruptionBudget", "message": format!(
                        "The disruption budget {} needs {} healthy pods and has {} currently",
                        b.spec.name, b.desired, b.healthy
                    )})],
                ));
            }
        }
    }
    preconditions("Pod", name, &options, &pod)?;
    removed.remove(ns, name);
    Ok(())
        })())
    });
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(f)) => return Err(f),
        Err(e) => return Err(status::internal(&format!("{e:#}"))),
    }
    Ok((
        201,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::store::Snapshot;
    use crate::state::Faults;
    use crate::state::{PdbSpec, Role};
    use crate::tools::testutil::Fleet;

    fn fleet() -> Fleet {
        let f = Fleet::new();
        f.node("cp-1", Role::ControlPlane, "v1.34.2");
        f.node("w-1", Role::Worker, "v1.34.2");
        f
    }

    fn admin() -> User {
        User {
            name: "kubernetes-admin".into(),
            groups: vec!["kubeadm:cluster-admins".into()],
        }
    }

    fn budget(name: &str, labels: &[(&str, &str)]) -> PdbSpec {
        PdbSpec {
            namespace: "default".into(),
            name: name.into(),
            min_available: Some(json!(1)),
            match_labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..PdbSpec::default()
        }
    }

    /// The web pod on w-1.
    fn web(shared: &Shared, removed: &Removed) -> Option<String> {
        let snap = Snapshot::new(shared.cluster().unwrap(), Faults::default(), removed);
        snap.pods
            .iter()
            .find(|p| p.node == "w-1" && p.name.starts_with("web-"))
            .map(|p| p.name.clone())
    }

    fn eviction(name: &str) -> Value {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn a_budget_that_allows_nothing_refuses_with_429_and_its_cause() {
        let f = fleet();
        let shared = f.shared();
        shared
            .update_cluster(|c| {
                c.pdbs.push(budget("web", &[("app", "web")]));
                Ok(())
            })
            .unwrap();
        let removed = Removed::default();
        let pod = web(&shared, &removed).unwrap();
        let err = evict(
            &shared,
            &removed,
            &admin(),
            "default",
            &pod,
            &eviction(&pod),
        )
        .unwrap_err();
        assert_eq!(err.code, 429);
        assert_eq!(err.body["reason"], "TooManyRequests");
        assert_eq!(
            err.body["message"],
            "Cannot evict pod as it would violate the pod's disruption budget."
        );
        assert_eq!(
            err.body["details"]["causes"][0],
            json!({"reason": "DisruptionBudget", "message": "The disruption budget web needs 1 healthy pods and has 1 currently"})
        );
        assert_eq!(web(&shared, &removed), Some(pod));
    }

    #[test]
    fn two_budgets_are_a_500_and_an_empty_selector_selects_nothing() {
        let f = fleet();
        let shared = f.shared();
        shared
            .update_cluster(|c| {
                c.pdbs.push(budget("a", &[("app", "web")]));
                c.pdbs.push(budget("b", &[("app", "web")]));
                Ok(())
            })
            .unwrap();
        let removed = Removed::default();
        let pod = web(&shared, &removed).unwrap();
        let err = evict(
            &shared,
            &removed,
            &admin(),
            "default",
            &pod,
            &eviction(&pod),
        )
        .unwrap_err();
        assert_eq!(err.code, 500);
        assert_eq!(
            err.body["message"],
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        );
        shared
            .update_cluster(|c| {
                c.pdbs = vec![budget("everything", &[])];
                Ok(())
            })
            .unwrap();
        let uid = |removed: &Removed| {
            let snap = Snapshot::new(shared.cluster().unwrap(), Faults::default(), removed);
            let pods = super::super::store::resource("", "v1", "pods").unwrap();
            meta(&snap.get(pods, "default", &pod).unwrap(), "uid").to_string()
        };
        let before = uid(&removed);
        let (code, _) = evict(
            &shared,
            &removed,
            &admin(),
            "default",
            &pod,
            &eviction(&pod),
        )
        .unwrap();
        assert_eq!(code, 201);
        // Its node is schedulable and Ready: the ReplicaSet's replacement
        // is there at once, a new pod of the same name.
        assert_ne!(uid(&removed), before);
    }

    #[test]
    fn a_node_evicts_only_its_own_pods() {
        let f = fleet();
        let shared = f.shared();
        let removed = Removed::default();
        let pod = web(&shared, &removed).unwrap();
        let cp = User {
            name: "system:node:cp-1".into(),
            groups: vec!["system:nodes".into()],
        };
        let err = evict(&shared, &removed, &cp, "default", &pod, &eviction(&pod)).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.body["message"],
            format!(
                "pods \"{pod}\" is forbidden: node cp-1 can only evict pods with spec.nodeName set to itself"
            )
        );
    }
}

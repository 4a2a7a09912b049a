//! PodDisruptionBudgets (policy/v1): the scenario's, and one per node the
//! `pdb_block` fault names (`fleetsim-block-<node>`, `minAvailable: 1` over
//! the one app pod of that node, so it allows no disruption). Their status
//! is computed as the disruption controller does (`pkg/controller/disruption`):
//!
//! - `expectedPods`: the matching pods (for `maxUnavailable` and percentages
//!   the controller uses the scale of their controllers; here every
//!   controller's scale is its pods in the sim);
//! - `desiredHealthy`: `minAvailable`, a percentage of `expectedPods`
//!   rounded up, or `expectedPods − maxUnavailable` (a percentage rounded up);
//! - `currentHealthy`: the matching pods that are Ready (their node Ready);
//! - `disruptionsAllowed`: `currentHealthy − desiredHealthy`, never below 0,
//!   and 0 with no expected pod; condition `DisruptionAllowed` True
//!   (`SufficientPods`) or False (`InsufficientPods`).
//!
//! A selector matches as the API server's label selectors do: `matchLabels`
//! and every `matchExpressions` requirement ANDed; no selector matches
//! nothing. Only pods of the budget's namespace count.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::pods::ApiPod;
use crate::state::{Cluster, Faults, PdbSpec, Requirement};
use crate::tools::int_or_percent;
use crate::tools::util::{rfc3339, uid_of};

/// A budget and its computed status.
pub(crate) struct Budget {
    pub spec: PdbSpec,
    pub expected: i64,
    pub desired: i64,
    pub healthy: i64,
    pub allowed: i64,
}

impl Budget {
    pub fn covers(&self, pod: &ApiPod) -> bool {
        pod.namespace == self.spec.namespace && selects(&self.spec, &pod.labels)
    }
}

fn selects(spec: &PdbSpec, labels: &BTreeMap<String, String>) -> bool {
    if spec.match_labels.is_empty() && spec.match_expressions.is_empty() {
        // An empty (not null) selector matches every pod of the namespace.
        return true;
    }
    spec.match_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && spec
            .match_expressions
            .iter()
            .all(|r| requirement(r, labels))
}

fn requirement(r: &Requirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&r.key);
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| r.values.contains(v)),
        "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

/// The budget `pdb_block` puts over `node`'s app pod.
fn blocking(c: &Cluster, node: &str) -> Option<PdbSpec> {
    let role = c.nodes.get(node)?.role;
    let (ns, instance) = match role {
        crate::state::Role::ControlPlane => ("kube-system", format!("coredns-{node}")),
        crate::state::Role::Worker => ("default", format!("web-{node}")),
    };
    Some(PdbSpec {
        namespace: ns.into(),
        name: format!("fleetsim-block-{node}"),
        min_available: Some(json!(1)),
        max_unavailable: None,
        match_labels: BTreeMap::from([("app.kubernetes.io/instance".into(), instance)]),
        match_expressions: Vec::new(),
    })
}

/// Every budget, sorted by namespace then name, with its status over `pods`.
pub(crate) fn budgets(c: &Cluster, faults: &Faults, pods: &[ApiPod]) -> Vec<Budget> {
    let mut specs: Vec<PdbSpec> = c.pdbs.clone();
    specs.extend(faults.pdb_block.iter().filter_map(|n| blocking(c, n)));
    specs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    specs
        .into_iter()
        .map(|spec| {
            let matching: Vec<&ApiPod> = pods
                .iter()
                .filter(|p| p.namespace == spec.namespace && selects(&spec, &p.labels))
                .collect();
            let expected = matching.len() as i64;
            let healthy = matching.iter().filter(|p| p.ready).count() as i64;
            let scaled = |v: &Value| {
                int_or_percent(v).map_or(
                    0,
                    |(n, pct)| {
                        if pct { (n * expected + 99) / 100 } else { n }
                    },
                )
            };
            let desired = match (&spec.min_available, &spec.max_unavailable) {
                (Some(min), _) => scaled(min),
                (None, Some(max)) => (expected - scaled(max)).max(0),
                (None, None) => expected,
            };
            let allowed = if expected <= 0 {
                0
            } else {
                (healthy - desired).max(0)
            };
            Budget {
                spec,
                expected,
                desired,
                healthy,
                allowed,
            }
        })
        .collect()
}

/// The object as `kubectl get pdb -o json` prints it.
pub(crate) fn json(b: &Budget, created: f64, resource_version: u64) -> Value {
    let mut selector = json!({});
    if !b.spec.match_labels.is_empty() {
        selector["matchLabels"] = json!(b.spec.match_labels);
    }
    if !b.spec.match_expressions.is_empty() {
        selector["matchExpressions"] = json!(
            b.spec
                .match_expressions
                .iter()
                .map(|r| {
                    let mut e = json!({"key": r.key, "operator": r.operator});
                    if !r.values.is_empty() {
                        e["values"] = json!(r.values);
                    }
                    e
                })
                .collect::<Vec<_>>()
        );
    }
    let mut spec = json!({"selector": selector});
    if let Some(v) = &b.spec.min_available {
        spec["minAvailable"] = v.clone();
    }
    if let Some(v) = &b.spec.max_unavailable {
        spec["maxUnavailable"] = v.clone();
    }
    let (status, reason) = if b.allowed > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {
            "creationTimestamp": rfc3339(created),
            "generation": 1,
            "name": b.spec.name,
            "namespace": b.spec.namespace,
            "resourceVersion": resource_version.to_string(),
            "uid": uid_of(&format!("pdb/{}/{}", b.spec.namespace, b.spec.name)),
        },
        "spec": spec,
        "status": {
            "conditions": [{
                "lastTransitionTime": rfc3339(created),
                "message": "",
                "observedGeneration": 1,
                "reason": reason,
                "status": status,
                "type": "DisruptionAllowed",
            }],
            "currentHealthy": b.healthy,
            "desiredHealthy": b.desired,
            "disruptionsAllowed": b.allowed,
            "expectedPods": b.expected,
            "observedGeneration": 1,
        },
    })
}

/// The pods on `node` whose eviction a PodDisruptionBudget refuses now
/// (`namespace/name`), as a drain of it would meet them: for Kured's drain.
pub(crate) fn evictions_refused(c: &Cluster, faults: &Faults, node: &str) -> Vec<String> {
    let pods = super::pods::all_pods(c, crate::state::now());
    let budgets = budgets(c, faults, &pods);
    pods.iter()
        .filter(|p| {
            p.node == node
                && !matches!(p.owner_kind.as_deref(), Some("Node" | "DaemonSet"))
                && budgets.iter().any(|b| b.covers(p) && b.allowed == 0)
        })
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect()
}

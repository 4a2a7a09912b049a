//! Drains that cannot finish. `kubectl drain` evicts pods through the
//! Eviction API, which refuses (429) while a PodDisruptionBudget covering the
//! pod has `status.disruptionsAllowed: 0`; kubectl retries until its timeout,
//! so apply would stop at that node. The plan names such budgets in advance.
//!
//! Which pods count is the API server's rule, not a guess:
//! - a budget covers the pods of its namespace that its `spec.selector`
//!   matches; in policy/v1 a null selector matches no pod and an empty one
//!   every pod of the namespace (the PodDisruptionBudgetSpec API reference);
//! - eviction ignores budgets for pods that are Succeeded, Failed, Pending
//!   or already terminating (`canIgnorePDB` in
//!   `pkg/registry/core/pod/storage/eviction.go`), so only running pods count;
//! - `kubectl drain --ignore-daemonsets` does not evict DaemonSet pods, and
//!   never evicts mirror pods of static pods (owner `Node`, annotation
//!   `kubernetes.io/config.mirror`).
//!
//! Selector matching follows `metav1.LabelSelector`: `matchLabels` entries
//! and `matchExpressions` are ANDed; `In` needs the key with a listed value,
//! `NotIn` matches when the key is absent or its value is not listed,
//! `Exists`/`DoesNotExist` test the key alone.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use serde::Deserialize;

use super::verdicts::{Check, CheckName, Verdict};

/// A `matchExpressions` operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default)]
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A `metav1.LabelSelector`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

impl LabelSelector {
    /// Every `matchLabels` pair and every expression holds; an empty
    /// selector matches everything.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }
}

/// A PodDisruptionBudget, as much as the check needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub namespace: String,
    pub name: String,
    /// `None`: the budget selects no pod.
    pub selector: Option<LabelSelector>,
    pub disruptions_allowed: i64,
}

impl Budget {
    pub fn covers(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }
}

/// A pod, as much as the check needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`; `None` while unscheduled.
    pub node: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub phase: String,
    /// The `kind` of each owner reference (`ReplicaSet`, `DaemonSet`, `Node`).
    pub owner_kinds: Vec<String>,
    /// The mirror of a static pod.
    pub mirror: bool,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

impl Pod {
    /// `kubectl drain --ignore-daemonsets` evicts it, and the eviction
    /// consults its budgets.
    pub fn evicted_under_budget(&self) -> bool {
        self.phase == "Running"
            && !self.terminating
            && !self.mirror
            && !self
                .owner_kinds
                .iter()
                .any(|k| k == "DaemonSet" || k == "Node")
    }
}

/// `kubectl get pdb -A -o json`.
pub fn parse_pdbs(json: &str) -> Result<Vec<Budget>> {
    #[derive(Deserialize)]
    struct PdbJson {
        metadata: KubectlMeta,
        #[serde(default)]
        spec: PdbSpecJson,
        #[serde(default)]
        status: PdbStatusJson,
    }
    #[derive(Deserialize, Default)]
    struct PdbSpecJson {
        selector: Option<LabelSelector>,
    }
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct PdbStatusJson {
        #[serde(default)]
        disruptions_allowed: i64,
    }
    let list: KubectlList<PdbJson> = serde_json::from_str(json).context(
        "`kubectl get pdb -A -o json` printed something that is not a list of PodDisruptionBudgets",
    )?;
    Ok(list
        .items
        .into_iter()
        .map(|r| Budget {
            namespace: r.metadata.namespace,
            name: r.metadata.name,
            selector: r.spec.selector,
            disruptions_allowed: r.status.disruptions_allowed,
        })
        .collect())
}

/// `kubectl get pods -A -o json` (or one node's, with a field selector).
pub fn parse_pods(json: &str) -> Result<Vec<Pod>> {
    #[derive(Deserialize)]
    struct PodJson {
        metadata: KubectlMeta,
        #[serde(default)]
        spec: PodSpecJson,
        #[serde(default)]
        status: PodStatusJson,
    }
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    struct PodSpecJson {
        node_name: Option<String>,
    }
    #[derive(Deserialize, Default)]
    struct PodStatusJson {
        #[serde(default)]
        phase: String,
    }
    let list: KubectlList<PodJson> = serde_json::from_str(json)
        .context("`kubectl get pods -A -o json` printed something that is not a list of pods")?;
    Ok(list
        .items
        .into_iter()
        .map(|r| Pod {
            mirror: r.metadata.annotations.contains_key(MIRROR_ANNOTATION),
            terminating: r.metadata.deletion_timestamp.is_some(),
            owner_kinds: r
                .metadata
                .owner_references
                .into_iter()
                .map(|o| o.kind)
                .collect(),
            namespace: r.metadata.namespace,
            name: r.metadata.name,
            node: r.spec.node_name.filter(|n| !n.is_empty()),
            labels: r.metadata.labels,
            phase: r.status.phase,
        })
        .collect())
}

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

#[derive(Deserialize)]
struct KubectlList<T> {
    items: Vec<T>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubectlMeta {
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
    #[serde(default)]
    owner_references: Vec<Owner>,
    deletion_timestamp: Option<String>,
}

#[derive(Deserialize)]
struct Owner {
    kind: String,
}

/// Warns for every budget with no disruption left that covers a running pod
/// on a node the hop drains, naming the budget and those pods and nodes.
/// A warning, not a block: the budget may allow a disruption again by the
/// time the drain reaches that node (a pod elsewhere turning Ready).
pub fn check_drains(budgets: &[Budget], pods: &[Pod], drained: &[String]) -> Check {
    let drained: BTreeSet<&str> = drained.iter().map(String::as_str).collect();
    let mut details = Vec::new();
    for budget in budgets.iter().filter(|b| b.disruptions_allowed <= 0) {
        let held: Vec<String> = pods
            .iter()
            .filter(|p| p.evicted_under_budget() && budget.covers(p))
            .filter_map(|p| {
                let node = p.node.as_deref()?;
                drained
                    .contains(node)
                    .then(|| format!("{} on {node}", p.name))
            })
            .collect();
        if !held.is_empty() {
            details.push(format!(
                "{}/{} allows no disruption and covers {}",
                budget.namespace,
                budget.name,
                held.join(", ")
            ));
        }
    }
    if details.is_empty() {
        return Check::pass(
            CheckName::Pdb,
            "no PodDisruptionBudget holds the drains of this hop",
        );
    }
    Check {
        name: CheckName::Pdb,
        verdict: Verdict::Warn,
        summary: format!(
            "{} PodDisruptionBudget(s) allow no disruption of pods this hop drains; \
             those drains wait until their timeout and apply stops there",
            details.len()
        ),
        details,
        remedy: Some(
            "give the workload room to lose a pod (more replicas, or a lower minAvailable / \
             higher maxUnavailable), or remove the budget for the upgrade and restore it after"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
        std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, operator: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn expr(r: Requirement) -> LabelSelector {
        LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![r],
        }
    }

    #[test]
    fn each_operator_matches_as_the_api_server_does() {
        let primary = labels(&[("app", "pg"), ("role", "primary")]);
        let bare = labels(&[("app", "pg")]);
        let cases = [
            (
                req("role", Operator::In, &["primary", "standby"]),
                true,
                false,
            ),
            (req("role", Operator::In, &["replica"]), false, false),
            (req("role", Operator::NotIn, &["replica"]), true, true),
            (req("role", Operator::NotIn, &["primary"]), false, true),
            (req("role", Operator::Exists, &[]), true, false),
            (req("role", Operator::DoesNotExist, &[]), false, true),
        ];
        for (r, on_primary, on_bare) in cases {
            let s = expr(r.clone());
            assert_eq!(s.matches(&primary), on_primary, "{r:?} on primary");
            assert_eq!(s.matches(&bare), on_bare, "{r:?} without the key");
        }
    }

    #[test]
    fn match_labels_and_expressions_are_anded_and_empty_matches_all() {
        let s = LabelSelector {
            match_labels: labels(&[("app", "pg")]),
            match_expressions: vec![req("tier", Operator::Exists, &[])],
        };
        assert!(s.matches(&labels(&[("app", "pg"), ("tier", "db")])));
        assert!(!s.matches(&labels(&[("app", "pg")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "db")])));
        assert!(LabelSelector::default().matches(&labels(&[])));
    }

    #[test]
    fn a_null_selector_covers_nothing_and_namespaces_do_not_leak() {
        let pod = Pod {
            namespace: "a".into(),
            name: "p".into(),
            node: Some("w-1".into()),
            labels: labels(&[("app", "x")]),
            phase: "Running".into(),
            owner_kinds: vec![],
            mirror: false,
            terminating: false,
        };
        let mut budget = Budget {
            namespace: "a".into(),
            name: "b".into(),
            selector: None,
            disruptions_allowed: 0,
        };
        assert!(!budget.covers(&pod));
        budget.selector = Some(LabelSelector::default());
        assert!(budget.covers(&pod));
        budget.namespace = "other".into();
        assert!(!budget.covers(&pod));
    }

    #[test]
    fn parses_real_pdbs_and_pods() {
        let budgets = parse_pdbs(&fixture("kubectl-get-pdb.json")).unwrap();
        let names: Vec<(&str, &str, i64)> = budgets
            .iter()
            .map(|b| (b.namespace.as_str(), b.name.as_str(), b.disruptions_allowed))
            .collect();
        assert_eq!(
            names,
            [
                ("db", "postgres", 0),
                ("default", "zk-pdb", 1),
                ("monitoring", "node-exporter", 0),
            ]
        );
        assert_eq!(
            budgets[0].selector.as_ref().unwrap().match_expressions,
            [req("role", Operator::In, &["primary"])]
        );
        let pods = parse_pods(&fixture("kubectl-get-pods.json")).unwrap();
        let evicted: Vec<&str> = pods
            .iter()
            .filter(|p| p.evicted_under_budget())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(
            evicted,
            ["postgres-0", "postgres-1", "zk-0"],
            "not the DaemonSet pod, the mirror pod or the finished job"
        );
        assert_eq!(pods[0].node.as_deref(), Some("w-1"));
    }

    #[test]
    fn warns_for_a_budget_at_zero_over_a_drained_node() {
        let budgets = parse_pdbs(&fixture("kubectl-get-pdb.json")).unwrap();
        let pods = parse_pods(&fixture("kubectl-get-pods.json")).unwrap();
        let check = check_drains(&budgets, &pods, &["w-1".into(), "cp-1".into()]);
        assert_eq!(check.verdict, Verdict::Warn);
        assert_eq!(
            check.details,
            ["db/postgres allows no disruption and covers postgres-0 on w-1"],
            "zk-pdb still allows one; node-exporter only covers DaemonSet pods; postgres-1 is a replica"
        );
        let elsewhere = check_drains(&budgets, &pods, &["w-2".into()]);
        assert_eq!(
            elsewhere.verdict,
            Verdict::Pass,
            "postgres-1 on w-2 is not selected"
        );
        assert_eq!(check_drains(&budgets, &pods, &[]).verdict, Verdict::Pass);
    }

    #[test]
    fn unknown_operators_and_non_lists_are_errors() {
        let bad = r#"{"items":[{"metadata":{"name":"x","namespace":"y"},"spec":{"selector":{"matchExpressions":[{"key":"a","operator":"Like"}]}}}]}"#;
        assert!(parse_pdbs(bad).is_err());
        assert!(parse_pdbs("error: the server doesn't have a resource type").is_err());
        assert!(parse_pods("{}").is_err());
        assert_eq!(
            parse_pods(r#"{"apiVersion":"v1","items":[],"kind":"List"}"#).unwrap(),
            vec![]
        );
    }
}

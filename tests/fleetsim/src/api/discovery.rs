//! Discovery, the legacy (unaggregated) documents: `/api` (APIVersions),
//! `/apis` (APIGroupList), `/apis/<group>` (APIGroup) and the resource
//! lists `/api/v1`, `/apis/<group>/<version>` (APIResourceList). kubectl
//! asks for the aggregated form first (`Accept: application/json;g=
//! apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, client-go
//! `discovery/aggregated_discovery.go`) and falls back to these when the
//! answer's Content-Type is plain `application/json`, as an apiserver
//! without aggregated discovery answers.
//!
//! `/api/v1` lists `pods/eviction` with group `policy` and version `v1`:
//! that is how `kubectl drain` decides to evict rather than delete
//! (`kubectl/pkg/drain/drain.go`, `CheckEvictionSupport`).

use serde_json::{Value, json};

use super::store::RESOURCES;

pub fn api_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn groups() -> Vec<&'static str> {
    let mut g: Vec<&str> = RESOURCES
        .iter()
        .map(|r| r.group)
        .filter(|g| !g.is_empty())
        .collect();
    g.dedup();
    g.sort();
    g.dedup();
    g
}

fn group_doc(group: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/v1"), "version": "v1"});
    json!({"name": group, "versions": [gv], "preferredVersion": gv})
}

pub fn api_group_list() -> Value {
    json!({
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": groups().into_iter().map(group_doc).collect::<Vec<_>>(),
    })
}

/// `/apis/<group>`, if served.
pub fn api_group(group: &str) -> Option<Value> {
    groups().contains(&group).then(|| {
        let mut d = group_doc(group);
        d["kind"] = json!("APIGroup");
        d["apiVersion"] = json!("v1");
        d
    })
}

/// `/api/v1` or `/apis/<group>/<version>`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let served: Vec<_> = RESOURCES
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if served.is_empty() {
        return None;
    }
    let mut list: Vec<Value> = Vec::new();
    for r in served {
        let mut e = json!({
            "name": r.name,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs,
        });
        if !r.short.is_empty() {
            e["shortNames"] = json!(r.short);
        }
        list.push(e);
        let sub = |name: &str, kind: &str, verbs: &[&str]| json!({"name": format!("{}/{name}", r.name), "singularName": "", "namespaced": r.namespaced, "kind": kind, "verbs": verbs});
        match r.name {
            "pods" => {
                let mut ev = sub("eviction", "Eviction", &["create"]);
                ev["group"] = json!("policy");
                ev["version"] = json!("v1");
                list.push(ev);
                list.push(sub("exec", "PodExecOptions", &["create", "get"]));
                list.push(sub("status", "Pod", &["get", "patch", "update"]));
            }
            "nodes" | "daemonsets" | "poddisruptionbudgets" | "namespaces" => {
                list.push(sub("status", r.kind, &["get", "patch", "update"]));
            }
            _ => {}
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_v1_offers_eviction_in_policy_v1() {
        let list = resource_list("", "v1").unwrap();
        let ev = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(ev["kind"], "Eviction");
        assert_eq!(ev["group"], "policy");
        assert_eq!(ev["version"], "v1");
    }

    #[test]
    fn every_group_is_listed_once() {
        let names: Vec<String> = api_group_list()["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            ["apps", "ceph.rook.io", "coordination.k8s.io", "policy"]
        );
        assert!(api_group("apps").is_some());
        assert!(api_group("batch").is_none());
        assert!(resource_list("batch", "v1").is_none());
    }
}

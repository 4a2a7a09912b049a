//! Server-side printing: the `meta.k8s.io/v1` Table a human-readable
//! `kubectl get` asks for (`Accept: application/json;as=Table;v=v1;
//! g=meta.k8s.io`), with the columns of the apiserver's printers
//! (`pkg/printers/internalversion/printers.go`: nodes `Name, Status, Roles,
//! Age, Version`; pods `Name, Ready, Status, Restarts, Age`; ConfigMaps
//! `Name, Data, Age`; DaemonSets `Name, Desired, Current, Ready, Up-to-date,
//! Available, Node Selector, Age`; PDBs `Name, Min Available, Max
//! Unavailable, Allowed Disruptions, Age`; namespaces `Name, Status, Age`;
//! leases `Name, Holder, Age`). Each row carries the object's metadata
//! (`PartialObjectMetadata`), or the object with `includeObject=Object`.

use serde_json::{Value, json};

use super::store::{Resource, meta};
use crate::tools::util::human_age;

/// Whether an Accept header asks for a Table.
pub fn wanted(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
}

fn age(o: &Value, now: f64) -> String {
    let created = meta(o, "creationTimestamp");
    let secs = parse_rfc3339(created).map_or(0.0, |t| (now - t).max(0.0));
    human_age(secs)
}

/// Seconds since the epoch of `YYYY-MM-DDTHH:MM:SSZ`.
fn parse_rfc3339(s: &str) -> Option<f64> {
    let (date, time) = s.strip_suffix('Z')?.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<f64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let ([y, m, day], [h, min, sec]) = (d.as_slice(), t.as_slice()) else {
        return None;
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if *m <= 2 { y - 1 } else { *y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + h * 3600.0 + min * 60.0 + sec)
}

fn column(name: &str, kind: &str, priority: u8) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": kind, "format": format, "description": "", "priority": priority})
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<none>".into(),
        other => other.to_string(),
    }
}

fn node_cells(o: &Value, now: f64) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True");
    let mut status = if ready { "Ready" } else { "NotReady" }.to_string();
    if o["spec"]["unschedulable"].as_bool() == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let roles: Vec<&str> = o["metadata"]["labels"]
        .as_object()
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.join(",")
    };
    vec![
        json!(meta(o, "name")),
        json!(status),
        json!(roles),
        json!(age(o, now)),
        json!(text(&o["status"]["nodeInfo"]["kubeletVersion"])),
    ]
}

fn pod_cells(o: &Value, now: f64) -> Vec<Value> {
    let statuses = o["status"]["containerStatuses"].as_array();
    let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready_containers = statuses.map_or_else(
        || {
            let ready = o["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            if ready { total } else { 0 }
        },
        |s| s.iter().filter(|c| c["ready"] == true).count(),
    );
    let restarts: i64 = statuses.map_or(0, |s| {
        s.iter().filter_map(|c| c["restartCount"].as_i64()).sum()
    });
    vec![
        json!(meta(o, "name")),
        json!(format!("{ready_containers}/{total}")),
        json!(text(&o["status"]["phase"])),
        json!(restarts),
        json!(age(o, now)),
    ]
}

/// A resource's cells of one object.
type Cells = Box<dyn Fn(&Value) -> Vec<Value>>;

/// The Table of `objects`.
pub fn table(
    r: &Resource,
    objects: &[Value],
    resource_version: &str,
    now: f64,
    include_object: bool,
) -> Value {
    let (columns, cells): (Vec<Value>, Cells) = match r.name {
        "nodes" => (
            ["Name", "Status", "Roles", "Age", "Version"]
                .iter()
                .map(|n| column(n, "string", 0))
                .collect(),
            Box::new(move |o| node_cells(o, now)),
        ),
        "pods" => (
            vec![
                column("Name", "string", 0),
                column("Ready", "string", 0),
                column("Status", "string", 0),
                column("Restarts", "string", 0),
                column("Age", "string", 0),
            ],
            Box::new(move |o| pod_cells(o, now)),
        ),
        "configmaps" => (
            vec![
                column("Name", "string", 0),
                column("Data", "integer", 0),
                column("Age", "string", 0),
            ],
            Box::new(move |o| {
                let n = o["data"].as_object().map_or(0, |d| d.len())
                    + o["binaryData"].as_object().map_or(0, |d| d.len());
                vec![json!(meta(o, "name")), json!(n), json!(age(o, now))]
            }),
        ),
        "daemonsets" => (
            [
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
            ]
            .iter()
            .map(|n| column(n, "string", 0))
            .collect(),
            Box::new(move |o| {
                let s = &o["status"];
                let selector = o["spec"]["template"]["spec"]["nodeSelector"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| format!("{k}={}", text(v)))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "<none>".into());
                vec![
                    json!(meta(o, "name")),
                    s["desiredNumberScheduled"].clone(),
                    s["currentNumberScheduled"].clone(),
                    s["numberReady"].clone(),
                    s["updatedNumberScheduled"].clone(),
                    s["numberAvailable"].clone(),
                    json!(selector),
                    json!(age(o, now)),
                ]
            }),
        ),
        "poddisruptionbudgets" => (
            [
                "Name",
                "Min Available",
                "Max Unavailable",
                "Allowed Disruptions",
                "Age",
            ]
            .iter()
            .map(|n| column(n, "string", 0))
            .collect(),
            Box::new(move |o| {
                let or_na = |v: &Value| {
                    if v.is_null() {
                        "N/A".to_string()
                    } else {
                        text(v)
                    }
                };
                vec![
                    json!(meta(o, "name")),
                    json!(or_na(&o["spec"]["minAvailable"])),
                    json!(or_na(&o["spec"]["maxUnavailable"])),
                    o["status"]["disruptionsAllowed"].clone(),
                    json!(age(o, now)),
                ]
            }),
        ),
        "namespaces" => (
            vec![
                column("Name", "string", 0),
                column("Status", "string", 0),
                column("Age", "string", 0),
            ],
            Box::new(move |o| {
                vec![
                    json!(meta(o, "name")),
                    json!(text(&o["status"]["phase"])),
                    json!(age(o, now)),
                ]
            }),
        ),
        _ => (
            vec![
                column("Name", "string", 0),
                column("Holder", "string", 0),
                column("Age", "string", 0),
            ],
            Box::new(move |o| {
                vec![
                    json!(meta(o, "name")),
                    json!(text(&o["spec"]["holderIdentity"])),
                    json!(age(o, now)),
                ]
            }),
        ),
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let object = if include_object {
                o.clone()
            } else {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
            };
            json!({"cells": cells(o), "object": object})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_table_first_accept_asks_for_one() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted(
            "application/vnd.kubernetes.protobuf,application/json"
        ));
    }

    #[test]
    fn rfc3339_times_parse_back() {
        assert_eq!(parse_rfc3339("1970-01-02T00:00:01Z"), Some(86_401.0));
        assert_eq!(
            parse_rfc3339(&crate::tools::util::rfc3339(1_796_187_525.0)),
            Some(1_796_187_525.0)
        );
        assert_eq!(parse_rfc3339("nonsense"), None);
    }

    #[test]
    fn a_node_row_says_ready_cordoned_and_its_roles() {
        let r = super::super::store::resource("", "v1", "nodes").unwrap();
        let node = json!({"metadata": {"name": "cp-1", "creationTimestamp": "1970-01-01T00:00:00Z",
            "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.34.2"}}});
        let t = table(r, &[node], "7", 120.0, false);
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "cp-1",
                "Ready,SchedulingDisabled",
                "control-plane",
                "2m",
                "v1.34.2"
            ])
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}

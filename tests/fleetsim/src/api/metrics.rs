//! `GET /metrics`: one kube-apiserver instance's metrics in the Prometheus
//! text exposition format (version 0.0.4), as client_golang writes them:
//! families sorted by name, each with `# HELP` (component-base puts the
//! stability level in brackets in front of the text) and `# TYPE`, then one
//! line per series with its labels in alphabetical order. The sim prints a
//! few families, among them `apiserver_requested_deprecated_apis` with one
//! series (value 1) per deprecated API the scenario says clients requested:
//! the gauge kube-apiserver sets when it serves such a request
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/deprecation`, the GaugeVec
//! `deprecatedRequestGauge` in `staging/src/k8s.io/apiserver/pkg/endpoints/
//! metrics/metrics.go`).
//!
//! That gauge lives in the kube-apiserver *process*: in HA each instance
//! counts only the requests it served itself. So the page is per instance
//! (the one the connection reached, `server.rs`): a deprecated API with
//! `served_by` shows only on those control planes, and
//! `process_start_time_seconds` is that instance's.

use std::fmt::Write as _;

use crate::state::Cluster;

/// `name{a="…",b="…"} value`, label values escaped as the format wants.
fn series(out: &mut String, name: &str, labels: &[(&str, &str)], value: &str) {
    let text: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    let _ = writeln!(out, "{name}{{{}}} {value}", text.join(","));
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The `/metrics` page of `instance`'s kube-apiserver.
pub(crate) fn text(c: &Cluster, instance: &str) -> String {
    let now = crate::state::now();
    let started = c
        .nodes
        .get(instance)
        .and_then(|n| n.kubelet_running())
        .map_or(now, |k| k.started_at + c.api_delay);
    let served: Vec<&crate::state::DeprecatedApi> = c
        .deprecated_apis
        .iter()
        .filter(|d| d.served_by.is_empty() || d.served_by.iter().any(|n| n == instance))
        .collect();
    let mut out = String::new();
    family(
        &mut out,
        "apiserver_request_total",
        "counter",
        "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
    );
    let mut requests: Vec<(String, String, String, String, String)> = vec![
        (
            "".into(),
            "nodes".into(),
            "cluster".into(),
            "LIST".into(),
            "v1".into(),
        ),
        (
            "".into(),
            "pods".into(),
            "namespace".into(),
            "GET".into(),
            "v1".into(),
        ),
        (
            "apps".into(),
            "daemonsets".into(),
            "namespace".into(),
            "GET".into(),
            "v1".into(),
        ),
    ];
    for d in &served {
        requests.push((
            d.group.clone(),
            d.resource.clone(),
            "cluster".into(),
            "LIST".into(),
            d.version.clone(),
        ));
    }
    requests.sort();
    for (i, (group, resource, scope, verb, version)) in requests.iter().enumerate() {
        let count = (c.resource_version as usize * 7 + i * 13 + 1).to_string();
        series(
            &mut out,
            "apiserver_request_total",
            &[
                ("code", "200"),
                ("component", "apiserver"),
                ("dry_run", ""),
                ("group", group),
                ("resource", resource),
                ("scope", scope),
                ("subresource", ""),
                ("verb", verb),
                ("version", version),
            ],
            &count,
        );
    }
    if !served.is_empty() {
        family(
            &mut out,
            "apiserver_requested_deprecated_apis",
            "gauge",
            "[STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.",
        );
        let mut apis = served.clone();
        apis.sort_by(|a, b| {
            (
                &a.group,
                &a.removed_release,
                &a.resource,
                &a.subresource,
                &a.version,
            )
                .cmp(&(
                    &b.group,
                    &b.removed_release,
                    &b.resource,
                    &b.subresource,
                    &b.version,
                ))
        });
        for d in &apis {
            series(
                &mut out,
                "apiserver_requested_deprecated_apis",
                &[
                    ("group", &d.group),
                    ("removed_release", &d.removed_release),
                    ("resource", &d.resource),
                    ("subresource", &d.subresource),
                    ("version", &d.version),
                ],
                "1",
            );
        }
    }
    family(
        &mut out,
        "apiserver_storage_objects",
        "gauge",
        "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
    );
    let objects = [
        ("configmaps", c.configmaps.len() + 1),
        (
            "daemonsets.apps",
            1 + usize::from(c.kube_proxy) + usize::from(c.kured.is_some()),
        ),
        ("nodes", c.nodes.len()),
    ];
    for (resource, n) in objects {
        series(
            &mut out,
            "apiserver_storage_objects",
            &[("resource", resource)],
            &n.to_string(),
        );
    }
    family(
        &mut out,
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    );
    let _ = writeln!(out, "process_start_time_seconds {started:.2}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::DeprecatedApi;

    fn flowschemas(served_by: &[&str]) -> DeprecatedApi {
        DeprecatedApi {
            group: "flowcontrol.apiserver.k8s.io".into(),
            version: "v1beta3".into(),
            resource: "flowschemas".into(),
            subresource: String::new(),
            removed_release: "1.32".into(),
            served_by: served_by.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn each_instance_names_only_the_deprecated_apis_it_served_in_family_order() {
        let mut c = Cluster::default();
        assert!(!text(&c, "cp-1").contains("apiserver_requested_deprecated_apis"));
        c.deprecated_apis = vec![flowschemas(&["cp-2"])];
        assert!(!text(&c, "cp-1").contains("apiserver_requested_deprecated_apis"));
        let page = text(&c, "cp-2");
        assert!(page.contains(
            "# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.\n\
             # TYPE apiserver_requested_deprecated_apis gauge\n\
             apiserver_requested_deprecated_apis{group=\"flowcontrol.apiserver.k8s.io\",removed_release=\"1.32\",resource=\"flowschemas\",subresource=\"\",version=\"v1beta3\"} 1\n"
        ), "{page}");
        let names: Vec<&str> = page
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "families in name order");
    }
}

//! `kubectl get --raw /metrics`: one kube-apiserver instance's metrics in
//! the Prometheus text exposition format (version 0.0.4), as client_golang
//! writes them: families sorted by name, each with `# HELP` (component-base
//! puts the stability level in brackets in front of the text) and `# TYPE`,
//! then one line per series with its labels in alphabetical order. The sim
//! prints a few families, among them `apiserver_requested_deprecated_apis`
//! with one series (value 1) per deprecated API the scenario says clients
//! requested — the gauge kube-apiserver sets when it serves such a request
//! (`staging/src/k8s.io/apiserver/pkg/endpoints/deprecation`, the GaugeVec
//! `deprecatedRequestGauge` in `staging/src/k8s.io/apiserver/pkg/endpoints/
//! metrics/metrics.go`).
//!
//! That gauge lives in the kube-apiserver *process*: in HA each instance
//! counts only the requests it served itself. So the page is per instance:
//! a deprecated API with `served_by` shows only on those control planes,
//! and `process_start_time_seconds` is that instance's. Which instance
//! answers is the one at the kubeconfig's server, or at `--server=https://
//! ADDR:PORT` (kubectl's override of the kubeconfig's cluster server; the
//! kubeconfig's CA still verifies, and kubeadm's serving certificate of
//! each instance covers its advertise address and node name,
//! `cmd/kubeadm/app/util/pkiutil` `GetAPIServerAltNames`). An address no
//! running kube-apiserver listens on is refused as the real kubectl
//! reports it; so is an instance the `apiserver_unreachable` fault cuts off.
//! A kubeconfig server that is no control plane's address or name (a load
//! balancer) reaches the first control plane whose static pods run.

use std::fmt::Write as _;

use crate::state::{Cluster, Faults};

use super::refused;

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

/// `--server=URL` as `host:port` (kubectl's default port for https is 443).
pub(super) fn server_flag(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(format!(
            "error: invalid configuration: host must be a URL or a host:port pair: {url:?}"
        ));
    }
    let has_port = if authority.starts_with('[') {
        authority.contains("]:")
    } else {
        authority.matches(':').count() == 1
    };
    Ok(if has_port {
        authority.to_string()
    } else {
        format!("{authority}:443")
    })
}

/// The control plane whose kube-apiserver answers at `addr` (`host:port`),
/// or the error kubectl prints. `explicit`: `--server` named it, so no
/// other instance stands in.
pub(super) fn instance_at(
    c: &Cluster,
    faults: &Faults,
    addr: &str,
    explicit: bool,
) -> Result<String, String> {
    let host = addr
        .rsplit_once(':')
        .map_or(addr, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let now = crate::state::now();
    let named = c.nodes.iter().find(|(name, n)| {
        n.role == crate::state::Role::ControlPlane && (n.address == host || *name == host)
    });
    let node = match named {
        Some((name, _)) => name.clone(),
        None if explicit => return Err(refused(addr)),
        None => match c.nodes.keys().find(|name| c.static_pods_running(name, now)) {
            Some(name) => name.clone(),
            None => return Err(refused(addr)),
        },
    };
    if !c.static_pods_running(&node, now) || faults.apiserver_unreachable.contains(&node) {
        return Err(refused(addr));
    }
    Ok(node)
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
mod instance_tests {
    use super::super::super::testutil::{Fleet, Node, Output};
    use super::*;
    use crate::state::{DeprecatedApi, Role};

    fn kubectl(node: &Node, args: &[&str]) -> Output {
        node.run("kubectl", args)
    }

    fn metrics_at(node: &Node, server: &str) -> Output {
        kubectl(
            node,
            &[
                "--kubeconfig=/etc/kubernetes/admin.conf",
                &format!("--server={server}"),
                "get",
                "--raw",
                "/metrics",
            ],
        )
    }

    const GAUGE: &str = "apiserver_requested_deprecated_apis{";

    #[test]
    fn each_instance_counts_only_what_it_served_and_is_reached_at_its_own_address() {
        let fleet = Fleet::new();
        let cp1 = fleet.node("cp1", Role::ControlPlane, "v1.34.2");
        let _cp2 = fleet.node("cp2", Role::ControlPlane, "v1.34.2");
        let _w1 = fleet.node("w1", Role::Worker, "v1.34.2");
        let c = cp1.cluster();
        let (a1, a2, aw) = (
            c.nodes["cp1"].address.clone(),
            c.nodes["cp2"].address.clone(),
            c.nodes["w1"].address.clone(),
        );
        cp1.update_cluster(|c| {
            c.deprecated_apis = vec![DeprecatedApi {
                group: "flowcontrol.apiserver.k8s.io".into(),
                version: "v1beta3".into(),
                resource: "flowschemas".into(),
                subresource: String::new(),
                removed_release: "1.32".into(),
                served_by: vec!["cp2".into()],
            }]
        });
        // admin.conf on cp1 reaches cp1's own kube-apiserver: not served there.
        let own = kubectl(
            &cp1,
            &[
                "--kubeconfig=/etc/kubernetes/admin.conf",
                "get",
                "--raw",
                "/metrics",
            ],
        );
        assert_eq!(own.code, 0, "{}", own.stderr);
        assert!(!own.stdout.contains(GAUGE), "{}", own.stdout);
        let at1 = metrics_at(&cp1, &format!("https://{a1}:6443"));
        assert_eq!(at1.code, 0, "{}", at1.stderr);
        assert!(!at1.stdout.contains(GAUGE));
        let at2 = metrics_at(&cp1, &format!("https://{a2}:6443"));
        assert_eq!(at2.code, 0, "{}", at2.stderr);
        assert!(
            at2.stdout.contains(
                "apiserver_requested_deprecated_apis{group=\"flowcontrol.apiserver.k8s.io\",\
                 removed_release=\"1.32\",resource=\"flowschemas\",subresource=\"\",version=\"v1beta3\"} 1\n"
            ),
            "{}",
            at2.stdout
        );
        assert!(at2.stdout.contains("process_start_time_seconds "));

        // Nothing listens on a worker's 6443: refused, as the real kubectl says it.
        let at_w = metrics_at(&cp1, &format!("https://{aw}:6443"));
        assert_eq!(at_w.code, 1);
        assert_eq!(
            at_w.stderr.trim(),
            format!(
                "The connection to the server {aw}:6443 was refused - did you specify the right host or port?"
            )
        );

        // cp2 cut off: refused at its address; cp1 still answers.
        fleet_faults(&cp1, |f| f.apiserver_unreachable = vec!["cp2".into()]);
        let cut = metrics_at(&cp1, &format!("https://{a2}:6443"));
        assert_eq!(cut.code, 1);
        assert!(cut.stderr.contains(&format!(
            "The connection to the server {a2}:6443 was refused"
        )));
        assert_eq!(metrics_at(&cp1, &format!("https://{a1}:6443")).code, 0);
    }

    fn fleet_faults(node: &Node, f: impl FnOnce(&mut Faults)) {
        node.shared()
            .update_faults(|x| {
                f(x);
            })
            .unwrap();
    }

    #[test]
    fn server_urls_become_host_and_port() {
        assert_eq!(
            server_flag("https://10.0.0.2:6443").unwrap(),
            "10.0.0.2:6443"
        );
        assert_eq!(server_flag("https://10.0.0.2").unwrap(), "10.0.0.2:443");
        assert_eq!(
            server_flag("https://[fd00::2]:6443/").unwrap(),
            "[fd00::2]:6443"
        );
        assert!(server_flag("https://").is_err());
    }
}

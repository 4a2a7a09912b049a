//! Removed APIs still in use, read from the API server's own record of them.
//!
//! Since v1.19 kube-apiserver sets the gauge `apiserver_requested_deprecated_apis`
//! to 1 for every deprecated API version a client requested since the process
//! started, labelled `group`, `version`, `resource`, `subresource` and
//! `removed_release` (the release that stops serving it; empty when none is
//! planned). It is defined, STABLE, in
//! `staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go`, and
//! documented in the deprecation policy ("Sets an
//! apiserver_requested_deprecated_apis gauge metric to 1 in the
//! kube-apiserver process", kubernetes/website#23551 fixed the label name to
//! `removed_release`). Unlike a hand-kept table of removed kinds, it also
//! catches a client (a Helm chart, an operator) that *calls* a removed
//! version, which is what breaks after the hop.
//!
//! `kubectl get --raw /metrics` prints it in the Prometheus text exposition
//! format; the parser below reads that format in general (labels in any
//! order, escaped values, timestamps) and keeps this one metric.
//!
//! The gauge is a GaugeVec of the kube-apiserver *process*
//! (`deprecatedRequestGauge` in `endpoints/metrics/metrics.go`, set by
//! `endpoints/deprecation`): in HA each instance counts only the requests
//! it served. One `/metrics` through admin.conf reads whichever instance
//! admin.conf reaches, so the check reads every instance instead: each
//! control plane's kube-apiserver at its advertise address, found in its
//! static pod manifest `/etc/kubernetes/manifests/kube-apiserver.yaml` as
//! the API shows it (the kube-system mirror pod the kubelet creates from
//! that file): `--advertise-address` and `--secure-port`, which kubeadm
//! writes there (`cmd/kubeadm/app/phases/controlplane/manifests.go`,
//! `getAPIServerCommand`), else kubeadm's annotation
//! `kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint`
//! (`cmd/kubeadm/app/constants`). kubeadm's serving certificate of each
//! instance covers its advertise address (`pkiutil.GetAPIServerAltNames`),
//! so `kubectl --server=https://ADDR:PORT` with admin.conf's CA verifies.
//! The results are merged; an instance that cannot be read is a warning
//! that names it, never a pass.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

use super::model::{Check, CheckName, Verdict};
use crate::version::Minor;

const METRIC: &str = "apiserver_requested_deprecated_apis";

/// A deprecated API version a client requested.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DeprecatedApi {
    /// `""` for the core group.
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    /// The `removed_release` label as printed (`1.32`); empty when the API
    /// is deprecated without a planned removal.
    pub removed_release: String,
}

impl DeprecatedApi {
    /// The minor that stops serving it, when one is planned.
    pub fn removed_in(&self) -> Option<Minor> {
        self.removed_release.parse().ok()
    }

    /// `flowcontrol.apiserver.k8s.io/v1beta3 flowschemas`, as kubectl names it
    /// in its deprecation warnings (`v1 pods` for the core group).
    pub fn describe(&self) -> String {
        let group_version = if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        };
        let resource = if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        format!("{group_version} {resource}")
    }
}

/// The requested deprecated APIs in a `/metrics` page (`kubectl get --raw
/// /metrics`). Samples whose value is 0 are left out: the gauge only says
/// "requested" when it is 1. A page with no sample at all is an error, so a
/// failed or truncated fetch never reads as "nothing deprecated in use".
pub fn parse_deprecated_apis(text: &str) -> Result<Vec<DeprecatedApi>> {
    let mut samples = 0usize;
    let mut apis = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r').trim_start();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let sample = match Sample::parse(line) {
            Ok(s) => s,
            Err(e) => bail!(
                "line {} of the metrics is not a sample: {e}: {line}",
                index + 1
            ),
        };
        samples += 1;
        if sample.name != METRIC || sample.value == 0.0 {
            continue;
        }
        let label = |key: &str| sample.label(key).unwrap_or_default().to_string();
        apis.push(DeprecatedApi {
            group: label("group"),
            version: label("version"),
            resource: label("resource"),
            subresource: label("subresource"),
            removed_release: label("removed_release"),
        });
    }
    if samples == 0 {
        bail!(
            "the API server's /metrics held no metric at all, so it cannot say which \
             deprecated APIs are in use"
        );
    }
    apis.sort();
    apis.dedup();
    Ok(apis)
}

/// The verdict for a hop to `hop` on a plan that ends at `target`:
/// - block for every API the hop's minor (or an earlier one) stops serving:
///   its clients break the moment the new API server starts;
/// - warn for one a later hop of this plan removes: this hop is safe, but
///   that hop will block, so the fix can start now;
/// - pass otherwise (deprecated APIs removed beyond the target are named in
///   the summary's count only).
pub fn check_removed_apis(requested: &[DeprecatedApi], hop: Minor, target: Minor) -> Check {
    judge(requested, hop, target, &BTreeMap::new())
}

/// One kube-apiserver instance: the control plane it runs on and where it
/// listens (its advertise address and secure port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServerInstance {
    pub node: String,
    pub endpoint: SocketAddr,
}

/// What one instance's `/metrics` said, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceMetrics {
    /// `cp-2 (10.0.0.2:6443)`, or `the API server admin.conf reaches`.
    pub instance: String,
    /// The node, for "requested at" (empty when not known).
    pub node: String,
    pub apis: Result<Vec<DeprecatedApi>, String>,
}

/// The kube-apiserver instances in `kubectl -n kube-system get pods -o
/// json`: the mirror pods labelled `component=kube-apiserver`, each with
/// its node and endpoint. A pod whose node or address is unusable is a
/// problem naming it (second list), never an argument on a command line.
pub fn parse_apiserver_instances(json: &str) -> Result<(Vec<ApiServerInstance>, Vec<String>)> {
    let doc: Value = serde_json::from_str(json).context("the pod list is not JSON")?;
    let items = doc
        .get("items")
        .and_then(Value::as_array)
        .context("the pod list has no items")?;
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for pod in items {
        let meta = &pod["metadata"];
        if meta["labels"]["component"] != "kube-apiserver" {
            continue;
        }
        let name = meta["name"].as_str().unwrap_or("?");
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !is_node_name(node) {
            problems.push(format!(
                "kube-apiserver pod {}: no valid node name ({:?})",
                name.escape_debug(),
                node.escape_debug().to_string()
            ));
            continue;
        }
        match endpoint(pod) {
            Some(endpoint) => found.push(ApiServerInstance {
                node: node.to_string(),
                endpoint,
            }),
            None => problems.push(format!(
                "{node}: its kube-apiserver pod names no usable --advertise-address, so it cannot be \
                 asked at its own address"
            )),
        }
    }
    found.sort_by(|a, b| a.node.cmp(&b.node));
    found.dedup_by(|a, b| a.node == b.node);
    Ok((found, problems))
}

/// DNS-1123 subdomain, as Kubernetes requires of node names.
fn is_node_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}

/// `--advertise-address` and `--secure-port` (default 6443) of the pod's
/// kube-apiserver container, else kubeadm's endpoint annotation.
fn endpoint(pod: &Value) -> Option<SocketAddr> {
    let containers = pod["spec"]["containers"].as_array()?;
    let args: Vec<&str> = containers
        .iter()
        .find(|c| c["name"] == "kube-apiserver")
        .or_else(|| containers.first())
        .into_iter()
        .flat_map(|c| {
            ["command", "args"]
                .into_iter()
                .filter_map(|k| c[k].as_array())
                .flatten()
        })
        .filter_map(Value::as_str)
        .collect();
    let flag = |name: &str| {
        args.iter()
            .rev()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
    };
    let from_flags = flag("advertise-address")
        .and_then(|a| a.parse::<IpAddr>().ok())
        .and_then(|ip| {
            let port = match flag("secure-port") {
                Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
                None => 6443,
            };
            Some(SocketAddr::new(ip, port))
        });
    from_flags.or_else(|| {
        pod["metadata"]["annotations"]["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"]
            .as_str()?
            .parse()
            .ok()
    })
}

/// The removed-API verdict over every instance read: their requests
/// merged, each API with the control planes that served it; an instance
/// that could not be read turns a pass into a warning that names it, and
/// is listed under a block or warning too.
pub fn check_removed_apis_across(
    instances: &[InstanceMetrics],
    hop: Minor,
    target: Minor,
) -> Check {
    let mut served: BTreeMap<DeprecatedApi, Vec<String>> = BTreeMap::new();
    let mut unread = Vec::new();
    for i in instances {
        match &i.apis {
            Ok(apis) => {
                for a in apis {
                    let at = served.entry(a.clone()).or_default();
                    if !i.node.is_empty() && !at.contains(&i.node) {
                        at.push(i.node.clone());
                    }
                }
            }
            Err(e) => unread.push(format!(
                "{}: its kube-apiserver's /metrics could not be read, so the deprecated requests it \
                 served are unknown: {e}",
                i.instance
            )),
        }
    }
    let read = instances.len() - unread.len();
    if read == 0 {
        return Check {
            name: CheckName::RemovedApis,
            verdict: Verdict::Warn,
            summary: "could not read any kube-apiserver's deprecated-API metric, so this is unchecked"
                .to_string(),
            details: unread,
            remedy: Some(
                "make each control plane's kube-apiserver reachable at its advertise address from the \
                 first control plane and plan again, or go on knowing `removed-apis` was not checked"
                    .to_string(),
            ),
        };
    }
    let requested: Vec<DeprecatedApi> = served.keys().cloned().collect();
    let mut check = judge(&requested, hop, target, &served);
    if unread.is_empty() {
        return check;
    }
    if check.verdict == Verdict::Pass {
        check.verdict = Verdict::Warn;
        check.summary = format!(
            "{}; but {} of {} kube-apiserver instance(s) could not be read",
            check.summary,
            unread.len(),
            instances.len()
        );
        check.remedy = Some(
            "make that kube-apiserver reachable at its advertise address from the first control \
             plane and plan again: a client it served may call an API this hop removes"
                .to_string(),
        );
    }
    check.details.extend(unread);
    check
}

fn judge(
    requested: &[DeprecatedApi],
    hop: Minor,
    target: Minor,
    served: &BTreeMap<DeprecatedApi, Vec<String>>,
) -> Check {
    let removed_by =
        |api: &DeprecatedApi, minor: Minor| api.removed_in().is_some_and(|r| r <= minor);
    let line = |api: &DeprecatedApi| {
        let text = match api.removed_in() {
            Some(minor) => format!("{} (removed in {minor})", api.describe()),
            None => api.describe(),
        };
        match served.get(api) {
            Some(at) if !at.is_empty() => format!("{text}, requested at {}", at.join(", ")),
            _ => text,
        }
    };
    let blocking: Vec<String> = requested
        .iter()
        .filter(|a| removed_by(a, hop))
        .map(line)
        .collect();
    let later: Vec<String> = requested
        .iter()
        .filter(|a| !removed_by(a, hop) && removed_by(a, target))
        .map(line)
        .collect();
    let remedy = "move each client to a version that is still served (the Deprecated API \
                  Migration Guide names it); the API server's audit log marks their requests \
                  with the annotation k8s.io/deprecated. The gauge only resets when \
                  kube-apiserver restarts, so restart it once the clients are fixed. If the \
                  only caller is kube-controller-manager's garbage collector (it watches every \
                  deletable resource, kubernetes/kubernetes#106668), go past this with \
                  --ignore-check removed-apis";
    if !blocking.is_empty() {
        return Check {
            name: CheckName::RemovedApis,
            verdict: Verdict::Block,
            summary: format!(
                "{} API version(s) still requested that {hop} no longer serves",
                blocking.len()
            ),
            details: blocking,
            remedy: Some(remedy.to_string()),
        };
    }
    if !later.is_empty() {
        return Check {
            name: CheckName::RemovedApis,
            verdict: Verdict::Warn,
            summary: format!(
                "{} API version(s) still requested that a later hop (up to {target}) removes; \
                 that hop will block",
                later.len()
            ),
            details: later,
            remedy: Some(remedy.to_string()),
        };
    }
    let summary = if requested.is_empty() {
        "no deprecated API requested since the API server started".to_string()
    } else {
        format!(
            "{} deprecated API version(s) requested, none removed by {target}",
            requested.len()
        )
    };
    Check::pass(CheckName::RemovedApis, summary)
}

/// One sample line: `name{label="value",…} value [timestamp]`.
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, String)>,
    value: f64,
}

impl<'a> Sample<'a> {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }

    fn parse(line: &'a str) -> Result<Sample<'a>, String> {
        let name_end = line
            .find(|c: char| c == '{' || c.is_whitespace())
            .ok_or("no value after the name")?;
        let name = &line[..name_end];
        if name.is_empty() {
            return Err("no metric name".into());
        }
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(body) = rest.strip_prefix('{') {
            let (parsed, after) = parse_labels(body)?;
            labels = parsed;
            rest = after;
        }
        let value = rest.split_whitespace().next().ok_or("no value")?;
        let value = parse_value(value).ok_or_else(|| format!("`{value}` is not a number"))?;
        Ok(Sample {
            name,
            labels,
            value,
        })
    }
}

/// A sample's labels, name and unescaped value, in the order printed.
type Labels<'a> = Vec<(&'a str, String)>;

/// The labels after `{` up to the closing `}`, and what follows it.
fn parse_labels(mut s: &str) -> Result<(Labels<'_>, &str), String> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = s.find('=').ok_or("a label without `=`")?;
        let key = s[..eq].trim();
        s = s[eq + 1..].trim_start();
        s = s.strip_prefix('"').ok_or("a label value without quotes")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("an escape at the end of the line".into()),
                },
                Some((_, c)) => value.push(c),
                None => return Err("an unterminated label value".into()),
            }
        };
        labels.push((key, value));
        s = s[end + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels not separated by `,`".into());
        }
    }
}

/// Go's float formatting as the exposition format uses it, `+Inf`/`NaN` included.
fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
        std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
    }

    fn m(s: &str) -> Minor {
        s.parse().unwrap()
    }

    fn api(group: &str, version: &str, resource: &str, removed: &str) -> DeprecatedApi {
        DeprecatedApi {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            subresource: String::new(),
            removed_release: removed.into(),
        }
    }

    #[test]
    fn reads_the_gauge_out_of_a_real_metrics_page() {
        let apis = parse_deprecated_apis(&fixture("apiserver-metrics.txt")).unwrap();
        assert_eq!(
            apis,
            vec![
                api(
                    "flowcontrol.apiserver.k8s.io",
                    "v1beta3",
                    "flowschemas",
                    "1.32"
                ),
                api(
                    "flowcontrol.apiserver.k8s.io",
                    "v1beta3",
                    "prioritylevelconfigurations",
                    "1.32"
                ),
            ],
            "the other metrics are not APIs in use"
        );
        assert_eq!(apis[0].removed_in(), Some(m("v1.32")));
        assert_eq!(
            apis[0].describe(),
            "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas"
        );
    }

    #[test]
    fn label_order_escapes_timestamps_and_crlf_do_not_matter() {
        let text = "# HELP x y\r\n\
            apiserver_requested_deprecated_apis{version=\"v1beta1\",removed_release=\"1.35\",\
            subresource=\"status\",resource=\"we\\\"ird,\\\\name\",group=\"\",} 1 1712345678000\r\n";
        let apis = parse_deprecated_apis(text).unwrap();
        assert_eq!(apis.len(), 1);
        assert_eq!(apis[0].resource, "we\"ird,\\name");
        assert_eq!(apis[0].describe(), "v1beta1 we\"ird,\\name/status");
        assert_eq!(apis[0].removed_in(), Some(m("v1.35")));
    }

    #[test]
    fn no_gauge_is_no_api_but_no_metric_at_all_is_an_error() {
        let quiet = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e+09\n\
            apiserver_requested_deprecated_apis{group=\"\",removed_release=\"1.9\",resource=\"x\",\
            subresource=\"\",version=\"v1\"} 0\n";
        assert_eq!(
            parse_deprecated_apis(quiet).unwrap(),
            vec![],
            "0 is not requested"
        );
        for broken in [
            "",
            "# only comments\n",
            "<html>Forbidden</html>\n",
            "x{a=\"b\" 1\n",
        ] {
            assert!(parse_deprecated_apis(broken).is_err(), "{broken:?}");
        }
    }

    #[test]
    fn blocks_at_the_removing_hop_and_names_the_api() {
        let apis = parse_deprecated_apis(&fixture("apiserver-metrics.txt")).unwrap();
        let check = check_removed_apis(&apis, m("v1.32"), m("v1.33"));
        assert_eq!(check.verdict, Verdict::Block);
        assert_eq!(
            check.details,
            [
                "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in v1.32)",
                "flowcontrol.apiserver.k8s.io/v1beta3 prioritylevelconfigurations (removed in v1.32)",
            ]
        );
        assert!(
            check.summary.contains("v1.32 no longer serves"),
            "{}",
            check.summary
        );
        assert!(
            check
                .remedy
                .unwrap()
                .contains("--ignore-check removed-apis")
        );
    }

    #[test]
    fn warns_before_a_later_hop_that_removes_it_and_passes_beyond_the_target() {
        let apis = vec![
            api("batch", "v1beta1", "cronjobs", "1.25"),
            api("x.io", "v1beta1", "things", "1.37"),
        ];
        let early = check_removed_apis(&apis[1..], m("v1.35"), m("v1.37"));
        assert_eq!(early.verdict, Verdict::Warn);
        assert_eq!(early.details, ["x.io/v1beta1 things (removed in v1.37)"]);
        let beyond = check_removed_apis(&apis[1..], m("v1.35"), m("v1.36"));
        assert_eq!(beyond.verdict, Verdict::Pass);
        assert!(
            beyond.summary.contains("none removed by v1.36"),
            "{}",
            beyond.summary
        );
        let past = check_removed_apis(&apis, m("v1.35"), m("v1.37"));
        assert_eq!(
            past.verdict,
            Verdict::Block,
            "a removal at or before the hop blocks"
        );
    }

    fn mirror_pod(node: &str, command: &[&str], endpoint: Option<&str>) -> serde_json::Value {
        let mut annotations = serde_json::json!({"kubernetes.io/config.mirror": "x"});
        if let Some(e) = endpoint {
            annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] =
                e.into();
        }
        serde_json::json!({
            "metadata": {"name": format!("kube-apiserver-{node}"), "namespace": "kube-system",
                         "labels": {"component": "kube-apiserver", "tier": "control-plane"},
                         "annotations": annotations},
            "spec": {"nodeName": node, "containers": [{"name": "kube-apiserver", "command": command}]}
        })
    }

    #[test]
    fn instances_come_from_the_mirror_pods_advertise_address() {
        let list = serde_json::json!({"kind": "PodList", "items": [
            mirror_pod("cp-2", &["kube-apiserver", "--advertise-address=10.0.0.2", "--secure-port=6443"], None),
            mirror_pod("cp-1", &["kube-apiserver", "--advertise-address=10.0.0.1"], Some("10.0.0.1:6443")),
            // No flag: kubeadm's annotation (IPv6, bracketed as JoinHostPort writes it).
            mirror_pod("cp-3", &["kube-apiserver"], Some("[fd00::3]:8443")),
            // Something that would become an argument: refused, named.
            mirror_pod("cp-4", &["kube-apiserver", "--advertise-address=10.0.0.4;reboot"], None),
            mirror_pod("Bad;Name", &["kube-apiserver", "--advertise-address=10.0.0.5"], None),
            {"metadata": {"name": "etcd-cp-1", "labels": {"component": "etcd"}}, "spec": {"nodeName": "cp-1"}},
        ]});
        let (found, problems) = parse_apiserver_instances(&list.to_string()).unwrap();
        let shown: Vec<String> = found
            .iter()
            .map(|i| format!("{} {}", i.node, i.endpoint))
            .collect();
        assert_eq!(
            shown,
            [
                "cp-1 10.0.0.1:6443",
                "cp-2 10.0.0.2:6443",
                "cp-3 [fd00::3]:8443"
            ]
        );
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("cp-4: its kube-apiserver pod names no usable --advertise-address")
        );
        assert!(problems[1].contains("no valid node name"), "{problems:?}");
        assert!(parse_apiserver_instances("<html>").is_err());
    }

    fn instance(node: &str, apis: Result<Vec<DeprecatedApi>, &str>) -> InstanceMetrics {
        InstanceMetrics {
            instance: format!("{node} (10.0.0.9:6443)"),
            node: node.into(),
            apis: apis.map_err(String::from),
        }
    }

    #[test]
    fn an_api_only_the_second_instance_served_blocks_and_names_it() {
        let served = api("batch", "v1beta1", "cronjobs", "1.35");
        let check = check_removed_apis_across(
            &[
                instance("cp-1", Ok(vec![])),
                instance("cp-2", Ok(vec![served.clone()])),
                instance("cp-3", Ok(vec![])),
            ],
            m("v1.35"),
            m("v1.35"),
        );
        assert_eq!(check.verdict, Verdict::Block);
        assert_eq!(
            check.details,
            ["batch/v1beta1 cronjobs (removed in v1.35), requested at cp-2"]
        );
    }

    #[test]
    fn an_unreadable_instance_is_a_warning_naming_it_never_a_pass() {
        let check = check_removed_apis_across(
            &[
                instance("cp-1", Ok(vec![])),
                instance("cp-2", Err("connection refused")),
            ],
            m("v1.35"),
            m("v1.35"),
        );
        assert_eq!(check.verdict, Verdict::Warn);
        assert!(
            check
                .summary
                .contains("1 of 2 kube-apiserver instance(s) could not be read"),
            "{}",
            check.summary
        );
        assert_eq!(
            check.details,
            [
                "cp-2 (10.0.0.9:6443): its kube-apiserver's /metrics could not be read, so the deprecated \
              requests it served are unknown: connection refused"
            ]
        );
        // A block stays a block, with the unread instance listed under it.
        let block = check_removed_apis_across(
            &[
                instance(
                    "cp-1",
                    Ok(vec![api("batch", "v1beta1", "cronjobs", "1.35")]),
                ),
                instance("cp-2", Err("connection refused")),
            ],
            m("v1.35"),
            m("v1.35"),
        );
        assert_eq!(block.verdict, Verdict::Block);
        assert_eq!(block.details.len(), 2);
        // None readable: unchecked, a warning.
        let none = check_removed_apis_across(&[instance("cp-1", Err("x"))], m("v1.35"), m("v1.35"));
        assert_eq!(none.verdict, Verdict::Warn);
        assert!(none.summary.contains("unchecked"));
    }

    #[test]
    fn the_per_instance_script_quotes_nothing_it_cannot_and_parses_back() {
        let a: SocketAddr = "10.0.0.2:6443".parse().unwrap();
        let b: SocketAddr = "[fd00::3]:6443".parse().unwrap();
        let script = crate::remote::instance_metrics_script(&[
            ("cp-2".into(), a),
            ("cp-3".into(), b),
            ("bad'name".into(), a),
        ]);
        assert!(!script.contains('\''), "sudo sh -c '…' would break");
        assert!(script.contains("probe \"metrics cp-2\" fleetctl_metrics_at \"10.0.0.2:6443\"\n"));
        assert!(script.contains("probe \"metrics cp-3\" fleetctl_metrics_at \"[fd00::3]:6443\"\n"));
        assert!(!script.contains("bad"), "an unvalidated name is left out");
        let sh = std::process::Command::new("sh")
            .args(["-n", "-c", &script])
            .output()
            .unwrap();
        assert!(
            sh.status.success(),
            "{}",
            String::from_utf8_lossy(&sh.stderr)
        );
        let output = "@@fleetctl:metrics 1@@\n\
            @@fleetctl:begin metrics cp-2@@\nprocess_start_time_seconds 1.7e+09\n\n@@fleetctl:stderr@@\n@@fleetctl:end 0@@\n\
            @@fleetctl:begin metrics cp-3@@\n\n@@fleetctl:stderr@@\nThe connection to the server [fd00::3]:6443 was refused - did you specify the right host or port?\n@@fleetctl:end 1@@\n\
            @@fleetctl:done@@\n";
        let read = crate::node::parse_instance_metrics(
            output,
            &["cp-2".into(), "cp-3".into(), "cp-4".into()],
        )
        .unwrap();
        assert_eq!(
            read[0].1.as_deref(),
            Ok("process_start_time_seconds 1.7e+09\n")
        );
        let e = read[1].1.as_ref().unwrap_err();
        assert!(
            e.contains("exit status 1: The connection to the server [fd00::3]:6443 was refused"),
            "{e}"
        );
        assert!(
            read[2]
                .1
                .as_ref()
                .unwrap_err()
                .contains("no section for cp-4")
        );
    }

    #[test]
    fn a_deprecation_without_a_planned_removal_never_blocks() {
        let apis = vec![api("x.io", "v1beta1", "things", "")];
        let check = check_removed_apis(&apis, m("v1.40"), m("v1.40"));
        assert_eq!(check.verdict, Verdict::Pass);
        let none = check_removed_apis(&[], m("v1.33"), m("v1.34"));
        assert_eq!(none.verdict, Verdict::Pass);
        assert!(none.summary.contains("no deprecated API"));
    }
}

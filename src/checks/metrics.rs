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
//! it served, and one `/metrics` through admin.conf reads whichever
//! instance admin.conf reaches. So the check reads every instance at its
//! advertise address (`super::apiservers`), with `kubectl
//! --server=https://ADDR:PORT` through admin.conf, whose CA verifies the
//! serving certificate kubeadm issues for that address
//! (`pkiutil.GetAPIServerAltNames`), and merges the results; an instance
//! that cannot be read is a warning that names it, never a pass.

use std::collections::BTreeMap;

use anyhow::{Result, bail};

use super::verdicts::{Check, CheckName, Verdict};
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

pub(super) fn judge(
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

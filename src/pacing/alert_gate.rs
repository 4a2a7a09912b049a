//! The alert gate: `--alert-gate URL` holds the next drain while alerts fire,
//! as Kured's `--prometheus-url` holds its reboots.
//!
//! Kured (kubereboot/kured `pkg/blockers/prometheus.go`) runs the instant
//! query `ALERTS` and blocks on every sample with an `alertname` and a
//! non-zero value; `--alert-filter-regexp` EXCLUDES the alerts whose name
//! it matches (`--alert-filter-match-only` turns it into an include list),
//! and `--alert-firing-only` ignores `pending` ones. fleetctl reads the same
//! query, and also Alertmanager's `GET /api/v2/alerts` (an array of alerts,
//! each with `labels.alertname` and `status.state`), where silenced and
//! inhibited alerts do not count: their state is `suppressed`.
//!
//! Pure: the caller fetches the body (through a control plane, with curl)
//! and decides how long to wait.

use std::collections::BTreeSet;

use anyhow::{Context, bail};
use serde::Deserialize;

/// One alert that would hold a drain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alert {
    pub name: String,
    pub firing: bool,
}

/// Which alerts hold a drain.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Alerts whose name this matches do not hold a drain (Kured's
    /// `--alert-filter-regexp`).
    pub exclude: Option<regex_lite::Regex>,
    /// Only firing alerts hold it; pending ones do not (Kured's
    /// `--alert-firing-only`).
    pub firing_only: bool,
    /// `exclude` is the list of the alerts that hold, not of those that do
    /// not (Kured's `--alert-filter-match-only`: `matchesRegex` in
    /// kubereboot/kured `pkg/blockers/prometheus.go` keeps an alert when
    /// the regexp's match equals this flag).
    pub match_only: bool,
}

impl Filter {
    /// The names of the alerts that hold the drain, sorted, each once.
    pub fn blocking(&self, alerts: &[Alert]) -> Vec<String> {
        alerts
            .iter()
            .filter(|a| a.firing || !self.firing_only)
            .filter(|a| {
                self.exclude
                    .as_ref()
                    .is_none_or(|re| re.is_match(&a.name) == self.match_only)
            })
            .map(|a| a.name.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

#[derive(Deserialize)]
struct PromResponse {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<PromData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromData {
    result_type: String,
    result: Vec<PromSample>,
}

#[derive(Deserialize)]
struct PromSample {
    metric: std::collections::BTreeMap<String, String>,
    /// `[unix time, "value"]`.
    value: (serde_json::Value, String),
}

#[derive(Deserialize)]
struct AmAlert {
    labels: std::collections::BTreeMap<String, String>,
    status: AmStatus,
}

#[derive(Deserialize)]
struct AmStatus {
    state: String,
}

/// The active alerts in a Prometheus `ALERTS` query response or an
/// Alertmanager v2 alert list. Anything else is an error: a gate that
/// cannot be read must not read as "no alerts".
pub fn parse(body: &str) -> anyhow::Result<Vec<Alert>> {
    let body = body.trim();
    if body.starts_with('[') {
        let alerts: Vec<AmAlert> = serde_json::from_str(body)
            .context("the Alertmanager answer is not a list of alerts")?;
        return Ok(alerts
            .into_iter()
            .filter(|a| a.status.state == "active")
            .filter_map(|a| {
                Some(Alert {
                    name: a.labels.get("alertname")?.clone(),
                    firing: true,
                })
            })
            .collect());
    }
    let response: PromResponse = serde_json::from_str(body).context(
        "the answer is neither a Prometheus query result nor an Alertmanager alert list",
    )?;
    if response.status != "success" {
        bail!(
            "Prometheus answered {}: {}",
            response.status,
            response.error.unwrap_or_default()
        );
    }
    let data = response
        .data
        .context("Prometheus answered success without data")?;
    if data.result_type != "vector" {
        bail!(
            "Prometheus answered a {} to the ALERTS query, not a vector",
            data.result_type
        );
    }
    Ok(data
        .result
        .into_iter()
        .filter(|s| s.value.1.parse::<f64>().is_ok_and(|v| v != 0.0))
        .filter_map(|s| {
            Some(Alert {
                firing: s.metric.get("alertstate").map(String::as_str) == Some("firing"),
                name: s.metric.get("alertname")?.clone(),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMETHEUS: &str = r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"__name__":"ALERTS","alertname":"Watchdog","alertstate":"firing","severity":"none"},"value":[1764640000.1,"1"]},
        {"metric":{"__name__":"ALERTS","alertname":"KubeNodeNotReady","alertstate":"pending"},"value":[1764640000.1,"1"]},
        {"metric":{"__name__":"ALERTS","alertname":"EtcdNoLeader","alertstate":"firing"},"value":[1764640000.1,"1"]},
        {"metric":{"__name__":"ALERTS","alertname":"EtcdNoLeader","alertstate":"firing","instance":"b"},"value":[1764640000.1,"1"]},
        {"metric":{"__name__":"ALERTS","alertname":"Resolved","alertstate":"firing"},"value":[1764640000.1,"0"]}
    ]}}"#;

    const ALERTMANAGER: &str = r#"[
        {"labels":{"alertname":"Watchdog"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]}},
        {"labels":{"alertname":"KubePodCrashLooping"},"status":{"state":"suppressed","silencedBy":["x"],"inhibitedBy":[]}},
        {"labels":{"alertname":"TargetDown"},"status":{"state":"active","silencedBy":[],"inhibitedBy":[]}}
    ]"#;

    #[test]
    fn reads_prometheus_alerts_as_kured_does() {
        let alerts = parse(PROMETHEUS).unwrap();
        assert_eq!(
            Filter::default().blocking(&alerts),
            ["EtcdNoLeader", "KubeNodeNotReady", "Watchdog"]
        );
        let filter = Filter {
            exclude: Some(regex_lite::Regex::new("^(Watchdog|InfoInhibitor)$").unwrap()),
            firing_only: true,
            match_only: false,
        };
        assert_eq!(filter.blocking(&alerts), ["EtcdNoLeader"]);
        // --alert-filter-match-only: the regexp names the alerts that hold.
        let only = Filter {
            match_only: true,
            firing_only: false,
            ..filter
        };
        assert_eq!(only.blocking(&alerts), ["Watchdog"]);
    }

    #[test]
    fn reads_alertmanager_alerts_without_the_silenced_ones() {
        let alerts = parse(ALERTMANAGER).unwrap();
        assert_eq!(
            Filter::default().blocking(&alerts),
            ["TargetDown", "Watchdog"]
        );
    }

    #[test]
    fn no_alerts_is_an_empty_vector_or_list() {
        assert!(
            parse(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
                .unwrap()
                .is_empty()
        );
        assert!(parse("[]").unwrap().is_empty());
    }

    #[test]
    fn an_answer_it_cannot_read_is_an_error_never_no_alerts() {
        for body in [
            "",
            "<html>login</html>",
            r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
            r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
            r#"{"status":"success"}"#,
            "[{}]",
        ] {
            assert!(parse(body).is_err(), "{body:?}");
        }
    }
}

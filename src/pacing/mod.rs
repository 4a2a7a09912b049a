//! When apply may start the next node: maintenance windows, the alert gate
//! and the soak between nodes. Pure decisions; `steps::hold` does the
//! waiting.

pub mod alert_gate;
pub mod ceph_gate;
pub mod window;

use std::time::Duration;

pub use alert_gate::{Alert, Filter};
pub use ceph_gate::CephGate;
pub use window::{Fit, Window};

/// What holds the next node back, from `--soak`, `--window` (or the
/// inventory's `window:`) and `--alert-gate`.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    /// After a node or batch is back (and after each hop), wait this long,
    /// then judge the gates again before the next one.
    pub soak: Duration,
    pub window: Option<Window>,
    pub alert_gate: Option<AlertGate>,
    /// The Ceph gate before each drain and after each node returns.
    pub ceph: CephGate,
}

/// `--alert-gate URL`: a Prometheus whose `ALERTS` hold the next drain.
#[derive(Debug, Clone)]
pub struct AlertGate {
    /// What is asked, e.g. `http://prometheus.monitoring:9090/api/v1/query?query=ALERTS`.
    pub query_url: String,
    pub filter: Filter,
    /// How long apply waits for the alerts to resolve before it fails.
    pub timeout: Duration,
    /// Between two readings while alerts fire.
    pub interval: Duration,
}

impl AlertGate {
    /// The gate for `url`: a Prometheus base URL (as Kured's
    /// `--prometheus-url`), to which `/api/v1/query?query=ALERTS` is added,
    /// or an Alertmanager URL ending in `/api/v2/alerts`, asked for active
    /// alerts that are neither silenced nor inhibited. The URL becomes an
    /// argument of `curl` on a control plane: only http(s), no credentials
    /// (they would land in the journal and the node's process list), no
    /// query or fragment of the operator's own, nothing a shell or curl
    /// could read as more than one URL.
    pub fn new(url: &str, filter: Filter, timeout: Duration) -> Result<AlertGate, String> {
        let bad = |why: &str| format!("--alert-gate {url:?}: {why}");
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| bad("give an http:// or https:// URL"))?;
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~/:[]%".contains(c);
        if let Some(c) = url.chars().find(|c| !allowed(*c)) {
            return Err(bad(&format!(
                "{c:?} is not allowed here (no credentials, query or fragment; \
                 the gate asks for the alerts itself)"
            )));
        }
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let base = url.trim_end_matches('/');
        let query_url = if base.ends_with("/api/v2/alerts") {
            format!("{base}?active=true&silenced=false&inhibited=false")
        } else {
            format!("{base}/api/v1/query?query=ALERTS")
        };
        Ok(AlertGate {
            query_url,
            filter,
            timeout,
            interval: Duration::from_secs(30),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(url: &str) -> Result<String, String> {
        AlertGate::new(url, Filter::default(), Duration::from_secs(60)).map(|g| g.query_url)
    }

    #[test]
    fn a_prometheus_or_an_alertmanager_url() {
        assert_eq!(
            gate("http://10.96.0.20:9090").unwrap(),
            "http://10.96.0.20:9090/api/v1/query?query=ALERTS"
        );
        assert_eq!(
            gate("https://prom.example.org/prometheus/").unwrap(),
            "https://prom.example.org/prometheus/api/v1/query?query=ALERTS"
        );
        assert_eq!(
            gate("http://am:9093/api/v2/alerts").unwrap(),
            "http://am:9093/api/v2/alerts?active=true&silenced=false&inhibited=false"
        );
    }

    #[test]
    fn refuses_what_could_leak_or_be_read_as_more() {
        for (url, says) in [
            ("prom:9090", "http:// or https://"),
            ("ftp://prom", "http:// or https://"),
            ("http://", "no host"),
            ("http://user:secret@prom:9090", "'@' is not allowed"),
            ("http://prom:9090/?query=up", "'?' is not allowed"),
            ("http://prom:9090/ -o /etc/passwd", "' ' is not allowed"),
            ("http://prom:9090/$(id)", "'$' is not allowed"),
            ("http://prom:9090/#x", "'#' is not allowed"),
        ] {
            let err = gate(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
        }
    }
}

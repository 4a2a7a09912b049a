//! The fleet's Prometheus and Alertmanager, for fleetctl's alert gate: a
//! loopback HTTP server answering the two reads a gate makes, from the
//! alerts `fleetsim ctl alert NAME firing|pending|resolved` sets.
//!
//! - `GET /api/v1/query?query=ALERTS` answers as Prometheus' HTTP API does
//!   (prometheus/prometheus `web/api/v1/api.go`): `{"status":"success",
//!   "data":{"resultType":"vector","result":[…]}}`, one sample per alert
//!   with the labels `__name__="ALERTS"`, `alertname` and `alertstate`
//!   (rules/alerting.go), value "1". Any other query is refused with 400
//!   and `errorType: bad_data`, so a gate asking something else fails
//!   instead of reading "no alerts".
//! - `GET /api/v2/alerts` answers as Alertmanager's API v2 does: an array of
//!   alerts with `labels` and `status.state` (`active`; pending alerts are
//!   not sent to Alertmanager at all).
//! - anything else is 404, and only GET is served.

use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use crate::hub::{read_head, respond};
use crate::state::{Shared, now};

/// A running Prometheus; it lives as long as the supervisor process.
#[derive(Debug, Clone)]
pub struct Prometheus {
    pub addr: SocketAddr,
}

impl Prometheus {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// Binds 127.0.0.1 on a free port and serves from a background thread.
pub fn serve(shared: Shared) -> Result<Prometheus> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding Prometheus on 127.0.0.1")?;
    let addr = listener
        .local_addr()
        .context("reading Prometheus' address")?;
    thread::Builder::new()
        .name("prometheus".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let shared = shared.clone();
                let _ = thread::Builder::new()
                    .name("prometheus-conn".into())
                    .spawn(move || {
                        if let Err(e) = handle(stream, &shared) {
                            eprintln!("fleetsim prometheus: {e:#}");
                        }
                    });
            }
        })
        .context("starting the Prometheus thread")?;
    Ok(Prometheus { addr })
}

fn handle(stream: TcpStream, shared: &Shared) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    stream.set_write_timeout(Some(Duration::from_secs(5))).ok();
    let mut reader = BufReader::new(stream.try_clone().context("cloning the socket")?);
    let Some(first) = read_head(&mut reader)? else {
        return Ok(());
    };
    let mut out = stream;
    let (status, body) = answer(&first, shared);
    respond(&mut out, status, "application/json", body.as_bytes(), false)
}

/// The status and body for a request line.
fn answer(request_line: &str, shared: &Shared) -> (u16, String) {
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return (400, error("bad_data", "malformed request"));
    };
    if method != "GET" {
        return (405, error("bad_data", "only GET is served here"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let alerts = shared.faults().map(|f| f.alerts).unwrap_or_default();
    match path {
        "/api/v1/query" => {
            let asked = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("query="))
                .unwrap_or_default();
            if asked != "ALERTS" {
                return (
                    400,
                    error(
                        "bad_data",
                        &format!(
                            "fleetsim's Prometheus only answers the query ALERTS, not {asked:?}"
                        ),
                    ),
                );
            }
            let t = now();
            let result: Vec<_> = alerts
                .iter()
                .map(|(name, state)| {
                    json!({
                        "metric": {"__name__": "ALERTS", "alertname": name, "alertstate": state, "severity": "warning"},
                        "value": [t, "1"],
                    })
                })
                .collect();
            (
                200,
                json!({"status": "success", "data": {"resultType": "vector", "result": result}})
                    .to_string(),
            )
        }
        "/api/v2/alerts" => {
            let list: Vec<_> = alerts
                .iter()
                .filter(|(_, state)| *state == "firing")
                .map(|(name, _)| {
                    json!({
                        "labels": {"alertname": name, "severity": "warning"},
                        "status": {"state": "active", "silencedBy": [], "inhibitedBy": []},
                    })
                })
                .collect();
            (200, serde_json::Value::from(list).to_string())
        }
        _ => (404, "404 page not found\n".to_string()),
    }
}

fn error(kind: &str, text: &str) -> String {
    json!({"status": "error", "errorType": kind, "error": text}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared_with(alerts: &[(&str, &str)]) -> (tempfile::TempDir, Shared) {
        let dir = tempfile::tempdir().unwrap();
        let shared = Shared::new(dir.path().to_path_buf());
        shared
            .update_faults(|f| {
                for (n, s) in alerts {
                    f.alerts.insert(n.to_string(), s.to_string());
                }
            })
            .unwrap();
        (dir, shared)
    }

    #[test]
    fn answers_alerts_as_prometheus_and_alertmanager_do() {
        let (_d, shared) =
            shared_with(&[("EtcdNoLeader", "firing"), ("KubeNodeNotReady", "pending")]);
        let (status, body) = answer("GET /api/v1/query?query=ALERTS HTTP/1.1", &shared);
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["data"]["resultType"], "vector");
        assert_eq!(
            v["data"]["result"][0]["metric"]["alertname"],
            "EtcdNoLeader"
        );
        assert_eq!(v["data"]["result"][1]["metric"]["alertstate"], "pending");
        let (status, body) = answer(
            "GET /api/v2/alerts?active=true&silenced=false&inhibited=false HTTP/1.1",
            &shared,
        );
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v.as_array().unwrap().len(),
            1,
            "pending alerts never reach Alertmanager"
        );
    }

    #[test]
    fn refuses_other_queries_and_paths() {
        let (_d, shared) = shared_with(&[]);
        assert_eq!(
            answer("GET /api/v1/query?query=up HTTP/1.1", &shared).0,
            400
        );
        assert_eq!(answer("GET /metrics HTTP/1.1", &shared).0, 404);
        assert_eq!(answer("POST /api/v1/query HTTP/1.1", &shared).0, 405);
    }
}

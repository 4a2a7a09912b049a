//! Ceph in `status`: each CephCluster's health and placement groups, as
//! the Ceph gate reads them (`crate::gather::rook_reading`), for the table
//! and the JSON. Absent (not even a key) on a cluster without Ceph.

use serde::Serialize;

use crate::checks::ceph::{Reading, fresh};
use crate::ui;

/// One CephCluster.
#[derive(Debug, Serialize)]
pub struct CephReport {
    /// `namespace/name`.
    pub cluster: String,
    /// `toolbox` (Ceph asked through Rook's toolbox pod), `status` (the
    /// CephCluster's `.status.ceph`) or `unreadable`.
    pub source: &'static str,
    /// `HEALTH_OK`, `HEALTH_WARN`, `HEALTH_ERR`; `None` when unknown.
    pub health: Option<String>,
    pub checks: Vec<CephCheckReport>,
    /// PG state → count; only from the toolbox.
    pub pgs: Option<Vec<PgCount>>,
    /// Why the health is unknown (a stale status, nothing readable).
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct CephCheckReport {
    pub code: String,
    pub severity: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct PgCount {
    pub state: String,
    pub count: u64,
}

/// The readings as the report shows them.
pub fn ceph_reports(readings: &[(String, Reading)]) -> Vec<CephReport> {
    readings
        .iter()
        .map(|(name, r)| {
            let (source, health, pgs, error) = match r {
                Reading::Toolbox { health, pgs, .. } => {
                    let counts = pgs
                        .by_state
                        .iter()
                        .map(|(s, n)| PgCount {
                            state: s.clone(),
                            count: *n,
                        })
                        .collect();
                    ("toolbox", Some(health.clone()), Some(counts), None)
                }
                Reading::Status { status, now } => match fresh(status, *now) {
                    Ok(h) => ("status", Some(h), None, None),
                    Err(e) => ("status", status.health.clone(), None, Some(e)),
                },
                Reading::Unreadable(e) => ("unreadable", None, None, Some(e.clone())),
            };
            CephReport {
                cluster: name.clone(),
                source,
                health: health.as_ref().map(|h| h.status.clone()),
                checks: health
                    .map(|h| {
                        h.checks
                            .into_iter()
                            .map(|c| CephCheckReport {
                                code: c.code,
                                severity: c.severity,
                                message: c.message,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                pgs,
                error,
            }
        })
        .collect()
}

/// `ceph rook-ceph/rook-ceph: HEALTH_WARN · 32 PGs: 32 active+clean (toolbox)`
/// and a line per check.
pub fn render(reports: &[CephReport]) -> String {
    let mut out = String::new();
    for c in reports {
        let health = match c.health.as_deref() {
            Some("HEALTH_OK") => "HEALTH_OK".to_string(),
            Some(h) => ui::attention(h),
            None => ui::attention("unknown"),
        };
        let pgs = match &c.pgs {
            Some(p) => {
                let total: u64 = p.iter().map(|x| x.count).sum();
                let states: Vec<String> = p
                    .iter()
                    .map(|x| format!("{} {}", x.count, x.state))
                    .collect();
                format!(" · {total} PGs: {}", states.join(", "))
            }
            None => String::new(),
        };
        out.push_str(&format!(
            "ceph {} {health}{pgs} (from the {})\n",
            ui::escape::escape_controls(&c.cluster),
            c.source
        ));
        for k in &c.checks {
            out.push_str(&format!(
                "  {} {}: {}\n",
                k.severity,
                k.code,
                ui::escape::escape_controls(&k.message)
            ));
        }
        if let Some(e) = &c.error {
            out.push_str(&format!("  {}\n", ui::escape::escape_controls(e)));
        }
    }
    out
}

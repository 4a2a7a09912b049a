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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::ceph::{CephCheck, CephClusterStatus, Health, PgStates};

    fn health() -> Health {
        Health {
            status: "HEALTH_WARN".into(),
            checks: vec![CephCheck {
                code: "PG_DEGRADED".into(),
                severity: "HEALTH_WARN".into(),
                message: "Degraded data redundancy: 3 pgs degraded\u{1b}[2J".into(),
            }],
        }
    }

    #[test]
    fn the_toolbox_shows_pgs_and_a_stale_status_says_why_it_is_unknown() {
        let toolbox = Reading::Toolbox {
            health: health(),
            pgs: PgStates {
                by_state: vec![
                    ("active+clean".into(), 29),
                    ("active+undersized+degraded".into(), 3),
                ],
            },
            stop: None,
        };
        let stale = Reading::Status {
            status: CephClusterStatus {
                name: "rook-ceph/rook-ceph".into(),
                namespace: "rook-ceph".into(),
                health: Some(health()),
                last_checked: Some(0),
                last_checked_text: "1970-01-01T00:00:00Z".into(),
            },
            now: 1_000,
        };
        let reports = ceph_reports(&[
            ("rook-ceph/rook-ceph".into(), toolbox),
            ("other/ceph".into(), stale),
        ]);
        assert_eq!(reports[0].source, "toolbox");
        assert_eq!(reports[0].pgs.as_ref().unwrap().len(), 2);
        assert_eq!(reports[1].source, "status");
        assert!(reports[1].pgs.is_none());
        assert!(reports[1].error.as_ref().unwrap().contains("unknown"));
        let text = render(&reports);
        assert!(
            text.contains(
                "32 PGs: 29 active+clean, 3 active+undersized+degraded (from the toolbox)"
            ),
            "{text}"
        );
        assert!(
            text.contains("HEALTH_WARN PG_DEGRADED: Degraded data redundancy"),
            "{text}"
        );
        assert!(
            !text.contains('\u{1b}'),
            "control characters are escaped: {text:?}"
        );
    }
}

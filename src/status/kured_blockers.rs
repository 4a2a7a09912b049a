//! Kured in `status`: its DaemonSet and any of its blockers active now
//! (`crate::gather::kured_reading`), what would hold a reboot by Kured, or
//! a drain by apply while it keeps Kured's gates. Absent (not even a key)
//! when no DaemonSet runs Kured.

use serde::Serialize;

use crate::gather::kured_reading::KuredNow;
use crate::ui;

#[derive(Debug, Serialize)]
pub struct KuredReport {
    /// `namespace/name` of Kured's DaemonSet.
    pub daemonset: String,
    /// Each blocker active now; empty: nothing holds a reboot.
    pub blockers: Vec<KuredBlockerReport>,
    /// Why Kured's blockers could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct KuredBlockerReport {
    /// The node it holds; absent: every node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub gate: String,
    pub what: String,
}

/// The reading as the report shows it; `None` without Kured.
pub fn kured_report(reading: anyhow::Result<Option<KuredNow>>) -> Option<KuredReport> {
    match reading {
        Ok(None) => None,
        Ok(Some(k)) => Some(KuredReport {
            daemonset: k.daemonset,
            blockers: k
                .blockers
                .into_iter()
                .map(|b| KuredBlockerReport {
                    node: b.node,
                    gate: b.gate,
                    what: b.what,
                })
                .collect(),
            error: None,
        }),
        Err(e) => Some(KuredReport {
            daemonset: "?".into(),
            blockers: Vec::new(),
            error: Some(format!("{e:#}")),
        }),
    }
}

/// `kured kube-system/kured: nothing holds a reboot now`, or a line per
/// blocker.
pub fn render(r: &KuredReport) -> String {
    let name = ui::escape::escape_controls(&r.daemonset);
    if let Some(e) = &r.error {
        return format!(
            "kured {}: its blockers could not be read: {}\n",
            name,
            ui::escape::escape_controls(e)
        );
    }
    if r.blockers.is_empty() {
        return format!("kured {name}: no blocker holds a reboot now\n");
    }
    let mut out = format!("kured {name}: {}\n", ui::attention("blockers active now"));
    for b in &r.blockers {
        let on = b.node.as_deref().unwrap_or("every node");
        out.push_str(&format!(
            "  {}: {} ({})\n",
            ui::escape::escape_controls(on),
            ui::escape::escape_controls(&b.what),
            ui::escape::escape_controls(&b.gate)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gather::kured_reading::KuredBlocker;

    #[test]
    fn names_each_blocker_and_its_node() {
        let r = kured_report(Ok(Some(KuredNow {
            daemonset: "kube-system/kured".into(),
            gates: Default::default(),
            blockers: vec![
                KuredBlocker {
                    node: Some("w-2".into()),
                    gate: "--blocking-pod-selector=app=backup".into(),
                    what: "pods backup-1".into(),
                },
                KuredBlocker {
                    node: None,
                    gate: "--prometheus-url".into(),
                    what: "alert KubeNodeNotReady".into(),
                },
            ],
        })))
        .unwrap();
        let text = render(&r);
        assert!(
            text.contains("w-2: pods backup-1 (--blocking-pod-selector=app=backup)"),
            "{text}"
        );
        assert!(
            text.contains("every node: alert KubeNodeNotReady (--prometheus-url)"),
            "{text}"
        );
        assert!(kured_report(Ok(None)).is_none());
    }
}

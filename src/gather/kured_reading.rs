//! Kured's blockers active now, for `status`: the Kured DaemonSet found
//! among the cluster's (`crate::checks::find_kured`), its gates read from
//! its container (`crate::checks::parse_kured_gates`), and what each would
//! hold right now, read the way apply's takeover reads them before a drain
//! (`crate::steps::kured_gates`): the pods matching each
//! `--blocking-pod-selector` on each node (Kured's own query,
//! `pkg/blockers/kubernetespod.go`), and the alerts at its
//! `--prometheus-url` after its filters (`pkg/blockers/prometheus.go`). A
//! reading that fails is shown as a blocker, as Kured holds on it.

use std::time::Duration;

use anyhow::bail;

use super::rook_reading::RunRoot;
use crate::checks::{self, KuredGates};
use crate::remote;

/// Kured and what holds a reboot now.
#[derive(Debug, Clone)]
pub struct KuredNow {
    /// `namespace/name` of its DaemonSet.
    pub daemonset: String,
    pub gates: KuredGates,
    pub blockers: Vec<KuredBlocker>,
}

/// One blocker active now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredBlocker {
    /// The node it holds; `None`: every node (an alert).
    pub node: Option<String>,
    /// Kured's flag: `--blocking-pod-selector=app=backup`, `--prometheus-url`.
    pub gate: String,
    /// The pods, the alert, or why it could not be read.
    pub what: String,
}

/// `Ok(None)` when no DaemonSet runs Kured.
pub async fn read(
    api: &(impl RunRoot + Sync),
    nodes: &[String],
) -> anyhow::Result<Option<KuredNow>> {
    let out = api
        .run_root_as(
            "kured: its DaemonSet",
            remote::kured_pods::daemonset_containers(),
        )
        .await?;
    if !out.success() {
        bail!(
            "the DaemonSets could not be listed: {}",
            out.stderr.trim().lines().last().unwrap_or("no output")
        );
    }
    let Some(kured) = checks::find_kured(&out.stdout)? else {
        return Ok(None);
    };
    let gates = checks::parse_kured_settings(
        &kured.daemonset,
        &kured.argv,
        &kured.env,
        checks::env_precedence(&kured.image),
    )?;
    let mut blockers = Vec::new();
    for node in nodes {
        for selector in &gates.pod_selectors {
            let gate = format!("--blocking-pod-selector={selector}");
            let out = api
                .run_root_as(
                    "kured: blocking pods",
                    remote::kured_pods::blocking_pods(selector, node),
                )
                .await?;
            let what = if out.success() {
                let pods = checks::blocking_pod_names(&out.stdout);
                (!pods.is_empty()).then(|| format!("pods {}", pods.join(", ")))
            } else {
                Some(format!(
                    "the pods could not be listed: {}",
                    out.stderr.trim().lines().last().unwrap_or("no output")
                ))
            };
            blockers.extend(what.map(|what| KuredBlocker {
                node: Some(node.clone()),
                gate: gate.clone(),
                what,
            }));
        }
    }
    if let Some(gate) = gates.alert_gate(&kured.daemonset, Duration::ZERO)? {
        let out = api
            .run_root_as("kured: alerts", remote::alerts::query(&gate.query_url))
            .await?;
        let firing = if out.success() {
            crate::pacing::alert_gate::parse(&out.stdout)
                .map(|alerts| gate.filter.blocking(&alerts))
                .map_err(|e| format!("{e:#}"))
        } else {
            Err(out.stderr.trim().to_string())
        };
        let alerts = match firing {
            Ok(names) => names.into_iter().map(|n| format!("alert {n}")).collect(),
            Err(e) => vec![format!("{} could not be read: {e}", gate.query_url)],
        };
        blockers.extend(alerts.into_iter().map(|what| KuredBlocker {
            node: None,
            gate: "--prometheus-url".into(),
            what,
        }));
    }
    Ok(Some(KuredNow {
        daemonset: kured.daemonset,
        gates,
        blockers,
    }))
}

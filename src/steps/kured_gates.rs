//! Kured's own blockers, kept while fleetctl holds Kured's lock (and so
//! Kured checks nothing): what its command line sets
//! (`crate::checks::parse_kured_gates`) is checked before each drain, as
//! Kured would before each reboot.
//!
//! - `--blocking-pod-selector`: a pod matching one on the node about to go
//!   holds that node only, until it is gone (`hold_for_pods`);
//! - `--prometheus-url` and its filters: an alert gate, read the way
//!   `--alert-gate` is (`crate::steps::hold`), used when the operator gave
//!   no `--alert-gate` of their own.
//!
//! `--no-kured-gates` turns both off, said loudly at the start.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::context::Apply;
pub use super::kured_takeover::{KuredTakeover, takeover};
use crate::remote::kured_pods;

/// Between two readings while a pod holds a node.
const POLL: Duration = Duration::from_secs(2);

/// Holds `batch` while a pod matching one of Kured's
/// `--blocking-pod-selector`s runs on one of its nodes (that node's pods
/// only, as Kured judges each node by its own), saying which pods, for how
/// long and what releases it; a reading that fails holds, as in Kured.
/// Past `--node-timeout` it stops the run naming Kured's selector, nothing
/// changed.
pub async fn hold_for_pods(
    apply: &Apply<'_>,
    kured: &KuredTakeover,
    batch: &[String],
) -> anyhow::Result<()> {
    if kured.gates.pod_selectors.is_empty() {
        return Ok(());
    }
    let api = apply.api()?;
    let timeout = apply.settings.node_timeout;
    let started = Instant::now();
    let mut said: Option<String> = None;
    let names = batch.join(", ");
    loop {
        apply.check_stop(None)?;
        let mut holding = Vec::new();
        for node in batch {
            for selector in &kured.gates.pod_selectors {
                let out = api
                    .run_root(
                        &format!("Kured's blocking pods on {node} ({selector})"),
                        &kured_pods::blocking_pods(selector, node),
                        None,
                    )
                    .await?;
                if !out.success() {
                    holding.push(format!(
                        "the pods on {node} matching {selector:?} could not be listed: {}",
                        out.stderr.trim().lines().last().unwrap_or("no output")
                    ));
                    continue;
                }
                let pods = crate::checks::blocking_pod_names(&out.stdout);
                if !pods.is_empty() {
                    holding.push(format!(
                        "pods {} on {node} match Kured's --blocking-pod-selector={selector}",
                        pods.join(", ")
                    ));
                }
            }
        }
        if holding.is_empty() {
            if said.is_some() {
                let text = format!(
                    "no pod holds {names} any more (held {})",
                    humantime::format_duration(Duration::from_secs(started.elapsed().as_secs()))
                );
                apply
                    .progress
                    .line(&format!("  Kured's pod selector: {text}"));
                apply.journal_event("kured-pods-released", None, &text);
            }
            return Ok(());
        }
        let why = holding.join("; ");
        if said.as_ref() != Some(&why) {
            apply.progress.line(&format!(
                "  Kured's blocking pods hold {names}: {why} (held {}, waiting up to {}; it releases \
                 once they are gone, as Kured would wait)",
                humantime::format_duration(Duration::from_secs(started.elapsed().as_secs())),
                humantime::format_duration(timeout)
            ));
            apply.journal_event("kured-pods", None, &why);
            said = Some(why.clone());
        }
        if started.elapsed() + POLL > timeout {
            bail!(
                "not taking {names} down: Kured's blocking pods still hold it after {}: {why}. \
                 Nothing was changed on {names}; let those pods finish (or run with \
                 --no-kured-gates to ignore Kured's gates), then run `{}` again",
                humantime::format_duration(timeout),
                apply.settings.rerun
            );
        }
        let until = Instant::now() + POLL;
        while Instant::now() < until {
            apply.check_stop(None)?;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

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

use std::time::Duration;

use anyhow::bail;

use super::context::Rerun;
use super::hold_world::{HoldWorld, Look, Waited, secs, wait_out};
pub use super::kured_takeover::{KuredTakeover, takeover};

/// Between two readings while a pod holds a node.
const POLL: Duration = Duration::from_secs(2);

/// Holds `batch` while a pod matching one of Kured's
/// `--blocking-pod-selector`s runs on one of its nodes (that node's pods
/// only, as Kured judges each node by its own), saying which pods, for how
/// long and what releases it; a reading that fails holds, as in Kured.
/// Past `timeout` (`--node-timeout`) it stops the run naming Kured's
/// selector, nothing changed.
pub(super) async fn hold_for_pods<W: HoldWorld>(
    w: &mut W,
    kured: &KuredTakeover,
    batch: &[String],
    timeout: Duration,
    rerun: Rerun,
) -> anyhow::Result<()> {
    if kured.gates.pod_selectors.is_empty() {
        return Ok(());
    }
    let names = batch.join(", ");
    let read = async |w: &mut W| {
        let mut holding = Vec::new();
        for node in batch {
            for selector in &kured.gates.pod_selectors {
                let pods = match w.pods(selector, node).await? {
                    Ok(listed) => crate::checks::blocking_pod_names(&listed)
                        .into_iter()
                        .map(String::from)
                        .collect::<Vec<String>>(),
                    Err(why) => {
                        holding.push(format!(
                            "the pods on {node} matching {selector:?} could not be listed: {why}"
                        ));
                        continue;
                    }
                };
                if !pods.is_empty() {
                    holding.push(format!(
                        "pods {} on {node} match Kured's --blocking-pod-selector={selector}",
                        pods.join(", ")
                    ));
                }
            }
        }
        Ok(match holding.is_empty() {
            true => Look::Clear,
            false => Look::Holds(holding.join("; ")),
        })
    };
    let held = |w: &mut W, why: &str, held: Duration| {
        w.say(&format!(
            "  Kured's blocking pods hold {names}: {why} (held {}, waiting up to {}; it releases \
             once they are gone, as Kured would wait)",
            secs(held),
            humantime::format_duration(timeout)
        ));
        w.journal("kured-pods", None, why);
    };
    match wait_out(w, timeout, POLL, read, held).await? {
        Waited::Absent | Waited::Clear => Ok(()),
        Waited::Released(after) => {
            let text = format!("no pod holds {names} any more (held {})", secs(after));
            w.say(&format!("  Kured's pod selector: {text}"));
            w.journal("kured-pods-released", None, &text);
            Ok(())
        }
        Waited::TimedOut(why) => bail!(
            "not taking {names} down: Kured's blocking pods still hold it after {}: {why}. \
             Nothing was changed on {names}; let those pods finish (or run with \
             --no-kured-gates to ignore Kured's gates), then run `{rerun}` again",
            humantime::format_duration(timeout),
        ),
    }
}

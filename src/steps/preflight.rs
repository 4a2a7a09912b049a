//! The checks again, right before each hop, on the fleet as it is then: the
//! previous hop restarted the API servers (which resets the deprecated-API
//! gauge), kubeadm rewrote kubelet flags, budgets moved. A block stops
//! apply before the hop touches anything; warnings and the operator's
//! overrides are printed and journaled.

use std::time::Duration;

use futures_util::future::join_all;

use super::context::{Apply, settled_facts};
use crate::checks::Verdict;
use crate::gather;
use crate::plan::{self, Hop};

/// Checks judged this recently (apply's re-check, with `--yes`) are not
/// read again for the first hop: nothing has run in between.
pub const FRESH: Duration = Duration::from_secs(60);

pub async fn checks(apply: &Apply<'_>, hop: &Hop) -> anyhow::Result<()> {
    let reads = apply
        .remotes()
        .map(|(name, r)| async move { (name.clone(), settled_facts(r).await) });
    let mut facts = Vec::new();
    for (name, read) in join_all(reads).await {
        let f = read.map_err(|e| {
            e.context(format!(
                "the checks before the hop to {} need every node's kubelet flags",
                hop.minor
            ))
        })?;
        facts.push((name, f));
    }
    let api = apply.api()?;
    // The cluster facts of the run's start are a hop old by now: every
    // read is the checks script's own.
    let inputs = gather::check_inputs(
        Some(api.session()),
        None,
        facts.iter().map(|(n, f)| (n.as_str(), f)),
        apply.settings.hub_images.clone(),
        &apply.inv.nodes,
    )
    .await;
    let found = plan::evaluate(
        &inputs,
        hop,
        apply.plan.target,
        &apply.settings.ignored_checks,
    );
    let mut blocks = Vec::new();
    for check in &found {
        let kind = match check.verdict {
            Verdict::Pass => continue,
            Verdict::Warn => "check-warn",
            Verdict::Ignored => "check-ignored",
            Verdict::Block => "check-block",
        };
        let mut text = format!("{}: {}", check.name, check.summary);
        for detail in &check.details {
            text.push_str(&format!("\n      - {detail}"));
        }
        apply.journal_event(kind, None, &format!("hop to {}: {text}", hop.minor));
        let label = match check.verdict {
            Verdict::Ignored => "ignored (--ignore-check)",
            Verdict::Block => "BLOCK",
            _ => "warning",
        };
        apply.progress.line(&format!("  check {label}: {text}"));
        if check.verdict == Verdict::Block {
            blocks.push(check);
        }
    }
    if blocks.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = blocks
        .iter()
        .map(|c| format!("--ignore-check {}", c.name))
        .collect();
    let remedies: Vec<String> = blocks
        .iter()
        .filter_map(|c| Some(format!("{}: {}", c.name, c.remedy.as_ref()?)))
        .collect();
    anyhow::bail!(
        "the checks before the hop to {} block it, so nothing of that hop was done:\n  {}\n\
         Fix it and run `fleetctl apply` again (it resumes here), or go past it on purpose with {}",
        hop.minor,
        remedies.join("\n  "),
        names.join(" ")
    )
}

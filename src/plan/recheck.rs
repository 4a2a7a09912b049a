//! What `plan` and `apply` decide about a plan before anything is touched,
//! all pure: a plan the checks block, a saved plan that is hand-edited, stale
//! or unverifiable against the plan made again from the live fleet, and which
//! of the saved plan's patches and sha256s still hold when the hub cannot be
//! read. Each refusal is exit 2 and says what to do next.

use std::path::Path;

use crate::checks::CheckName;
use crate::error::UsageError;
use crate::usage;

use super::hop_checks::blocking;
use super::model::{Action, Component, Hop, Plan, Warning};
use super::workers::WorkerStrategy;
use crate::hub::is_sha256;

#[cfg(test)]
mod tests;

/// Exit 2, nothing saved or changed, when a check blocks a hop: each block
/// named with its hop, and how to go past it on purpose.
pub fn refuse_blocked(plan: &Plan) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    let mut names = Vec::new();
    for hop in &plan.hops {
        for check in blocking(&hop.checks) {
            lines.push(format!(
                "hop to {}: {}: {}",
                hop.minor, check.name, check.summary
            ));
            if !names.contains(&check.name) {
                names.push(check.name);
            }
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    let flags: Vec<String> = names
        .iter()
        .map(|n| format!("--ignore-check {n}"))
        .collect();
    Err(anyhow::Error::new(UsageError(format!(
        "the checks block this plan:\n  - {}\nFix what each says (the plan above lists the details), then plan again; \
         or, to go past a check on purpose, plan again with {}",
        lines.join("\n  - "),
        flags.join(" ")
    ))))
}

/// Every sha256 the saved plan carries is 64 hexadecimal characters: a
/// digest is only ever compared by `sha256sum -c --strict`, which refuses
/// anything else, and a hand-edited plan must not turn a check into a no-op.
pub fn refuse_bad_digests(saved: &Plan, path: &Path) -> anyhow::Result<()> {
    let bad: Vec<String> = saved
        .hops
        .iter()
        .filter_map(|hop| {
            let sum = hop.sha256.as_deref()?;
            (!is_sha256(sum)).then(|| format!("hop to {}: `{sum}`", hop.minor))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(usage!(
        "{} records a sha256 that is not 64 hexadecimal characters ({}): it cannot vouch for an \
         image. Nothing was changed; run `fleetctl plan` again",
        path.display(),
        bad.join(", ")
    ))
}

/// An `http://` hub: anyone on the path can serve another image and the
/// `SHA256SUMS` that matches it, so the sums fleetctl reads vouch for
/// nothing. Allowed only on request (`--allow-insecure-hub`).
pub fn refuse_insecure_hub(hub: &str, allowed: bool) -> anyhow::Result<()> {
    if allowed || !hub.starts_with("http://") {
        return Ok(());
    }
    Err(usage!(
        "the hub {hub} is plain HTTP: the images and the SHA256SUMS that vouches for them travel \
         unprotected, so whoever sits on the path chooses the kubeadm and kubelet your nodes run. \
         Nothing was changed. Use an https:// hub in the inventory's `sysupdate: hub:`, or pass \
         --allow-insecure-hub if the network between the nodes and the hub is yours"
    ))
}

/// The checks whose blocks the operator goes past: those the plan was made
/// with, and those given to apply.
pub fn ignored_checks(saved: &Plan, asked: &[CheckName]) -> Vec<CheckName> {
    let mut ignored = saved.ignored_checks.clone();
    for name in asked {
        if !ignored.contains(name) {
            ignored.push(*name);
        }
    }
    ignored
}

/// The saved plan's worker strategy, unless apply is told another.
pub fn worker_strategy(saved: &Plan, asked: Option<WorkerStrategy>) -> WorkerStrategy {
    asked.unwrap_or(saved.workers.strategy)
}

/// The saved plan still describes this fleet, apart from the nodes apply
/// itself was changing; and the hub still stages the same patches.
pub fn refuse_stale(saved: &Plan, fresh: &Plan) -> anyhow::Result<()> {
    let mut lines = saved.fingerprint.diff(&fresh.fingerprint);
    for hop in &fresh.hops {
        if let Some(old) = saved.hops.iter().find(|h| h.minor == hop.minor)
            && old.version.is_some()
            && old.version != hop.version
        {
            lines.push(format!(
                "hub: the newest {} patch is now {}, the plan stages {}",
                hop.minor,
                hop.version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |v| v.to_string()),
                old.version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |v| v.to_string())
            ));
        }
    }
    for hop in &fresh.hops {
        if let Some(old) = saved.hops.iter().find(|h| h.version == hop.version)
            && let (Some(was), None) = (&old.sha256, &hop.sha256)
        {
            lines.push(format!(
                "hub: SHA256SUMS no longer gives one sha256 for kubernetes {} (the plan recorded \
                 {was}): the list changed since the plan",
                hop.version
                    .as_ref()
                    .map_or_else(|| hop.minor.to_string(), |v| v.to_string())
            ));
        }
        if let Some(old) = saved.hops.iter().find(|h| h.version == hop.version)
            && let (Some(was), Some(is)) = (&old.sha256, &hop.sha256)
            && was != is
        {
            lines.push(format!(
                "hub: the sha256 of kubernetes {} changed since the plan ({was} → {is}): the image \
                 was replaced",
                hop.version
                    .as_ref()
                    .map_or_else(|| hop.minor.to_string(), |v| v.to_string())
            ));
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(UsageError(format!(
        "the plan is stale: the fleet changed since it was made:\n  - {}\nRun `fleetctl plan` again, read it, then `fleetctl apply`",
        lines.join("\n  - ")
    ))))
}

/// The hub unreadable now is not the hub changed: the saved plan's patches
/// (the ones the operator read) still hold, and downloading checks exactly
/// those rather than whatever the hub serves once it is back. Returns why
/// the hub could not be read when that was the case.
pub fn keep_saved_patches(saved: &Plan, fresh: &mut Plan) -> Option<String> {
    let at = fresh
        .warnings
        .iter()
        .position(|w| matches!(w, Warning::HubUnresolved { .. }))?;
    let mut kept = false;
    for hop in fresh.hops.iter_mut().filter(|h| h.version.is_none()) {
        let Some(v) = saved
            .hops
            .iter()
            .find(|h| h.minor == hop.minor)
            .and_then(|h| h.version.clone())
        else {
            continue;
        };
        for step in hop.phases.iter_mut().flat_map(|p| p.steps.iter_mut()) {
            match &mut step.action {
                Action::Download { expect, .. }
                | Action::Stage {
                    component: Component::Kubernetes,
                    expect,
                    ..
                } if expect.is_none() => *expect = Some(v.clone()),
                Action::UpgradeApply { version, .. } | Action::UpgradeNode { version, .. }
                    if version.is_none() =>
                {
                    *version = Some(v.clone())
                }
                _ => {}
            }
        }
        if hop.sha256.is_none() {
            hop.sha256 = saved
                .hops
                .iter()
                .find(|h| h.minor == hop.minor)
                .and_then(|h| h.sha256.clone());
        }
        hop.version = Some(v);
        kept = true;
    }
    // Without a saved patch either, the plan's own warning still tells the truth.
    if !kept {
        return None;
    }
    match fresh.warnings.remove(at) {
        Warning::HubUnresolved { reason } => Some(reason),
        _ => None,
    }
}

/// Every hop that downloads, stages or runs the kubeadm of a kubernetes
/// image knows the sha256 fleetctl checks it against itself (its
/// [`super::Image`]: the steps take nothing else). sysupdate's
/// own check reads the same `SHA256SUMS` over the same connection, so it
/// is never enough on its own: with no single sum (the hub lists two, or
/// it cannot be read and the saved plan recorded none) apply does not start.
pub fn refuse_unverifiable(fresh: &Plan) -> anyhow::Result<()> {
    let unread = fresh.warnings.iter().find_map(|w| match w {
        Warning::HubUnresolved { reason } => Some(reason.clone()),
        _ => None,
    });
    let lines: Vec<String> = fresh
        .hops
        .iter()
        .filter(|hop| hop.image().is_none() && uses_image(hop))
        .map(|hop| {
            let what = hop.version.as_ref().map_or_else(
                || format!("the {} image", hop.minor),
                |v| format!("kubernetes {v}"),
            );
            match &unread {
                Some(reason) => format!(
                    "{what}: the hub's SHA256SUMS could not be read ({reason}) and the saved plan \
                     records no sha256 for it"
                ),
                None => format!("{what}: the hub's SHA256SUMS gives no single sha256 for it"),
            }
        })
        .collect();
    if lines.is_empty() {
        return Ok(());
    }
    Err(usage!(
        "fleetctl cannot verify an image this plan needs:\n  - {}\nNothing was changed. Fix the hub \
         (one sha256 per image, reachable from the nodes), then run `fleetctl plan` and \
         `fleetctl apply` again",
        lines.join("\n  - ")
    ))
}

/// The hop downloads, stages or runs the kubeadm of its kubernetes image.
pub fn uses_image(hop: &Hop) -> bool {
    hop.steps().any(|s| {
        matches!(
            s.action,
            Action::Download { .. }
                | Action::UpgradeApply { .. }
                | Action::UpgradeNode { .. }
                | Action::Stage {
                    component: Component::Kubernetes,
                    ..
                }
        )
    })
}

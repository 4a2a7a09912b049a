//! Rolling a node onto what it has staged: the gates, drain, reboot (the
//! kubelet restart kubeadm's procedure asks for: the sysext is merged at
//! boot), then wait for the new boot, the new kubelet active at the staged
//! version, the Node Ready and, on a control plane, its static pods Running
//! at that version; only then uncordon.
//!
//! Undo: a node drained but not rebooted (a failed drain, a symlink that
//! moved, Ctrl-C) is uncordoned again. A node that was rebooted and does
//! not come back stays cordoned, and the report says so.
//!
//! The waits after the reboot are in `after_reboot`. The order of a roll
//! is written once, in `flow`, over the seam `world::RollWorld`: the real
//! run over `ssh_world`, the dry run over `dry_world`, the rules' tests
//! over `fake_fleet`.

use std::time::Duration;

use anyhow::{Context, bail};

use super::context::{Apply, Rerun};
use super::detached;
use super::on_failure::{self, BatchFailed};
use super::runner::{CommandFailed, Remote};
use super::stage::{check_staged, staged_version};
use crate::plan::Component;
use crate::remote::{kubectl, upgrade};
use crate::ssh::{self};
use crate::version::{Minor, Version};

mod after_reboot;
mod crash_loop;
mod drain_verdict;
pub(super) mod dry_world;
#[cfg(test)]
mod failure_rules;
#[cfg(test)]
pub(in crate::steps) mod fake_fleet;
mod flow;
#[cfg(test)]
mod flow_tests;
#[cfg(test)]
mod hold_flow_tests;
mod offline;
mod reconnect_pause;
mod ssh_world;
mod world;
pub use after_reboot::ready_then_uncordon;
use after_reboot::uncordon;
use drain_verdict::{DrainVerdict, drain_verdict, not_drained};
pub use offline::roll_offline;
use ssh_world::SshRoll;

/// How much longer than `--drain-timeout` a drain may take: kubectl's own
/// start and its last eviction (the command's timeout in [`drain`]).
const DRAIN_GRACE: Duration = Duration::from_secs(60);

/// How long a reconnected node may take to print its boot id.
const BOOT_ID_TIMEOUT: Duration = Duration::from_secs(10);

/// Drains, reboots and waits for `batch` (one control plane, or workers up
/// to `--max-unavailable`, all of one zone), then uncordons each node.
/// `expect`: the version they must boot (`None` when the hub's list was
/// unreadable: the staged `minor` image, whichever patch). The nodes of a
/// batch drain and reboot together; a failure stops the run only once every
/// other node of the batch is back (or has failed too). The order is
/// `flow`'s, over the real world (`ssh_world`).
pub async fn roll(
    apply: &mut Apply<'_>,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
    rollback: bool,
) -> anyhow::Result<()> {
    flow::roll_batch(&mut SshRoll { apply }, batch, minor, expect, rollback).await
}

/// One error for a batch: the only one as it is, several listed (with
/// the nodes among them that came back but not up, for `--on-failure`).
fn batch_error(mut failures: Vec<anyhow::Error>, undone: anyhow::Result<()>) -> anyhow::Error {
    let mut error = if failures.len() == 1 {
        failures.remove(0)
    } else {
        anyhow::Error::new(BatchFailed {
            text: format!(
                "{} nodes of the batch failed:\n  - {}",
                failures.len(),
                failures
                    .iter()
                    .map(|e| format!("{e:#}"))
                    .collect::<Vec<_>>()
                    .join("\n  - ")
            ),
            not_up: failures.iter().flat_map(on_failure::not_up).collect(),
        })
    };
    if let Err(u) = undone {
        error = error.context(format!(
            "and the other nodes of the batch could not all be uncordoned: {u:#}"
        ));
    }
    error
}

/// What a node is about to reboot into, and from which boot.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BeforeReboot {
    staged: Version,
    boot_id: String,
}

/// Right before a reboot: the node's own sysupdate timer may have moved the
/// symlink since it was staged. The boot id is read in the same command,
/// to recognise the new boot afterwards.
async fn before_reboot(
    r: &Remote,
    minor: Minor,
    expect: Option<&Version>,
) -> anyhow::Result<BeforeReboot> {
    let out = r
        .check_root(
            "check staged kubernetes, read the boot id",
            &upgrade::before_reboot(),
        )
        .await?;
    let (link, boot_id) = link_and_boot_id(&out.stdout).with_context(|| {
        format!(
            "{}: expected the target of /etc/extensions/kubernetes.raw and the boot id, got `{}`",
            r.node(),
            out.stdout.trim()
        )
    })?;
    let staged = staged_version(Component::Kubernetes, link).with_context(|| {
        format!(
            "{}: /etc/extensions/kubernetes.raw points at `{link}`",
            r.node()
        )
    })?;
    check_staged(r.node(), Component::Kubernetes, &staged, minor, expect)?;
    Ok(BeforeReboot {
        staged,
        boot_id: boot_id.to_string(),
    })
}

/// The two lines [`before_reboot`]'s command prints.
fn link_and_boot_id(stdout: &str) -> anyhow::Result<(&str, &str)> {
    let mut lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    match (lines.next(), lines.next(), lines.next()) {
        (Some(link), Some(id), None) => Ok((link, id)),
        _ => bail!("not two lines"),
    }
}

/// A drain that did not finish, and whether the node was uncordoned again.
struct DrainFailed {
    error: anyhow::Error,
    uncordoned: bool,
}

/// Names of the pods a drain could not evict, from kubectl's messages.
pub fn blocked_pods(stderr: &str) -> Vec<String> {
    let mut pods: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            let at = l.find("pods/")?;
            let rest = &l[at + 5..];
            let name: String = rest
                .trim_start_matches('"')
                .chars()
                .take_while(|c| *c != '"' && !c.is_whitespace())
                .collect();
            let ns = l[at..]
                .split(" -n ")
                .nth(1)
                .and_then(|s| s.trim_start_matches('"').split('"').next());
            (!name.is_empty()).then(|| match ns {
                Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
                _ => name,
            })
        })
        .collect();
    pods.sort();
    pods.dedup();
    pods
}

/// The kubectl drain of `node`, bounded by `--drain-timeout`.
pub fn drain_command(node: &str, timeout: Duration) -> String {
    kubectl::drain(node, &format!("--timeout={}s", timeout.as_secs().max(1)))
}

/// Cordons and drains `node` through the API node. A drain that fails is
/// undone (uncordon: nothing was rebooted) and reported with the pods that
/// blocked it.
/// The drain runs detached on the API node (see [`super::detached`]): a
/// dropped connection does not leave it half done; its output (stdout and
/// stderr together) comes back as the output's stdout.
async fn drain(
    api: &Remote,
    node: &str,
    timeout: Duration,
    rerun: Rerun,
) -> Result<(), DrainFailed> {
    let mut api = api.clone();
    let mut out = detached::run(
        &mut api,
        None,
        &format!("drain-{node}"),
        &format!("cordon and drain {node}"),
        &drain_command(node, timeout),
        timeout + DRAIN_GRACE,
    )
    .await
    .map_err(|error| DrainFailed {
        error,
        uncordoned: false,
    })?;
    out.stderr = std::mem::take(&mut out.stdout);
    let why = match drain_verdict(node, out.success(), &out.stderr, rerun) {
        DrainVerdict::Drained => return Ok(()),
        DrainVerdict::NotCordoned(error) => {
            return Err(DrainFailed {
                error,
                uncordoned: true,
            });
        }
        DrainVerdict::NotDrained { why } => why,
    };
    let undo = uncordon(&api, node).await;
    let state = match &undo {
        Ok(()) => format!("{node} was uncordoned again; nothing was rebooted"),
        Err(e) => format!(
            "{node} IS STILL CORDONED (uncordon failed: {e:#}); run `kubectl uncordon {node}`"
        ),
    };
    Err(DrainFailed {
        error: not_drained(node, timeout, &why, &state, rerun),
        uncordoned: undo.is_ok(),
    })
}

/// Sends the reboot. The connection dropping is what success looks like.
async fn send_reboot(r: &Remote) -> anyhow::Result<()> {
    match r
        .run_root_timeout("reboot", upgrade::REBOOT, None, Duration::from_secs(30))
        .await
    {
        Ok(out) if out.exit.is_none_or(|c| c == 0) => Ok(()),
        Ok(out) => Err(anyhow::Error::new(CommandFailed::new(
            r.node(),
            "reboot",
            &out,
        ))),
        Err(e) if ssh::is_disconnected(&e) || e.chain().any(|c| c.is::<ssh::CommandTimedOut>()) => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests;

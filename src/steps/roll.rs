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
//! The waits after the reboot are in `after_reboot`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::future::join_all;

use super::context::{Apply, Rerun};
use super::detached;
use super::gates;
use super::hold;
use super::on_failure::{self, BatchFailed};
use super::runner::{CommandFailed, Remote};
use super::stage::{check_staged, staged_version};
use crate::inventory::Role;
use crate::plan::Component;
use crate::remote::{kubectl, upgrade};
use crate::ssh::{self};
use crate::version::{Minor, Version};

mod after_reboot;
mod crash_loop;
mod offline;
mod reconnect_pause;
pub use after_reboot::ready_then_uncordon;
use after_reboot::{Wait, uncordon};
pub use offline::roll_offline;

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
/// other node of the batch is back (or has failed too).
pub async fn roll(
    apply: &mut Apply<'_>,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
    rollback: bool,
) -> anyhow::Result<()> {
    apply.check_stop(None)?;
    let names = batch.join(", ");
    let pace = apply.settings.pace.clone();
    let needed = apply.settings.drain_timeout + apply.settings.node_timeout;
    hold::before_node(apply, &pace, apply.back_at, batch, needed).await?;
    // Each stretch must fit in the lock's lease as it stands (see the
    // reboot below).
    apply.stop.ensure_lease(
        &format!("{names}: drain"),
        apply.settings.drain_timeout + DRAIN_GRACE,
    )?;
    apply.progress.step(&format!("{names}: gates, then drain"));
    // The ledger says which stage each node is in, so a stop (a failure, a
    // second Ctrl-C) names it precisely.
    apply.begin(&names, "gates and drain");
    let spared = gates::before_drain(apply, batch, rollback).await?;
    super::kured_labels::set(apply, batch, super::kured_labels::When::BeforeDrain).await?;
    for node in batch {
        apply.mark(node)?;
    }
    apply.ledger(|l| l.cordoned.extend(batch.iter().cloned()));
    let api = apply.api()?;
    let timeout = apply.settings.drain_timeout;
    let rerun = apply.settings.rerun;
    let drains = join_all(batch.iter().map(|n| {
        let api = api.clone();
        let n = n.clone();
        async move { (n.clone(), drain(&api, &n, timeout, rerun).await) }
    }))
    .await;
    let mut failures = Vec::new();
    for (node, result) in drains {
        if let Err(failure) = result {
            if failure.uncordoned {
                apply.ledger(|l| {
                    l.cordoned.remove(&node);
                });
            }
            failures.push(failure.error);
        }
    }
    if !failures.is_empty() {
        // The others were drained for nothing: nothing is rebooted.
        let undone = uncordon_cordoned(apply, &api, batch).await;
        return Err(batch_error(failures, undone));
    }
    if apply.stop.requested() {
        uncordon_all(apply, &api, batch).await?;
        apply.check_stop(Some(&names))?;
    }

    // Never take a node down on a lock that could lapse before it is back:
    // the reboot and the wait for it must end within the lease.
    if let Err(e) = apply.stop.ensure_lease(
        &format!("{names}: reboot and wait for it"),
        apply.settings.node_timeout,
    ) {
        let state = match uncordon_all(apply, &api, batch).await {
            Ok(()) => format!("{names}: uncordoned again; nothing was rebooted"),
            Err(u) => format!("{names}: SOME ARE STILL CORDONED (uncordon failed: {u:#})"),
        };
        return Err(e.context(state));
    }
    let ceph = spared != gates::Spared::NoCeph;
    reboot_and_wait(apply, batch, minor, expect, rollback, Some(&api), ceph).await
}

/// The reboot of a drained `batch` and the wait for each node: its new
/// boot, its kubelet, its static pods, Ready, uncordoned. `api`: the API
/// the waits ask, and that uncordons the batch if nothing is rebooted;
/// `None` for a lone control plane rolled back offline (`offline`), whose
/// own new session answers once its API server is back. `ceph`: Ceph's
/// recovery is waited for once the batch is back (false when the gate
/// before its drain found no CephCluster).
async fn reboot_and_wait(
    apply: &mut Apply<'_>,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
    rollback: bool,
    api: Option<&Remote>,
    ceph: bool,
) -> anyhow::Result<()> {
    let names = batch.join(", ");
    let mut befores = Vec::new();
    for node in batch {
        let r = apply.remote(node)?;
        match before_reboot(&r, minor, expect).await {
            Ok(b) => befores.push((node.clone(), r, b)),
            Err(e) => {
                let Some(api) = api else {
                    return Err(e.context(format!("{names}: nothing was rebooted")));
                };
                let state = match uncordon_all(apply, api, batch).await {
                    Ok(()) => format!("{names}: uncordoned again; nothing was rebooted"),
                    Err(u) => format!("{names}: SOME ARE STILL CORDONED (uncordon failed: {u:#})"),
                };
                return Err(e.context(state));
            }
        }
    }
    apply.begin(&names, "reboot into the staged images");
    for (node, r, before) in &befores {
        r.journal()
            .event("reboot", Some(node), &format!("boot id {}", before.boot_id));
    }
    join_all(befores.iter().map(|(_, r, _)| send_reboot(r)))
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<()>>>()?;
    apply.progress.step(&format!(
        "{names}: rebooting (the connection drops; waiting for it to come back)"
    ));

    let api_node = apply.inv.first_control_plane().name.clone();
    let deadline = apply.deadline();
    let cluster_version = apply.plan.fingerprint.cluster_version.clone();
    let mut waits = tokio::task::JoinSet::new();
    for (node, r, before) in befores {
        let wait = Wait {
            target: apply
                .settings
                .targets
                .get(&node)
                .with_context(|| format!("{node}: no SSH target"))?
                .clone(),
            ssh: apply.settings.ssh.clone(),
            timeout: apply.settings.node_timeout,
            deadline,
            // The first control plane answers for the API, unless it is the
            // node rebooting: then its own new session does.
            api: api.filter(|_| node != api_node).cloned(),
            control_plane: (apply.role(&node) == Role::ControlPlane).then(|| {
                // A rollback leaves the static pods where kubeadm put
                // them, at the cluster's version, ahead of the kubelet.
                cluster_version
                    .clone()
                    .filter(|v: &Version| rollback || v.minor() == minor)
            }),
            minor,
            etcd_peer: (apply.role(&node) == Role::ControlPlane)
                .then(|| super::etcd_gate::peer(apply.inv, &node)),
            on_failure: apply.settings.on_failure,
            rollback,
            rerun: apply.settings.rerun,
        };
        waits.spawn(async move {
            let result = wait.run(&node, &r, &before).await;
            (node, result)
        });
    }
    let mut failures = Vec::new();
    let mut back = Vec::new();
    while let Some(joined) = waits.join_next().await {
        match joined {
            Ok((node, Ok((fresh, facts)))) => {
                back.push(node.clone());
                apply.set_remote(&node, fresh);
                apply.ledger(|l| {
                    l.cordoned.remove(&node);
                });
                apply.settle(&node, facts)?;
            }
            Ok((_, Err(e))) => failures.push(e),
            Err(e) => failures.push(anyhow::anyhow!("waiting for {names} failed: {e}")),
        }
    }
    // Kured's post labels on each node back and uncordoned, as Kured's
    // `uncordon` sets them.
    back.sort_by_key(|n| batch.iter().position(|b| b == n));
    let labelled =
        super::kured_labels::set(apply, &back, super::kured_labels::When::AfterUncordon).await;
    if failures.is_empty() {
        labelled?;
        if ceph {
            super::storage_gate::after_return(apply, batch).await?;
        }
        apply.back_at = Some(Instant::now());
        Ok(())
    } else {
        failures.extend(labelled.err());
        Err(batch_error(failures, Ok(())))
    }
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

/// Uncordons every node of the batch the ledger still has cordoned.
async fn uncordon_cordoned(
    apply: &Apply<'_>,
    api: &Remote,
    batch: &[String],
) -> anyhow::Result<()> {
    let cordoned: Vec<String> = apply
        .ledger
        .lock()
        .map(|l| {
            batch
                .iter()
                .filter(|n| l.cordoned.contains(*n))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    uncordon_all(apply, api, &cordoned).await
}

async fn uncordon_all(apply: &Apply<'_>, api: &Remote, nodes: &[String]) -> anyhow::Result<()> {
    let mut first_error = None;
    for node in nodes {
        match uncordon(api, node).await {
            Ok(()) => apply.ledger(|l| {
                l.cordoned.remove(node);
            }),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
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
    let cordoned = kubectl::drain_cordoned(node, &out.stderr);
    if out.success() && cordoned {
        return Ok(());
    }
    if !cordoned {
        // kubectl drain goes on evicting after the API refused its cordon
        // (RunCordonOrUncordon prints the error and returns nil), and can
        // exit 0: a node drained but schedulable takes new pods, so it is
        // not rebooted.
        let why = kubectl::schedulability_refused(&out.stderr)
            .or_else(|| out.stderr.trim().lines().last())
            .unwrap_or("it printed nothing");
        let done = if out.success() {
            "kubectl evicted its pods, but the node stays schedulable and was not rebooted"
        } else {
            "nothing was rebooted"
        };
        return Err(DrainFailed {
            error: anyhow::anyhow!(
                "{node}: kubectl drain could not cordon {node}: {why}. {done}; run \
                 `{rerun}` again once the API server accepts the cordon"
            ),
            uncordoned: true,
        });
    }
    let undo = uncordon(&api, node).await;
    let state = match &undo {
        Ok(()) => format!("{node} was uncordoned again; nothing was rebooted"),
        Err(e) => format!(
            "{node} IS STILL CORDONED (uncordon failed: {e:#}); run `kubectl uncordon {node}`"
        ),
    };
    let pods = blocked_pods(&out.stderr);
    let why = if pods.is_empty() {
        format!(
            "kubectl said: {}",
            out.stderr.trim().lines().last().unwrap_or("nothing")
        )
    } else {
        format!("a PodDisruptionBudget blocks evicting {}", pods.join(", "))
    };
    Err(DrainFailed {
        error: anyhow::anyhow!(
            "{node}: drain did not finish within {}: {why}. {state}. Make room for the pods (scale the \
             workload or relax the budget), then run `{rerun}` again",
            humantime::format_duration(timeout)
        ),
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

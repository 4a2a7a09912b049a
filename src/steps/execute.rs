//! Running the script ([`super::script`]): each task in turn, a safe point
//! between any two (Ctrl-C, a lease about to lapse), each journaled as it
//! starts. What a task needs from the whole run is here: marking a node in
//! progress in the saved plan before fleetctl changes it, and recording
//! its new state after its last step of the hop, so a rerun after a failure
//! is not refused as stale while a change made by someone else still is.
//!
//! A phase whose steps may run in parallel runs them across nodes, bounded
//! by `--parallel`, each node keeping its own order.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::bail;
use futures_util::future::join_all;

use super::context::{Apply, OnFailure, settled_facts};
use super::kubeadm::Kind;
use super::runner::Remote;
use super::script::{At, Task, last_steps};
use super::{
    POLL, download, etcd, gates, hold, kept_images, last_look, on_failure, preflight, roll, verify,
};
use crate::node::NodeFacts;
use crate::plan::{Action, Hop, Step};

mod parallel_phase;
use parallel_phase::{Job, parallel};

/// Runs the tasks in order: a safe point between any two, each journaled
/// as it starts with the title the dry run shows for it. A roll that fails
/// goes through `--on-failure` ([`after_failed_roll`]).
pub async fn run(apply: &mut Apply<'_>, tasks: &[Task]) -> anyhow::Result<()> {
    let total = tasks.len();
    for (i, task) in tasks.iter().enumerate() {
        apply.check_stop(None)?;
        let title = task.title(&apply.plan);
        apply.journal_event("task", task.node(), &format!("{}/{total} {title}", i + 1));
        if let Err(e) = one(apply, task).await {
            return Err(match task {
                Task::Roll {
                    rollback: false, ..
                } if apply.settings.on_failure == OnFailure::Rollback => {
                    after_failed_roll(apply, e).await
                }
                _ => e,
            });
        }
    }
    Ok(())
}

/// `--on-failure rollback`: the nodes the roll left not up on their new
/// kubelet go back to their kept image ([`on_failure`] decides and words
/// it), run here as `fleetctl rollback` runs them, with the plan's hops set
/// aside meanwhile; then apply stops with what happened.
async fn after_failed_roll(apply: &mut Apply<'_>, failure: anyhow::Error) -> anyhow::Error {
    let failed = on_failure::not_up(&failure);
    if failed.is_empty() {
        return on_failure::not_eligible(failure);
    }
    let names: Vec<String> = failed.iter().map(|n| n.node.clone()).collect();
    let prepared = match on_failure::prepare(apply, failed).await {
        Ok(p) => p,
        Err(why) => {
            apply.journal_event("rollback-refused", None, &format!("{why:#}"));
            return on_failure::refused(failure, &names, &why);
        }
    };
    for r in &prepared.rollbacks {
        apply.progress.line(&format!(
            "{}: not up on its new kubelet; --on-failure rollback: back to {}",
            r.node,
            r.to_text()
        ));
        apply.journal_event(
            "rollback",
            Some(&r.node),
            &format!("{} (--on-failure rollback)", r.from_to()),
        );
    }
    if prepared.offline {
        let why = on_failure::OFFLINE;
        apply.progress.line(&format!("{}: {why}", names.join(", ")));
        apply.journal_event("rollback-offline", Some(&names.join(", ")), why);
    }
    let hops = std::mem::replace(&mut apply.plan.hops, prepared.hops.clone());
    let result = run_rollback(apply, &prepared.tasks, prepared.offline).await;
    apply.plan.hops = hops;
    let saved = apply.save();
    if result.is_ok() {
        // Rolled back is not done: the report must not say so.
        apply.ledger(|l| {
            l.done.retain(|d| !names.contains(d));
            l.current = Some((
                names.join(", "),
                "rolled back (--on-failure rollback)".into(),
            ));
        });
    }
    on_failure::outcome(apply, failure, &prepared, result.and(saved))
}

/// The tasks of a rollback (`script::of_rollbacks`), each journaled as it
/// starts, a safe point between any two (a lease that lapsed or a Ctrl-C
/// stops it before the next); `offline`: the roll is `roll::roll_offline` (a control plane
/// whose API server is down: no gates, no drain), as `apply --on-failure
/// rollback` and `fleetctl rollback` both run it.
pub async fn run_rollback(
    apply: &mut Apply<'_>,
    tasks: &[Task],
    offline: bool,
) -> anyhow::Result<()> {
    let total = tasks.len();
    for (i, task) in tasks.iter().enumerate() {
        apply.check_stop(None)?;
        let title = task.title(&apply.plan);
        apply.journal_event("task", task.node(), &format!("{}/{total} {title}", i + 1));
        match task {
            Task::Roll {
                nodes,
                minor,
                expect,
                ..
            } if offline => {
                let node = nodes.join(", ");
                roll::roll_offline(apply, &node, *minor, expect.as_ref()).await?;
            }
            _ => one(apply, task).await?,
        }
    }
    Ok(())
}

async fn one(apply: &mut Apply<'_>, task: &Task) -> anyhow::Result<()> {
    match task {
        Task::HopStart { hop: h } => {
            let title = task.title(&apply.plan);
            let what = title.split_once(": ").map_or("", |(_, w)| w).to_string();
            apply.progress.line(&title);
            if let Some(window) = &apply.settings.pace.window {
                // A hop starts only if its first node could still be done.
                let needed = apply.settings.drain_timeout + apply.settings.node_timeout;
                let of = format!("hop {}/{}", h + 1, apply.plan.hops.len());
                hold::in_window(window, &of, needed, apply.settings.rerun)?;
            }
            apply.journal_event("hop-start", None, &what);
        }
        Task::Checks { hop: h } => {
            let just_judged = *h == 0
                && apply
                    .settings
                    .checks_judged
                    .is_some_and(|t| t.elapsed() < preflight::FRESH);
            if !just_judged {
                let hop = apply.plan.hops[*h].clone();
                preflight::checks(apply, &hop).await?;
            }
        }
        Task::PresentImages { hop: h, nodes } => {
            let hop = apply.plan.hops[*h].clone();
            verify_present_images(apply, &hop, nodes).await?;
        }
        Task::Phase { hop: h, phase: p } => {
            let title = apply.plan.hops[*h].phases[*p].kind.title();
            apply.progress.line(&format!("  {title}"));
        }
        Task::ControlPlanesReady { node } => {
            apply.begin(node, "wait until every control plane is Ready");
            super::storage_gate::before_upgrade(apply, node).await?;
            let api = apply.api()?;
            wait_control_planes_ready(apply, &api).await?;
        }
        Task::EtcdSnapshot { node, minor } => {
            let Some(dir) = apply.settings.etcd_backups.clone() else {
                bail!("internal error: an etcd snapshot task without a backups directory");
            };
            apply.begin(node, "etcd snapshot before upgrade apply");
            etcd::snapshot(apply, node, *minor, &dir).await?;
        }
        Task::Step {
            hop: h,
            phase: p,
            step: s,
            finishes,
        } => {
            let hop = apply.plan.hops[*h].clone();
            let step = hop.phases[*p].steps[*s].clone();
            one_step(apply, &hop, &step, *finishes).await?;
        }
        Task::Parallel { hop: h, phase: p } => {
            let hop = apply.plan.hops[*h].clone();
            let last = last_steps(&hop);
            parallel(apply, &hop, *p, &hop.phases[*p], &last).await?;
        }
        Task::LastLook { hop: h, nodes } => {
            let hop = apply.plan.hops[*h].clone();
            last_look::before_reboot(apply, &hop, nodes).await?;
        }
        Task::Roll {
            nodes,
            minor,
            expect,
            finishes,
            rollback,
        } => {
            let names = nodes.join(", ");
            apply.begin(&names, "drain, reboot, wait, uncordon");
            roll::roll(apply, nodes, *minor, expect.as_ref(), *rollback).await?;
            for node in nodes {
                apply.progress.advance();
                if finishes.contains(node) {
                    finish_node(apply, node, None).await?;
                }
            }
        }
        Task::Verify { hop: h } => {
            let hop = apply.plan.hops[*h].clone();
            verify::verify(apply, &hop).await?;
        }
        Task::HopDone { .. } => apply.progress.line(&task.title(&apply.plan)),
        Task::Soak { hop: h } => {
            let what = format!("after hop {}/{}", h + 1, apply.plan.hops.len());
            // Nothing came back from a reboot in this run: nothing to watch.
            if apply.back_at.is_some() {
                hold::soak(apply, apply.settings.pace.soak, apply.back_at, &what).await?;
                gates::healthy(apply, &what).await?;
            }
        }
        Task::KeptImages { hop: h, node } => {
            let hop = apply.plan.hops[*h].clone();
            apply.begin(node, "check the kept images against the hub");
            let r = apply.remote(node)?;
            kept_images::verify(&r, &apply.plan.hub, &hop).await?;
        }
    }
    Ok(())
}

/// The hop's image on the nodes that already had it (a download checks its
/// own): all at once, before anything of the hop runs from it anywhere.
async fn verify_present_images(
    apply: &Apply<'_>,
    hop: &Hop,
    present: &[String],
) -> anyhow::Result<()> {
    let image = &download::hop_image(hop)?;
    let checks = present.iter().map(|node| async move {
        let r = apply.remote(node)?;
        download::verify(&r, image, "already downloaded").await
    });
    let failures: Vec<String> = join_all(checks)
        .await
        .into_iter()
        .filter_map(|r| r.err().map(|e| format!("{e:#}")))
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    bail!("{}", failures.join("\n"))
}

fn is_last(last: &BTreeMap<String, At>, node: &str, at: At) -> bool {
    last.get(node) == Some(&at)
}

/// The step changes what the saved plan fingerprints (configs, symlink,
/// boot, the cluster's version), so the node is marked in progress first.
fn changes_fingerprint(action: &Action) -> bool {
    matches!(
        action,
        Action::Pin { .. } | Action::Stage { .. } | Action::UpgradeApply { .. } | Action::Roll
    )
}

/// One step that runs alone, with the whole apply at hand.
async fn one_step(
    apply: &mut Apply<'_>,
    hop: &Hop,
    step: &Step,
    finishes: bool,
) -> anyhow::Result<()> {
    // Every boundary between two steps is a safe point: a node is never
    // staged before its kubeadm step, and a roll undoes its own drain.
    apply.check_stop(None)?;
    let node = step.node.as_str();
    let text = step.action.describe();
    apply.begin(node, &text);
    apply.progress.step(&format!("{node}: {text}"));
    match &step.action {
        Action::Roll => {
            // The script makes every roll a task of its own (Task::Roll).
            bail!("{node}: internal error: a roll reached the one-step runner");
        }
        Action::UpgradeApply { minor, version } => {
            apply.mark(node)?;
            let mut job = Job::of(apply, node, hop)?;
            let v = match version {
                Some(v) => v.clone(),
                None => download::resolve_image(&job.remote, *minor).await?,
            };
            let result = job.kubeadm(Kind::Apply, &v).await;
            apply.set_remote(node, job.remote);
            result?;
            apply.record_cluster_version(v)?;
        }
        other => {
            if changes_fingerprint(other) {
                apply.mark(node)?;
            }
            let mut job = Job::of(apply, node, hop)?;
            let result = job.run(other).await;
            apply.set_remote(node, job.remote);
            result?;
        }
    }
    apply.progress.advance();
    if finishes {
        finish_node(apply, node, None).await?;
    }
    Ok(())
}

/// A node is through with the hop: record its state if fleetctl changed it
/// (a roll has already done so), and say so.
async fn finish_node(
    apply: &mut Apply<'_>,
    node: &str,
    facts: Option<NodeFacts>,
) -> anyhow::Result<()> {
    if apply.plan.fingerprint.in_progress.contains(node) {
        let facts = match facts {
            Some(f) => f,
            None => settled_facts(&apply.remote(node)?).await?,
        };
        apply.settle(node, facts)?;
    }
    let took = apply.took(node);
    apply.ledger(|l| {
        if !l.done.iter().any(|d| d == node) {
            l.done.push(node.to_string());
        }
        l.current = None;
    });
    apply.progress.line(&format!(
        "  {node} done ({})",
        humantime::format_duration(took)
    ));
    Ok(())
}

/// kubeadm's own preflight refuses `upgrade apply` while a control-plane
/// Node is NotReady (ControlPlaneNodesReady), and one that just rebooted may
/// still be coming up: wait for them (and `/readyz`) up to the node timeout.
/// The same before a control plane's `upgrade node`, which restarts its API
/// server.
async fn wait_control_planes_ready(apply: &Apply<'_>, api: &Remote) -> anyhow::Result<()> {
    let deadline = apply.deadline();
    loop {
        let problems = gates::control_planes_ready(api).await?;
        if problems.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "not running kubeadm on a control plane: {}. Nothing was changed. Fix it, then run \
                 `fleetctl apply` again",
                problems.join("; ")
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

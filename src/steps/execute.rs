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
use futures_util::FutureExt;

use super::context::{Apply, OnFailure, Settings, settled_facts};
use super::runner::Remote;
use super::script::{At, Task};
use super::{POLL, gates, on_failure};
use crate::inventory::Inventory;
use crate::node::NodeFacts;
use crate::plan::{Action, Hop, Plan, Step};

mod dry_script;
#[cfg(test)]
mod fake_on_failure;
#[cfg(test)]
mod fake_script;
#[cfg(test)]
mod fault_rules;
#[cfg(test)]
mod hold_script_rules;
#[cfg(test)]
mod on_failure_rules;
mod parallel_phase;
#[cfg(test)]
mod parallel_rules;
#[cfg(test)]
mod random_runs;
#[cfg(test)]
mod script_hop_rules;
#[cfg(test)]
mod script_rules;
mod script_world;
mod ssh_script;
use dry_script::DryScript;
use script_world::{OnFailureWorld, ScriptWorld};
use ssh_script::SshScript;

/// Runs the tasks in order: a safe point between any two, each journaled
/// as it starts with the title the dry run shows for it. A roll that fails
/// goes through `--on-failure` ([`after_failed_roll`]).
pub async fn run(apply: &mut Apply<'_>, tasks: &[Task]) -> anyhow::Result<()> {
    let mut w = SshScript {
        apply: &mut *apply,
        offline: false,
    };
    run_then_on_failure(&mut w, tasks).await
}

/// The tasks over `w`; a roll of the upgrade that fails, with `--on-failure
/// rollback`, goes through [`after_failed_roll`] (never a rollback's own).
async fn run_then_on_failure<W: OnFailureWorld>(w: &mut W, tasks: &[Task]) -> anyhow::Result<()> {
    let Err((failed, e)) = run_over(w, tasks).await else {
        return Ok(());
    };
    Err(match failed.map(|i| &tasks[i]) {
        Some(Task::Roll {
            rollback: false, ..
        }) if w.on_failure() == OnFailure::Rollback => after_failed_roll(w, e).await,
        _ => e,
    })
}

/// The tasks in order over `w`, a safe point between any two, each
/// journaled as it starts; at the first error, which task failed (`None`:
/// stopped between two) and why.
async fn run_over<W: ScriptWorld>(
    w: &mut W,
    tasks: &[Task],
) -> Result<(), (Option<usize>, anyhow::Error)> {
    let total = tasks.len();
    for (i, task) in tasks.iter().enumerate() {
        started(w, i, total, task).map_err(|e| (None, e))?;
        one(w, task).await.map_err(|e| (Some(i), e))?;
    }
    Ok(())
}

/// `--dry-run`: the tasks run by the same interpreter ([`one`]) over the
/// dry world ([`DryScript`]), which records what each would run instead:
/// each task headed by the title the run journals when it starts it
/// (`== 7/31 cp-1: wait until every control plane is Ready…`), then its
/// commands, one a line, `[node] command`, between the lock taken and
/// given back. A command the run repeats until something holds, or runs
/// only in some cases, carries that in a leading parenthesis; a
/// placeholder in angle brackets stands for what is only known when it
/// runs (a time, a directory read from the cluster).
pub fn dry_run(tasks: &[Task], plan: &Plan, inv: &Inventory, settings: &Settings) -> String {
    let mut w = DryScript::new(plan, inv, settings);
    w.lock_taken();
    dry_tasks(&mut w, tasks);
    w.lock_released();
    w.text()
}

/// `rollback --dry-run` of a lone control plane whose API is down
/// (`commands::rollback::without_api`): its tasks as [`run_rollback`] runs
/// them offline, with no lock, and a roll of no holds, gates or drain
/// (`roll::roll_offline`).
pub fn dry_run_offline(
    tasks: &[Task],
    plan: &Plan,
    inv: &Inventory,
    settings: &Settings,
) -> String {
    let mut w = DryScript::new(plan, inv, settings).offline();
    dry_tasks(&mut w, tasks);
    w.text()
}

fn dry_tasks(w: &mut DryScript<'_>, tasks: &[Task]) {
    let total = tasks.len();
    for (i, task) in tasks.iter().enumerate() {
        let result = match started(w, i, total, task) {
            // Nothing in the dry world waits: each task ends on its first poll.
            Ok(()) => one(w, task).now_or_never(),
            Err(e) => Some(Err(e)),
        };
        match result {
            Some(Ok(())) => {}
            Some(Err(e)) => w.cannot_render(&format!("{e:#}")),
            None => w.cannot_render("the task waited"),
        }
    }
}

/// Between two tasks: a safe point, then the task journaled as it starts.
fn started<W: ScriptWorld>(w: &mut W, i: usize, total: usize, task: &Task) -> anyhow::Result<()> {
    w.check_stop()?;
    let title = task.title(w.plan());
    w.task_starts(i + 1, total, &title, task.node());
    Ok(())
}

/// `--on-failure rollback`: the nodes the roll left not up on their new
/// kubelet go back to their kept image ([`on_failure`] decides and words
/// it), run here as `fleetctl rollback` runs them, by the same loop and
/// interpreter over the same world, with the plan's hops set aside
/// meanwhile; then apply stops with what happened.
async fn after_failed_roll<W: OnFailureWorld>(w: &mut W, failure: anyhow::Error) -> anyhow::Error {
    let failed = on_failure::not_up(&failure);
    if failed.is_empty() {
        return on_failure::not_eligible(failure);
    }
    let names: Vec<String> = failed.iter().map(|n| n.node.clone()).collect();
    let prepared = match w.prepare_rollback(failed).await {
        Ok(p) => p,
        Err(why) => {
            w.journal("rollback-refused", None, &format!("{why:#}"));
            return on_failure::refused(failure, &names, &why);
        }
    };
    for r in &prepared.rollbacks {
        w.say(&format!(
            "{}: not up on its new kubelet; --on-failure rollback: back to {}",
            r.node,
            r.to_text()
        ));
        w.journal(
            "rollback",
            Some(&r.node),
            &format!("{} (--on-failure rollback)", r.from_to()),
        );
    }
    if prepared.offline {
        let why = on_failure::OFFLINE;
        w.say(&format!("{}: {why}", names.join(", ")));
        w.journal("rollback-offline", Some(&names.join(", ")), why);
    }
    let hops = w.swap_hops(prepared.hops.clone());
    let offline = w.set_offline(prepared.offline);
    let result = run_over(w, &prepared.tasks).await.map_err(|(_, e)| e);
    w.set_offline(offline);
    w.swap_hops(hops);
    let saved = w.save_plan();
    if result.is_ok() {
        // Rolled back is not done: the report must not say so.
        w.rolled_back(&names);
    }
    on_failure::outcome(w.node_timeout(), failure, &prepared, result.and(saved))
}

/// The tasks of a rollback (`script::of_rollbacks`), each journaled as it
/// starts, a safe point between any two (a lease that lapsed or a Ctrl-C
/// stops it before the next), by the same loop and interpreter as any run;
/// `offline`: the roll is `roll::roll_offline` (a control plane whose API
/// server is down: no gates, no drain), as `fleetctl rollback` runs it and
/// `apply --on-failure rollback` ([`after_failed_roll`]) over the same
/// world as the failed roll.
pub async fn run_rollback(
    apply: &mut Apply<'_>,
    tasks: &[Task],
    offline: bool,
) -> anyhow::Result<()> {
    let mut w = SshScript { apply, offline };
    run_over(&mut w, tasks).await.map_err(|(_, e)| e)
}

/// The one interpreter of a task, the run's and the dry run's: what the
/// task does, in which order, over the world it is given.
async fn one<W: ScriptWorld>(w: &mut W, task: &Task) -> anyhow::Result<()> {
    match task {
        Task::HopStart { hop: h } => {
            let title = task.title(w.plan());
            let what = title.split_once(": ").map_or("", |(_, w)| w).to_string();
            w.say(&title);
            w.in_window(*h)?;
            w.journal("hop-start", None, &what);
        }
        Task::Checks { hop: h } => {
            let hop = w.plan().hops[*h].clone();
            w.checks(*h, &hop).await?;
        }
        Task::PresentImages { hop: h, nodes } => {
            let hop = w.plan().hops[*h].clone();
            w.present_images(&hop, nodes).await?;
        }
        Task::Phase { hop: h, phase: p } => {
            let title = w.plan().hops[*h].phases[*p].kind.title();
            w.say(&format!("  {title}"));
        }
        Task::ControlPlanesReady { node } => {
            w.begin(node, "wait until every control plane is Ready");
            w.ceph_before_upgrade(node).await?;
            w.control_planes_ready(node).await?;
        }
        Task::EtcdSnapshot { node, minor } => {
            w.begin(node, "etcd snapshot before upgrade apply");
            w.etcd_snapshot(node, *minor).await?;
        }
        Task::Step {
            hop: h,
            phase: p,
            step: s,
            finishes,
        } => {
            let hop = w.plan().hops[*h].clone();
            let step = hop.phases[*p].steps[*s].clone();
            one_step(w, &hop, &step, *finishes).await?;
        }
        Task::Parallel { hop: h, phase: p } => {
            let hop = w.plan().hops[*h].clone();
            w.parallel(&hop, *p).await?;
        }
        Task::LastLook { hop: h, nodes } => {
            let hop = w.plan().hops[*h].clone();
            w.last_look(&hop, nodes).await?;
        }
        Task::Roll {
            nodes,
            minor,
            expect,
            finishes,
            rollback,
        } => {
            let names = nodes.join(", ");
            w.begin(&names, "drain, reboot, wait, uncordon");
            w.roll(nodes, *minor, expect.as_ref(), *rollback).await?;
            for node in nodes {
                w.advance();
                if finishes.contains(node) {
                    w.finish_node(node).await?;
                }
            }
        }
        Task::Verify { hop: h } => {
            let hop = w.plan().hops[*h].clone();
            w.verify(&hop).await?;
        }
        Task::HopDone { .. } => {
            let title = task.title(w.plan());
            w.say(&title);
        }
        Task::Soak { hop: h } => w.soak(*h).await?,
        Task::KeptImages { hop: h, node } => {
            let hop = w.plan().hops[*h].clone();
            w.begin(node, "check the kept images against the hub");
            w.kept_images(&hop, node).await?;
        }
    }
    Ok(())
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

/// One step that runs alone.
async fn one_step<W: ScriptWorld>(
    w: &mut W,
    hop: &Hop,
    step: &Step,
    finishes: bool,
) -> anyhow::Result<()> {
    // Every boundary between two steps is a safe point: a node is never
    // staged before its kubeadm step, and a roll undoes its own drain.
    w.check_stop()?;
    let node = step.node.as_str();
    let text = step.action.describe();
    w.begin(node, &text);
    w.say_step(&format!("{node}: {text}"));
    if let Action::Roll = &step.action {
        // The script makes every roll a task of its own (Task::Roll).
        bail!("{node}: internal error: a roll reached the one-step runner");
    }
    if changes_fingerprint(&step.action) {
        w.mark(node)?;
    }
    w.action(hop, node, &step.action).await?;
    w.advance();
    if finishes {
        w.finish_node(node).await?;
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

//! `fleetctl rollback NODE` when the API server answers through no control
//! plane: the rollback that needs no API (issue 37), offered only for one
//! control plane whose own kube-apiserver is down, which is what a new
//! kubelet that crash-loops on a lone control plane leaves (its static pods
//! never start). It pins back, points the symlink back, reboots and waits
//! for the API to answer, Ready, uncordon: the tasks and the offline roll
//! `apply --on-failure rollback` runs (`execute::run_rollback`,
//! `steps::roll::roll_offline`), decided the same way (`plan::rollbacks` on
//! the node's own facts, `on_failure::lone_state`).
//!
//! What it cannot do, said before the confirmation and in the journal: no
//! drain, no gates, and no lock. fleetctl's Lease and Kured's lock are both
//! objects in the API (kured's pkg/daemonsetlock/daemonsetlock.go `Acquire`
//! reads and updates the DaemonSet's annotation through it), so while the
//! API is down nobody can take either: no Kured reboot and no other
//! fleetctl run (which takes the lock first) can start. What the lock cannot
//! cover is a person working on the nodes by hand; the confirmation says so.
//! `--yes` is that confirmation, as for any rollback: the operator named the
//! node, and the offline path is never taken for a worker, for more than one
//! node, or while the API answers.

use std::process::ExitCode;
use std::sync::Arc;

use crate::gather::Gathered;
use crate::inventory::{Inventory, Role};
use crate::plan::{self, Rollback};
use crate::steps::on_failure::{self, OFFLINE};
use crate::steps::{Stop, execute, script};
use crate::ui::Printer;
use crate::usage;

use super::super::locked::{
    RunHandles, Script, confirm, open_journal, run_script, spawn_interrupt_handler,
};
use super::super::{HopFindings, RunConfig};

/// Rolls back the one control plane in `nodes` without the API, which
/// answered through no control plane while gathering (`api`); refuses
/// anything else (exit 2), touching nothing.
pub async fn run(
    inv: &Inventory,
    config: &RunConfig,
    nodes: &[String],
    printer: &Printer,
    gathered: &Gathered,
    api: &anyhow::Error,
) -> anyhow::Result<ExitCode> {
    let (rollback, state) = decide(inv, gathered, nodes, api).await?;
    let settings = config.settings(HopFindings::default());
    let plan = plan::fixed_plan(inv, &state, vec![plan::rollback_hop(&rollback)]);
    let tasks = script::of_rollbacks(&plan);
    let text = describe(&rollback, api);
    if config.dry_run {
        printer.out(&text);
        printer.out(&execute::dry_run_offline(&tasks, &plan, inv, &settings));
        return Ok(ExitCode::SUCCESS);
    }
    printer.out(&text);
    confirm(
        config.yes,
        &format!(
            "Roll {} back WITHOUT the API server: no lock, no drain?",
            rollback.node
        ),
    )?;
    config.refuse_outside_window()?;
    let stop = Stop::default();
    let second = Arc::new(tokio::sync::Notify::new());
    spawn_interrupt_handler(stop.clone(), second.clone(), printer.clone())?;
    let journal = open_journal(inv, printer)?;
    let node = rollback.node.clone();
    journal.event("rollback", Some(&node), &rollback.from_to());
    journal.event("rollback-offline", Some(&node), &no_lock_text(api));
    printer.warn(&format!("{node}: {OFFLINE}"));
    let locked = RunHandles {
        stop,
        second,
        journal,
        kured: None,
    };
    let script = Script {
        total: tasks.len() as u64,
        tasks,
        plan,
        plan_path: None,
        settings,
        done: format!(
            "{node} rolled back offline to {}; the API answers again",
            rollback.to_text()
        ),
        offline: true,
    };
    let result = run_script(inv, &config.reach, printer, &locked, gathered, script).await;
    if let Err(e) = locked.journal.check() {
        printer.warn(&format!("the journal is incomplete: {e:#}"));
    }
    result
}

/// The one rollback the offline path allows, and the fleet it is decided
/// on; a refusal says why and what to do instead.
async fn decide(
    inv: &Inventory,
    gathered: &Gathered,
    names: &[String],
    api: &anyhow::Error,
) -> anyhow::Result<(Rollback, plan::FleetState)> {
    let down = format!("the API server answers through no control plane ({api:#})");
    let workers: Vec<&str> = names
        .iter()
        .filter(|n| {
            inv.nodes
                .iter()
                .any(|m| &m.name == *n && m.role == Role::Worker)
        })
        .map(String::as_str)
        .collect();
    if !workers.is_empty() {
        return Err(usage!(
            "not rolling back {}: {down}. A worker is rolled back only through the API (the lock, \
             its drain, Ready); only a control plane whose API server is down can be rolled back \
             without it. Bring the API back first (if a control plane's new kubelet fails, roll \
             that one back: `fleetctl rollback CONTROL_PLANE`), then roll back {}. Nothing was \
             changed",
            workers.join(", "),
            workers.join(", ")
        ));
    }
    let [name] = names else {
        return Err(usage!(
            "not rolling back {}: {down}. Without the API only one control plane is rolled back \
             at a time (no lock holds the others back); name one. Nothing was changed",
            names.join(", ")
        ));
    };
    let Some(report) = gathered.nodes.iter().find(|r| &r.node.name == name) else {
        return Err(usage!(
            "not rolling back {name}: it is not in the inventory. Nothing was changed"
        ));
    };
    let (Ok(facts), Some(session)) = (&report.facts, &report.session) else {
        return Err(usage!(
            "not rolling back {name}: {down}, and {name} did not answer over SSH either; fix its \
             SSH access (see `fleetctl status`) and try again. Nothing was changed"
        ));
    };
    // The gather asked each control plane in turn; ask the node itself once
    // more, now: an API that answers gets the ordinary rollback, its drain.
    if on_failure::api_answers(session).await {
        return Err(usage!(
            "not rolling back {name} offline: its API server answers now, although {down} a \
             moment ago. Run `fleetctl rollback {name}` again: with the API up it is rolled back \
             the ordinary way, locked and drained. Nothing was changed"
        ));
    }
    let state = on_failure::lone_state(
        inv.hub.clone(),
        inv.containerd_version,
        name,
        facts.clone(),
        api,
    )
    .map_err(|e| usage!("not rolling back {name}: {e:#}. Nothing was changed"))?;
    let mut chosen = super::decide(&state, names)?;
    let rollback = chosen.pop().ok_or_else(|| {
        usage!("not rolling back {name}: nothing to roll back. Nothing was changed")
    })?;
    Ok((rollback, state))
}

/// What the journal records of the path taken and why.
fn no_lock_text(api: &anyhow::Error) -> String {
    format!(
        "{OFFLINE}; fleetctl rollback without the lock: the API answered through no control \
         plane ({api:#})"
    )
}

/// What the operator reads before saying yes: what will be done, and what
/// cannot be without the API.
fn describe(rollback: &Rollback, api: &anyhow::Error) -> String {
    let node = &rollback.node;
    format!(
        "The API server answers through no control plane ({api:#}),\nand {node}'s own is down: \
         {node} can only be rolled back OFFLINE.\n{}  then: pin back, point the symlink back, \
         reboot {node}, wait for the API to answer, {node} Ready, uncordon\nWithout the API, \
         fleetctl cannot:\n  - drain {node}: NO DRAIN POSSIBLE; pods still on it are not \
         evicted, the reboot stops them\n  - check the gates before a reboot (alerts, Ceph, \
         etcd, PodDisruptionBudgets)\n  - take the lock (fleetctl's or Kured's): both live in \
         the API, so nobody else can take\n    them either until it answers; make sure nobody \
         works on the nodes by hand meanwhile\n",
        super::describe(std::slice::from_ref(rollback))
            .trim_start_matches("Roll back, one node at a time:\n")
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use futures_util::FutureExt;

    use super::*;

    const INVENTORY: &str = "\
kubernetes_version: v1.35
sysupdate:
  hub: https://hub.example/ext
ssh:
  user: core
  identity_file: /nonexistent/id
  host_key_checking: strict
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: w-1, address: 10.0.0.21, role: worker}
";

    /// What `decide` says of `names` while the API answers through no
    /// control plane; the refusals below come before any node is asked.
    fn refused(names: &[&str]) -> String {
        let inv = crate::inventory::parse(INVENTORY, Path::new("/tmp/inventory.yaml")).unwrap();
        let gathered = Gathered {
            nodes: Vec::new(),
            warnings: Vec::new(),
            cluster: Err(anyhow::anyhow!("down")),
            cluster_output: None,
            retried: Vec::new(),
        };
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let api = anyhow::anyhow!("connection refused");
        let decided = decide(&inv, &gathered, &names, &api)
            .now_or_never()
            .expect("a refusal asks no node");
        format!("{:#}", decided.expect_err("refused"))
    }

    /// tests/cli/offline_rollback.rs proved it on a fleet whose lone control
    /// plane crash-loops: a worker is never rolled back without the API,
    /// nor two nodes at once; nothing is changed.
    #[test]
    fn without_the_api_a_worker_or_two_nodes_are_refused_touching_nothing() {
        let worker = refused(&["w-1"]);
        for words in [
            "not rolling back w-1: the API server answers through no control plane",
            "A worker is rolled back only through the API",
            "Nothing was changed",
        ] {
            assert!(worker.contains(words), "no `{words}` in {worker}");
        }
        let two = refused(&["cp-1", "cp-2"]);
        assert!(
            two.contains("only one control plane is rolled back at a time")
                && two.contains("Nothing was changed"),
            "{two}"
        );
    }

    /// What the operator reads before the offline rollback: what cannot be
    /// done without the API.
    #[test]
    fn the_offline_rollback_says_it_cannot_drain_gate_or_lock() {
        let v = |s: &str| s.parse::<crate::version::Version>().unwrap();
        let rollback = Rollback {
            node: "cp-1".into(),
            role: Role::ControlPlane,
            from: v("v1.35.1"),
            to: v("v1.34.2"),
            pin: crate::plan::Action::RemoveImages {
                versions: Vec::new(),
            },
            containerd: None,
        };
        let text = describe(&rollback, &anyhow::anyhow!("connection refused"));
        for words in [
            "cp-1 can only be rolled back OFFLINE",
            "NO DRAIN POSSIBLE",
            "take the lock (fleetctl's or Kured's)",
        ] {
            assert!(text.contains(words), "no `{words}` in {text}");
        }
    }
}

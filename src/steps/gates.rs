//! The gates: what must hold before fleetctl takes a node down, or moves
//! the control plane. The probes are independent, so they all run at once:
//! one round trip instead of one per probe, on the path between two reboots.

use anyhow::{Context, bail};

use super::context::Apply;
use super::runner::Remote;
pub use super::storage_gate::Spared;
use crate::node::{self, ClusterFacts};
use crate::remote;

/// Before every drain (so before every reboot): every node reachable and
/// Ready, nothing cordoned but the batch about to go down, the API healthy,
/// the operator's checks. A rollback (`rollback`) may take down a batch
/// that is not Ready: it is already out of service, often for the very
/// kubelet it goes back from. And while it is, the other nodes this run
/// rolls back may be down and cordoned too (a batch of `--max-unavailable`
/// whose new kubelets all failed, rolled back one at a time): taking down
/// a node that is down already adds no node to those out of service.
pub async fn before_drain(
    apply: &Apply<'_>,
    batch: &[String],
    rollback: bool,
) -> anyhow::Result<Spared> {
    let node = batch.join(", ");
    let tolerated = match rollback {
        true => Tolerated {
            not_ready: batch.to_vec(),
            while_batch_down: rolled_back_nodes(apply)
                .into_iter()
                .filter(|n| !batch.contains(n))
                .collect(),
        },
        false => Tolerated::default(),
    };
    // Ceph's and etcd's readings and the fleet's own are independent:
    // asked at once, they cost one round trip's time between two reboots
    // instead of three.
    let (spared, problems) = until_none_held(&node, &apply.settings.rerun, || async {
        let (storage, etcd, problems) = tokio::join!(
            super::storage_gate::before_drain(apply, batch, rollback),
            super::etcd_gate::before_drain(apply, batch, rollback),
            problems(apply, batch, &tolerated),
        );
        Ok(Round {
            storage: storage?,
            etcd_held: etcd?,
            problems,
        })
    })
    .await?;
    if problems.is_empty() {
        return Ok(spared);
    }
    bail!(
        "not taking {node} down: the fleet is not healthy enough:\n  - {}\nNothing was changed on {node}. \
         Fix these, then run `{}` again",
        problems.join("\n  - "),
        apply.settings.rerun
    )
}

/// Rounds of the gates before a drain in which Ceph or etcd held (each
/// bounded by its own timeout) before the run stops: each such round was
/// released, so only gates that keep taking turns reach it.
const MAX_HOLD_ROUNDS: u32 = 10;

/// One reading of the gates before a drain, all at once.
struct Round {
    storage: Spared,
    /// etcd's gate held (and was waited out).
    etcd_held: bool,
    /// What the fleet's own reading found wrong (its error, if unread).
    problems: anyhow::Result<Vec<String>>,
}

/// Reads the gates (`round`) until a round in which neither Ceph's nor
/// etcd's held: a gate that held was waited out, and what the others saw
/// meanwhile is stale, so the fleet is judged on a round in which nothing
/// waited. At most `MAX_HOLD_ROUNDS` rounds that held, so two gates that
/// keep taking turns stop the run instead of holding it forever.
async fn until_none_held<F, Fut>(
    node: &str,
    rerun: &impl std::fmt::Display,
    mut round: F,
) -> anyhow::Result<(Spared, Vec<String>)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Round>>,
{
    let mut rounds = 0;
    loop {
        let r = round().await?;
        if !r.etcd_held && r.storage != Spared::Released {
            return Ok((r.storage, r.problems?));
        }
        rounds += 1;
        if rounds >= MAX_HOLD_ROUNDS {
            bail!(
                "not taking {node} down: Ceph's and etcd's gates held in turn {rounds} times \
                 without both being clear at once. Nothing was changed on {node}; once the \
                 cluster is calm, run `{rerun}` again"
            );
        }
    }
}

/// After a soak (`--soak`, after a hop): what the same gates find wrong,
/// with nothing about to go down (`super::hold::after_hop` judges it).
pub async fn fleet_problems(apply: &Apply<'_>) -> anyhow::Result<Vec<String>> {
    problems(apply, &[], &Tolerated::default()).await
}

/// The nodes a gate lets be out of service.
#[derive(Default)]
struct Tolerated {
    /// May be NotReady.
    not_ready: Vec<String>,
    /// May be NotReady and cordoned, if every node of the batch is
    /// NotReady already.
    while_batch_down: Vec<String>,
}

/// The nodes the steps of this run roll back: a rollback's plan (`fleetctl
/// rollback`, or the hops `--on-failure rollback` puts in place of the
/// plan's meanwhile) holds nothing else.
fn rolled_back_nodes(apply: &Apply<'_>) -> Vec<String> {
    let mut nodes: Vec<String> = apply
        .plan
        .hops
        .iter()
        .flat_map(|h| &h.phases)
        .flat_map(|p| &p.steps)
        .filter(|s| s.action == crate::plan::Action::Roll)
        .map(|s| s.node.clone())
        .collect();
    nodes.dedup();
    nodes
}

/// What is wrong with the fleet for taking `batch` down (none: all well),
/// but for what `tolerated` lets be out of service.
async fn problems(
    apply: &Apply<'_>,
    batch: &[String],
    tolerated: &Tolerated,
) -> anyhow::Result<Vec<String>> {
    let node = if batch.is_empty() {
        "the batch about to go down".to_string()
    } else {
        batch.join(", ")
    };
    let api = apply.api()?;
    let (mut problems, view, checks) =
        tokio::join!(reachable(apply), view(&api), health_checks(apply, &api),);
    let view = view?;
    match view.not_ready {
        Some(problem) => problems.push(problem),
        None => {
            let batch_down = !batch.is_empty()
                && batch
                    .iter()
                    .all(|b| view.nodes.iter().any(|c| &c.name == b && !c.ready));
            let down_ok = |name: &String| batch_down && tolerated.while_batch_down.contains(name);
            for n in &apply.inv.nodes {
                match view.nodes.iter().find(|c| c.name == n.name) {
                    None => problems.push(format!("{} is not known to the API server", n.name)),
                    Some(c) if down_ok(&c.name) => {}
                    Some(c) if !c.ready && !tolerated.not_ready.contains(&c.name) => {
                        problems.push(format!("{} is not Ready", n.name))
                    }
                    Some(c) if c.cordoned && !batch.contains(&c.name) => problems.push(format!(
                        "{} is cordoned: fleetctl takes nothing but {node} out of service",
                        c.name
                    )),
                    _ => {}
                }
            }
        }
    }
    problems.extend(checks?);
    Ok(problems)
}

/// Before `kubeadm upgrade apply`: `/readyz` ok and every control-plane
/// Node Ready, which kubeadm's own preflight (ControlPlaneNodesReady)
/// demands; checked here so a control plane that is still coming up after
/// its reboot is waited for, not failed on.
pub async fn control_planes_ready(api: &Remote) -> anyhow::Result<Vec<String>> {
    let view = view(api).await?;
    if let Some(problem) = view.not_ready {
        return Ok(vec![problem]);
    }
    Ok(view
        .nodes
        .iter()
        .filter(|n| n.control_plane && !n.ready)
        .map(|n| format!("control-plane node {} is not Ready", n.name))
        .collect())
}

/// `/readyz` and the nodes, asked at once in one round trip: the two API
/// reads every gate needs.
async fn view(api: &Remote) -> anyhow::Result<node::GateView> {
    let out = api
        .run_root("gate: API readyz and nodes", remote::GATES_SCRIPT, None)
        .await?;
    node::parse_gates(&out.stdout).with_context(|| format!("{}: reading the gates", api.node()))
}

/// Every node answers a command over its session.
async fn reachable(apply: &Apply<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut probes = tokio::task::JoinSet::new();
    for n in &apply.inv.nodes {
        match apply.remote_of(&n.name) {
            Some(r) => {
                probes.spawn(async move {
                    let res = r
                        .run("gate: reachable", crate::remote::upgrade::ALIVE, None)
                        .await;
                    (r.node().to_string(), res.map(|o| o.success()))
                });
            }
            None => problems.push(format!("{} has no SSH session", n.name)),
        }
    }
    while let Some(j) = probes.join_next().await {
        match j {
            Ok((_, Ok(true))) => {}
            Ok((n, Ok(false))) => problems.push(format!("{n} does not run commands")),
            Ok((n, Err(e))) => problems.push(format!("{n} is not reachable: {e:#}")),
            Err(e) => problems.push(format!("a probe failed: {e}")),
        }
    }
    problems
}

/// The operator's health checks, all at once; one problem per failed
/// check, in inventory order.
async fn health_checks(apply: &Apply<'_>, api: &Remote) -> anyhow::Result<Vec<String>> {
    let mut runs = tokio::task::JoinSet::new();
    for (i, check) in apply.inv.health_checks.iter().enumerate() {
        let api = api.clone();
        let check = check.clone();
        runs.spawn(async move {
            let label = format!("health check {}", check.name);
            let out = api.run_root(&label, &check.command, None).await;
            (i, check, out)
        });
    }
    let mut results = Vec::new();
    while let Some(joined) = runs.join_next().await {
        results.push(joined.context("a health check task failed")?);
    }
    results.sort_by_key(|(i, _, _)| *i);
    let mut problems = Vec::new();
    for (_, check, out) in results {
        let out = out?;
        let text = format!("{}{}", out.stdout, out.stderr);
        if !out.success() || !text.contains(&check.expect) {
            problems.push(format!(
                "health check `{}` failed: `{}` printed `{}` ({}), expected it to contain `{}`",
                check.name,
                check.command,
                text.trim(),
                out.exit.map_or_else(
                    || "no exit status".to_string(),
                    |c| format!("exit status {c}")
                ),
                check.expect
            ));
        }
    }
    Ok(problems)
}

pub async fn cluster(api: &Remote) -> anyhow::Result<ClusterFacts> {
    let out = api
        .run_root("cluster facts", remote::CLUSTER_SCRIPT, None)
        .await?;
    node::parse_cluster(&out.stdout)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use futures_util::FutureExt;

    use super::*;

    /// Runs the loop over scripted rounds: each `(storage, etcd held,
    /// problems)` in turn; counts the rounds read.
    fn over(script: &[(Spared, bool, &[&str])]) -> (anyhow::Result<(Spared, Vec<String>)>, usize) {
        let read = Cell::new(0);
        let out = until_none_held("w-1", &"fleetctl apply", || {
            let i = read.get();
            read.set(i + 1);
            let (storage, etcd_held, problems) = script[i.min(script.len() - 1)];
            let problems = Ok(problems.iter().map(|p| p.to_string()).collect());
            async move {
                Ok(Round {
                    storage,
                    etcd_held,
                    problems,
                })
            }
        })
        .now_or_never()
        .expect("no round waits");
        (out, read.get())
    }

    #[test]
    fn a_round_in_which_a_gate_held_is_read_again_and_the_fresh_one_judged() {
        // Ceph held w-1 (stale: cp-1 looked not Ready meanwhile), then
        // etcd held; the third round held nothing and is the one judged.
        let (out, rounds) = over(&[
            (Spared::Released, false, &["cp-1 is not Ready"]),
            (Spared::Clear, true, &["cp-1 is not Ready"]),
            (Spared::Clear, false, &[]),
        ]);
        assert_eq!(rounds, 3);
        let (spared, problems) = out.unwrap();
        assert_eq!(spared, Spared::Clear);
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn gates_that_keep_taking_turns_stop_the_run_after_ten_rounds() {
        let (out, rounds) = over(&[(Spared::Released, false, &[]), (Spared::Clear, true, &[])]);
        assert_eq!(rounds, MAX_HOLD_ROUNDS as usize);
        let err = out.unwrap_err().to_string();
        assert_eq!(
            err,
            "not taking w-1 down: Ceph's and etcd's gates held in turn 10 times without both \
             being clear at once. Nothing was changed on w-1; once the cluster is calm, run \
             `fleetctl apply` again"
        );
    }

    #[test]
    fn a_first_round_that_held_nothing_is_the_only_one() {
        let (out, rounds) = over(&[(Spared::NoCeph, false, &["w-2 is cordoned"])]);
        assert_eq!(rounds, 1);
        assert_eq!(
            out.unwrap(),
            (Spared::NoCeph, vec!["w-2 is cordoned".to_string()])
        );
    }
}

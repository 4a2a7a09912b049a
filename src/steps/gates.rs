//! The gates: what must hold before fleetctl takes a node down, or moves
//! the control plane. The probes are independent, so they all run at once:
//! one round trip instead of one per probe, on the path between two reboots.

use anyhow::{Context, bail};

use super::context::Apply;
use super::runner::Remote;
use crate::node::{self, ClusterFacts};
use crate::remote::{self, kubectl};

/// Before every drain (so before every reboot): every node reachable and
/// Ready, nothing cordoned but the batch about to go down, the API healthy,
/// the operator's checks.
pub async fn before_drain(apply: &Apply<'_>, batch: &[String]) -> anyhow::Result<()> {
    let node = batch.join(", ");
    let api = apply.api()?;
    let (mut problems, ready, cluster, checks) = tokio::join!(
        reachable(apply),
        readyz(&api),
        cluster(&api),
        health_checks(apply, &api),
    );
    match ready? {
        Some(problem) => problems.push(problem),
        None => {
            let cluster = cluster?;
            for n in &apply.inv.nodes {
                match cluster.nodes.iter().find(|c| c.name == n.name) {
                    None => problems.push(format!("{} is not known to the API server", n.name)),
                    Some(c) if !c.ready => problems.push(format!("{} is not Ready", n.name)),
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
    if problems.is_empty() {
        return Ok(());
    }
    bail!(
        "not taking {node} down: the fleet is not healthy enough:\n  - {}\nNothing was changed on {node}. \
         Fix these, then run `fleetctl apply` again",
        problems.join("\n  - ")
    )
}

/// Before `kubeadm upgrade apply`: `/readyz` ok and every control-plane
/// Node Ready, which kubeadm's own preflight (ControlPlaneNodesReady)
/// demands; checked here so a control plane that is still coming up after
/// its reboot is waited for, not failed on.
pub async fn control_planes_ready(api: &Remote) -> anyhow::Result<Vec<String>> {
    let (ready, cluster) = tokio::join!(readyz(api), cluster(api));
    if let Some(problem) = ready? {
        return Ok(vec![problem]);
    }
    Ok(cluster?
        .nodes
        .iter()
        .filter(|n| n.control_plane && !n.ready)
        .map(|n| format!("control-plane node {} is not Ready", n.name))
        .collect())
}

/// `None` when `/readyz` says ok, else the problem.
async fn readyz(api: &Remote) -> anyhow::Result<Option<String>> {
    let out = api
        .run_root("gate: API readyz", &kubectl::readyz(), None)
        .await?;
    Ok(if out.success() && out.stdout.trim() == "ok" {
        None
    } else {
        Some(format!(
            "the API server is not healthy (/readyz: {})",
            out.stderr
                .trim()
                .lines()
                .last()
                .unwrap_or(out.stdout.trim())
        ))
    })
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

/// What `--dry-run` shows for the gates before a drain.
pub fn commands(api_node: &str, checks: &[crate::inventory::HealthCheck]) -> Vec<(String, String)> {
    let mut lines = vec![
        (
            "*".to_string(),
            "# gates, all at once: `true` on every node; /readyz; every node Ready, no other cordoned; health checks"
                .to_string(),
        ),
        (api_node.to_string(), kubectl::readyz()),
        (
            api_node.to_string(),
            "(cluster facts script: kubectl get nodes -o json, kubeadm-config, kube-proxy)".to_string(),
        ),
    ];
    lines.extend(
        checks
            .iter()
            .map(|c| (api_node.to_string(), c.command.clone())),
    );
    lines
}

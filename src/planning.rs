//! Planning from the live fleet: gathered facts, the hub's list read through
//! the first control-plane node, and every hop's checks, turned into a
//! [`Plan`]. `plan` plans with it, `apply` plans again with it to resume,
//! `reboot` and `rollback` read the fleet's state through it. The decisions
//! themselves are pure and live in `crate::plan`; this module only reaches
//! the nodes for what they need.

use std::collections::BTreeMap;

use anyhow::Context;

use crate::checks::{self, CheckName, HubImage};
use crate::error::UsageError;
use crate::gather::{self, Gathered};
use crate::inventory::Inventory;
use crate::plan::{self, FleetState, HubVersions, Plan, WorkerStrategy};
use crate::remote;
use crate::version::TargetVersion;

/// Facts → plan, with every hop's checks: what `plan` prints and saves, and
/// what `apply` plans again from the live fleet to resume. `ignored`: the
/// checks whose blocks the operator goes past; `workers`, how the workers
/// take the hops. Also returns the hub's images (every architecture), which
/// apply checks again before each hop.
pub async fn compute(
    inv: &Inventory,
    gathered: &Gathered,
    target: &TargetVersion,
    ignored: &[CheckName],
    workers: WorkerStrategy,
) -> anyhow::Result<(Plan, Option<Vec<HubImage>>)> {
    let state = fleet_state(inv, gathered, "planning")?;
    let (hub, images) = read_hub(inv, gathered).await;
    let mut plan = plan::plan_with(&state, target, &hub, workers)
        .map_err(|refusal| anyhow::Error::new(UsageError(refusal.to_string())))?;
    plan.ignored_checks = ignored.to_vec();
    if !plan.hops.is_empty() {
        let inputs = check_inputs(gathered, images.clone()).await;
        let all = plan::evaluate_all(&inputs, &plan.hops, plan.target, ignored);
        for (hop, found) in plan.hops.iter_mut().zip(all) {
            hop.checks = found;
            hop.skip_system_verification =
                checks::skips_system_verification(&inputs.cgroups, hop.minor, ignored);
        }
    }
    Ok((plan, images))
}

/// What the checks read, through the node that answered for the cluster.
pub async fn check_inputs(gathered: &Gathered, images: Option<Vec<HubImage>>) -> plan::Inputs {
    let session = gathered.cluster.as_ref().ok().and_then(|(name, _)| {
        gathered
            .nodes
            .iter()
            .find(|r| &r.node.name == name)
            .and_then(|r| r.session.clone())
    });
    let facts = gathered
        .nodes
        .iter()
        .filter_map(|r| Some((r.node.name.as_str(), r.facts.as_ref().ok()?)));
    let nodes: Vec<crate::inventory::Node> =
        gathered.nodes.iter().map(|r| r.node.clone()).collect();
    let cluster_output = gathered.cluster_output.as_deref();
    gather::check_inputs(session.as_deref(), cluster_output, facts, images, &nodes).await
}

/// Every node's facts and the API server's view, or why not (`what` needs
/// them all: "planning", "rebooting").
pub fn fleet_state(inv: &Inventory, gathered: &Gathered, what: &str) -> anyhow::Result<FleetState> {
    let mut facts = BTreeMap::new();
    let mut unreachable = Vec::new();
    for r in &gathered.nodes {
        match &r.facts {
            Ok(f) => {
                facts.insert(r.node.name.clone(), f.clone());
            }
            Err(e) => unreachable.push(format!("  {}: {e:#}", r.node.name)),
        }
    }
    if !unreachable.is_empty() {
        anyhow::bail!(
            "{what} needs every node, and these did not answer:\n{}\nFix their SSH access (see `fleetctl status`) and try again",
            unreachable.join("\n")
        );
    }
    let cluster = match &gathered.cluster {
        Ok((_, c)) => c.clone(),
        Err(e) => {
            return Err(anyhow::anyhow!("{e:#}"))
                .with_context(|| format!("{what} needs the API server's view of the nodes"));
        }
    };
    FleetState::new(inv, facts, cluster)
}

/// The hub's SHA256SUMS, fetched through the first control-plane node (the
/// node reaches the hub; the operator's laptop may not), as the planner
/// reads it and with every architecture kept for the hub check. A failure
/// is not fatal: the plan goes on with patches unresolved and says so.
pub async fn read_hub(
    inv: &Inventory,
    gathered: &Gathered,
) -> (HubVersions, Option<Vec<HubImage>>) {
    let versions = hub_versions(inv, gathered).await;
    match versions {
        (HubVersions::Resolved { .. }, Some(text)) => {
            let images = HubImage::parse_sha256sums(&text);
            (versions.0, Some(images))
        }
        (v, _) => (v, None),
    }
}

async fn hub_versions(inv: &Inventory, gathered: &Gathered) -> (HubVersions, Option<String>) {
    let first = inv.first_control_plane();
    let url = plan::sha256sums_url(&inv.hub);
    let Some(session) = gathered
        .nodes
        .iter()
        .find(|r| r.node.name == first.name)
        .and_then(|r| r.session.clone())
    else {
        return (
            HubVersions::Unresolved(format!("{} is not reachable", first.name)),
            None,
        );
    };
    let versions = match session.exec(&remote::upgrade::fetch(&url), None).await {
        Ok(out) if out.success() => {
            return (HubVersions::from_sha256sums(&out.stdout), Some(out.stdout));
        }
        Ok(out) => HubVersions::Unresolved(format!(
            "{} could not read {url}: {}",
            first.name,
            out.stderr
                .trim()
                .lines()
                .last()
                .unwrap_or("no error output")
        )),
        Err(e) => HubVersions::Unresolved(format!("{} could not read {url}: {e:#}", first.name)),
    };
    (versions, None)
}

//! `fleetctl plan`: gather the fleet's real state, read the hub's list of
//! images through the first control-plane node, compute the path, print it
//! and save it for `apply`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{Global, PlanArgs, PlanFormat};
use crate::error::UsageError;
use crate::gather::Gathered;
use crate::inventory::Inventory;
use crate::plan::{self, FleetState, HubVersions, Plan};
use crate::remote;
use crate::ui::Printer;
use crate::version::Target;

pub async fn run(global: &Global, args: &PlanArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let target = args
        .target
        .clone()
        .unwrap_or(Target::Minor(inv.kubernetes_version));
    let gathered = super::gather_fleet(&inv, global, printer).await?;
    let plan = compute(&inv, &gathered, &target).await?;
    let path = args.out.clone().unwrap_or_else(|| plan::default_path(&inv));
    plan::save(&plan, &path)?;
    match args.output {
        PlanFormat::Json => printer.out(&serde_json::to_string_pretty(&plan)?),
        PlanFormat::Text => {
            printer.out(&plan::render(&plan, console::colors_enabled()));
            printer.note(&format!(
                "plan saved to {}; run `fleetctl apply` to carry it out",
                display(&path)
            ));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// Facts → plan. Shared with `apply`, which re-plans from the live fleet to resume.
pub async fn compute(
    inv: &Inventory,
    gathered: &Gathered,
    target: &Target,
) -> anyhow::Result<Plan> {
    let state = fleet_state(inv, gathered, "planning")?;
    let hub = hub_versions(inv, gathered).await;
    plan::plan(&state, target, &hub)
        .map_err(|refusal| anyhow::Error::new(UsageError(refusal.to_string())))
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
/// node reaches the hub; the operator's laptop may not). A failure is not
/// fatal: the plan goes on with patches unresolved and says so.
async fn hub_versions(inv: &Inventory, gathered: &Gathered) -> HubVersions {
    let first = inv.first_control_plane();
    let url = plan::sha256sums_url(&inv.hub);
    let Some(session) = gathered
        .nodes
        .iter()
        .find(|r| r.node.name == first.name)
        .and_then(|r| r.session.clone())
    else {
        return HubVersions::Unresolved(format!("{} is not reachable", first.name));
    };
    match session.exec(&remote::upgrade::fetch(&url), None).await {
        Ok(out) if out.success() => HubVersions::from_sha256sums(&out.stdout),
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
    }
}

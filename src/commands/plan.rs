//! `fleetctl plan`: gather the fleet's real state, read the hub's list of
//! images through the first control-plane node, compute the path, print it
//! and save it for `apply`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::checks::{self, CheckName, HubImage};
use crate::cli::{Global, PlanArgs, PlanFormat};
use crate::error::UsageError;
use crate::gather::{self, Gathered};
use crate::inventory::Inventory;
use crate::plan::{self, FleetState, HubVersions, Plan, WorkerStrategy};
use crate::remote;
use crate::ui::Printer;
use crate::version::TargetVersion;

pub async fn run(global: &Global, args: &PlanArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let target = args
        .target
        .clone()
        .unwrap_or(TargetVersion::Minor(inv.kubernetes_version));
    let gathered = super::gather_fleet(&inv, global, printer).await?;
    let (plan, _) = compute(
        &inv,
        &gathered,
        &target,
        &args.checks.ignore_check,
        args.workers,
    )
    .await?;
    match args.output {
        PlanFormat::Json => printer.out_json(&plan)?,
        PlanFormat::Text => printer.out(&plan::render(&plan, console::colors_enabled())),
    }
    // A blocked plan is not saved: apply would only stop at the same check.
    refuse_blocked(&plan)?;
    let path = args.out.clone().unwrap_or_else(|| plan::default_path(&inv));
    plan::save(&plan, &path)?;
    if args.output == PlanFormat::Text {
        printer.note(&format!(
            "plan saved to {}; run `fleetctl apply` to carry it out",
            display(&path)
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Exit 2, nothing saved or changed, when a check blocks a hop: each block
/// named with its hop, and how to go past it on purpose.
pub fn refuse_blocked(plan: &Plan) -> anyhow::Result<()> {
    let mut lines = Vec::new();
    let mut names = Vec::new();
    for hop in &plan.hops {
        for check in plan::blocking(&hop.checks) {
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

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// Facts → plan, with every hop's checks. Shared with `apply`, which
/// re-plans from the live fleet to resume. `ignored`: the checks whose
/// blocks the operator goes past; `workers`, how the workers take the hops.
/// Also returns the hub's images (every
/// architecture), which apply checks again before each hop.
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
    gather::check_inputs(session.as_deref(), facts, images, &nodes).await
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

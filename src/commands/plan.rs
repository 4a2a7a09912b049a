//! `fleetctl plan`: gather the fleet's real state, read the hub's list of
//! images through the first control-plane node, compute the path, print it
//! and save it for `apply`.

use std::path::Path;
use std::process::ExitCode;

use crate::cli::{Global, PlanArgs, PlanFormat};
use crate::plan;
use crate::planning;
use crate::ui::Printer;
use crate::version::TargetVersion;

pub async fn run(global: &Global, args: &PlanArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let target = args
        .target
        .clone()
        .unwrap_or(TargetVersion::Minor(inv.kubernetes_version));
    let reach = super::Reach::new(global, &inv);
    let gathered = super::gather_fleet(&inv, &reach, printer).await?;
    let (plan, _) = planning::compute(
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
    plan::refuse_blocked(&plan)?;
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

fn display(path: &Path) -> String {
    path.display().to_string()
}

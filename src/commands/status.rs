//! `fleetctl status`: gather, build the report, print it.

use std::process::ExitCode;

use crate::cli::{Global, StatusArgs, StatusFormat};
use crate::gather::Gathered;
use crate::status::{self, NodeInput, StatusReport};
use crate::ui::Printer;

pub async fn run(
    global: &Global,
    args: &StatusArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let gathered = super::gather_fleet(&inv, global, printer).await?;
    let report = report(&gathered);
    match args.output {
        StatusFormat::Json => printer.out_json(&report)?,
        StatusFormat::Table => printer.out(&status::render_table(&report)),
    }
    Ok(if gathered.all_answered() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Gathered facts → the report `status` prints (also apply's closing state).
pub fn report(gathered: &Gathered) -> StatusReport {
    let inputs = gathered
        .nodes
        .iter()
        .map(|r| NodeInput {
            name: &r.node.name,
            role: r.node.role,
            address: &r.node.address,
            facts: r.facts.as_ref().map_err(|e| format!("{e:#}")),
        })
        .collect();
    let cluster = gathered
        .cluster
        .as_ref()
        .map(|(by, c)| (by.as_str(), c))
        .map_err(|e| format!("{e:#}"));
    status::build(inputs, cluster)
}

//! `fleetctl status`: gather, build the report, print it.

use std::process::ExitCode;

use crate::cli::{Global, StatusArgs, StatusFormat};
use crate::status;
use crate::ui::Printer;

pub async fn run(
    global: &Global,
    args: &StatusArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let gathered = super::gather_fleet(&inv, global, printer).await?;
    let report = status::report(&gathered);
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

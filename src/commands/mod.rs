//! One file per subcommand, each thin: load, gather, decide, act, print.

mod apply;
mod locked;
mod plan;
mod reboot;
mod status;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, Command, Global};
use crate::gather;
use crate::inventory::{self, Inventory};
use crate::ssh;
use crate::ui::Printer;

pub async fn run(cli: Cli, printer: &Printer) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Status(args) => status::run(&cli.global, &args, printer).await,
        Command::Plan(args) => plan::run(&cli.global, &args, printer).await,
        Command::Apply(args) => apply::run(&cli.global, &args, printer).await,
        Command::Reboot(args) => reboot::run(&cli.global, &args, printer).await,
        Command::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut Cli::command(), "fleetctl", &mut out);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut buf)
                .context("rendering the man page")?;
            let _ = std::io::stdout().lock().write_all(&buf);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// SSH settings: the inventory's known_hosts policy, the operator's timeouts.
pub fn ssh_options(inv: &Inventory, global: &Global) -> ssh::Options {
    let mut opts = ssh::Options::from_inventory(inv);
    opts.connect_timeout = global.connect_timeout;
    opts
}

/// Facts from every node of the inventory, with the transport's warnings
/// (host key recorded, checking off) shown to the operator.
pub async fn gather_fleet(
    inv: &Inventory,
    global: &Global,
    printer: &Printer,
) -> anyhow::Result<gather::Gathered> {
    let gathered = gather::gather(inv, &ssh_options(inv, global), global.parallel.into()).await?;
    for w in &gathered.warnings {
        printer.warn(w);
    }
    Ok(gathered)
}

/// The inventory named by `-i`/`$FLEETCTL_INVENTORY`, or `./inventory.yaml`.
pub fn load_inventory(global: &Global) -> anyhow::Result<Inventory> {
    let path = global
        .inventory
        .clone()
        .unwrap_or_else(|| PathBuf::from("inventory.yaml"));
    inventory::load(&path)
}

//! One file per subcommand, each thin: load, gather, decide, act, print.

mod apply;
mod fleet_clocks;
mod locked;
mod plan;
mod reboot;
#[cfg(test)]
mod report_rules;
mod rollback;
mod run_config;
mod status;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, Command, Global};
use crate::gather;
use crate::inventory::{self, Inventory};
use crate::ui::Printer;

use run_config::{HopFindings, Reach, RunConfig};

pub async fn run(cli: Cli, printer: &Printer) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Status(args) => status::run(&cli.global, &args, printer).await,
        Command::Plan(args) => plan::run(&cli.global, &args, printer).await,
        Command::Apply(args) => apply::run(&cli.global, &args, printer).await,
        Command::Reboot(args) => reboot::run(&cli.global, &args, printer).await,
        Command::Rollback(args) => rollback::run(&cli.global, &args, printer).await,
        Command::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            clap_complete::generate(shell, &mut Cli::command(), "fleetctl", &mut out);
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            let pages = man_pages()?;
            let mut out = std::io::stdout().lock();
            match dir {
                None => {
                    if let Some((_, root)) = pages.first() {
                        let _ = out.write_all(root);
                    }
                }
                Some(dir) => {
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                    for (name, roff) in &pages {
                        let path = dir.join(name);
                        std::fs::write(&path, roff).with_context(|| {
                            format!(
                                "writing the man page {}: is the directory writable?",
                                path.display()
                            )
                        })?;
                        let _ = writeln!(out, "{}", path.display());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Every man page as (file name, roff): `fleetctl.1` first, then a
/// `fleetctl-<command>.1` for each command, because the root page's COMMANDS
/// section refers to `fleetctl-<command>(1)` for each of them.
pub fn man_pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    // Without the implicit `help` command: it would be listed as
    // fleetctl-help(1), a page nobody needs (`--help` is on every page).
    let mut cli = Cli::command().disable_help_subcommand(true);
    // Building names the subcommands `fleetctl-<command>` for their pages.
    cli.build();
    let mut pages = Vec::new();
    add_pages(cli, &mut pages)?;
    Ok(pages)
}

fn add_pages(cmd: clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    let subcommands: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    let man = clap_mangen::Man::new(cmd);
    let mut roff = Vec::new();
    man.render(&mut roff)
        .with_context(|| format!("rendering the man page {}", man.get_filename()))?;
    pages.push((man.get_filename(), roff));
    for sub in subcommands {
        add_pages(sub, pages)?;
    }
    Ok(())
}

/// Facts from every node of the inventory, with the transport's warnings
/// (host key recorded, checking off) shown to the operator.
pub async fn gather_fleet(
    inv: &Inventory,
    reach: &Reach,
    printer: &Printer,
) -> anyhow::Result<gather::Gathered> {
    let progress = crate::ui::Progress::nodes(
        printer.interactive,
        "gathering facts",
        inv.nodes.len() as u64,
    );
    let gathered = gather::gather(inv, &reach.ssh, reach.parallel, &progress).await?;
    for w in &gathered.warnings {
        printer.warn(w);
    }
    for r in &gathered.retried {
        printer.debug(r);
    }
    if let Ok((_, cluster)) = &gathered.cluster {
        let disagree = gather::role_disagreements(inv, cluster);
        if !disagree.is_empty() {
            return Err(crate::usage!(
                "the inventory and the cluster disagree on which nodes are control planes; \
                 nothing was changed:\n  - {}",
                disagree.join("\n  - ")
            ));
        }
    }
    for p in &inv.provenance {
        printer.debug(&format!(
            "{}: {} {} from {}",
            p.node, p.setting, p.value, p.from
        ));
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The names in `fleetctl-<command>(1)` references, roff's `\-` read as `-`.
    fn references(roff: &str) -> Vec<String> {
        let text = roff.replace("\\-", "-");
        let mut found = Vec::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("fleetctl-") {
            let after = &rest[at..];
            let name_len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(after.len());
            let (name, tail) = after.split_at(name_len);
            if tail.starts_with("(1)") {
                found.push(name.to_string());
            }
            rest = &after[name_len..];
        }
        found
    }

    #[test]
    fn every_page_a_man_page_refers_to_is_generated() {
        let pages = man_pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names[0], "fleetctl.1");
        let mut referenced = 0;
        for (page, roff) in &pages {
            let roff = String::from_utf8_lossy(roff);
            for name in references(&roff) {
                referenced += 1;
                assert!(
                    names.contains(&format!("{name}.1").as_str()),
                    "{page} refers to {name}(1), which is not generated; pages: {names:?}"
                );
            }
        }
        // Not vacuous: the root page lists every command.
        assert!(referenced >= 6, "{referenced} references");
        for command in [
            "status",
            "plan",
            "apply",
            "reboot",
            "rollback",
            "completions",
            "man",
        ] {
            assert!(
                names.contains(&format!("fleetctl-{command}.1").as_str()),
                "{names:?}"
            );
        }
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
    }

    #[test]
    fn command_pages_carry_their_own_options() {
        let pages = man_pages().unwrap();
        let status = pages
            .iter()
            .find(|(name, _)| name == "fleetctl-status.1")
            .map(|(_, roff)| String::from_utf8_lossy(roff).into_owned())
            .unwrap();
        assert!(status.contains(".TH fleetctl-status 1"), "{status}");
        assert!(status.contains("\\-\\-output"), "{status}");
    }

    #[test]
    fn man_dir_writes_every_page() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("man1");
        let cli = Cli::try_parse_from(["fleetctl", "man", "--dir", out.to_str().unwrap()]).unwrap();
        let printer = Printer::new(true, 0);
        let code = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(run(cli, &printer))
            .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        for (name, roff) in man_pages().unwrap() {
            assert_eq!(std::fs::read(out.join(&name)).unwrap(), roff, "{name}");
        }
    }
}

//! `fleetctl-audit DB CONFIG LOCKFILE`: Cargo.lock against a RustSec
//! advisory database on disk, as cargo-audit does it (cargo-audit's report
//! is this library's `Report::generate`), without cargo-audit's git and
//! HTTP stack: CI cannot fetch the database, so a snapshot ships beside
//! this file, and what is left to build is a sixth of cargo-audit.
//!
//! Exit 0: nothing found. Exit 1: a vulnerability, or an informational
//! advisory of a kind CONFIG asks for (unmaintained, unsound, notice), not
//! accepted there. Exit 2: the audit could not run.

use std::path::Path;
use std::process::ExitCode;

use rustsec::advisory::{Id, Informational, Metadata};
use rustsec::report::{Report, Settings};
use rustsec::{Database, Lockfile, package::Package};
use serde::Deserialize;

/// CONFIG (`audit.toml`): the advisories accepted, each with its reason in
/// a comment, and the informational kinds that fail the audit. Unknown
/// keys are refused: a setting this audit does not honour must not look
/// as if it did.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    advisories: Advisories,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Advisories {
    #[serde(default)]
    ignore: Vec<Id>,
    #[serde(default)]
    informational_warnings: Vec<Informational>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, config, lockfile] = args.as_slice() else {
        eprintln!("usage: fleetctl-audit DATABASE_DIR AUDIT_TOML CARGO_LOCK");
        return ExitCode::from(2);
    };
    match audit(Path::new(db), Path::new(config), Path::new(lockfile)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("fleetctl-audit: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints the findings; `Ok(true)` when there are none.
fn audit(db: &Path, config: &Path, lockfile: &Path) -> Result<bool, String> {
    let text = std::fs::read_to_string(config)
        .map_err(|e| format!("cannot read {}: {e}", config.display()))?;
    let config: Config = toml::from_str(&text).map_err(|e| format!("{}: {e}", config.display()))?;
    let database = Database::open(db)
        .map_err(|e| format!("cannot open the advisory database {}: {e}", db.display()))?;
    let advisories = database.iter().count();
    if advisories == 0 {
        // An empty directory is a database with nothing in it: every
        // lockfile would pass.
        return Err(format!("{} holds no advisories", db.display()));
    }
    let lock =
        Lockfile::load(lockfile).map_err(|e| format!("cannot read {}: {e}", lockfile.display()))?;
    let settings = Settings {
        ignore: config.advisories.ignore.clone(),
        informational_warnings: config.advisories.informational_warnings,
        ..Settings::default()
    };
    let report = Report::generate(&database, &lock, &settings);

    let mut findings = 0;
    for v in &report.vulnerabilities.list {
        findings += 1;
        print_finding("vulnerability", &v.advisory, &v.package, &lock);
    }
    for (kind, warnings) in &report.warnings {
        for w in warnings {
            findings += 1;
            match &w.advisory {
                Some(a) => print_finding(&kind.to_string(), a, &w.package, &lock),
                None => println!("{kind}: {} {}", w.package.name, w.package.version),
            }
        }
    }
    // An accepted advisory that no longer matches: its reason in
    // audit.toml is stale.
    for id in &config.advisories.ignore {
        let matches = database
            .get(id)
            .is_some_and(|a| lock.packages.iter().any(|p| a.metadata.package == p.name));
        if !matches {
            println!("note: {id} is accepted in audit.toml but no package here has it: remove it");
        }
    }
    println!(
        "{findings} finding(s) in {} ({} packages) against {advisories} advisories; accepted: {}",
        lockfile.display(),
        lock.packages.len(),
        match config.advisories.ignore.is_empty() {
            true => "none".to_string(),
            false => config
                .advisories
                .ignore
                .iter()
                .map(Id::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }
    );
    Ok(findings == 0)
}

/// One finding, with the packages that pull it in (cargo-audit draws the
/// whole tree; one level says which dependency to look at).
fn print_finding(kind: &str, a: &Metadata, p: &Package, lock: &Lockfile) {
    println!("{kind}: {} {} {}: {}", a.id, p.name, p.version, a.title);
    let by: Vec<String> = lock
        .packages
        .iter()
        .filter(|q| {
            q.dependencies
                .iter()
                .any(|d| d.name == p.name && d.version == p.version)
        })
        .map(|q| format!("{} {}", q.name, q.version))
        .collect();
    if !by.is_empty() {
        println!("  required by {}", by.join(", "));
    }
    if let Some(url) = &a.url {
        println!("  {url}");
    }
    println!("  https://rustsec.org/advisories/{}", a.id);
}

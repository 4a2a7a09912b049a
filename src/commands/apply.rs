//! `fleetctl apply`, as the list of what it does:
//!
//! 1. **load** the saved plan: the operator's approval of a path;
//! 2. **lock**: Kured's reboot lock (or fleetctl's own), taken before the
//!    fleet is looked at, so nothing changes between the check and the run;
//! 3. **gather and re-check**: plan again from the live fleet with the saved
//!    plan's target (that is how a rerun resumes) and refuse a stale plan;
//! 4. **confirm**;
//! 5. **the hops**, each a list of phases in kubeadm's order (`steps::hop`);
//! 6. **release** the lock, on every path, and say where things stand.
//!
//! `--dry-run` stops after 3 and prints every command instead, without the lock.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use crate::checks::{HubImage, Verdict};
use crate::cli::{ApplyArgs, Global};
use crate::gather::Gathered;
use crate::inventory::Inventory;
use crate::plan::{self, Plan};
use crate::planning;
use crate::steps::journal::Journal;
use crate::steps::script::{self, Shape};
use crate::steps::{Interrupted, Settings, execute};

use super::locked::{RunHandles, Script, confirm, recheck_under_lock, run_script, run_under_lock};
use super::{HopFindings, RunConfig};
use crate::ui::Printer;
use crate::usage;

pub async fn run(global: &Global, args: &ApplyArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let plan_path = args
        .plan
        .clone()
        .unwrap_or_else(|| plan::default_path(&inv));
    let saved = load(&plan_path)?;
    let config = RunConfig::apply(global, args, &inv)?;
    if config.dry_run {
        let gathered = super::gather_fleet(&inv, &config.reach, printer).await?;
        let (fresh, hub_images) = replan(&inv, printer, &saved, &config, &gathered).await?;
        if fresh.hops.is_empty() {
            printer.note("nothing to do: the fleet already matches the plan's target");
        } else {
            let settings = config.settings(findings(&fresh, hub_images, None));
            let tasks = script::of_plan(&fresh, &inv, shape(&settings));
            printer.out(&execute::dry_run(&tasks, &fresh, &inv, &settings));
            plan::refuse_blocked(&fresh)?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    run_under_lock(&inv, &config, printer, async |locked| {
        let run = Run {
            inv: &inv,
            config: &config,
            printer,
            journal: &locked.journal,
            plan_path: &plan_path,
        };
        run.locked(&saved, locked).await
    })
    .await
}

/// The saved plan, or exit 2 saying to plan first.
fn load(path: &Path) -> anyhow::Result<Plan> {
    if !path.exists() {
        return Err(usage!(
            "no saved plan at {}: run `fleetctl plan` first",
            path.display()
        ));
    }
    let saved = plan::load(path).map_err(|e| usage!("{e:#}"))?;
    plan::refuse_bad_digests(&saved, path)?;
    Ok(saved)
}

/// Plans again from the `gathered` fleet with the saved plan's target (the
/// checks with it) and refuses a plan the fleet has moved away from:
/// apply's part of the re-check under the lock, and its dry run.
async fn replan(
    inv: &Inventory,
    printer: &Printer,
    saved: &Plan,
    config: &RunConfig,
    gathered: &Gathered,
) -> anyhow::Result<(Plan, Option<Vec<HubImage>>)> {
    let ignored = plan::ignored_checks(saved, &config.ignore_checks);
    let (mut fresh, hub_images) = planning::compute(
        inv,
        gathered,
        &saved.requested,
        &ignored,
        plan::worker_strategy(saved, config.workers),
    )
    .await?;
    if let Some(reason) = plan::keep_saved_patches(saved, &mut fresh) {
        printer.warn(&format!(
            "could not read the hub's image list ({reason}); going on with the patches the plan stages \
             and the sha256s it recorded. Downloading fails, before any kubeadm step or reboot, if the \
             nodes cannot reach the hub either"
        ));
    }
    plan::refuse_stale(saved, &fresh)?;
    plan::refuse_unverifiable(&fresh)?;
    Ok((fresh, hub_images))
}

/// What the locked part of apply works with.
struct Run<'a> {
    inv: &'a Inventory,
    config: &'a RunConfig,
    printer: &'a Printer,
    journal: &'a Arc<Journal>,
    plan_path: &'a PathBuf,
}

impl Run<'_> {
    /// Everything between taking the lock and giving it back.
    async fn locked(&self, saved: &Plan, locked: &RunHandles) -> anyhow::Result<ExitCode> {
        let reach = &self.config.reach;
        let rechecked = recheck_under_lock(self.inv, reach, self.printer, async |gathered| {
            let (fresh, hub_images) =
                replan(self.inv, self.printer, saved, self.config, gathered).await?;
            super::fleet_clocks::judge(self.inv, gathered, &locked.stop, self.printer)?;
            let judged = Instant::now();
            if fresh.hops.is_empty() {
                self.printer.out(&plan::summary(&fresh));
                self.printer
                    .note("nothing to do: the fleet already matches the plan's target");
                plan::save(&fresh, self.plan_path)?;
                return Ok(None);
            }
            Ok(Some((fresh, hub_images, judged)))
        })
        .await?;
        let Some(((fresh, hub_images, judged), gathered)) = rechecked else {
            return Ok(ExitCode::SUCCESS);
        };
        self.printer
            .out(&plan::render(&fresh, console::colors_enabled()));
        plan::refuse_blocked(&fresh)?;
        for name in &fresh.ignored_checks {
            self.journal.event(
                "check-ignored",
                None,
                &format!("the operator goes past `{name}` (--ignore-check)"),
            );
        }
        journal_checks(self.journal, &fresh);
        confirm(
            self.config.yes,
            "Apply this plan? Nodes will be drained and rebooted one at a time.",
        )?;
        if locked.stop.requested() {
            return Err(anyhow::Error::new(Interrupted(
                "stopped before anything was changed".into(),
            )));
        }
        // Asked at a prompt, the operator may have taken their time: the
        // first hop's checks are only trusted as fresh without one.
        let judged = self.config.yes.then_some(judged);
        self.hops(fresh, &gathered, hub_images, judged, locked)
            .await
    }

    async fn hops(
        &self,
        fresh: Plan,
        gathered: &Gathered,
        hub_images: Option<Vec<HubImage>>,
        checks_judged: Option<Instant>,
        locked: &RunHandles,
    ) -> anyhow::Result<ExitCode> {
        let settings = self
            .config
            .settings(findings(&fresh, hub_images, checks_judged));
        let tasks = script::of_plan(&fresh, self.inv, shape(&settings));
        let total = fresh.steps().count() as u64;
        plan::save(&fresh, self.plan_path)?;
        let script = Script {
            tasks,
            plan: fresh,
            plan_path: Some(self.plan_path.clone()),
            settings,
            total,
            done: format!("{} nodes upgraded", self.inv.nodes.len()),
            offline: false,
        };
        run_script(
            self.inv,
            &self.config.reach,
            self.printer,
            locked,
            gathered,
            script,
        )
        .await
    }
}

/// What the re-check found that the steps judge with.
fn findings(
    fresh: &Plan,
    hub_images: Option<Vec<HubImage>>,
    checks_judged: Option<Instant>,
) -> HopFindings {
    HopFindings {
        ignored_checks: fresh.ignored_checks.clone(),
        hub_images,
        checks_judged,
    }
}

/// What shapes the script beyond the plan.
fn shape(settings: &Settings) -> Shape {
    Shape {
        max_unavailable: settings.max_unavailable,
        soak: !settings.pace.soak.is_zero(),
        etcd_snapshot: settings.etcd_backups.is_some(),
    }
}

/// What the re-check found, in the journal: every check that did not pass.
fn journal_checks(journal: &Journal, plan: &Plan) {
    for hop in &plan.hops {
        for check in &hop.checks {
            let kind = match check.verdict {
                Verdict::Pass => continue,
                Verdict::Warn => "check-warn",
                Verdict::Ignored => "check-ignored",
                Verdict::Block => "check-block",
            };
            let mut text = format!("hop to {}: {}: {}", hop.minor, check.name, check.summary);
            for detail in &check.details {
                text.push_str(&format!("\n      - {detail}"));
            }
            journal.event(kind, None, &text);
        }
    }
}

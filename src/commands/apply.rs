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

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;

use crate::checks::{CheckName, HubImage, Verdict};
use crate::cli::{ApplyArgs, Global};
use crate::error::UsageError;
use crate::gather::Gathered;
use crate::inventory::Inventory;
use crate::plan::{self, Action, Component, Plan, Warning, is_sha256};
use crate::ssh;
use crate::steps::journal::Journal;
use crate::steps::runner::Remote;
use crate::steps::script::{self, Shape};
use crate::steps::{Apply, Interrupted, Settings, Stop, etcd, execute, render};

use super::lock_run::{LockRequest, LockedRun, run_locked, take_lock};
use super::locked::{confirm, failure_report, fleet_now, open_journal, spawn_interrupt_handler};
use crate::ui::{Printer, Progress};
use crate::usage;

pub async fn run(global: &Global, args: &ApplyArgs, printer: &Printer) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let plan_path = args
        .plan
        .clone()
        .unwrap_or_else(|| plan::default_path(&inv));
    let saved = load(&plan_path)?;
    refuse_insecure_hub(&inv.hub, args.allow_insecure_hub)?;
    if args.roll.dry_run {
        let (fresh, _, hub_images) = recheck(&inv, global, printer, &saved, args).await?;
        if fresh.hops.is_empty() {
            printer.note("nothing to do: the fleet already matches the plan's target");
        } else {
            let settings = settings(&inv, global, args, &fresh, hub_images, None)?;
            let tasks = script::of_plan(&fresh, &inv, shape(&settings));
            printer.out(&render::render(&tasks, &fresh, &inv, &settings));
            super::plan::refuse_blocked(&fresh)?;
        }
        return Ok(ExitCode::SUCCESS);
    }

    super::refuse_outside_window(&super::pacing(&inv, &args.roll)?, &args.roll)?;
    let stop = Stop::default();
    let second = Arc::new(tokio::sync::Notify::new());
    spawn_interrupt_handler(stop.clone(), second.clone(), printer.clone())?;
    let journal = open_journal(&inv, printer)?;

    let request = LockRequest::new(&inv, &args.roll);
    let held = take_lock(&inv, global, &request, &journal, printer, &stop).await?;
    let run = Run {
        inv: &inv,
        global,
        args,
        printer,
        journal: &journal,
        plan_path: &plan_path,
    };
    // Under catch_unwind: not even a bug in fleetctl leaves the lock held.
    let outcome = AssertUnwindSafe(run.locked(&saved, stop, second))
        .catch_unwind()
        .await;
    held.release(printer).await;
    if let Err(e) = journal.check() {
        printer.warn(&format!("the journal is incomplete: {e:#}"));
    }
    outcome.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
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
    refuse_bad_digests(&saved, path)?;
    Ok(saved)
}

/// Every sha256 the saved plan carries is 64 hexadecimal characters: a
/// digest is only ever compared by `sha256sum -c --strict`, which refuses
/// anything else, and a hand-edited plan must not turn a check into a no-op.
fn refuse_bad_digests(saved: &Plan, path: &Path) -> anyhow::Result<()> {
    let bad: Vec<String> = saved
        .hops
        .iter()
        .filter_map(|hop| {
            let sum = hop.sha256.as_deref()?;
            (!is_sha256(sum)).then(|| format!("hop to {}: `{sum}`", hop.minor))
        })
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(usage!(
        "{} records a sha256 that is not 64 hexadecimal characters ({}): it cannot vouch for an \
         image. Nothing was changed; run `fleetctl plan` again",
        path.display(),
        bad.join(", ")
    ))
}

/// An `http://` hub: anyone on the path can serve another image and the
/// `SHA256SUMS` that matches it, so the sums fleetctl reads vouch for
/// nothing. Allowed only on request (`--allow-insecure-hub`).
fn refuse_insecure_hub(hub: &str, allowed: bool) -> anyhow::Result<()> {
    if allowed || !hub.starts_with("http://") {
        return Ok(());
    }
    Err(usage!(
        "the hub {hub} is plain HTTP: the images and the SHA256SUMS that vouches for them travel \
         unprotected, so whoever sits on the path chooses the kubeadm and kubelet your nodes run. \
         Nothing was changed. Use an https:// hub in the inventory's `sysupdate: hub:`, or pass \
         --allow-insecure-hub if the network between the nodes and the hub is yours"
    ))
}

/// The checks whose blocks the operator goes past: those the plan was made
/// with, and those given to apply.
fn ignored_checks(saved: &Plan, args: &ApplyArgs) -> Vec<CheckName> {
    let mut ignored = saved.ignored_checks.clone();
    for name in &args.checks.ignore_check {
        if !ignored.contains(name) {
            ignored.push(*name);
        }
    }
    ignored
}

/// The saved plan's worker strategy, unless apply is told another.
fn workers(saved: &Plan, args: &ApplyArgs) -> plan::WorkerStrategy {
    args.workers.unwrap_or(saved.workers.strategy)
}

/// Gathers the fleet, plans again with the saved plan's target (the checks
/// with it) and refuses a plan the fleet has moved away from.
async fn recheck(
    inv: &Inventory,
    global: &Global,
    printer: &Printer,
    saved: &Plan,
    args: &ApplyArgs,
) -> anyhow::Result<(Plan, Gathered, Option<Vec<HubImage>>)> {
    let gathered = super::gather_fleet(inv, global, printer).await?;
    let ignored = ignored_checks(saved, args);
    let (mut fresh, hub_images) = super::plan::compute(
        inv,
        &gathered,
        &saved.requested,
        &ignored,
        workers(saved, args),
    )
    .await?;
    if let Some(reason) = keep_saved_patches(saved, &mut fresh) {
        printer.warn(&format!(
            "could not read the hub's image list ({reason}); going on with the patches the plan stages \
             and the sha256s it recorded. Downloading fails, before any kubeadm step or reboot, if the \
             nodes cannot reach the hub either"
        ));
    }
    refuse_stale(saved, &fresh)?;
    refuse_unverifiable(&fresh)?;
    Ok((fresh, gathered, hub_images))
}

/// What the locked part of apply works with.
struct Run<'a> {
    inv: &'a Inventory,
    global: &'a Global,
    args: &'a ApplyArgs,
    printer: &'a Printer,
    journal: &'a Arc<Journal>,
    plan_path: &'a PathBuf,
}

impl Run<'_> {
    /// Everything between taking the lock and giving it back.
    async fn locked(
        &self,
        saved: &Plan,
        stop: Stop,
        second: Arc<tokio::sync::Notify>,
    ) -> anyhow::Result<ExitCode> {
        let (fresh, gathered, hub_images) =
            recheck(self.inv, self.global, self.printer, saved, self.args).await?;
        let judged = Instant::now();
        if fresh.hops.is_empty() {
            self.printer.out(&plan::summary(&fresh));
            self.printer
                .note("nothing to do: the fleet already matches the plan's target");
            plan::save(&fresh, self.plan_path)?;
            return Ok(ExitCode::SUCCESS);
        }
        self.printer
            .out(&plan::render(&fresh, console::colors_enabled()));
        super::plan::refuse_blocked(&fresh)?;
        for name in &fresh.ignored_checks {
            self.journal.event(
                "check-ignored",
                None,
                &format!("the operator goes past `{name}` (--ignore-check)"),
            );
        }
        journal_checks(self.journal, &fresh);
        confirm(
            self.args.roll.yes,
            "Apply this plan? Nodes will be drained and rebooted one at a time.",
        )?;
        if stop.requested() {
            return Err(anyhow::Error::new(Interrupted(
                "stopped before anything was changed".into(),
            )));
        }
        // Asked at a prompt, the operator may have taken their time: the
        // first hop's checks are only trusted as fresh without one.
        let judged = self.args.roll.yes.then_some(judged);
        self.hops(fresh, &gathered, hub_images, judged, stop, second)
            .await
    }

    async fn hops(
        &self,
        fresh: Plan,
        gathered: &Gathered,
        hub_images: Option<Vec<HubImage>>,
        checks_judged: Option<Instant>,
        stop: Stop,
        second: Arc<tokio::sync::Notify>,
    ) -> anyhow::Result<ExitCode> {
        let mut remotes = BTreeMap::new();
        for r in &gathered.nodes {
            if let Some(s) = &r.session {
                remotes.insert(
                    r.node.name.clone(),
                    Remote::new(s.clone(), self.journal.clone()),
                );
            }
        }
        let settings = settings(
            self.inv,
            self.global,
            self.args,
            &fresh,
            hub_images,
            checks_judged,
        )?;
        let tasks = script::of_plan(&fresh, self.inv, shape(&settings));
        let total = fresh.steps().count();
        // Echoed commands and a redrawn bar do not mix: -v prints plain lines.
        let progress = Progress::new(
            self.printer.interactive && self.printer.verbose() == 0,
            total as u64,
        );
        plan::save(&fresh, self.plan_path)?;
        let mut apply = Apply::new(
            self.inv,
            settings,
            remotes,
            &progress,
            stop,
            Some(self.plan_path.clone()),
            fresh,
        );
        let ledger = apply.ledger.clone();
        let lease = apply.stop.clone();
        let LockedRun {
            result,
            at_once: twice,
        } = run_locked(&lease, &second, &ledger, execute::run(&mut apply, &tasks)).await;
        progress.finish();
        match result {
            Ok(()) => {
                self.printer.note(&format!(
                    "done: {} nodes upgraded; journal {}",
                    self.inv.nodes.len(),
                    self.journal.path().display()
                ));
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                let ledger = ledger.lock().map(|l| l.clone()).unwrap_or_default();
                let mut report = failure_report(&ledger, &e, self.journal.path(), "fleetctl apply");
                if !twice {
                    report.insert_str(
                        0,
                        &format!(
                            "the fleet now:\n{}\n",
                            fleet_now(self.inv, self.global).await
                        ),
                    );
                }
                self.printer.note(&report);
                Err(e)
            }
        }
    }
}

/// What the run works with beyond the plan, for the run and its dry run alike.
fn settings(
    inv: &Inventory,
    global: &Global,
    args: &ApplyArgs,
    fresh: &Plan,
    hub_images: Option<Vec<HubImage>>,
    checks_judged: Option<Instant>,
) -> anyhow::Result<Settings> {
    let targets = ssh::resolve_all(inv)
        .map_err(|e| usage!("{e:#}"))?
        .into_iter()
        .map(|t| (t.node.clone(), t))
        .collect();
    Ok(Settings {
        node_timeout: args.roll.node_timeout,
        drain_timeout: args.roll.drain_timeout,
        ssh: super::ssh_options(inv, global),
        targets,
        parallel: global.parallel.into(),
        max_unavailable: args.roll.max_unavailable,
        ignored_checks: fresh.ignored_checks.clone(),
        hub_images,
        etcd_backups: (!args.skip_etcd_snapshot).then(|| etcd::backups_dir(&inv.state_dir())),
        etcd_snapshot_max: args.etcd_snapshot_max,
        checks_judged,
        pace: super::pacing(inv, &args.roll)?,
        on_failure: args.on_failure,
    })
}

/// What shapes the script beyond the plan.
fn shape(settings: &Settings) -> Shape {
    Shape {
        max_unavailable: settings.max_unavailable,
        soak: !settings.pace.soak.is_zero(),
        etcd_snapshot: settings.etcd_backups.is_some(),
    }
}

/// Every hop that downloads, stages or runs the kubeadm of a kubernetes
/// image knows the sha256 fleetctl checks it against itself (its
/// [`crate::plan::Image`]: the steps take nothing else). sysupdate's
/// own check reads the same `SHA256SUMS` over the same connection, so it
/// is never enough on its own: with no single sum (the hub lists two, or
/// it cannot be read and the saved plan recorded none) apply does not start.
fn refuse_unverifiable(fresh: &Plan) -> anyhow::Result<()> {
    let unread = fresh.warnings.iter().find_map(|w| match w {
        Warning::HubUnresolved { reason } => Some(reason.clone()),
        _ => None,
    });
    let lines: Vec<String> = fresh
        .hops
        .iter()
        .filter(|hop| hop.image().is_none() && uses_image(hop))
        .map(|hop| {
            let what = hop.version.as_ref().map_or_else(
                || format!("the {} image", hop.minor),
                |v| format!("kubernetes {v}"),
            );
            match &unread {
                Some(reason) => format!(
                    "{what}: the hub's SHA256SUMS could not be read ({reason}) and the saved plan \
                     records no sha256 for it"
                ),
                None => format!("{what}: the hub's SHA256SUMS gives no single sha256 for it"),
            }
        })
        .collect();
    if lines.is_empty() {
        return Ok(());
    }
    Err(usage!(
        "fleetctl cannot verify an image this plan needs:\n  - {}\nNothing was changed. Fix the hub \
         (one sha256 per image, reachable from the nodes), then run `fleetctl plan` and \
         `fleetctl apply` again",
        lines.join("\n  - ")
    ))
}

/// The hop downloads, stages or runs the kubeadm of its kubernetes image.
fn uses_image(hop: &crate::plan::Hop) -> bool {
    hop.steps().any(|s| {
        matches!(
            s.action,
            Action::Download { .. }
                | Action::UpgradeApply { .. }
                | Action::UpgradeNode { .. }
                | Action::Stage {
                    component: Component::Kubernetes,
                    ..
                }
        )
    })
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

/// The hub unreadable now is not the hub changed: the saved plan's patches
/// (the ones the operator read) still hold, and downloading checks exactly
/// those rather than whatever the hub serves once it is back. Returns why
/// the hub could not be read when that was the case.
fn keep_saved_patches(saved: &Plan, fresh: &mut Plan) -> Option<String> {
    let at = fresh
        .warnings
        .iter()
        .position(|w| matches!(w, Warning::HubUnresolved { .. }))?;
    let mut kept = false;
    for hop in fresh.hops.iter_mut().filter(|h| h.version.is_none()) {
        let Some(v) = saved
            .hops
            .iter()
            .find(|h| h.minor == hop.minor)
            .and_then(|h| h.version.clone())
        else {
            continue;
        };
        for step in hop.phases.iter_mut().flat_map(|p| p.steps.iter_mut()) {
            match &mut step.action {
                Action::Download { expect, .. }
                | Action::Stage {
                    component: Component::Kubernetes,
                    expect,
                    ..
                } if expect.is_none() => *expect = Some(v.clone()),
                Action::UpgradeApply { version, .. } | Action::UpgradeNode { version, .. }
                    if version.is_none() =>
                {
                    *version = Some(v.clone())
                }
                _ => {}
            }
        }
        if hop.sha256.is_none() {
            hop.sha256 = saved
                .hops
                .iter()
                .find(|h| h.minor == hop.minor)
                .and_then(|h| h.sha256.clone());
        }
        hop.version = Some(v);
        kept = true;
    }
    // Without a saved patch either, the plan's own warning still tells the truth.
    if !kept {
        return None;
    }
    match fresh.warnings.remove(at) {
        Warning::HubUnresolved { reason } => Some(reason),
        _ => None,
    }
}

/// The saved plan still describes this fleet, apart from the nodes apply
/// itself was changing; and the hub still stages the same patches.
fn refuse_stale(saved: &Plan, fresh: &Plan) -> anyhow::Result<()> {
    let mut lines = saved.fingerprint.diff(&fresh.fingerprint);
    for hop in &fresh.hops {
        if let Some(old) = saved.hops.iter().find(|h| h.minor == hop.minor)
            && old.version.is_some()
            && old.version != hop.version
        {
            lines.push(format!(
                "hub: the newest {} patch is now {}, the plan stages {}",
                hop.minor,
                hop.version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |v| v.to_string()),
                old.version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), |v| v.to_string())
            ));
        }
    }
    for hop in &fresh.hops {
        if let Some(old) = saved.hops.iter().find(|h| h.version == hop.version)
            && let (Some(was), None) = (&old.sha256, &hop.sha256)
        {
            lines.push(format!(
                "hub: SHA256SUMS no longer gives one sha256 for kubernetes {} (the plan recorded \
                 {was}): the list changed since the plan",
                hop.version
                    .as_ref()
                    .map_or_else(|| hop.minor.to_string(), |v| v.to_string())
            ));
        }
        if let Some(old) = saved.hops.iter().find(|h| h.version == hop.version)
            && let (Some(was), Some(is)) = (&old.sha256, &hop.sha256)
            && was != is
        {
            lines.push(format!(
                "hub: the sha256 of kubernetes {} changed since the plan ({was} → {is}): the image \
                 was replaced",
                hop.version
                    .as_ref()
                    .map_or_else(|| hop.minor.to_string(), |v| v.to_string())
            ));
        }
    }
    if lines.is_empty() {
        return Ok(());
    }
    Err(anyhow::Error::new(UsageError(format!(
        "the plan is stale: the fleet changed since it was made:\n  - {}\nRun `fleetctl plan` again, read it, then `fleetctl apply`",
        lines.join("\n  - ")
    ))))
}

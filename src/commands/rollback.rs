//! `fleetctl rollback NODE…`: each named node back to the kubernetes image
//! it kept (`crate::plan::rollbacks` decides which, or refuses), one node at
//! a time, control planes first: its sysupdate config pinned to that
//! image's minor, its symlink pointed at it, then drained, rebooted, waited
//! for and uncordoned, with apply's gates, lock, journal, Ctrl-C and report.
//! A refusal of any node touches nothing. When the API answers through no
//! control plane, `without_api` decides instead.

use std::process::ExitCode;

use crate::cli::{Global, RollbackArgs};
use crate::inventory::Role;
use crate::plan::{self, Rollback};
use crate::planning;
use crate::steps::{execute, script};
use crate::ui::Printer;
use crate::usage;

use super::locked::{Script, confirm, recheck_under_lock, run_script, run_under_lock};
use super::{HopFindings, RunConfig};

mod without_api;

pub async fn run(
    global: &Global,
    args: &RollbackArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let config = RunConfig::rollback(global, args, &inv)?;
    let (chosen, state) = {
        // What to ask the operator about; decided again under the lock.
        let gathered = super::gather_fleet(&inv, &config.reach, printer).await?;
        if let Err(api) = &gathered.cluster {
            // No API through any control plane: no lock, no drain; only
            // a control plane whose own API server is down can go back.
            return without_api::run(&inv, &config, &args.nodes, printer, &gathered, api).await;
        }
        let state = planning::fleet_state(&inv, &gathered, "rolling back")?;
        (decide(&state, &args.nodes)?, state)
    };
    let settings = config.settings(HopFindings::default());
    if config.dry_run {
        let plan = plan::fixed_plan(
            &inv,
            &state,
            chosen.iter().map(plan::rollback_hop).collect(),
        );
        let tasks = script::of_rollbacks(&plan);
        printer.out(&execute::dry_run(&tasks, &plan, &inv, &settings));
        return Ok(ExitCode::SUCCESS);
    }
    printer.out(&describe(&chosen));
    confirm(
        config.yes,
        "Roll these nodes back? Each is drained and rebooted, one at a time.",
    )?;

    run_under_lock(&inv, &config, printer, async |locked| {
        // The operator said yes to exactly these images.
        let rechecked = recheck_under_lock(&inv, &config.reach, printer, async |gathered| {
            let state = planning::fleet_state(&inv, gathered, "rolling back")?;
            let fresh = decide(&state, &args.nodes)?;
            if fresh != chosen {
                anyhow::bail!(
                    "the fleet changed between the confirmation and taking the lock: {}. \
                     Nothing was rolled back; run `fleetctl rollback` again to see and confirm \
                     what it does now",
                    describe(&fresh).trim_end().replace('\n', "; ")
                );
            }
            Ok(Some((fresh, state)))
        })
        .await?;
        // decide refuses an empty rollback, so the re-check always goes on.
        let Some(((fresh, state), gathered)) = rechecked else {
            return Ok(ExitCode::SUCCESS);
        };
        let plan = plan::fixed_plan(&inv, &state, fresh.iter().map(plan::rollback_hop).collect());
        let tasks = script::of_rollbacks(&plan);
        for r in &fresh {
            locked
                .journal
                .event("rollback", Some(&r.node), &r.from_to());
        }
        let script = Script {
            tasks,
            plan,
            plan_path: None,
            settings,
            total: fresh.len() as u64,
            done: format!(
                "{} rolled back",
                fresh
                    .iter()
                    .map(|r| format!("{} to {}", r.node, r.to_text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            offline: false,
        };
        run_script(&inv, &config.reach, printer, locked, &gathered, script).await
    })
    .await
}

/// The rollbacks, control planes first; a refusal is exit 2 with every reason.
fn decide(state: &plan::FleetState, names: &[String]) -> anyhow::Result<Vec<Rollback>> {
    let mut chosen = plan::rollbacks(state, names).map_err(|problems| {
        usage!(
            "not rolling back:\n  - {}\nNothing was changed",
            problems.join("\n  - ")
        )
    })?;
    // Stable: inventory order within each role.
    chosen.sort_by_key(|r| r.role != Role::ControlPlane);
    Ok(chosen)
}

fn describe(chosen: &[Rollback]) -> String {
    let mut out = String::from("Roll back, one node at a time:\n");
    for r in chosen {
        out.push_str(&format!(
            "  {}: kubelet {} back to {} (the image it kept), config pinned to {}\n",
            r.node,
            r.from,
            r.to,
            r.to.minor()
        ));
        if let Some(c) = &r.containerd {
            out.push_str(&format!(
                "  {}: {} too (changed in the same reboot), config pinned to {}\n",
                r.node,
                c.from_to(),
                c.to.minor().to_string().trim_start_matches('v')
            ));
        }
    }
    // No colours of its own: escaped whole before `Printer::out` (issue 38).
    crate::ui::escape::escape_controls(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_summary_cannot_carry_our_colours_or_act_on_the_terminal() {
        let v = |s: &str| s.parse::<crate::version::Version>().unwrap();
        let r = super::Rollback {
            node: crate::ui::escape::HOSTILE.into(),
            role: crate::inventory::Role::Worker,
            from: v("v1.35.1"),
            to: v("v1.34.3"),
            pin: crate::plan::Action::RemoveImages {
                versions: Vec::new(),
            },
            containerd: None,
        };
        crate::ui::escape::assert_inert(&super::describe(&[r]));
    }
}

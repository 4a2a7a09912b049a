//! `fleetctl reboot [NODE…]`: apply's rolling reboot without an upgrade,
//! for what is staged already (a Flatcar update, a sysext patch of the
//! running minor) or asked for by `/run/reboot-required`, without waiting
//! for Kured's next period and without a plan. The same gates, lock,
//! journal, Ctrl-C and report as apply; control planes one at a time,
//! workers in batches of `--max-unavailable` within one zone.

use std::process::ExitCode;

use crate::cli::{Global, RebootArgs};
use crate::plan::{self, Reboot};
use crate::planning;
use crate::steps::{execute, script};
use crate::ui::Printer;
use crate::usage;
use crate::version::Minor;

use super::locked::{Script, confirm, recheck_under_lock, run_script, run_under_lock};
use super::{HopFindings, RunConfig};

pub async fn run(
    global: &Global,
    args: &RebootArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let config = RunConfig::reboot(global, args, &inv)?;
    let (chosen, order, state) = {
        // What to ask the operator about; looked at again under the lock.
        let gathered = super::gather_fleet(&inv, &config.reach, printer).await?;
        let state = planning::fleet_state(&inv, &gathered, "rebooting")?;
        let chosen = plan::reboots(&state, &args.nodes).map_err(|e| usage!("{e}"))?;
        let order = plan::reboot_batches(&inv, &chosen, config.max_unavailable);
        (chosen, order, state)
    };
    if chosen.is_empty() {
        printer.note("nothing to reboot: no node has a staged update or /run/reboot-required");
        return Ok(ExitCode::SUCCESS);
    }
    if config.dry_run {
        let settings = config.settings(HopFindings::default());
        let tasks = script::of_reboots(&order);
        printer.out(&execute::dry_run(
            &tasks,
            &plan::fixed_plan(&inv, &state, Vec::new()),
            &inv,
            &settings,
        ));
        return Ok(ExitCode::SUCCESS);
    }
    printer.out(&describe(&chosen, &order));
    confirm(
        config.yes,
        "Reboot these nodes? They will be drained and rebooted, control planes one at a time.",
    )?;

    run_under_lock(&inv, &config, printer, async |locked| {
        // The reboots still due, of those the operator confirmed.
        let rechecked = recheck_under_lock(&inv, &config.reach, printer, async |gathered| {
            let state = planning::fleet_state(&inv, gathered, "rebooting")?;
            let fresh = plan::reboots(&state, &args.nodes).map_err(|e| usage!("{e}"))?;
            let chosen = still_confirmed(&chosen, fresh, printer)?;
            if chosen.is_empty() {
                printer.note("nothing to reboot any more: the nodes were rebooted meanwhile");
                return Ok(None);
            }
            Ok(Some((chosen, state)))
        })
        .await?;
        let Some(((chosen, state), gathered)) = rechecked else {
            return Ok(ExitCode::SUCCESS);
        };
        let order = plan::reboot_batches(&inv, &chosen, config.max_unavailable);
        let script = Script {
            tasks: script::of_reboots(&order),
            plan: plan::fixed_plan(&inv, &state, Vec::new()),
            plan_path: None,
            settings: config.settings(HopFindings::default()),
            total: chosen.len() as u64,
            done: format!("{} nodes rebooted", chosen.len()),
            offline: false,
        };
        run_script(&inv, &config.reach, printer, locked, &gathered, script).await
    })
    .await
}

/// The reboots still due under the lock, of those the operator confirmed.
/// A node that no longer needs one (rebooted meanwhile) is dropped; a node
/// that newly needs one, or would now boot another minor, was not what the
/// operator said yes to: nothing is rebooted and a rerun asks again.
fn still_confirmed(
    confirmed: &[Reboot],
    fresh: Vec<Reboot>,
    printer: &Printer,
) -> anyhow::Result<Vec<Reboot>> {
    let was = |r: &Reboot| {
        confirmed
            .iter()
            .any(|c| c.node == r.node && c.minor == r.minor)
    };
    let new: Vec<String> = fresh
        .iter()
        .filter(|r| !was(r))
        .map(|r| format!("{} ({})", r.node, r.reasons.join(", ")))
        .collect();
    if !new.is_empty() {
        anyhow::bail!(
            "the fleet changed between the confirmation and taking the lock: {} now \
             need a reboot you did not confirm. Nothing was rebooted; run `fleetctl reboot` again \
             to see and confirm what is due now",
            new.join(", ")
        );
    }
    for gone in confirmed
        .iter()
        .filter(|c| !fresh.iter().any(|r| r.node == c.node))
    {
        printer.note(&format!(
            "{}: no reboot due any more (rebooted meanwhile); left alone",
            gone.node
        ));
    }
    Ok(fresh)
}

fn describe(chosen: &[Reboot], batches: &[(Vec<String>, Minor)]) -> String {
    let mut out = String::from("Reboot:\n");
    for r in chosen {
        out.push_str(&format!("  {}: {}\n", r.node, r.reasons.join(", ")));
    }
    out.push_str("In this order (a batch is drained and rebooted together):\n");
    for (i, (batch, _)) in batches.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", i + 1, batch.join(", ")));
    }
    // A reason is the node's word (its Flatcar version): escaped whole, as
    // this text has no colours of its own for `Printer::out` to keep.
    crate::ui::escape::escape_controls(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodes_words_in_the_summary_cannot_carry_our_colours_or_act_on_the_terminal() {
        let r = Reboot {
            node: "w-1".into(),
            role: crate::inventory::Role::Worker,
            minor: Minor::new(1, 35),
            reasons: vec![crate::ui::escape::HOSTILE.into()],
        };
        let text = describe(&[r], &[(vec!["w-1".into()], Minor::new(1, 35))]);
        crate::ui::escape::assert_inert(&text);
    }
}

//! apply, under the lock: every node's clock, read by the gather, against
//! the clock of the control plane the lock is written through (issue 38).
//! A node too far off is refused by name before anything changes; the
//! worst one ahead widens the lease's safety margin, so that apply stops
//! acting before any node's Kured could see fleetctl's lock as expired.
//! The rule itself is [`crate::steps::lock::clock::fleet_skew`].

use std::time::Duration;

use crate::gather::Gathered;
use crate::inventory::Inventory;
use crate::steps::Stop;
use crate::steps::lock::clock::{NodeClock, fleet_skew};
use crate::ui::Printer;

/// Refuses a fleet whose clocks disagree too much; else makes the lease's
/// margin at least the worst skew ahead. Nodes not reached have no reading
/// (the gather's own errors speak for them).
pub fn judge(
    inv: &Inventory,
    gathered: &Gathered,
    stop: &Stop,
    printer: &Printer,
) -> anyhow::Result<()> {
    let clocks: Vec<NodeClock<'_>> = gathered
        .nodes
        .iter()
        .filter_map(|r| {
            let c = r.clock.as_ref()?;
            Some(NodeClock {
                node: &r.node.name,
                sent: c.sent,
                answer: c.answer.as_deref().map_err(String::as_str),
                received: c.received,
            })
        })
        .collect();
    let reference = &inv.first_control_plane().name;
    if !clocks.iter().any(|c| c.node == reference.as_str()) {
        return Ok(());
    }
    let skew = fleet_skew(&clocks, reference)?;
    if let Some(node) = &skew.node
        && skew.worst_ahead >= Duration::from_secs(1)
    {
        stop.widen_margin(skew.worst_ahead);
        printer.note(&format!(
            "{node}'s clock is {} ahead of {reference}'s: the lock's safety margin is at least that",
            humantime::format_duration(Duration::from_secs(skew.worst_ahead.as_secs()))
        ));
    }
    Ok(())
}

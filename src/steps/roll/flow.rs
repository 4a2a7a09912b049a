//! The roll's order, written once over [`RollWorld`]: the real run, the dry
//! run and the fake fleet's tests all go through these two functions.
//!
//! The rules they keep: nothing is cordoned before the holds and the gates
//! let the batch go; nothing is rebooted unless every node of the batch
//! drained and the reboot fits in the lock's lease; a drain that fails, a
//! stop asked during the drain or a lease too short uncordons what was
//! cordoned; a node is uncordoned only once it is back and Ready (inside
//! the world's wait); a batch that fails stops the run only once every
//! other node of it is back or has failed too.

use super::world::RollWorld;
use super::{BeforeReboot, DRAIN_GRACE, batch_error};
use crate::steps::kured_labels::When;
use crate::version::{Minor, Version};

/// Holds, gates, drain, reboot and waits for `batch`; see `super::roll`.
pub(super) async fn roll_batch<W: RollWorld>(
    w: &mut W,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
    rollback: bool,
) -> anyhow::Result<()> {
    w.check_stop(None)?;
    let names = batch.join(", ");
    w.hold(batch).await?;
    // Each stretch must fit in the lock's lease as it stands (see the
    // reboot below).
    w.ensure_lease(&format!("{names}: drain"), w.drain_timeout() + DRAIN_GRACE)?;
    w.say(&format!("{names}: gates, then drain"));
    // The ledger says which stage each node is in, so a stop (a failure, a
    // second Ctrl-C) names it precisely.
    w.begin(&names, "gates and drain");
    let ceph = w.gates(batch, rollback).await?;
    w.kured_labels(batch, When::BeforeDrain).await?;
    for node in batch {
        w.mark(node)?;
    }
    w.note_cordoned(batch, true);
    let mut failures = Vec::new();
    for (node, result) in w.drain(batch).await {
        if let Err(failure) = result {
            if failure.uncordoned {
                w.note_cordoned(std::slice::from_ref(&node), false);
            }
            failures.push(failure.error);
        }
    }
    if !failures.is_empty() {
        // The others were drained for nothing: nothing is rebooted.
        let cordoned = w.still_cordoned(batch);
        let undone = uncordon_all(w, &cordoned).await;
        return Err(batch_error(failures, undone));
    }
    if w.stop_requested() {
        uncordon_all(w, batch).await?;
        w.check_stop(Some(&names))?;
    }

    // Never take a node down on a lock that could lapse before it is back:
    // the reboot and the wait for it must end within the lease.
    if let Err(e) = w.ensure_lease(
        &format!("{names}: reboot and wait for it"),
        w.node_timeout(),
    ) {
        return Err(e.context(uncordoned_again(w, batch).await));
    }
    reboot_and_wait(w, batch, minor, expect, rollback, false, ceph).await
}

/// The reboot of a drained `batch` and the wait for each node. `offline`:
/// a lone control plane rolled back while its API is down (`super::offline`):
/// nothing can be uncordoned through it if the reboot is refused. `ceph`:
/// Ceph's recovery is waited for once the batch is back.
pub(super) async fn reboot_and_wait<W: RollWorld>(
    w: &mut W,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
    rollback: bool,
    offline: bool,
    ceph: bool,
) -> anyhow::Result<()> {
    let names = batch.join(", ");
    let mut befores: Vec<(String, BeforeReboot)> = Vec::new();
    for node in batch {
        match w.before_reboot(node, minor, expect).await {
            Ok(b) => befores.push((node.clone(), b)),
            Err(e) if offline => return Err(e.context(format!("{names}: nothing was rebooted"))),
            Err(e) => return Err(e.context(uncordoned_again(w, batch).await)),
        }
    }
    w.begin(&names, "reboot into the staged images");
    w.reboot(&befores).await?;
    w.say(&format!(
        "{names}: rebooting (the connection drops; waiting for it to come back)"
    ));
    let (mut back, mut failures) = w.wait_back(befores, minor, rollback, offline).await?;
    w.note_cordoned(&back, false);
    // Kured's post labels on each node back and uncordoned, as Kured's
    // `uncordon` sets them.
    back.sort_by_key(|n| batch.iter().position(|b| b == n));
    let labelled = w.kured_labels(&back, When::AfterUncordon).await;
    if failures.is_empty() {
        labelled?;
        if ceph {
            w.ceph_after(batch).await?;
        }
        w.came_back();
        Ok(())
    } else {
        failures.extend(labelled.err());
        Err(batch_error(failures, Ok(())))
    }
}

/// Uncordons the whole batch before anything was rebooted; what to add to
/// the error that stopped it.
async fn uncordoned_again<W: RollWorld>(w: &mut W, batch: &[String]) -> String {
    let names = batch.join(", ");
    match uncordon_all(w, batch).await {
        Ok(()) => format!("{names}: uncordoned again; nothing was rebooted"),
        Err(u) => format!("{names}: SOME ARE STILL CORDONED (uncordon failed: {u:#})"),
    }
}

/// Uncordons each of `nodes`, the ledger kept; the first failure, once all
/// were tried.
async fn uncordon_all<W: RollWorld>(w: &mut W, nodes: &[String]) -> anyhow::Result<()> {
    let mut first_error = None;
    for node in nodes {
        match w.uncordon(node).await {
            Ok(()) => w.note_cordoned(std::slice::from_ref(node), false),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

//! Kured's `--pre-reboot-node-labels` and `--post-reboot-node-labels`, set
//! around each reboot while fleetctl holds Kured's lock, where Kured sets
//! them (kubereboot/kured `cmd/kured/main.go`): the pre labels in `drain`,
//! before it cordons and drains the node (here: once the gates let the node
//! go, right before its drain); the post labels in `uncordon`, only after
//! the uncordon succeeded (here: once the node is back, Ready and
//! uncordoned). Operators hang things on them (silenced alerts, a
//! scheduler's avoidance), so they are set as Kured would.
//!
//! Kured only logs a label it could not set and goes on; fleetctl stops
//! instead (the first failure stops the run): before the drain nothing is
//! down yet, and after the return the node is up and the operator is told
//! which labels to set by hand.

use anyhow::bail;

use super::context::{Apply, Rerun};
use super::hold_world::{HoldWorld, SshHolds};
use crate::checks::NodeLabel;

/// Which of Kured's two label flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    BeforeDrain,
    AfterUncordon,
}

impl When {
    fn flag(self) -> &'static str {
        match self {
            When::BeforeDrain => "pre-reboot-node-labels",
            When::AfterUncordon => "post-reboot-node-labels",
        }
    }
}

/// The labels Kured sets on a node at `when`, when its lock is held and
/// its gates kept; empty otherwise.
pub fn labels_of<'a>(apply: &'a Apply<'_>, when: When) -> &'a [NodeLabel] {
    match (&apply.kured, when) {
        (None, _) => &[],
        (Some(k), When::BeforeDrain) => &k.gates.pre_reboot_node_labels,
        (Some(k), When::AfterUncordon) => &k.gates.post_reboot_node_labels,
    }
}

/// Sets Kured's labels for `when` on each of `nodes`, journaled; the first
/// that fails stops the run, saying what was and was not done.
pub async fn set(apply: &Apply<'_>, nodes: &[String], when: When) -> anyhow::Result<()> {
    let labels: Vec<String> = labels_of(apply, when)
        .iter()
        .map(ToString::to_string)
        .collect();
    if labels.is_empty() || nodes.is_empty() {
        return Ok(());
    }
    let mut w = SshHolds::new(apply)?;
    set_in(&mut w, &labels, nodes, when, apply.settings.rerun).await
}

/// [`set`] of `labels` in world `w`.
pub(super) async fn set_in<W: HoldWorld>(
    w: &mut W,
    labels: &[String],
    nodes: &[String],
    when: When,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let text = labels.join(" ");
    for node in nodes {
        // Before the drain a stop is a safe point (nothing is cordoned yet).
        // After the return it is not one: the node is back and uncordoned,
        // its roll is done but for these labels, and a rerun would not set
        // them (as Kured's `uncordon` does, they finish the node's reboot);
        // the stop is seen at the next node's holds.
        if when == When::BeforeDrain {
            w.check_stop()?;
        }
        let what = format!("{node}: Kured's --{} {text}", when.flag());
        if let Err(why) = w.label(&what, node, labels).await? {
            let state = match when {
                When::BeforeDrain => format!("{node} was not drained; nothing was rebooted"),
                When::AfterUncordon => format!(
                    "{node} is back and uncordoned; set them yourself (`kubectl label node {node} \
                     {text} --overwrite`)"
                ),
            };
            bail!(
                "{node}: Kured's --{} ({text}) could not be set: {why}. {state}; then run \
                 `{rerun}` again",
                when.flag(),
            );
        }
        w.journal(
            match when {
                When::BeforeDrain => "kured-labels-pre",
                When::AfterUncordon => "kured-labels-post",
            },
            Some(node),
            &text,
        );
        w.say(&format!(
            "  {node}: labelled {text} (Kured's --{})",
            when.flag()
        ));
    }
    Ok(())
}

//! etcd as a gate, for a stacked etcd (kubeadm's member on every control
//! plane): before a control plane's drain, every member healthy and the
//! cluster keeping quorum without this one; after its reboot, its own
//! member healthy and caught up with the leader before anything else goes
//! (`crate::checks::EtcdMembers`). An external etcd is not fleetctl's to
//! judge: the gate says nothing then.
//!
//! etcdctl runs in the etcd static pod of another control plane than the
//! one judged (`peer`), so a member that is down or lagging is looked at
//! from outside, as its peers see it. A reading that fails holds, as Kured
//! holds on a gate it cannot read.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::context::{Apply, Rerun};
use super::hold_world::{HoldWorld, Holding, Look, SshHolds, Waited, secs, wait_out};
use super::runner::Remote;
use crate::checks::{self, EtcdTopology};
use crate::inventory::Role;
use crate::remote::before_hop;

/// Between two readings while the gate holds: each is two kubectl execs
/// and one etcdctl per member.
const POLL: Duration = Duration::from_secs(2);

/// The control plane whose etcd pod judges `node`: the first other
/// control plane, or `node` itself when it is the only one.
pub fn peer(inv: &crate::inventory::Inventory, node: &str) -> String {
    inv.nodes
        .iter()
        .find(|n| n.role == Role::ControlPlane && n.name != node)
        .map_or_else(|| node.to_string(), |n| n.name.clone())
}

/// Whether kubeadm runs etcd here (a stacked member per control plane),
/// read once per run into `known` (`Apply::etcd_stacked`): every control
/// plane's drain and return asks, and kubeadm-config's `etcd.local` or
/// `etcd.external` is not something an upgrade changes. A reading that
/// failed is not kept; the next asks again.
pub async fn stacked(api: &Remote, known: &tokio::sync::OnceCell<bool>) -> anyhow::Result<bool> {
    known.get_or_try_init(|| read_stacked(api)).await.copied()
}

async fn read_stacked(api: &Remote) -> anyhow::Result<bool> {
    let out = api
        .run_root(
            "etcd gate: where etcd lives (kubeadm-config)",
            &before_hop::get_kubeadm_config(),
            None,
        )
        .await?;
    if !out.success() {
        bail!(
            "{}: reading kubeadm-config for the etcd gate failed: {}",
            api.node(),
            out.stderr.trim()
        );
    }
    Ok(matches!(
        checks::etcd_topology(&out.stdout)?,
        EtcdTopology::Local { .. }
    ))
}

/// Before the drain of `batch`: holds (saying what holds, how long, what
/// releases it) until etcd can spare each control plane in it, for at most
/// `--node-timeout`; then stops the run naming etcd, nothing changed.
/// `true` when it held before it released. A
/// rollback's node is out of service already: its own member may be down.
pub async fn before_drain(
    apply: &Apply<'_>,
    batch: &[String],
    rollback: bool,
) -> anyhow::Result<bool> {
    let cps: Vec<String> = batch
        .iter()
        .filter(|n| apply.role(n) == Role::ControlPlane)
        .cloned()
        .collect();
    let Some(first) = cps.first() else {
        return Ok(false);
    };
    let api = apply.api()?;
    if !stacked(&api, &apply.etcd_stacked).await? {
        return Ok(false);
    }
    let via = peer(apply.inv, first);
    let mut w = SshHolds::new(apply)?;
    let (timeout, rerun) = (apply.settings.node_timeout, apply.settings.rerun);
    spare(&mut w, &cps, &via, rollback, timeout, rerun).await
}

/// [`before_drain`] in world `w`, for the control planes `cps` of the
/// batch (at least one), read through etcd-`via`.
pub(super) async fn spare<W: HoldWorld>(
    w: &mut W,
    cps: &[String],
    via: &str,
    rollback: bool,
    timeout: Duration,
    rerun: Rerun,
) -> anyhow::Result<bool> {
    let names = cps.join(", ");
    let read = async |w: &mut W| {
        Ok(match w.etcd(via).await {
            Ok(members) => {
                let problems: std::collections::BTreeSet<String> = cps
                    .iter()
                    .flat_map(|n| members.before_down(n, rollback))
                    .collect();
                match problems.is_empty() {
                    true => Look::Clear,
                    false => Look::Holds(problems.into_iter().collect::<Vec<_>>().join("; ")),
                }
            }
            Err(e) => Look::Holds(format!("etcd could not be read: {e}")),
        })
    };
    let held = |w: &mut W, why: &str, held: Duration| {
        w.say(&format!(
            "  etcd gate holds {names}: {why} (held {}, waiting up to {}; it releases once every \
             member is healthy and etcd keeps quorum without it)",
            secs(held),
            humantime::format_duration(timeout)
        ));
        w.journal("etcd-gate", None, why);
    };
    match wait_out(w, timeout, POLL, read, held).await? {
        Waited::Absent | Waited::Clear => Ok(false),
        Waited::Released(after) => {
            let text = format!("etcd can spare {names} now (held {})", secs(after));
            w.say(&format!("  etcd gate: {text}"));
            w.journal("etcd-gate-released", None, &text);
            Ok(true)
        }
        Waited::TimedOut(why) => bail!(
            "not taking {names} down: the etcd gate still holds after {}: {why}. Nothing was \
             changed on {names}; bring every etcd member back to health (`etcdctl endpoint \
             status --cluster` in an etcd pod), then run `{rerun}` again",
            humantime::format_duration(timeout),
        ),
    }
}

/// After `node`'s reboot: waits until its own member is healthy and caught
/// up with the leader, as etcd-`via` sees it, until `deadline`; for a
/// stacked etcd ([`stacked`]).
pub async fn caught_up(
    api: &Remote,
    node: &str,
    via: &str,
    deadline: Instant,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let mut w = SshHolds::on_api(api);
    let timeout = deadline.saturating_duration_since(Instant::now());
    wait_caught_up(&mut w, node, via, timeout, rerun).await
}

/// [`caught_up`] in world `w`, for at most `timeout`.
pub(super) async fn wait_caught_up<W: HoldWorld>(
    w: &mut W,
    node: &str,
    via: &str,
    timeout: Duration,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let mut held =
        |w: &mut W, why: &str, _: Duration| w.journal("etcd-catching-up", Some(node), why);
    // Its own loop, not `wait_out`: this future is spawned with the other
    // nodes' waits, and must be `Send`.
    let mut h = Holding::new(w, timeout, POLL);
    let end = loop {
        let look = match w.etcd(via).await {
            Ok(members) => match members.not_caught_up(node) {
                None => Look::Clear,
                Some(why) => Look::Holds(why),
            },
            Err(e) => Look::Holds(format!("etcd could not be read: {e}")),
        };
        if let Some(end) = h.after(w, look, &mut held) {
            break end;
        }
        w.pause(POLL).await?;
    };
    match end {
        Waited::Absent | Waited::Clear => {
            w.journal(
                "etcd-caught-up",
                Some(node),
                "healthy and caught up with the leader after 0s",
            );
            Ok(())
        }
        Waited::Released(after) => {
            let text = format!(
                "healthy and caught up with the leader after {}",
                secs(after)
            );
            w.journal("etcd-caught-up", Some(node), &text);
            Ok(())
        }
        Waited::TimedOut(why) => bail!(
            "{node}: its etcd member did not catch up with the leader after its reboot: \
             {why}. It is cordoned, and no other control plane was touched. Check etcd on \
             {node} (`etcdctl endpoint status --cluster` in an etcd pod, its log), then run \
             `{rerun}` again"
        ),
    }
}

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
use super::runner::Remote;
use crate::checks::{self, EtcdMembers, EtcdTopology};
use crate::inventory::Role;
use crate::remote::{before_hop, etcd_status};

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

/// Whether kubeadm runs etcd here (a stacked member per control plane).
pub async fn stacked(api: &Remote) -> anyhow::Result<bool> {
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

/// Every member as `via`'s etcd pod sees it; `Err` (in words) when it
/// cannot be read.
async fn read(api: &Remote, via: &str) -> Result<EtcdMembers, String> {
    let (list_label, status_label) = (
        format!("etcd gate: member list (etcd-{via})"),
        format!("etcd gate: every member's status (etcd-{via})"),
    );
    let (list_cmd, status_cmd) = (
        etcd_status::member_list(via),
        etcd_status::endpoint_status(via),
    );
    let (list, status) = tokio::join!(
        api.run_root(&list_label, &list_cmd, None),
        api.run_root(&status_label, &status_cmd, None),
    );
    let list = list.map_err(|e| format!("{e:#}"))?;
    let status = status.map_err(|e| format!("{e:#}"))?;
    if !list.success() {
        return Err(format!(
            "etcdctl member list in etcd-{via} failed: {}",
            last_line(&list.stderr)
        ));
    }
    checks::parse_etcd_members(&list.stdout, &status.stdout, &status.stderr)
        .map_err(|e| format!("etcd-{via}: {e:#}"))
}

fn last_line(s: &str) -> String {
    s.trim()
        .lines()
        .last()
        .unwrap_or("no output")
        .chars()
        .take(300)
        .collect()
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
    let cps: Vec<&String> = batch
        .iter()
        .filter(|n| apply.role(n) == Role::ControlPlane)
        .collect();
    let Some(first) = cps.first() else {
        return Ok(false);
    };
    let api = apply.api()?;
    if !stacked(&api).await? {
        return Ok(false);
    }
    let timeout = apply.settings.node_timeout;
    let started = Instant::now();
    let mut said: Option<String> = None;
    loop {
        apply.check_stop(None)?;
        let via = peer(apply.inv, first);
        let why = match read(&api, &via).await {
            Ok(members) => {
                let problems: Vec<String> = cps
                    .iter()
                    .flat_map(|n| members.before_down(n, rollback))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if problems.is_empty() {
                    if said.is_some() {
                        let text = format!(
                            "etcd can spare {} now (held {})",
                            names(&cps),
                            held(started)
                        );
                        apply.progress.line(&format!("  etcd gate: {text}"));
                        apply.journal_event("etcd-gate-released", None, &text);
                    }
                    return Ok(said.is_some());
                }
                problems.join("; ")
            }
            Err(e) => format!("etcd could not be read: {e}"),
        };
        if said.as_ref() != Some(&why) {
            apply.progress.line(&format!(
                "  etcd gate holds {}: {why} (held {}, waiting up to {}; it releases once every \
                 member is healthy and etcd keeps quorum without it)",
                names(&cps),
                held(started),
                humantime::format_duration(timeout)
            ));
            apply.journal_event("etcd-gate", None, &why);
            said = Some(why.clone());
        }
        if started.elapsed() + POLL > timeout {
            bail!(
                "not taking {} down: the etcd gate still holds after {}: {why}. Nothing was \
                 changed on {}; bring every etcd member back to health (`etcdctl endpoint status \
                 --cluster` in an etcd pod), then run `{}` again",
                names(&cps),
                humantime::format_duration(timeout),
                names(&cps),
                apply.settings.rerun
            );
        }
        pause(apply).await?;
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
    let started = Instant::now();
    let mut said: Option<String> = None;
    loop {
        let why = match read(api, via).await {
            Ok(members) => match members.not_caught_up(node) {
                None => {
                    api.journal().event(
                        "etcd-caught-up",
                        Some(node),
                        &format!(
                            "healthy and caught up with the leader after {}",
                            held(started)
                        ),
                    );
                    return Ok(());
                }
                Some(why) => why,
            },
            Err(e) => format!("etcd could not be read: {e}"),
        };
        if said.as_ref() != Some(&why) {
            api.journal().event("etcd-catching-up", Some(node), &why);
            said = Some(why.clone());
        }
        if Instant::now() + POLL > deadline {
            bail!(
                "{node}: its etcd member did not catch up with the leader after its reboot: \
                 {why}. It is cordoned, and no other control plane was touched. Check etcd on \
                 {node} (`etcdctl endpoint status --cluster` in an etcd pod, its log), then run \
                 `{rerun}` again"
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits one poll, ending at once on Ctrl-C.
async fn pause(apply: &Apply<'_>) -> anyhow::Result<()> {
    let until = Instant::now() + POLL;
    while Instant::now() < until {
        apply.check_stop(None)?;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

fn names(nodes: &[&String]) -> String {
    nodes
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn held(since: Instant) -> String {
    humantime::format_duration(Duration::from_secs(since.elapsed().as_secs())).to_string()
}

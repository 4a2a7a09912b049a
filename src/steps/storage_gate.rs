//! The Ceph gate (docs/apply.md, "Ceph"): before each drain, hold until
//! Ceph can spare the node; after each node returns, wait until every
//! placement group is active+clean again before the next one. Found
//! automatically: with no CephCluster in the cluster (or no Rook CRD),
//! nothing is said and nothing waits.
//!
//! Each reading is the discovery script, then, per CephCluster whose
//! namespace runs a Ready toolbox pod, `ceph health detail`, `pg stat` and
//! `osd tree` through it (and `osd ok-to-stop` for the OSDs of the nodes
//! about to stop); a cluster without a toolbox is judged from its
//! `.status.ceph` (`checks::ceph`). While held, the lock's heartbeat goes
//! on (`steps::lock::keeper` renews it beside this loop) and Ctrl-C stops
//! the wait at once; nothing has been cordoned yet.

use std::time::Duration;

use anyhow::Context;

use super::context::{Apply, Rerun};
use super::hold_world::{HoldWorld, Look, SshHolds, Waited, secs, wait_out};
use super::runner::Remote;
use crate::checks::ceph::{self as judge, Policy, Reading};
use crate::gather::rook_reading::RunRoot;
use crate::pacing::CephGate;

impl RunRoot for Remote {
    async fn run_root_as(
        &self,
        label: &'static str,
        cmd: String,
    ) -> anyhow::Result<crate::ssh::Output> {
        self.run_root(label, &cmd, None).await
    }

    fn node_name(&self) -> String {
        self.node().to_string()
    }
}

/// What the gate before a drain found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spared {
    /// No CephCluster (or no Rook CRD), or the gate is off: the batch's
    /// return has nothing to wait for (the next drain's gate reads Ceph
    /// again, and holds on any degraded PG).
    NoCeph,
    /// Ceph could spare the batch at once.
    Clear,
    /// Ceph held the batch, then released it.
    Released,
    /// Not asked (a rollback's batch): its return still reads Ceph.
    NotAsked,
}

/// Before `batch` is drained: waits until Ceph can spare it, or fails
/// after `--ceph-timeout` with nothing changed. A rollback's batch is down
/// already (its new kubelet failed): holding it would keep its OSDs down
/// longer, so only the wait after it returns applies.
pub async fn before_drain(
    apply: &Apply<'_>,
    batch: &[String],
    rollback: bool,
) -> anyhow::Result<Spared> {
    if rollback {
        return Ok(Spared::NotAsked);
    }
    let mut w = SshHolds::new(apply)?;
    spare_batch(
        &mut w,
        &apply.settings.pace.ceph,
        apply.settings.rerun,
        batch,
    )
    .await
}

/// [`before_drain`] in world `w`, for a batch that is not a rollback's.
pub(super) async fn spare_batch<W: HoldWorld>(
    w: &mut W,
    gate: &CephGate,
    rerun: Rerun,
    batch: &[String],
) -> anyhow::Result<Spared> {
    let names = batch.join(", ");
    let words = Words {
        what: names.clone(),
        refusal: format!("not taking {names} down"),
        unchanged: format!("on {names} (nothing was drained)"),
    };
    spare(w, gate, rerun, batch, &words).await
}

/// Before a control plane's kubeadm step, the first change of a hop: a
/// run that Ceph holds from the start stops with nothing changed, not
/// with the control plane upgraded and every node still to go.
pub async fn before_upgrade(apply: &Apply<'_>, node: &str) -> anyhow::Result<()> {
    let mut w = SshHolds::new(apply)?;
    spare_upgrade(
        &mut w,
        &apply.settings.pace.ceph,
        apply.settings.rerun,
        node,
    )
    .await
}

/// [`before_upgrade`] in world `w`.
pub(super) async fn spare_upgrade<W: HoldWorld>(
    w: &mut W,
    gate: &CephGate,
    rerun: Rerun,
    node: &str,
) -> anyhow::Result<()> {
    let words = Words {
        what: format!("{node}'s control-plane upgrade"),
        refusal: format!("not upgrading {node}'s control plane"),
        unchanged: "(nothing was upgraded or drained)".to_string(),
    };
    spare(w, gate, rerun, &[], &words).await.map(|_| ())
}

/// What a hold names: what it holds, the refusal once it times out, and
/// what was left unchanged.
struct Words {
    what: String,
    refusal: String,
    unchanged: String,
}

/// Waits until Ceph can spare `batch` (none: judges Ceph's health alone),
/// or fails after `--ceph-timeout` in `words`.
async fn spare<W: HoldWorld>(
    w: &mut W,
    gate: &CephGate,
    rerun: Rerun,
    batch: &[String],
    words: &Words,
) -> anyhow::Result<Spared> {
    if !gate.enabled {
        return Ok(Spared::NoCeph);
    }
    let policy = Policy {
        hold_on: gate.hold_on.clone(),
    };
    let mut release = "released when no PG is inactive, degraded or undersized and no \
                       HEALTH_ERR or data-availability check is raised"
        .to_string();
    if !batch.is_empty() {
        release.push_str(&format!(
            ", and Ceph says {}'s OSDs are ok to stop",
            batch.join(", ")
        ));
    }
    let hold = Hold {
        what: &words.what,
        timeout: gate.timeout,
        interval: gate.interval,
        release: &release,
        kind: "ceph-hold",
    };
    match hold
        .wait(w, |r| judge::before_drain(r, &policy), batch)
        .await?
    {
        Waited::Absent => Ok(Spared::NoCeph),
        Waited::Clear => Ok(Spared::Clear),
        Waited::Released(_) => Ok(Spared::Released),
        Waited::TimedOut(why) => Err(anyhow::anyhow!(
            "{}: Ceph still holds after {}: {why}. Nothing was changed {}; \
             once Ceph can spare it ({release}), run `{rerun}` again. --ceph-timeout waits longer",
            words.refusal,
            humantime::format_duration(gate.timeout),
            words.unchanged,
        ))
        .context("Ceph gate"),
    }
}

/// After `batch` returned (Ready and uncordoned): waits until every PG is
/// active+clean, or fails after `--ceph-recovery-timeout`, the next node
/// not started.
pub async fn after_return(apply: &Apply<'_>, batch: &[String]) -> anyhow::Result<()> {
    let mut w = SshHolds::new(apply)?;
    recovery(
        &mut w,
        &apply.settings.pace.ceph,
        apply.settings.rerun,
        batch,
    )
    .await
}

/// [`after_return`] in world `w`.
pub(super) async fn recovery<W: HoldWorld>(
    w: &mut W,
    gate: &CephGate,
    rerun: Rerun,
    batch: &[String],
) -> anyhow::Result<()> {
    if !gate.enabled {
        return Ok(());
    }
    let names = batch.join(", ");
    // Only a status checked after this moment, in the cluster's time,
    // counts. No CephCluster (or no Rook CRD): nothing to wait for, and
    // no second reading to say so between two reboots.
    let Some(since) = w.ceph_clock().await else {
        return Ok(());
    };
    let release = "released when every placement group is active+clean";
    let hold = Hold {
        what: &format!("the node after {names}"),
        timeout: gate.recovery_timeout,
        interval: gate.interval,
        release,
        kind: "ceph-recovery",
    };
    match hold.wait(w, |r| judge::recovered(r, since), &[]).await? {
        Waited::Absent | Waited::Clear | Waited::Released(_) => Ok(()),
        Waited::TimedOut(why) => Err(anyhow::anyhow!(
            "{names} returned and is uncordoned, but Ceph has not recovered within {}: {why}. \
             No other node was started; once every placement group is active+clean, run \
             `{rerun}` again. --ceph-recovery-timeout waits longer",
            humantime::format_duration(gate.recovery_timeout),
        ))
        .context("Ceph recovery"),
    }
}

/// One of Ceph's holds: what it holds, for how long at most, how often
/// it reads, what releases it, and its journal's kind.
struct Hold<'h> {
    what: &'h str,
    timeout: Duration,
    interval: Duration,
    release: &'h str,
    kind: &'h str,
}

impl Hold<'_> {
    /// Reads Ceph until `verdict` finds nothing, saying what holds, for how
    /// long and what releases it each time that changes (terminal and
    /// journal, `kind`), up to the timeout. `stopping`: the nodes about to
    /// stop, whose OSDs ok-to-stop is asked about.
    async fn wait<W: HoldWorld>(
        &self,
        w: &mut W,
        verdict: impl Fn(&Reading) -> Vec<String>,
        stopping: &[String],
    ) -> anyhow::Result<Waited> {
        let read = async |w: &mut W| {
            let readings = match w.ceph(stopping).await {
                Ok(None) => return Ok(Look::Absent),
                Ok(Some(r)) => r,
                Err(e) => vec![("Ceph".to_string(), Reading::Unreadable(format!("{e:#}")))],
            };
            let why: Vec<String> = readings
                .iter()
                .flat_map(|(name, r)| verdict(r).into_iter().map(move |w| format!("{name}: {w}")))
                .collect();
            Ok(match why.is_empty() {
                true => Look::Clear,
                false => Look::Holds(why.join("; ")),
            })
        };
        let held = |w: &mut W, why: &str, held: Duration| {
            let text = format!(
                "Ceph holds {} (held {} so far, waiting up to {}): {why}; {}",
                self.what,
                secs(held),
                humantime::format_duration(self.timeout),
                self.release
            );
            w.say(&format!("  {text}"));
            w.journal(self.kind, None, &text);
        };
        let waited = wait_out(w, self.timeout, self.interval, read, held).await?;
        match &waited {
            Waited::Released(after) => {
                let text = format!("Ceph released {} after {}", self.what, secs(*after));
                w.say(&format!("  {text}"));
                w.journal(&format!("{}-released", self.kind), None, &text);
            }
            Waited::TimedOut(why) => w.journal(&format!("{}-timeout", self.kind), None, why),
            Waited::Absent | Waited::Clear => {}
        }
        Ok(waited)
    }
}

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

use std::time::{Duration, Instant};

use anyhow::Context;

use super::context::Apply;
use super::runner::Remote;
use crate::checks::ceph::{self as judge, Policy, Reading};
use crate::gather::rook_reading::{self, RunRoot};

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
    let names = batch.join(", ");
    spare(
        apply,
        batch,
        &names,
        &format!("not taking {names} down"),
        &format!("on {names} (nothing was drained)"),
    )
    .await
}

/// Before a control plane's kubeadm step, the first change of a hop: a
/// run that Ceph holds from the start stops with nothing changed, not
/// with the control plane upgraded and every node still to go.
pub async fn before_upgrade(apply: &Apply<'_>, node: &str) -> anyhow::Result<()> {
    spare(
        apply,
        &[],
        &format!("{node}'s control-plane upgrade"),
        &format!("not upgrading {node}'s control plane"),
        "(nothing was upgraded or drained)",
    )
    .await
    .map(|_| ())
}

/// Waits until Ceph can spare `batch` (none: judges Ceph's health alone),
/// or fails after `--ceph-timeout` saying `refusal` and `unchanged`.
async fn spare(
    apply: &Apply<'_>,
    batch: &[String],
    what: &str,
    refusal: &str,
    unchanged: &str,
) -> anyhow::Result<Spared> {
    let gate = &apply.settings.pace.ceph;
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
    let outcome = hold(
        apply,
        what,
        gate.timeout,
        &release,
        "ceph-hold",
        |r| judge::before_drain(r, &policy),
        Some(batch),
    )
    .await?;
    match outcome {
        Held::Absent => Ok(Spared::NoCeph),
        Held::Never => Ok(Spared::Clear),
        Held::Released => Ok(Spared::Released),
        Held::TimedOut(why) => Err(anyhow::anyhow!(
            "{refusal}: Ceph still holds after {}: {why}. Nothing was changed {unchanged}; \
             once Ceph can spare it ({release}), run `{}` again. --ceph-timeout waits longer",
            humantime::format_duration(gate.timeout),
            apply.settings.rerun
        ))
        .context("Ceph gate"),
    }
}

/// After `batch` returned (Ready and uncordoned): waits until every PG is
/// active+clean, or fails after `--ceph-recovery-timeout`, the next node
/// not started.
pub async fn after_return(apply: &Apply<'_>, batch: &[String]) -> anyhow::Result<()> {
    let gate = &apply.settings.pace.ceph;
    if !gate.enabled {
        return Ok(());
    }
    let names = batch.join(", ");
    let api = apply.api()?;
    // Only a status checked after this moment, in the cluster's time, counts.
    let since = match rook_reading::discover(&api).await {
        // No CephCluster (or no Rook CRD): nothing to wait for, and no
        // second reading to say so between two reboots.
        Ok(d) if d.clusters.as_ref().is_ok_and(Vec::is_empty) => return Ok(()),
        Ok(d) => d.now.unwrap_or(i64::MAX),
        Err(_) => i64::MAX,
    };
    let release = "released when every placement group is active+clean".to_string();
    let outcome = hold(
        apply,
        &format!("the node after {names}"),
        gate.recovery_timeout,
        &release,
        "ceph-recovery",
        |r| judge::recovered(r, since),
        None,
    )
    .await?;
    match outcome {
        Held::Absent | Held::Never | Held::Released => Ok(()),
        Held::TimedOut(why) => Err(anyhow::anyhow!(
            "{names} returned and is uncordoned, but Ceph has not recovered within {}: {why}. \
             No other node was started; once every placement group is active+clean, run `{}` \
             again. --ceph-recovery-timeout waits longer",
            humantime::format_duration(gate.recovery_timeout),
            apply.settings.rerun
        ))
        .context("Ceph recovery"),
    }
}

enum Held {
    /// No CephCluster.
    Absent,
    /// Nothing held.
    Never,
    Released,
    TimedOut(String),
}

/// Reads Ceph until `verdict` finds nothing, saying what holds, for how
/// long and what releases it each time that changes (terminal and
/// journal, `kind`), up to `timeout`. `stopping`: the nodes about to stop,
/// whose OSDs ok-to-stop is asked about.
async fn hold(
    apply: &Apply<'_>,
    what: &str,
    timeout: Duration,
    release: &str,
    kind: &str,
    verdict: impl Fn(&Reading) -> Vec<String>,
    stopping: Option<&[String]>,
) -> anyhow::Result<Held> {
    let api = apply.api()?;
    let start = Instant::now();
    let mut said: Option<String> = None;
    loop {
        apply.check_stop(None)?;
        let readings = rook_reading::read(&api, stopping.unwrap_or_default()).await;
        let readings = match readings {
            Ok(None) => return Ok(Held::Absent),
            Ok(Some(r)) => r,
            Err(e) => vec![("Ceph".to_string(), Reading::Unreadable(format!("{e:#}")))],
        };
        let why: Vec<String> = readings
            .iter()
            .flat_map(|(name, r)| verdict(r).into_iter().map(move |w| format!("{name}: {w}")))
            .collect();
        let held_for = humantime::format_duration(Duration::from_secs(start.elapsed().as_secs()));
        if why.is_empty() {
            if said.is_some() {
                let text = format!("Ceph released {what} after {held_for}");
                apply.progress.line(&format!("  {text}"));
                apply.journal_event(&format!("{kind}-released"), None, &text);
                return Ok(Held::Released);
            }
            return Ok(Held::Never);
        }
        let why = why.join("; ");
        if said.as_ref() != Some(&why) {
            let text = format!(
                "Ceph holds {what} (held {held_for} so far, waiting up to {}): {why}; {release}",
                humantime::format_duration(timeout)
            );
            apply.progress.line(&format!("  {text}"));
            apply.journal_event(kind, None, &text);
            said = Some(why.clone());
        }
        let interval = apply.settings.pace.ceph.interval;
        if start.elapsed() + interval > timeout {
            apply.journal_event(&format!("{kind}-timeout"), None, &why);
            return Ok(Held::TimedOut(why));
        }
        let until = Instant::now() + interval;
        while Instant::now() < until {
            apply.check_stop(None)?;
            tokio::time::sleep(super::POLL).await;
        }
    }
}

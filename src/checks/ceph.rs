//! The Ceph gate's judgement, pure: whether a node may go down now, and
//! whether Ceph has recovered from the last one, from what Rook's toolbox
//! and the CephCluster's status say (`read` parses them). docs/checks.md,
//! "Ceph", has the table of codes and why.
//!
//! - A HEALTH_ERR check always holds; so does a status of HEALTH_ERR with
//!   no check named.
//! - The data-availability codes of [`HOLDING`] hold whatever their
//!   severity; `--ceph-hold-on CODE` names more.
//! - Any other HEALTH_WARN passes (it is shown): Ceph sits at HEALTH_WARN
//!   for months for reasons that do not make a reboot any less safe.
//! - With the toolbox: no PG may be inactive, degraded or undersized, and
//!   `ceph osd ok-to-stop` must allow the node's OSDs to stop.
//! - Without it: the CephCluster's `.status.ceph`, which Rook's operator
//!   refreshes; older than [`STALE_AFTER`] in the cluster's time, or
//!   absent, it is unknown, and unknown holds (as Kured holds on a gate it
//!   cannot read).

mod ceph_read;
#[cfg(test)]
mod tests;

pub use ceph_read::{
    CephCheck, CephClusterStatus, Discovery, Health, OkToStop, PgStates, Toolbox, clean, host_osds,
    parse_health, parse_ok_to_stop, parse_pg_stat, read_discovery,
};

/// How old a CephCluster's `lastChecked` may be before its health is
/// unknown: twice Rook's default health-check interval (60 s,
/// `healthCheck.daemonHealth.status.interval`).
pub const STALE_AFTER: i64 = 120;

/// The codes that hold a drain whatever their severity, and why: each
/// says data is unavailable, or would be with one more node down.
/// Ceph's meanings: doc/rados/operations/health-checks.rst.
pub const HOLDING: &[(&str, &str)] = &[
    (
        "PG_AVAILABILITY",
        "placement groups are inactive: their data cannot be read or written now",
    ),
    (
        "PG_DEGRADED",
        "placement groups have fewer copies than their pool's size: another OSD down may take \
         them below min_size, and inactive",
    ),
    (
        "PG_RECOVERY_FULL",
        "recovery is stalled for lack of space: degraded data stays degraded",
    ),
    (
        "PG_BACKFILL_FULL",
        "backfill is stalled for lack of space: misplaced data cannot move",
    ),
    (
        "PG_DAMAGED",
        "scrubbing found inconsistent or lost data: the good copies may be on this node",
    ),
    (
        "OBJECT_UNFOUND",
        "objects are unfound: their only current copy may be on an OSD that is down",
    ),
    (
        "OSD_DOWN",
        "OSDs are down already: their PGs rely on the copies that remain",
    ),
    (
        "OSD_HOST_DOWN",
        "a host's OSDs are down already: their PGs rely on the copies that remain",
    ),
    (
        "OSD_FULL",
        "an OSD is full: writes are blocked and recovery after the reboot cannot proceed",
    ),
    (
        "OSD_BACKFILLFULL",
        "OSDs are too full to backfill: recovery after the reboot would stall",
    ),
    (
        "MON_DOWN",
        "monitors are down: one more down may lose quorum, and with it every client",
    ),
];

/// Codes known to pass, and why, for the docs and the messages: none of
/// them makes data less available when a node reboots.
pub const BENIGN: &[(&str, &str)] = &[
    (
        "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED",
        "an authentication setting",
    ),
    (
        "POOL_NO_REDUNDANCY",
        "a pool chose one copy; ok-to-stop still judges its PGs",
    ),
    ("PG_NOT_SCRUBBED", "scrubbing is behind schedule"),
    ("PG_NOT_DEEP_SCRUBBED", "deep scrubbing is behind schedule"),
    (
        "RECENT_CRASH",
        "a daemon crashed recently and was restarted",
    ),
    ("OSDMAP_FLAGS", "a cluster flag (noout…) is set"),
    (
        "OSD_NEARFULL",
        "an OSD is nearly full; writes still succeed",
    ),
    ("MON_CLOCK_SKEW", "monitors' clocks differ"),
    ("POOL_TOO_FEW_PGS", "a pool's PG count is not optimal"),
    ("TOO_MANY_PGS", "more PGs per OSD than advised"),
];

/// What the operator asked on top of the defaults (`--ceph-hold-on`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Policy {
    pub hold_on: Vec<String>,
}

/// Why each check of `health` holds (empty: nothing does).
pub fn holding(health: &Health, policy: &Policy) -> Vec<String> {
    let mut out = Vec::new();
    for c in &health.checks {
        let why = if c.severity == "HEALTH_ERR" {
            Some("every HEALTH_ERR holds")
        } else if let Some((_, why)) = HOLDING.iter().find(|(code, _)| *code == c.code) {
            Some(*why)
        } else if policy.hold_on.iter().any(|h| h == &c.code) {
            Some("--ceph-hold-on names it")
        } else {
            None
        };
        if let Some(why) = why {
            out.push(format!("{} ({}: {why})", c.code, c.message));
        }
    }
    if out.is_empty() && health.status == "HEALTH_ERR" {
        out.push("HEALTH_ERR (no check named)".to_string());
    }
    out
}

/// The checks that pass, named for the record ("benign: …").
pub fn passing(health: &Health, policy: &Policy) -> Vec<String> {
    let held = |c: &CephCheck| {
        c.severity == "HEALTH_ERR"
            || HOLDING.iter().any(|(code, _)| *code == c.code)
            || policy.hold_on.iter().any(|h| h == &c.code)
    };
    health
        .checks
        .iter()
        .filter(|c| !held(c))
        .map(|c| c.code.clone())
        .collect()
}

/// What one CephCluster says now, as the gate read it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// From the toolbox: health, PG states, and the OSDs about to stop
    /// with Ceph's answer (`None` when the nodes have no OSD, or after a
    /// node returned).
    Toolbox {
        health: Health,
        pgs: PgStates,
        stop: Option<(Vec<u32>, Result<OkToStop, String>)>,
    },
    /// From the CephCluster's status, with the cluster's clock.
    Status { status: CephClusterStatus, now: i64 },
    /// Nothing could be read.
    Unreadable(String),
}

impl Reading {
    pub fn is_unreadable(&self) -> bool {
        matches!(self, Reading::Unreadable(_))
    }
}

/// Why `reading` holds a drain (empty: Ceph can spare the node).
pub fn before_drain(reading: &Reading, policy: &Policy) -> Vec<String> {
    match reading {
        Reading::Toolbox { health, pgs, stop } => {
            let mut out = holding(health, policy);
            out.extend(pgs.unsafe_states());
            match stop {
                Some((ids, Ok(ok))) if !ok.ok_to_stop => out.push(format!(
                    "`ceph osd ok-to-stop {}` says no: {} PGs are or would become inactive",
                    join(ids),
                    ok.num_not_ok_pgs
                )),
                Some((ids, Err(e))) => out.push(format!(
                    "`ceph osd ok-to-stop {}` could not be read: {e}",
                    join(ids)
                )),
                _ => {}
            }
            out
        }
        Reading::Status { status, now } => match fresh(status, *now) {
            Ok(health) => holding(&health, policy),
            Err(unknown) => vec![unknown],
        },
        Reading::Unreadable(e) => vec![format!("Ceph's health is unknown: {e}")],
    }
}

/// Why Ceph has not recovered yet (empty: every PG active+clean). From the
/// status, only a check made at `since` or later (the cluster's time when
/// the wait began) counts: an older one may predate the reboot.
pub fn recovered(reading: &Reading, since: i64) -> Vec<String> {
    match reading {
        Reading::Toolbox { pgs, .. } => pgs.not_clean(),
        Reading::Status { status, now } => match fresh(status, *now) {
            Ok(_) if status.last_checked.is_some_and(|t| t < since) => vec![format!(
                "the CephCluster's status was last checked before the node returned ({})",
                status.last_checked_text
            )],
            Ok(health) => health
                .checks
                .iter()
                .filter(|c| {
                    c.code.starts_with("PG_")
                        && c.code != "PG_NOT_SCRUBBED"
                        && c.code != "PG_NOT_DEEP_SCRUBBED"
                        || c.code.starts_with("OSD_") && c.code.ends_with("_DOWN")
                })
                .map(|c| format!("{} ({})", c.code, c.message))
                .collect(),
            Err(unknown) => vec![unknown],
        },
        Reading::Unreadable(e) => vec![format!("Ceph's health is unknown: {e}")],
    }
}

/// The status's health when it is fresh, else why it is unknown.
pub fn fresh(status: &CephClusterStatus, now: i64) -> Result<Health, String> {
    let Some(health) = &status.health else {
        return Err(format!(
            "{} has no .status.ceph: Rook has not reported Ceph's health",
            status.name
        ));
    };
    match status.last_checked {
        Some(t) if now - t <= STALE_AFTER => Ok(health.clone()),
        Some(_) => Err(format!(
            "{}'s .status.ceph was last checked at {}, more than {STALE_AFTER} s ago in the \
             cluster's time: Ceph's health is unknown (is Rook's operator running?)",
            status.name, status.last_checked_text
        )),
        None => Err(format!(
            "{}'s .status.ceph has no readable lastChecked ({:?}): Ceph's health is unknown",
            status.name, status.last_checked_text
        )),
    }
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
}

//! Kured's lock annotation, both forms: one `LockAnnotationValue` or, with
//! `--concurrency` > 1, `{"maxOwners":N,"locks":[…]}`; written as Kured
//! writes it and read as Kured reads it (see `steps/lock/kured.rs`).

use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::steps::lock::{Holder, Identity, LockState, Mine, parse_time, rfc3339};

/// One lock entry as Kured writes it (`LockAnnotationValue`): field names
/// and order as Go's encoding/json produces them; `TTL` is a Go duration in
/// nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct KuredEntry {
    #[serde(rename = "nodeID", default)]
    node_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    metadata: KuredNodeMeta,
    #[serde(default)]
    created: String,
    #[serde(rename = "TTL", default)]
    ttl: i64,
}

/// Kured's `NodeMeta` plus, in entries fleetctl writes, who holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct KuredNodeMeta {
    #[serde(default)]
    unschedulable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fleetctl: Option<FleetctlMeta>,
}

/// Under `metadata`, which Kured decodes into a struct that has no such
/// field and so skips.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct FleetctlMeta {
    host: String,
    pid: u32,
    /// Which process the pid was (boot id and start time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process: Option<String>,
    started: String,
}

/// Kured 1.4 and older wrote `metadata` as any JSON, possibly `null`.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The form Kured uses with `--concurrency` > 1.
#[derive(Debug, Serialize, Deserialize)]
struct KuredMultiLock {
    #[serde(rename = "maxOwners", default)]
    max_owners: i64,
    #[serde(default)]
    locks: Option<Vec<KuredEntry>>,
}

/// Kured's annotation value for this run's lock with its heartbeat at
/// `created` (RFC 3339) and `ttl`: the single form, or for a Kured with
/// several slots (`concurrency` above 1) the multi-owner form with every
/// slot taken, so no Kured pod finds a free one.
pub(super) fn lock_value(
    mine: &Mine,
    created: &str,
    ttl: Duration,
    concurrency: usize,
) -> anyhow::Result<String> {
    let entry = KuredEntry {
        node_id: mine.holder.clone(),
        metadata: KuredNodeMeta {
            unschedulable: false,
            fleetctl: Some(FleetctlMeta {
                host: mine.host.clone(),
                pid: mine.pid,
                process: mine.process.clone(),
                started: mine.started.clone(),
            }),
        },
        created: created.to_string(),
        ttl: i64::try_from(ttl.as_nanos()).unwrap_or(i64::MAX),
    };
    let json = if concurrency > 1 {
        serde_json::to_string(&KuredMultiLock {
            max_owners: i64::try_from(concurrency).unwrap_or(i64::MAX),
            locks: Some(vec![entry; concurrency]),
        })
    } else {
        serde_json::to_string(&entry)
    };
    json.context("encoding Kured's lock annotation")
}

/// Kured's annotation value for `me`'s lock taken at `started`, heartbeat
/// at `created`, with `ttl`, for a Kured with `concurrency`.
pub fn kured_lock_value(
    me: &Identity,
    started: SystemTime,
    created: SystemTime,
    ttl: Duration,
    concurrency: usize,
) -> anyhow::Result<String> {
    lock_value(&Mine::new(me, started), &rfc3339(created), ttl, concurrency)
}

/// Every entry of a lock annotation, in either form; an empty value has none.
pub(super) fn kured_entries(value: &str) -> Result<Vec<KuredEntry>, String> {
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let json: serde_json::Value =
        serde_json::from_str(value).map_err(|e| format!("not JSON: {e}"))?;
    let is_multi = json.get("locks").is_some() || json.get("maxOwners").is_some();
    if is_multi {
        let multi: KuredMultiLock = serde_json::from_value(json)
            .map_err(|e| format!("not Kured's multi-owner form: {e}"))?;
        Ok(multi.locks.unwrap_or_default())
    } else if json.get("nodeID").is_some() {
        let entry: KuredEntry =
            serde_json::from_value(json).map_err(|e| format!("not Kured's lock form: {e}"))?;
        Ok(vec![entry])
    } else {
        Err("neither of Kured's lock forms (no nodeID, no locks)".into())
    }
}

impl KuredEntry {
    pub(super) fn holder(&self) -> Holder {
        match &self.metadata.fleetctl {
            Some(me) => Holder {
                id: self.node_id.clone(),
                host: Some(me.host.clone()),
                pid: Some(me.pid.to_string()),
                process: me.process.clone(),
                started: Some(me.started.clone()),
                heartbeat: Some(self.created.clone()),
                ttl: self.ttl_duration(),
                gone: false,
            },
            // A Kured node, or a fleetctl from before heartbeats.
            None => Holder {
                id: self.node_id.clone(),
                started: (!self.created.is_empty()).then(|| self.created.clone()),
                ttl: self.ttl_duration(),
                ..Holder::default()
            },
        }
    }

    /// The entry's own TTL; `None` for 0 (never expires) or a negative one.
    fn ttl_duration(&self) -> Option<Duration> {
        u64::try_from(self.ttl)
            .ok()
            .filter(|&n| n > 0)
            .map(Duration::from_nanos)
    }

    /// As Kured's `ttlExpired`: a TTL > 0 that has run out since `created`.
    pub(super) fn expired(&self, now: SystemTime) -> bool {
        let Ok(ttl) = u64::try_from(self.ttl) else {
            return false;
        };
        if ttl == 0 {
            return false;
        }
        match parse_time(&self.created) {
            // A `created` near the end of time cannot expire: no overflow panic.
            Some(created) => created
                .checked_add(Duration::from_nanos(ttl))
                .is_some_and(|expires| expires <= now),
            None => false,
        }
    }
}

/// Reads Kured's annotation (`None`: absent) as Kured would at `now`: an
/// entry whose own TTL has run out no longer holds the lock; one with TTL 0
/// holds it until released.
pub fn kured_lock_state(value: Option<&str>, now: SystemTime) -> LockState {
    let entries = match kured_entries(value.unwrap_or("")) {
        Ok(entries) => entries,
        Err(why) => {
            return LockState::Unreadable {
                value: value.unwrap_or("").to_string(),
                why,
            };
        }
    };
    let holders: Vec<Holder> = entries
        .iter()
        .filter(|e| !e.expired(now))
        .map(KuredEntry::holder)
        .collect();
    if holders.is_empty() {
        LockState::Free
    } else {
        LockState::Held(holders)
    }
}

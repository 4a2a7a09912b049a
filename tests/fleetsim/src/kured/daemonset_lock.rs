//! Kured's lock as `pkg/daemonsetlock` keeps it (see `kured.rs` for what
//! the sim takes from it): the annotation's two forms, expiry by the pod's
//! node clock, and `Acquire`, `Holding` and `Release` on the DaemonSet.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::LOCK_ANNOTATION;
use crate::state::{Cluster, DaemonSet, Shared, now};
use crate::tools::util::parse_go_duration;

use super::DEFAULT_PERIOD;

/// Kured's settings, read from its container's flags as Kured parses them.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub ds_namespace: String,
    pub ds_name: String,
    pub annotation: String,
    pub period: f64,
    pub lock_ttl: f64,
    /// `--concurrency` (pflag's int; Kured's default 1).
    pub concurrency: usize,
}

impl Settings {
    pub fn of(ds: &DaemonSet) -> Settings {
        let argv: Vec<&String> = ds.command.iter().chain(&ds.args).collect();
        let flag = |name: &str| {
            let prefix = format!("--{name}=");
            argv.iter()
                .rev()
                .find_map(|a| a.strip_prefix(&prefix))
                .map(str::to_string)
        };
        let secs = |name: &str, default: f64| {
            flag(name)
                .and_then(|v| parse_go_duration(&v))
                .unwrap_or(default)
        };
        Settings {
            ds_namespace: flag("ds-namespace").unwrap_or_else(|| "kube-system".into()),
            ds_name: flag("ds-name").unwrap_or_else(|| "kured".into()),
            annotation: flag("lock-annotation").unwrap_or_else(|| LOCK_ANNOTATION.into()),
            period: secs("period", DEFAULT_PERIOD),
            lock_ttl: secs("lock-ttl", 0.0),
            concurrency: flag("concurrency")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(1),
        }
    }
}

/// `LockAnnotationValue`, as Go's `json.Unmarshal` fills it: unknown keys
/// ignored, missing ones zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LockValue {
    #[serde(rename = "nodeID", default)]
    pub node_id: String,
    #[serde(default)]
    pub metadata: NodeMeta,
    /// RFC 3339; empty: Go's zero time.
    #[serde(default)]
    pub created: String,
    /// Nanoseconds.
    #[serde(rename = "TTL", default)]
    pub ttl: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMeta {
    #[serde(default)]
    pub unschedulable: bool,
}

impl LockValue {
    /// Kured's `json.Unmarshal` into the struct; its error text when it fails.
    pub fn parse(text: &str) -> Result<LockValue, String> {
        let v: LockValue = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if !v.created.is_empty() && parse_rfc3339(&v.created).is_none() {
            return Err(format!("parsing time {:?} as RFC 3339", v.created));
        }
        Ok(v)
    }

    /// `ttlExpired(created, TTL)`.
    pub fn expired(&self, at: f64) -> bool {
        let created = parse_rfc3339(&self.created).unwrap_or(f64::NEG_INFINITY);
        self.ttl > 0 && at - created >= self.ttl as f64 / 1e9
    }

    /// What a Kured pod writes: `json.Marshal` of the struct, `created` as
    /// Go prints a UTC `time.Time` (RFC 3339, nanoseconds without trailing zeros).
    pub fn new(node: &str, unschedulable: bool, at: f64, ttl: f64) -> LockValue {
        LockValue {
            node_id: node.to_string(),
            metadata: NodeMeta { unschedulable },
            created: rfc3339_nano(at),
            ttl: (ttl * 1e9).round() as i64,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `2026-12-01T15:04:05.123456789Z`, trailing zeros of the fraction dropped.
pub fn rfc3339_nano(ts: f64) -> String {
    let c = crate::tools::civil(ts);
    let nanos = ((ts - ts.floor()) * 1e9).round().min(999_999_999.0) as u64;
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{frac}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// Seconds since the epoch of an RFC 3339 time (`Z` or `±HH:MM`).
pub fn parse_rfc3339(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (o.get(1..3)?.parse::<i64>().ok()? * 3600
                + o.get(4..6)?.parse::<i64>().ok()? * 60)
        }
        _ => return None,
    };
    // Howard Hinnant's days-from-civil.
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + sec - offset) as f64 + frac)
}

/// `multiLockAnnotationValue`, as `json.Unmarshal` fills it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MultiLock {
    #[serde(rename = "maxOwners", default)]
    pub max_owners: i64,
    /// `null` when Go's slice is nil.
    #[serde(default)]
    pub locks: Option<Vec<LockValue>>,
}

impl MultiLock {
    /// Kured's `json.Unmarshal` into the struct; its error when it fails.
    pub fn parse(text: &str) -> Result<MultiLock, String> {
        let m: MultiLock = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for entry in m.locks.iter().flatten() {
            if !entry.created.is_empty() && parse_rfc3339(&entry.created).is_none() {
                return Err(format!("parsing time {:?} as RFC 3339", entry.created));
            }
        }
        Ok(m)
    }

    /// `canAcquireMultiple`: the value with this node's entry added, or
    /// `None` when every slot is held by an unexpired entry.
    pub(crate) fn with_entry(
        &self,
        entry: LockValue,
        max_owners: usize,
        at: f64,
    ) -> Option<MultiLock> {
        let locks = self.locks.clone().unwrap_or_default();
        let mut next = MultiLock {
            max_owners: max_owners as i64,
            locks: None,
        };
        let kept: Vec<LockValue> = if self.locks.is_none() || locks.len() < max_owners {
            locks
        } else {
            let live: Vec<LockValue> = locks.iter().filter(|l| !l.expired(at)).cloned().collect();
            if live.len() == locks.len() {
                return None;
            }
            live
        };
        let mut kept = kept;
        kept.push(entry);
        next.locks = Some(kept);
        Some(next)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The Kured DaemonSet that holds the lock named by `settings`, if it is the
/// one installed.
fn lock_ds<'a>(c: &'a mut Cluster, s: &Settings) -> Option<&'a mut DaemonSet> {
    c.kured
        .as_mut()
        .filter(|k| k.namespace == s.ds_namespace && k.name == s.ds_name)
}

/// `Holding()`: this node's unexpired entry, if the lock is ours.
pub(super) fn holding(shared: &Shared, s: &Settings, me: &str) -> Result<Option<LockValue>> {
    let mut c = shared.cluster()?;
    let Some(ds) = lock_ds(&mut c, s) else {
        return Ok(None);
    };
    let Some(text) = ds.annotations.get(&s.annotation) else {
        return Ok(None);
    };
    if s.concurrency > 1 {
        return Ok(MultiLock::parse(text).ok().and_then(|m| {
            m.locks
                .into_iter()
                .flatten()
                .find(|v| v.node_id == me && !v.expired(now()))
        }));
    }
    Ok(LockValue::parse(text)
        .ok()
        .filter(|v| !v.expired(now()) && v.node_id == me))
}

/// What `Acquire` came to.
#[derive(Debug, PartialEq)]
pub(super) enum Acquired {
    Yes,
    HeldBy(String),
    Failed(String),
}

/// `Acquire(nodeMeta)`: a read and an Update in one step under the state
/// lock, which is what Kured's retry on Conflict amounts to.
pub(super) fn acquire(
    shared: &Shared,
    s: &Settings,
    me: &str,
    unschedulable: bool,
) -> Result<Acquired> {
    shared.update_cluster(|c| {
        let next_rv = c.next_resource_version();
        let Some(ds) = lock_ds(c, s) else {
            return Ok(Acquired::Failed(format!(
                "timed out trying to get daemonset {} in namespace {}",
                s.ds_name, s.ds_namespace
            )));
        };
        if s.concurrency > 1 {
            let current = match ds.annotations.get(&s.annotation) {
                None => MultiLock::default(),
                Some(text) => match MultiLock::parse(text) {
                    Ok(m) => m,
                    Err(e) => {
                        return Ok(Acquired::Failed(format!("error getting multi lock: {e}")));
                    }
                },
            };
            let entry = LockValue::new(me, unschedulable, now(), s.lock_ttl);
            let Some(next) = current.with_entry(entry, s.concurrency, now()) else {
                // Kured names no holder here (it joins the ids of an empty
                // value); the sim's log names them for the reader.
                let holders: Vec<String> = current
                    .locks
                    .iter()
                    .flatten()
                    .map(|l| l.node_id.clone())
                    .collect();
                return Ok(Acquired::HeldBy(holders.join(",")));
            };
            ds.annotations.insert(s.annotation.clone(), next.to_json());
            ds.resource_version = next_rv;
            c.resource_version = next_rv;
            return Ok(Acquired::Yes);
        }
        if let Some(text) = ds.annotations.get(&s.annotation) {
            let current = match LockValue::parse(text) {
                Ok(v) => v,
                Err(e) => return Ok(Acquired::Failed(e)),
            };
            if !current.expired(now()) {
                return Ok(if current.node_id == me {
                    Acquired::Yes
                } else {
                    Acquired::HeldBy(current.node_id)
                });
            }
        }
        let value = LockValue::new(me, unschedulable, now(), s.lock_ttl);
        ds.annotations.insert(s.annotation.clone(), value.to_json());
        ds.resource_version = next_rv;
        c.resource_version = next_rv;
        Ok(Acquired::Yes)
    })
}

/// `Release()`: only our own entry.
pub(super) fn release(shared: &Shared, s: &Settings, me: &str) -> Result<Result<(), String>> {
    shared.update_cluster(|c| {
        let next = c.next_resource_version();
        let Some(ds) = lock_ds(c, s) else {
            return Ok(Err("daemonset gone".into()));
        };
        let Some(text) = ds.annotations.get(&s.annotation) else {
            return Ok(Err("lock not held".into()));
        };
        if s.concurrency > 1 {
            let mut m = match MultiLock::parse(text) {
                Ok(m) => m,
                Err(e) => return Ok(Err(e)),
            };
            let mut locks = m.locks.take().unwrap_or_default();
            let Some(i) = locks.iter().position(|l| l.node_id == me) else {
                return Ok(Err("Lock not held".into()));
            };
            locks.remove(i);
            m.locks = Some(locks);
            ds.annotations.insert(s.annotation.clone(), m.to_json());
            ds.resource_version = next;
            c.resource_version = next;
            return Ok(Ok(()));
        }
        match LockValue::parse(text) {
            Ok(v) if v.node_id == me => {}
            Ok(v) => return Ok(Err(format!("not lock holder: {}", v.node_id))),
            Err(e) => return Ok(Err(e)),
        }
        ds.annotations.remove(&s.annotation);
        ds.resource_version = next;
        c.resource_version = next;
        Ok(Ok(()))
    })
}

pub(super) fn set_unschedulable(shared: &Shared, me: &str, on: bool) -> Result<()> {
    shared.update_cluster(|c| {
        if let Some(n) = c.nodes.get_mut(me)
            && n.unschedulable != on
        {
            n.unschedulable = on;
            c.resource_version += 1;
        }
        Ok(())
    })
}

//! Kured's own reboot lock: finding Kured in any namespace, reading where
//! its flags keep the lock, and holding that annotation in Kured's format.
//!
//! What this relies on in Kured (kubereboot/kured):
//!
//! - The manifest (`kured-ds.yaml`) and the Helm chart
//!   (kubereboot/charts `charts/kured/templates/daemonset.yaml`) run a
//!   container named `kured`, image `…/kured:<version>`, command
//!   `/usr/bin/kured`; the chart names the DaemonSet after the release and
//!   passes `--ds-name`/`--ds-namespace` to match. The image's entrypoint is
//!   `/usr/bin/kured` too (`Dockerfile`).
//! - `pkg/daemonsetlock`: the lock is the annotation `--lock-annotation` on
//!   DaemonSet `--ds-namespace`/`--ds-name`, a JSON `LockAnnotationValue`
//!   (`nodeID`, `metadata`, `created`, `TTL` in nanoseconds), or with
//!   `--concurrency` > 1 `{"maxOwners":N,"locks":[…]}`. Kured decodes it
//!   with `json.Unmarshal`, which ignores object keys it has no field for,
//!   so fleetctl's own details under `metadata` do not disturb it.
//! - Expiry, identical in every release from 1.5.0 to 1.23.0:
//!   `ttlExpired(created, ttl)` is `ttl > 0 && time.Since(created) >= ttl`,
//!   judged on the entry's own `created` and `TTL`; a pod's `--lock-ttl` is
//!   only what it writes into the entries it creates. Before 1.5.0 entries
//!   never expire.
//! - Environment variables (`KURED_<FLAG>`): ignored before 1.9.0; from
//!   1.9.0 to 1.16.x applied only to flags not given on the command line
//!   (`bindFlags`: `!f.Changed && v.IsSet`); from 1.17.0 applied after the
//!   flags, so they win (`LoadFromEnv` after `flag.Parse`).

use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::discovery::FoundKured;
use super::{
    ATTEMPTS, ForeignLockAction, Holder, Identity, Kubectl, Lock, LockKind, LockLost, LockOptions,
    LockState, Mine, Released, describe_holder, failed, human, judge, parse_time, rfc3339,
};
use crate::remote::kubectl::{self as k, ApiError, api_error};

// ---------------------------------------------------------------------------
// Kured's lock annotation

/// One lock entry as Kured writes it (`LockAnnotationValue`): field names
/// and order as Go's encoding/json produces them; `TTL` is a Go duration in
/// nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct KuredEntry {
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
fn lock_value(
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
fn kured_entries(value: &str) -> Result<Vec<KuredEntry>, String> {
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
    fn holder(&self) -> Holder {
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
    fn expired(&self, now: SystemTime) -> bool {
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

// ---------------------------------------------------------------------------
// Acquire, heartbeat, release

/// The lock DaemonSet as [`k::get_lock_annotation`] shows it.
struct LockObject {
    resource_version: String,
    /// The annotation; empty when absent.
    value: String,
}

/// `RESOURCEVERSION<TAB>VALUE`.
fn parse_lock_object(text: &str) -> anyhow::Result<LockObject> {
    let (rv, value) = text.split_once('\t').unwrap_or((text, ""));
    let rv = rv.trim();
    if rv.is_empty() {
        bail!("kubectl printed no resourceVersion, so the lock cannot be changed safely: {text:?}");
    }
    Ok(LockObject {
        resource_version: rv.to_string(),
        value: value.to_string(),
    })
}

/// `None` when the DaemonSet does not exist.
async fn read_lock<K: Kubectl>(
    api: &K,
    namespace: &str,
    name: &str,
    annotation: &str,
) -> anyhow::Result<Option<LockObject>> {
    let label = format!("lock: read annotation {annotation} of daemonset {namespace}/{name}");
    let out = api
        .kubectl(
            &label,
            &k::get_lock_annotation(namespace, name, annotation),
            None,
        )
        .await?;
    if !out.success() {
        if api_error(&out.stderr) == Some(ApiError::NotFound) {
            return Ok(None);
        }
        return Err(failed(api, &label, &out));
    }
    parse_lock_object(&out.stdout)
        .map(Some)
        .with_context(|| format!("{}: reading daemonset {namespace}/{name}", api.node()))
}

pub(super) async fn acquire<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
    found: FoundKured,
) -> anyhow::Result<Lock> {
    let FoundKured {
        kured,
        config,
        how,
        mut warnings,
    } = found;
    let (namespace, name, key) = (&config.ds_namespace, &config.ds_name, &config.annotation);
    let mine = Mine::new(me, now);
    let value = lock_value(&mine, &mine.started, opts.ttl, config.concurrency)?;
    let what = format!("Kured's reboot lock on daemonset {namespace}/{name}");
    let mut forced: Option<super::LockHeld> = None;
    for _ in 0..ATTEMPTS {
        let Some(current) = read_lock(api, namespace, name, key).await? else {
            if (namespace, name) == (&kured.namespace, &kured.name) {
                bail!(
                    "{}: daemonset {namespace}/{name} disappeared while fleetctl was taking Kured's lock; \
                     retry once Kured is back",
                    api.node()
                );
            }
            bail!(
                "{}: Kured (daemonset {}/{}) keeps its reboot lock on daemonset {namespace}/{name} \
                 (--ds-namespace/--ds-name), which does not exist, so Kured cannot lock either; fix \
                 Kured's flags before applying",
                api.node(),
                kured.namespace,
                kured.name
            );
        };
        let state = kured_lock_state(Some(&current.value), now);
        if state == LockState::Free {
            let label = format!("lock: take {what}");
            let args =
                k::annotate_daemonset(namespace, name, key, &value, &current.resource_version);
            let out = api.kubectl(&label, &args, None).await?;
            if out.success() {
                warnings.extend(forced.as_ref().and_then(kured_node_warning));
                return Ok(Lock {
                    kind: LockKind::Kured {
                        namespace: namespace.clone(),
                        name: name.clone(),
                        annotation: key.clone(),
                        concurrency: config.concurrency,
                        argv: kured.argv.clone(),
                        env: kured
                            .env
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                        image: kured.image.clone(),
                    },
                    mine,
                    ttl: opts.ttl,
                    chosen: how,
                    forced: forced.map(|held| held.removed()),
                    warnings,
                });
            }
            // Changed since we read it (Kured took it, or just status): read again.
            if api_error(&out.stderr) == Some(ApiError::Conflict) {
                continue;
            }
            return Err(failed(api, &label, &out));
        }
        match judge(&what, state, opts, now, forced.is_some()) {
            ForeignLockAction::Refuse(held) => return Err(anyhow::Error::new(held)),
            ForeignLockAction::Remove(held) => {
                let label = format!("lock: force-unlock {what}");
                let args =
                    k::remove_daemonset_annotation(namespace, name, key, &current.resource_version);
                let out = api.kubectl(&label, &args, None).await?;
                if out.success() {
                    api.note(
                        "lock-force-unlocked",
                        &format!("--force-unlock removed {}", held.removed()),
                    );
                    forced = Some(held);
                } else if api_error(&out.stderr) != Some(ApiError::Conflict) {
                    return Err(failed(api, &label, &out));
                }
                // On Conflict the lock changed after we judged it: judge again.
            }
        }
    }
    bail!(
        "{}: daemonset {namespace}/{name} changed {ATTEMPTS} times while fleetctl was taking Kured's lock \
         (Kured or a controller keeps writing to it); retry in a moment",
        api.node()
    )
}

/// Removing a Kured pod's lock mid-reboot means that pod will not uncordon
/// its node afterwards: say so.
fn kured_node_warning(held: &super::LockHeld) -> Option<String> {
    let LockState::Held(holders) = &held.state else {
        return None;
    };
    let nodes: Vec<&str> = holders
        .iter()
        .filter(|h| !h.is_fleetctl() && !h.id.is_empty())
        .map(|h| h.id.as_str())
        .collect();
    (!nodes.is_empty()).then(|| {
        format!(
            "--force-unlock removed the reboot lock Kured held for {}: if Kured was rebooting it, \
             it will not uncordon it afterwards; check `kubectl get nodes` for SchedulingDisabled",
            nodes.join(", ")
        )
    })
}

/// The lock's entries, each judged ours or not; `Err` describes who (or
/// what) holds it instead.
fn ours(lock: &Lock, value: &str, now: SystemTime) -> Result<usize, Option<String>> {
    let entries =
        kured_entries(value).map_err(|_| Some(format!("an unreadable value: {value}")))?;
    if entries.is_empty() {
        return Err(None);
    }
    let others: Vec<String> = entries
        .iter()
        .map(KuredEntry::holder)
        .filter(|h| !h.is(&lock.mine))
        .map(|h| describe_holder(&h, now))
        .collect();
    if others.is_empty() {
        Ok(entries.len())
    } else {
        Err(Some(others.join(", ")))
    }
}

pub(super) async fn heartbeat<K: Kubectl>(
    lock: &Lock,
    api: &K,
    now: SystemTime,
) -> anyhow::Result<()> {
    let LockKind::Kured {
        namespace,
        name,
        annotation,
        concurrency,
        ..
    } = &lock.kind
    else {
        bail!("not Kured's lock");
    };
    let what = format!("Kured's reboot lock on daemonset {namespace}/{name}");
    let lost = |held_by| {
        anyhow::Error::new(LockLost {
            lock: what.clone(),
            held_by,
        })
    };
    let value = lock_value(&lock.mine, &rfc3339(now), lock.ttl, *concurrency)?;
    for _ in 0..ATTEMPTS {
        let Some(current) = read_lock(api, namespace, name, annotation).await? else {
            return Err(lost(None));
        };
        if let Err(by) = ours(lock, &current.value, now) {
            return Err(lost(by));
        }
        let label = format!("lock: heartbeat {what}");
        let args = k::annotate_daemonset(
            namespace,
            name,
            annotation,
            &value,
            &current.resource_version,
        );
        let out = api.kubectl(&label, &args, None).await?;
        if out.success() {
            return Ok(());
        }
        match api_error(&out.stderr) {
            Some(ApiError::Conflict) => continue,
            Some(ApiError::NotFound) => {
                return Err(lost(None));
            }
            _ => return Err(failed(api, &label, &out)),
        }
    }
    bail!(
        "{}: daemonset {namespace}/{name} changed {ATTEMPTS} times while fleetctl was refreshing its lock's \
         heartbeat; the next heartbeat tries again (the lock stays valid for {} after the last one)",
        api.node(),
        human(lock.ttl)
    )
}

pub(super) async fn release<K: Kubectl>(lock: &Lock, api: &K) -> anyhow::Result<Released> {
    let LockKind::Kured {
        namespace,
        name,
        annotation,
        ..
    } = &lock.kind
    else {
        bail!("not Kured's lock");
    };
    let now = SystemTime::now();
    for _ in 0..ATTEMPTS {
        let Some(current) = read_lock(api, namespace, name, annotation).await? else {
            return Ok(Released::AlreadyGone);
        };
        match ours(lock, &current.value, now) {
            Ok(_) => {}
            Err(None) => return Ok(Released::AlreadyGone),
            Err(Some(by)) => return Ok(Released::TakenOver { by }),
        }
        let label = format!("lock: release Kured's reboot lock on daemonset {namespace}/{name}");
        let args =
            k::remove_daemonset_annotation(namespace, name, annotation, &current.resource_version);
        let out = api.kubectl(&label, &args, None).await?;
        if out.success() {
            return Ok(Released::Removed);
        }
        match api_error(&out.stderr) {
            Some(ApiError::Conflict) => continue,
            Some(ApiError::NotFound) => return Ok(Released::AlreadyGone),
            _ => return Err(failed(api, &label, &out)),
        }
    }
    bail!(
        "{}: daemonset {namespace}/{name} changed {ATTEMPTS} times while fleetctl was releasing Kured's lock; \
         Kured takes it back by itself {} after the last heartbeat, or remove it now: \
         run `kubectl -n {namespace} annotate daemonset {name} {annotation}-`",
        api.node(),
        human(lock.ttl)
    )
}

#[cfg(test)]
mod tests;

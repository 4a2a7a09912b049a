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

use std::time::SystemTime;

use anyhow::{Context, bail};

use super::discovery::FoundKured;
use super::{
    ATTEMPTS, ForeignLockAction, Identity, Kubectl, Lock, LockKind, LockLost, LockOptions,
    LockState, Mine, Released, describe_holder, failed, human, judge, read_if_found, rfc3339,
};
use crate::remote::kubectl::{self as k, ApiError, api_error};

mod kured_annotation;
use kured_annotation::{KuredEntry, kured_entries, lock_value};
pub use kured_annotation::{kured_lock_state, kured_lock_value};

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
    let args = k::get_lock_annotation(namespace, name, annotation);
    let Some(text) = read_if_found(api, &label, &args).await? else {
        return Ok(None);
    };
    parse_lock_object(&text)
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
    let lost = |held_by| LockLost::error(&what, held_by);
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

//! fleetctl's own lock when no Kured runs anywhere: a configmap, created
//! atomically (AlreadyExists means held), that records who holds it, where,
//! since when, and a heartbeat. Every later change names the uid and
//! resourceVersion it judged: the heartbeat is a merge patch carrying the
//! resourceVersion, the removal a DELETE with preconditions.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use super::{
    ATTEMPTS, ForeignLockAction, Holder, Identity, Kubectl, Lock, LockHeld, LockKind, LockLost,
    LockOptions, LockState, Mine, Released, describe_holder, failed, judge, read_if_found, rfc3339,
};
use crate::remote::kubectl::{self as k, ApiError, api_error};

/// fleetctl's lock configmap as [`k::get_lock_configmap`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockConfigMap {
    pub resource_version: String,
    pub uid: String,
    pub holder: Holder,
}

/// Parses `RESOURCEVERSION<TAB>UID<TAB>DATA`, DATA the configmap's `data`
/// as JSON (empty when it has none).
pub fn parse_lock_configmap(text: &str) -> anyhow::Result<LockConfigMap> {
    let mut fields = text.splitn(3, '\t');
    let rv = fields.next().unwrap_or("").trim();
    let uid = fields.next().unwrap_or("").trim();
    let data = fields.next().unwrap_or("").trim();
    if rv.is_empty() || uid.is_empty() {
        bail!(
            "kubectl printed no resourceVersion or uid, so the lock cannot be changed safely: {text:?}"
        );
    }
    let mut data: BTreeMap<String, String> = if data.is_empty() {
        BTreeMap::new()
    } else {
        serde_json::from_str(data)
            .with_context(|| format!("the configmap's data is not a JSON map: {data}"))?
    };
    let mut take = |key: &str| data.remove(key).filter(|v| !v.is_empty());
    Ok(LockConfigMap {
        resource_version: rv.to_string(),
        uid: uid.to_string(),
        holder: Holder {
            id: take("holder").unwrap_or_else(|| "an unknown holder".into()),
            host: take("host"),
            pid: take("pid"),
            process: take("process"),
            started: take("started"),
            heartbeat: take("heartbeat"),
            // Whole seconds; anything else is no TTL recorded.
            ttl: take("ttl")
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|&s| s > 0)
                .map(Duration::from_secs),
            gone: false,
        },
    })
}

/// `None` when the configmap does not exist.
async fn read<K: Kubectl>(
    api: &K,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<LockConfigMap>> {
    let label = format!("lock: read configmap {namespace}/{name}");
    let args = k::get_lock_configmap(namespace, name);
    let Some(text) = read_if_found(api, &label, &args).await? else {
        return Ok(None);
    };
    parse_lock_configmap(&text)
        .map(Some)
        .with_context(|| format!("{}: reading configmap {namespace}/{name}", api.node()))
}

/// Deletes the configmap if it is still `current` (same uid and
/// resourceVersion). `Ok(false)` when it changed or went meanwhile.
async fn delete_if_unchanged<K: Kubectl>(
    api: &K,
    label: &str,
    namespace: &str,
    name: &str,
    current: &LockConfigMap,
) -> anyhow::Result<bool> {
    let call =
        k::delete_configmap_if_unchanged(namespace, name, &current.resource_version, &current.uid);
    let out = api.kubectl(label, &call.args, Some(&call.stdin)).await?;
    if out.success() {
        return Ok(true);
    }
    match api_error(&out.stderr) {
        Some(ApiError::Conflict | ApiError::NotFound) => Ok(false),
        _ => Err(failed(api, label, &out)),
    }
}

pub(super) async fn acquire<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
) -> anyhow::Result<Lock> {
    let (namespace, name) = (k::LOCK_NAMESPACE, k::LOCK_CONFIGMAP);
    let what = format!("fleetctl's lock (configmap {namespace}/{name})");
    let mine = Mine::new(me, now);
    let pid = mine.pid.to_string();
    let ttl = opts.ttl.as_secs().to_string();
    let mut literals = vec![
        ("holder", mine.holder.as_str()),
        ("host", mine.host.as_str()),
        ("pid", pid.as_str()),
        ("started", mine.started.as_str()),
        ("heartbeat", mine.started.as_str()),
        ("ttl", ttl.as_str()),
    ];
    if let Some(process) = &mine.process {
        literals.push(("process", process.as_str()));
    }
    let mut forced: Option<LockHeld> = None;
    for _ in 0..ATTEMPTS {
        let label = format!("lock: take {what}");
        let out = api
            .kubectl(
                &label,
                &k::create_configmap(namespace, name, &literals),
                None,
            )
            .await?;
        if out.success() {
            return Ok(Lock {
                kind: LockKind::ConfigMap {
                    namespace: namespace.into(),
                    name: name.into(),
                },
                mine,
                ttl: opts.ttl,
                chosen: "no Kured DaemonSet or pod in any namespace".into(),
                forced: forced.map(|held| held.removed()),
                warnings: Vec::new(),
            });
        }
        if api_error(&out.stderr) != Some(ApiError::AlreadyExists) {
            return Err(failed(api, &label, &out));
        }
        let Some(current) = read(api, namespace, name).await? else {
            continue; // released between our create and our read
        };
        let state = LockState::Held(vec![current.holder.clone()]);
        match judge(&what, state, opts, now, forced.is_some()) {
            ForeignLockAction::Refuse(held) => return Err(anyhow::Error::new(held)),
            ForeignLockAction::Remove(held) => {
                let label = format!("lock: force-unlock {what}");
                if delete_if_unchanged(api, &label, namespace, name, &current).await? {
                    api.note(
                        "lock-force-unlocked",
                        &format!("--force-unlock removed {}", held.removed()),
                    );
                    forced = Some(held);
                }
                // Otherwise it changed after we judged it: judge again.
            }
        }
    }
    bail!(
        "{}: {what} was taken and released {ATTEMPTS} times while fleetctl tried to take it; \
         another fleetctl is running against this cluster",
        api.node()
    )
}

pub(super) async fn heartbeat<K: Kubectl>(
    lock: &Lock,
    api: &K,
    now: SystemTime,
) -> anyhow::Result<()> {
    let LockKind::ConfigMap { namespace, name } = &lock.kind else {
        bail!("not fleetctl's configmap lock");
    };
    let what = format!("fleetctl's lock (configmap {namespace}/{name})");
    let lost = |held_by| LockLost::error(&what, held_by);
    let beat = rfc3339(now);
    for _ in 0..ATTEMPTS {
        let Some(current) = read(api, namespace, name).await? else {
            return Err(lost(None));
        };
        if !current.holder.is(&lock.mine) {
            return Err(lost(Some(describe_holder(&current.holder, now))));
        }
        let label = format!("lock: heartbeat {what}");
        let args = k::patch_configmap_data(
            namespace,
            name,
            &current.resource_version,
            &[("heartbeat", beat.as_str())],
        );
        let out = api.kubectl(&label, &args, None).await?;
        if out.success() {
            return Ok(());
        }
        match api_error(&out.stderr) {
            Some(ApiError::Conflict) => continue,
            Some(ApiError::NotFound) => return Err(lost(None)),
            _ => return Err(failed(api, &label, &out)),
        }
    }
    bail!(
        "{}: {what} changed {ATTEMPTS} times while fleetctl was refreshing its heartbeat; the next \
         heartbeat tries again",
        api.node()
    )
}

pub(super) async fn release<K: Kubectl>(lock: &Lock, api: &K) -> anyhow::Result<Released> {
    let LockKind::ConfigMap { namespace, name } = &lock.kind else {
        bail!("not fleetctl's configmap lock");
    };
    for _ in 0..ATTEMPTS {
        let Some(current) = read(api, namespace, name).await? else {
            return Ok(Released::AlreadyGone);
        };
        if !current.holder.is(&lock.mine) {
            return Ok(Released::TakenOver {
                by: describe_holder(&current.holder, SystemTime::now()),
            });
        }
        let label = format!("lock: release fleetctl's lock (configmap {namespace}/{name})");
        if delete_if_unchanged(api, &label, namespace, name, &current).await? {
            return Ok(Released::Removed);
        }
    }
    bail!(
        "{}: configmap {namespace}/{name} changed {ATTEMPTS} times while fleetctl was releasing its lock; \
         if it is still this run's, remove it with `kubectl -n {namespace} delete configmap {name}`",
        api.node()
    )
}

#[cfg(test)]
mod tests;

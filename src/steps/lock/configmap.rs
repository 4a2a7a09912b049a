//! fleetctl's own lock when Kured is not installed: a configmap, created
//! atomically (AlreadyExists means held), that records who holds it.

use std::collections::BTreeMap;
use std::time::SystemTime;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::{
    ATTEMPTS, Holder, Identity, Kubectl, Lock, LockHeld, LockKind, LockOptions, LockState,
    Released, describe_holder, failed, rfc3339,
};
use crate::remote::kubectl::{self as k, ApiError, api_error};

// ---------------------------------------------------------------------------
// fleetctl's configmap

#[derive(Deserialize)]
struct ConfigMapJson {
    #[serde(default)]
    data: Option<BTreeMap<String, String>>,
}

/// The holder recorded in fleetctl's lock configmap (`kubectl get configmap -o json`).
pub fn parse_lock_configmap(json: &str) -> anyhow::Result<Holder> {
    let cm: ConfigMapJson =
        serde_json::from_str(json).context("kubectl's output is not a ConfigMap in JSON")?;
    let mut data = cm.data.unwrap_or_default();
    Ok(Holder {
        id: data
            .remove("holder")
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "an unknown holder".into()),
        since: data.remove("started").unwrap_or_default(),
        pid: data.remove("pid"),
        host: data.remove("host"),
    })
}

pub(super) async fn acquire_configmap<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
) -> anyhow::Result<Lock> {
    let (namespace, name) = (k::LOCK_NAMESPACE, k::LOCK_CONFIGMAP);
    let what = format!("fleetctl's lock (configmap {namespace}/{name})");
    let holder = me.holder();
    let pid = me.pid.to_string();
    let started = rfc3339(now);
    let literals = [
        ("holder", holder.as_str()),
        ("host", me.host.as_str()),
        ("pid", pid.as_str()),
        ("started", started.as_str()),
    ];
    let mut forced: Option<LockHeld> = None;
    for _ in 0..ATTEMPTS {
        let label = format!("lock: take {what}");
        let out = api
            .kubectl(&label, &k::create_configmap(namespace, name, &literals))
            .await?;
        if out.success() {
            return Ok(Lock {
                kind: LockKind::ConfigMap {
                    namespace: namespace.into(),
                    name: name.into(),
                    pid,
                    started,
                },
                holder,
                forced: forced.map(|held| held.to_string()),
                warnings: Vec::new(),
            });
        }
        if api_error(&out.stderr) != Some(ApiError::AlreadyExists) {
            return Err(failed(api, &label, &out));
        }
        let Some(current) = read_configmap(api, namespace, name).await? else {
            continue; // released between our create and our read
        };
        let held = LockHeld {
            lock: what.clone(),
            state: LockState::Held(vec![current]),
            now,
        };
        if !opts.force_unlock || forced.is_some() {
            return Err(anyhow::Error::new(held));
        }
        let label = format!("lock: force-unlock {what}");
        let out = api
            .kubectl(&label, &k::delete_configmap(namespace, name))
            .await?;
        if !out.success() && api_error(&out.stderr) != Some(ApiError::NotFound) {
            return Err(failed(api, &label, &out));
        }
        api.note(
            "lock-force-unlocked",
            &format!("--force-unlock removed it: {held}"),
        );
        forced = Some(held);
    }
    bail!(
        "{}: {what} was taken and released {ATTEMPTS} times while fleetctl tried to take it; \
         another fleetctl is running against this cluster",
        api.node()
    )
}

/// `None` when the configmap does not exist.
async fn read_configmap<K: Kubectl>(
    api: &K,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<Holder>> {
    let label = format!("lock: read configmap {namespace}/{name}");
    let out = api
        .kubectl(&label, &k::get_configmap(namespace, name))
        .await?;
    if !out.success() {
        if api_error(&out.stderr) == Some(ApiError::NotFound) {
            return Ok(None);
        }
        return Err(failed(api, &label, &out));
    }
    parse_lock_configmap(&out.stdout)
        .map(Some)
        .with_context(|| format!("{}: reading configmap {namespace}/{name}", api.node()))
}

impl Lock {
    pub(super) async fn release_configmap<K: Kubectl>(
        &self,
        api: &K,
        namespace: &str,
        name: &str,
        pid: &str,
        started: &str,
    ) -> anyhow::Result<Released> {
        let Some(current) = read_configmap(api, namespace, name).await? else {
            return Ok(Released::AlreadyGone);
        };
        let ours = current.id == self.holder
            && current.pid.as_deref() == Some(pid)
            && current.since == started;
        if !ours {
            return Ok(Released::TakenOver {
                by: describe_holder(&current, SystemTime::now()),
            });
        }
        let label = format!("lock: release fleetctl's lock (configmap {namespace}/{name})");
        let out = api
            .kubectl(&label, &k::delete_configmap(namespace, name))
            .await?;
        if out.success() {
            Ok(Released::Removed)
        } else if api_error(&out.stderr) == Some(ApiError::NotFound) {
            Ok(Released::AlreadyGone)
        } else {
            Err(failed(api, &label, &out))
        }
    }
}

#[cfg(test)]
mod tests;

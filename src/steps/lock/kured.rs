//! Kured's own reboot lock: the annotation on Kured's DaemonSet, found from
//! Kured's flags, written in Kured's format, and given back only while it is
//! still ours.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::{
    ATTEMPTS, Holder, Kubectl, Lock, LockHeld, LockKind, LockOptions, LockState, Released, failed,
    rfc3339,
};
use crate::remote::kubectl::{self as k, ApiError, api_error};
use crate::steps::lock::Identity;

/// Kured's default `--lock-annotation`.
pub const KURED_ANNOTATION: &str = "weave.works/kured-node-lock";
/// Kured's default `--ds-namespace`, and where fleetctl looks for Kured.
pub const KURED_NAMESPACE: &str = "kube-system";
/// Kured's default `--ds-name`, and the DaemonSet fleetctl looks for.
pub const KURED_NAME: &str = "kured";

// ---------------------------------------------------------------------------
// Kured's DaemonSet

/// A DaemonSet as `kubectl get daemonset -o json` shows it: what the lock
/// needs from Kured's (its container's argv and env) and from the one
/// holding the lock (annotations and resourceVersion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredInfo {
    pub namespace: String,
    pub name: String,
    pub resource_version: String,
    pub annotations: BTreeMap<String, String>,
    /// The Kured container's `command` then `args`, as the kubelet runs them.
    pub argv: Vec<String>,
    /// The Kured container's env vars with a literal `value`.
    pub env: BTreeMap<String, String>,
}

/// Where and how Kured keeps its lock, from its flags (and `KURED_*` env
/// vars, which newer Kured releases apply after the flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredConfig {
    /// `--ds-namespace` (default kube-system).
    pub ds_namespace: String,
    /// `--ds-name` (default kured).
    pub ds_name: String,
    /// `--lock-annotation` (default weave.works/kured-node-lock).
    pub annotation: String,
    /// `--concurrency` (default 1): above 1 Kured uses the multi-owner form.
    pub concurrency: usize,
    /// `--lock-ttl`, when set to something other than 0.
    pub lock_ttl: Option<String>,
}

#[derive(Deserialize)]
struct DaemonSetJson {
    metadata: MetaJson,
    #[serde(default)]
    spec: Option<DaemonSetSpecJson>,
}

#[derive(Deserialize)]
struct MetaJson {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct DaemonSetSpecJson {
    template: PodTemplateJson,
}

#[derive(Deserialize)]
struct PodTemplateJson {
    spec: PodSpecJson,
}

#[derive(Deserialize)]
struct PodSpecJson {
    #[serde(default)]
    containers: Vec<ContainerJson>,
}

#[derive(Deserialize)]
struct ContainerJson {
    #[serde(default)]
    name: String,
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<EnvJson>>,
}

#[derive(Deserialize)]
struct EnvJson {
    name: String,
    #[serde(default)]
    value: Option<String>,
}

/// Parses `kubectl get daemonset NAME -o json`. The Kured container is the
/// one named `kured`, else the first.
pub fn parse_daemonset(json: &str) -> anyhow::Result<KuredInfo> {
    let ds: DaemonSetJson =
        serde_json::from_str(json).context("kubectl's output is not a DaemonSet in JSON")?;
    if ds.metadata.resource_version.is_empty() {
        bail!(
            "daemonset {}/{} has no metadata.resourceVersion, so it cannot be updated safely",
            ds.metadata.namespace,
            ds.metadata.name
        );
    }
    let mut containers = ds
        .spec
        .map(|s| s.template.spec.containers)
        .unwrap_or_default();
    let index = containers
        .iter()
        .position(|c| c.name == KURED_NAME)
        .unwrap_or(0);
    let (argv, env) = if containers.is_empty() {
        (Vec::new(), BTreeMap::new())
    } else {
        let c = containers.swap_remove(index);
        let mut argv = c.command.unwrap_or_default();
        argv.extend(c.args.unwrap_or_default());
        let env = c
            .env
            .unwrap_or_default()
            .into_iter()
            .filter_map(|e| Some((e.name, e.value?)))
            .collect();
        (argv, env)
    };
    Ok(KuredInfo {
        namespace: ds.metadata.namespace,
        name: ds.metadata.name,
        resource_version: ds.metadata.resource_version,
        annotations: ds.metadata.annotations.unwrap_or_default(),
        argv,
        env,
    })
}

impl KuredInfo {
    /// Kured's lock settings from this DaemonSet's container, with Kured's defaults.
    pub fn config(&self) -> anyhow::Result<KuredConfig> {
        let setting = |flag: &str| {
            let env = format!("KURED_{}", flag.to_uppercase().replace('-', "_"));
            self.env
                .get(&env)
                .cloned()
                .or_else(|| flag_value(&self.argv, flag))
        };
        let concurrency = match setting("concurrency") {
            None => 1,
            Some(raw) => raw.trim().parse::<i64>().map_err(|_| {
                anyhow!(
                    "Kured's daemonset {}/{} sets --concurrency to `{raw}`, which is not a number; fix Kured's configuration",
                    self.namespace,
                    self.name
                )
            })?,
        };
        Ok(KuredConfig {
            ds_namespace: setting("ds-namespace").unwrap_or_else(|| KURED_NAMESPACE.into()),
            ds_name: setting("ds-name").unwrap_or_else(|| KURED_NAME.into()),
            annotation: setting("lock-annotation").unwrap_or_else(|| KURED_ANNOTATION.into()),
            concurrency: usize::try_from(concurrency.max(1)).unwrap_or(1),
            lock_ttl: setting("lock-ttl").filter(|ttl| !matches!(ttl.trim(), "" | "0" | "0s")),
        })
    }
}

/// The value of `--name=value` or `--name value` in `argv` (the last one
/// wins, as with Kured's flag parser); flags end at `--`.
fn flag_value(argv: &[String], name: &str) -> Option<String> {
    let bare = format!("--{name}");
    let with_eq = format!("--{name}=");
    let mut found = None;
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if let Some(value) = arg.strip_prefix(&with_eq) {
            found = Some(value.to_string());
        } else if *arg == bare {
            found = args.next().cloned().or(found);
        }
    }
    found
}

// ---------------------------------------------------------------------------
// Kured's lock annotation

/// One lock entry as Kured writes it (`LockAnnotationValue`): field names
/// and order as Go's encoding/json produces them; `TTL` is a Go duration in
/// nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct KuredEntry {
    #[serde(rename = "nodeID", default)]
    node_id: String,
    #[serde(default)]
    metadata: KuredNodeMeta,
    #[serde(default)]
    created: String,
    #[serde(rename = "TTL", default)]
    ttl: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct KuredNodeMeta {
    #[serde(default)]
    unschedulable: bool,
}

/// The form Kured uses with `--concurrency` > 1.
#[derive(Debug, Serialize, Deserialize)]
struct KuredMultiLock {
    #[serde(rename = "maxOwners", default)]
    max_owners: i64,
    #[serde(default)]
    locks: Option<Vec<KuredEntry>>,
}

/// Kured's annotation value for a lock held by `holder` since `created`
/// (RFC 3339): the single form, or with `concurrency` > 1 the multi-owner
/// form with every one of the `concurrency` slots taken, so no Kured pod
/// finds a free one.
pub fn kured_lock_value(holder: &str, created: &str, concurrency: usize) -> anyhow::Result<String> {
    let entry = KuredEntry {
        node_id: holder.to_string(),
        metadata: KuredNodeMeta::default(),
        created: created.to_string(),
        ttl: 0,
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

/// Reads Kured's annotation (`None`: absent) as Kured would at `now`: an
/// entry whose own TTL has run out no longer holds the lock. An entry with
/// TTL 0 holds it until released (older Kured releases never expire it;
/// newer ones may apply their `--lock-ttl`, which we do not, to stay safe).
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
        .into_iter()
        .filter(|e| !expired(e, now))
        .map(|e| Holder {
            id: e.node_id,
            since: e.created,
            pid: None,
            host: None,
        })
        .collect();
    if holders.is_empty() {
        LockState::Free
    } else {
        LockState::Held(holders)
    }
}

fn expired(entry: &KuredEntry, now: SystemTime) -> bool {
    let Ok(ttl) = u64::try_from(entry.ttl) else {
        return false;
    };
    if ttl == 0 {
        return false;
    }
    match humantime::parse_rfc3339(&entry.created) {
        Ok(created) => created + Duration::from_nanos(ttl) <= now,
        Err(_) => false,
    }
}

pub(super) async fn read_daemonset<K: Kubectl>(
    api: &K,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<KuredInfo>> {
    let label = format!("lock: read daemonset {namespace}/{name}");
    let out = api
        .kubectl(&label, &k::get_daemonset(namespace, name))
        .await?;
    if !out.success() {
        if api_error(&out.stderr) == Some(ApiError::NotFound) {
            return Ok(None);
        }
        return Err(failed(api, &label, &out));
    }
    parse_daemonset(&out.stdout)
        .map(Some)
        .with_context(|| format!("{}: reading daemonset {namespace}/{name}", api.node()))
}

pub(super) async fn acquire_kured<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
    kured: KuredInfo,
) -> anyhow::Result<Lock> {
    let config = kured
        .config()
        .with_context(|| format!("{}: reading Kured's lock settings", api.node()))?;
    let mut ds = if config.ds_namespace == kured.namespace && config.ds_name == kured.name {
        kured
    } else {
        lock_daemonset(api, &kured, &config).await?
    };
    let key = config.annotation.clone();
    let holder = me.holder();
    let created = rfc3339(now);
    let value = kured_lock_value(&holder, &created, config.concurrency)?;
    let what = format!(
        "Kured's reboot lock on daemonset {}/{}",
        ds.namespace, ds.name
    );
    let mut forced: Option<LockHeld> = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            ds = reread(api, &ds).await?;
        }
        let current = ds.annotations.get(&key).map(String::as_str);
        let state = kured_lock_state(current, now);
        if state == LockState::Free {
            let args = k::annotate_daemonset(
                &ds.namespace,
                &ds.name,
                &key,
                &value,
                &ds.resource_version,
                current.is_some(),
            );
            let label = format!("lock: take {what}");
            let out = api.kubectl(&label, &args).await?;
            if out.success() {
                let mut warnings: Vec<String> = ttl_warning(&config).into_iter().collect();
                warnings.extend(forced.as_ref().and_then(kured_node_warning));
                return Ok(Lock {
                    kind: LockKind::Kured {
                        namespace: ds.namespace,
                        name: ds.name,
                        annotation: key,
                        created,
                    },
                    holder,
                    forced: forced.map(|held| held.to_string()),
                    warnings,
                });
            }
            match api_error(&out.stderr) {
                // Changed since we read it (Kured took it, or just status): read again.
                Some(ApiError::Conflict | ApiError::AnnotationExists) => continue,
                _ => return Err(failed(api, &label, &out)),
            }
        }
        let held = LockHeld {
            lock: what.clone(),
            state,
            now,
        };
        if !opts.force_unlock || forced.is_some() {
            return Err(anyhow::Error::new(held));
        }
        let label = format!("lock: force-unlock {what}");
        let args =
            k::remove_daemonset_annotation(&ds.namespace, &ds.name, &key, &ds.resource_version);
        let out = api.kubectl(&label, &args).await?;
        if out.success() {
            api.note(
                "lock-force-unlocked",
                &format!("--force-unlock removed it: {held}"),
            );
            forced = Some(held);
        } else if api_error(&out.stderr) != Some(ApiError::Conflict) {
            return Err(failed(api, &label, &out));
        }
    }
    bail!(
        "{}: daemonset {}/{} changed {ATTEMPTS} times while fleetctl was taking Kured's lock \
         (Kured or a controller keeps writing to it); retry in a moment",
        api.node(),
        ds.namespace,
        ds.name
    )
}

/// `ds` again, after a conflict.
async fn reread<K: Kubectl>(api: &K, ds: &KuredInfo) -> anyhow::Result<KuredInfo> {
    let (namespace, name) = (&ds.namespace, &ds.name);
    read_daemonset(api, namespace, name).await?.ok_or_else(|| {
        anyhow!(
            "{}: daemonset {namespace}/{name} disappeared while fleetctl was taking Kured's lock; retry",
            api.node()
        )
    })
}

/// The DaemonSet Kured's flags name for its lock, when it is not Kured's own.
async fn lock_daemonset<K: Kubectl>(
    api: &K,
    kured: &KuredInfo,
    config: &KuredConfig,
) -> anyhow::Result<KuredInfo> {
    read_daemonset(api, &config.ds_namespace, &config.ds_name)
        .await?
        .ok_or_else(|| {
            anyhow!(
                "{}: Kured (daemonset {}/{}) keeps its reboot lock on daemonset {}/{} (--ds-namespace/--ds-name), \
                 which does not exist, so Kured cannot lock either; fix Kured's flags before applying",
                api.node(),
                kured.namespace,
                kured.name,
                config.ds_namespace,
                config.ds_name
            )
        })
}

fn ttl_warning(config: &KuredConfig) -> Option<String> {
    config.lock_ttl.as_ref().map(|ttl| {
        format!(
            "Kured runs with --lock-ttl={ttl}: Kured releases that apply it to locks recording no TTL \
             (fleetctl's records none) may consider fleetctl's lock expired after {ttl} and reboot nodes \
             while apply is still running"
        )
    })
}

/// Removing a Kured pod's lock mid-reboot means that pod will not uncordon
/// its node afterwards: say so.
fn kured_node_warning(held: &LockHeld) -> Option<String> {
    let LockState::Held(holders) = &held.state else {
        return None;
    };
    let nodes: Vec<&str> = holders
        .iter()
        .filter(|h| !h.is_fleetctl())
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

impl Lock {
    pub(super) async fn release_kured<K: Kubectl>(
        &self,
        api: &K,
        namespace: &str,
        name: &str,
        annotation: &str,
        created: &str,
    ) -> anyhow::Result<Released> {
        for _ in 0..ATTEMPTS {
            let Some(ds) = read_daemonset(api, namespace, name).await? else {
                return Ok(Released::AlreadyGone);
            };
            let Some(value) = ds.annotations.get(annotation) else {
                return Ok(Released::AlreadyGone);
            };
            let entries = match kured_entries(value) {
                Ok(entries) if entries.is_empty() => return Ok(Released::AlreadyGone),
                Ok(entries) => entries,
                Err(_) => {
                    return Ok(Released::TakenOver {
                        by: format!("an unreadable value: {value}"),
                    });
                }
            };
            let ours = entries
                .iter()
                .all(|e| e.node_id == self.holder && e.created == created);
            if !ours {
                let by: Vec<&str> = entries.iter().map(|e| e.node_id.as_str()).collect();
                return Ok(Released::TakenOver { by: by.join(", ") });
            }
            let label =
                format!("lock: release Kured's reboot lock on daemonset {namespace}/{name}");
            let args =
                k::remove_daemonset_annotation(namespace, name, annotation, &ds.resource_version);
            let out = api.kubectl(&label, &args).await?;
            if out.success() {
                return Ok(Released::Removed);
            }
            if api_error(&out.stderr) != Some(ApiError::Conflict) {
                return Err(failed(api, &label, &out));
            }
        }
        bail!(
            "{}: daemonset {namespace}/{name} changed {ATTEMPTS} times while fleetctl was releasing Kured's lock; \
             Kured will not reboot anything until annotation {annotation} is removed: \
             run `kubectl -n {namespace} annotate daemonset {name} {annotation}-`",
            api.node()
        )
    }
}

#[cfg(test)]
mod tests;

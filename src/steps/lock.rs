//! Apply's lock: only one apply per fleet at a time, and no Kured reboot
//! behind fleetctl's back while it runs.
//!
//! When Kured is installed, fleetctl holds *Kured's own* reboot lock — the
//! annotation on Kured's DaemonSet, written in Kured's format with every
//! slot taken — so Kured sees a holder and waits. The holder id
//! `fleetctl/<user>@<host>` contains a `/`, which no node name can, so no
//! Kured pod ever takes it for its own. The write names the resourceVersion
//! it read, so a Kured pod taking the lock at the same moment makes the API
//! answer Conflict instead of one silently overwriting the other.
//!
//! Without Kured, the lock is a configmap in kube-system, created
//! atomically (AlreadyExists means held), recording holder, host, pid and
//! start time.
//!
//! A held lock stops apply with who holds it and since when; `--force-unlock`
//! removes any holder first (journaled). Release removes the lock only if it
//! is still ours, and is safe to call twice.
//!
//! Everything that decides (Kured's args, the annotation's two JSON forms,
//! expiry, messages) is pure; the API is reached through [`Kubectl`], which
//! [`Remote`] implements (kubectl as root on a control-plane node) and the
//! tests fake.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime};

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::runner::{CommandFailed, Remote};
use crate::remote::kubectl::{self as k, ApiError, api_error};
use crate::ssh::Output;

/// Kured's default `--lock-annotation`.
pub const KURED_ANNOTATION: &str = "weave.works/kured-node-lock";
/// Kured's default `--ds-namespace`, and where fleetctl looks for Kured.
pub const KURED_NAMESPACE: &str = "kube-system";
/// Kured's default `--ds-name`, and the DaemonSet fleetctl looks for.
pub const KURED_NAME: &str = "kured";

/// Read–decide–write rounds before giving up on an object that keeps
/// changing (a DaemonSet's resourceVersion also moves with its status).
const ATTEMPTS: usize = 3;

/// The `--force-unlock` hint every "held" message ends with.
const FORCE_HINT: &str = "run `fleetctl apply --force-unlock`";

/// The API as the lock needs it: kubectl with these arguments, as root with
/// the admin kubeconfig on a control-plane node.
pub trait Kubectl {
    /// Runs kubectl with `args`; `label` says why, for the journal. A
    /// non-zero exit is not an error here (the lock reads kubectl's reason).
    fn kubectl(
        &self,
        label: &str,
        args: &[String],
    ) -> impl Future<Output = anyhow::Result<Output>> + Send;

    /// Records a lock decision in the journal (`lock-acquired`, …).
    fn note(&self, kind: &str, detail: &str);

    /// The node kubectl runs on, for error messages.
    fn node(&self) -> &str;
}

impl Kubectl for Remote {
    async fn kubectl(&self, label: &str, args: &[String]) -> anyhow::Result<Output> {
        self.run_root(label, &k::kubectl(args), None).await
    }

    fn note(&self, kind: &str, detail: &str) {
        self.journal().event(kind, Some(Remote::node(self)), detail);
    }

    fn node(&self) -> &str {
        Remote::node(self)
    }
}

/// Who is taking the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub host: String,
    pub pid: u32,
}

impl Identity {
    /// This process: `$USER` (or `$LOGNAME`), the machine's hostname, its pid.
    pub fn local() -> Identity {
        Identity {
            user: local_user(),
            host: local_host(),
            pid: std::process::id(),
        }
    }

    /// `fleetctl/<user>@<host>`: never a node name (node names cannot
    /// contain `/`), so Kured never mistakes it for one of its pods.
    pub fn holder(&self) -> String {
        format!("fleetctl/{}@{}", self.user, self.host)
    }
}

fn local_user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn local_host() -> String {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let from_command = || {
        std::process::Command::new("hostname")
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    from_proc
        .or_else(from_command)
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into())
}

/// Where to look for Kured, and whether to remove a lock someone holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    pub kured_namespace: String,
    pub kured_name: String,
    /// `--force-unlock`: remove the current holder's lock first (any holder).
    pub force_unlock: bool,
}

impl Default for LockOptions {
    fn default() -> Self {
        LockOptions {
            kured_namespace: KURED_NAMESPACE.into(),
            kured_name: KURED_NAME.into(),
            force_unlock: false,
        }
    }
}

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

/// Who holds a lock and since when, as recorded in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// A Kured node name, or `fleetctl/<user>@<host>`.
    pub id: String,
    /// The start time as recorded (RFC 3339), possibly empty.
    pub since: String,
    /// The holder's pid and host, when recorded (fleetctl's configmap).
    pub pid: Option<String>,
    pub host: Option<String>,
}

impl Holder {
    fn is_fleetctl(&self) -> bool {
        self.id.starts_with("fleetctl/")
    }
}

/// What a lock annotation (or its absence) means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    Free,
    Held(Vec<Holder>),
    /// A value that is not a lock in either of Kured's forms.
    Unreadable {
        value: String,
        why: String,
    },
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

// ---------------------------------------------------------------------------
// Messages

/// Apply cannot start: someone else holds the lock. The message says who,
/// since when, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockHeld {
    /// "Kured's reboot lock on daemonset kube-system/kured"
    pub lock: String,
    pub state: LockState,
    /// When this was observed, for the holder's age.
    pub now: SystemTime,
}

impl fmt::Display for LockHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            LockState::Free => write!(f, "{} is free", self.lock),
            LockState::Unreadable { value, why } => write!(
                f,
                "{} holds a value fleetctl cannot read as a lock ({why}): {value}. \
                 If nothing uses it, {FORCE_HINT} to remove it.",
                self.lock
            ),
            LockState::Held(holders) => {
                write!(f, "{} is held by ", self.lock)?;
                for (i, holder) in holders.iter().enumerate() {
                    if i > 0 {
                        f.write_str(if i + 1 == holders.len() {
                            " and "
                        } else {
                            ", "
                        })?;
                    }
                    f.write_str(&describe_holder(holder, self.now))?;
                }
                f.write_str(". ")?;
                if let Some(node) = holders.iter().find(|h| !h.is_fleetctl()) {
                    write!(
                        f,
                        "Kured is rebooting node {}: wait until it is back and Kured releases the lock, then retry. \
                         If the lock is stale (the node is gone, Kured was removed mid-reboot), {FORCE_HINT}.",
                        node.id
                    )
                } else {
                    write!(
                        f,
                        "If that holder is dead (e.g. a fleetctl that was killed), {FORCE_HINT}."
                    )
                }
            }
        }
    }
}

impl std::error::Error for LockHeld {}

/// `fleetctl/alice@laptop (pid 4242) since 2026-11-29T19:30:12Z (3m 5s ago)`
fn describe_holder(holder: &Holder, now: SystemTime) -> String {
    let mut text = if holder.id.is_empty() {
        "an entry with no nodeID".to_string()
    } else {
        holder.id.clone()
    };
    if let Some(pid) = &holder.pid {
        text.push_str(&format!(" (pid {pid})"));
    }
    if !holder.since.is_empty() {
        text.push_str(&format!(" since {}", holder.since));
        if let Some(age) = age(&holder.since, now) {
            text.push_str(&format!(" ({age} ago)"));
        }
    }
    text
}

fn age(since: &str, now: SystemTime) -> Option<String> {
    let since = humantime::parse_rfc3339(since).ok()?;
    let age = now.duration_since(since).ok()?;
    Some(humantime::format_duration(Duration::from_secs(age.as_secs())).to_string())
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn failed<K: Kubectl>(api: &K, label: &str, out: &Output) -> anyhow::Error {
    anyhow::Error::new(CommandFailed::new(api.node(), label, out))
}

// ---------------------------------------------------------------------------
// Acquire and release

/// A lock fleetctl holds; [`Lock::release`] gives it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    kind: LockKind,
    holder: String,
    forced: Option<String>,
    warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LockKind {
    Kured {
        namespace: String,
        name: String,
        annotation: String,
        created: String,
    },
    ConfigMap {
        namespace: String,
        name: String,
        pid: String,
        started: String,
    },
}

/// What [`Lock::release`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// Our lock was there and is gone now.
    Removed,
    /// Nothing to remove (released already, or the object is gone).
    AlreadyGone,
    /// Someone else holds it now (a `--force-unlock` elsewhere): left alone.
    TakenOver { by: String },
}

/// Takes the lock: Kured's when a DaemonSet `opts.kured_namespace/kured_name`
/// exists (its flags say where Kured keeps the lock), fleetctl's configmap
/// otherwise. `now` is recorded as the start time.
pub async fn acquire<K: Kubectl>(
    api: &K,
    opts: &LockOptions,
    me: &Identity,
    now: SystemTime,
) -> anyhow::Result<Lock> {
    let lock = match read_daemonset(api, &opts.kured_namespace, &opts.kured_name).await? {
        Some(kured) => acquire_kured(api, opts, me, now, kured).await?,
        None => acquire_configmap(api, opts, me, now).await?,
    };
    api.note(
        "lock-acquired",
        &format!("{} taken by {}", lock.describe(), lock.holder),
    );
    Ok(lock)
}

/// `None` when the DaemonSet does not exist.
async fn read_daemonset<K: Kubectl>(
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

async fn acquire_kured<K: Kubectl>(
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

async fn acquire_configmap<K: Kubectl>(
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
    /// "Kured's reboot lock on daemonset kube-system/kured (annotation …)"
    /// or "fleetctl's lock (configmap kube-system/fleetctl-lock)".
    pub fn describe(&self) -> String {
        match &self.kind {
            LockKind::Kured {
                namespace,
                name,
                annotation,
                ..
            } => format!(
                "Kured's reboot lock on daemonset {namespace}/{name} (annotation {annotation})"
            ),
            LockKind::ConfigMap {
                namespace, name, ..
            } => {
                format!("fleetctl's lock (configmap {namespace}/{name})")
            }
        }
    }

    /// The holder id written into the lock.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// With `--force-unlock`: the lock that was removed, described.
    pub fn forced(&self) -> Option<&str> {
        self.forced.as_deref()
    }

    /// Things the operator must read (a Kured `--lock-ttl`, a Kured node
    /// left cordoned by a forced unlock).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Gives the lock back if it is still ours; safe to call again, and
    /// from any control-plane node.
    pub async fn release<K: Kubectl>(&self, api: &K) -> anyhow::Result<Released> {
        let released = match &self.kind {
            LockKind::Kured {
                namespace,
                name,
                annotation,
                created,
            } => {
                self.release_kured(api, namespace, name, annotation, created)
                    .await?
            }
            LockKind::ConfigMap {
                namespace,
                name,
                pid,
                started,
            } => {
                self.release_configmap(api, namespace, name, pid, started)
                    .await?
            }
        };
        let detail = match &released {
            Released::Removed => format!("{} released", self.describe()),
            Released::AlreadyGone => format!("{} was already released", self.describe()),
            Released::TakenOver { by } => {
                format!("{} left alone: it is now held by {by}", self.describe())
            }
        };
        api.note("lock-released", &detail);
        Ok(released)
    }

    async fn release_kured<K: Kubectl>(
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

    async fn release_configmap<K: Kubectl>(
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

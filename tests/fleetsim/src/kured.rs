//! Kured (kubereboot/kured) in the simulated cluster: its DaemonSet as the
//! upstream manifest or the Helm chart installs it, and, when the scenario
//! says so, its pods' loop, so a test can watch Kured reboot a node by
//! itself and prove that fleetctl holds it off.
//!
//! What the sim takes from Kured (commit 51220cc of kubereboot/kured, 1.23.0;
//! kubereboot/charts 8927217, chart 6.1.0):
//!
//! - `kured-ds.yaml`: DaemonSet `kube-system/kured`, container `kured`,
//!   image `ghcr.io/kubereboot/kured:1.23.0`, `command: [/usr/bin/kured,
//!   --reboot-sentinel=/sentinel/reboot-required]` (every other flag
//!   commented out), env `KURED_NODE_ID` from `spec.nodeName`, `hostPID:
//!   true` and the container `privileged: true` (to run the reboot command
//!   in PID 1's mount namespace through nsenter).
//! - The chart (`templates/daemonset.yaml`, `_helpers.tpl`, `values.yaml`):
//!   DaemonSet named `kured.fullname` (the release name if it contains
//!   `kured`, else `RELEASE-kured`) in the release's namespace, `command:
//!   [/usr/bin/kured]`, and args `--ds-name`, `--ds-namespace`,
//!   `--metrics-port=8080`, `--reboot-sentinel=/sentinel/reboot-required`,
//!   `--reboot-command=/bin/systemctl reboot`, `--log-format=text`,
//!   `--concurrency=1` with the default values (`lockTtl: 0` and `period:
//!   ""` write no flag).
//! - `pkg/daemonsetlock`: the lock is a JSON `LockAnnotationValue`
//!   (`nodeID`, `metadata.unschedulable`, `created` as RFC 3339 with
//!   nanoseconds, `TTL` in nanoseconds) in the annotation; an entry holds
//!   while `!(TTL > 0 && since(created) >= TTL)`; a value that does not
//!   unmarshal makes `Acquire` fail; writes are Updates that retry on
//!   Conflict. Expiry is judged with `time.Since(created)`, the clock of the
//!   node the pod runs on: here the node's own clock, which the sim's nodes
//!   share with the host (a test that wants the laptop's clock elsewhere
//!   moves fleetctl's, `FLEETCTL_TEST_CLOCK_OFFSET`).
//! - With `--concurrency` > 1 (`New` returns a `DaemonSetMultiLock`) the
//!   annotation is `{"maxOwners":N,"locks":[entries]}`:
//!   `canAcquireMultiple` appends this node's entry while the list is
//!   shorter than the pod's own `--concurrency`, keeping every entry as it
//!   is, expired or not; a full list frees the expired entries and has room
//!   only if there was one. `Holding` looks for this node's unexpired
//!   entry, `Release` removes this node's first entry ("Lock not held"
//!   without one). A single-form value unmarshals into it as an empty list.
//! - `cmd/kured/main.go` `rebootAsRequired`: at start, on a tick of
//!   `delaytick(1m)`, a pod that holds the lock uncordons its node (unless
//!   the lock says it was unschedulable before) and releases it; then on
//!   every `delaytick(period)` tick: no sentinel, nothing; else record the
//!   node's `unschedulable`, take the lock (held by another: wait for the
//!   next tick), cordon and drain (no timeout by default: a PDB holds it
//!   there), and run the reboot command.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::provision::SYSUPDATE_DIR;
use crate::state::{Cluster, DaemonSet, Event, Shared, now};
use crate::tools::util::{go_duration, parse_go_duration};

/// Kured's default `--lock-annotation`.
pub const LOCK_ANNOTATION: &str = "weave.works/kured-node-lock";
/// The Kured release the upstream manifest and the chart's appVersion name.
pub const DEFAULT_VERSION: &str = "1.23.0";
/// Kured's default `--period`.
const DEFAULT_PERIOD: f64 = 3600.0;
/// The sentinel Kured reads through its hostPath mount of `/var/run`.
const SENTINEL: &str = "/run/reboot-required";

/// The scenario's `kured:` — `true`/`false`, or a mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Kured {
    Installed(bool),
    Spec(KuredSpec),
}

impl Kured {
    /// How Kured is installed; `None` when it is not.
    pub fn spec(&self) -> Option<KuredSpec> {
        match self {
            Kured::Installed(false) => None,
            Kured::Installed(true) => Some(KuredSpec::default()),
            Kured::Spec(s) => Some(s.clone()),
        }
    }
}

/// How Kured is installed and whether its pods act.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KuredSpec {
    /// `NAMESPACE/RELEASE`: installed by the Helm chart as that release.
    /// Unset: the upstream manifest, `kube-system/kured`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub helm: Option<String>,
    /// The image tag (the Kured release).
    pub version: String,
    /// Kured's pods run their loop (lock, cordon, drain, reboot). Off, they
    /// exist and do nothing, as a Kured outside its reboot window.
    pub run: bool,
    /// `--period` in seconds (written only when not Kured's default 1h).
    pub period: f64,
    /// `--lock-ttl` in seconds (0: no flag, entries never expire).
    pub lock_ttl: f64,
    /// `--concurrency`: how many nodes may hold the lock at once; above 1
    /// Kured uses the multi-owner form of its lock.
    pub concurrency: u32,
}

impl Default for KuredSpec {
    fn default() -> Self {
        KuredSpec {
            helm: None,
            version: DEFAULT_VERSION.into(),
            run: false,
            period: DEFAULT_PERIOD,
            lock_ttl: 0.0,
            concurrency: 1,
        }
    }
}

impl KuredSpec {
    pub fn validate(&self) -> Result<()> {
        if let Some(h) = &self.helm {
            let ok = h
                .split_once('/')
                .is_some_and(|(ns, rel)| dns_label(ns) && dns_label(rel));
            if !ok {
                bail!("`helm: {h}` is not NAMESPACE/RELEASE (lowercase DNS labels)");
            }
        }
        if !(self.period.is_finite() && self.period >= 0.05) {
            bail!(
                "`period` must be at least 0.05 seconds, not {}",
                self.period
            );
        }
        if !(self.lock_ttl.is_finite() && self.lock_ttl >= 0.0) {
            bail!("`lock_ttl` must be seconds ≥ 0, not {}", self.lock_ttl);
        }
        if self.concurrency == 0 {
            bail!("`concurrency` must be at least 1");
        }
        if self.version.is_empty() || self.version.contains(['/', ':', '@', ' ']) {
            bail!(
                "`version` must be an image tag like 1.23.0, not {:?}",
                self.version
            );
        }
        Ok(())
    }

    /// The DaemonSet as the manifest or the chart creates it.
    pub fn daemonset(&self) -> DaemonSet {
        let image = format!("ghcr.io/kubereboot/kured:{}", self.version);
        let mut extra = Vec::new();
        if self.period != DEFAULT_PERIOD {
            extra.push(format!("--period={}", go_duration(self.period)));
        }
        if self.lock_ttl > 0.0 {
            extra.push(format!("--lock-ttl={}", go_duration(self.lock_ttl)));
        }
        if self.concurrency > 1 {
            extra.push(format!("--concurrency={}", self.concurrency));
        }
        let env = vec![json!({
            "name": "KURED_NODE_ID",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
        })];
        let (namespace, name, command, args, labels) = match &self.helm {
            None => {
                let mut command = vec![
                    "/usr/bin/kured".to_string(),
                    "--reboot-sentinel=/sentinel/reboot-required".to_string(),
                ];
                command.extend(extra);
                let labels = BTreeMap::from([("name".to_string(), "kured".to_string())]);
                (
                    "kube-system".to_string(),
                    "kured".to_string(),
                    command,
                    Vec::new(),
                    labels,
                )
            }
            Some(h) => {
                let (ns, release) = h.split_once('/').unwrap_or(("kube-system", h));
                let name = if release.contains("kured") {
                    release.to_string()
                } else {
                    format!("{release}-kured")
                };
                let mut args = vec![
                    format!("--ds-name={name}"),
                    format!("--ds-namespace={ns}"),
                    "--metrics-port=8080".to_string(),
                ];
                if self.lock_ttl > 0.0 {
                    args.push(format!("--lock-ttl={}", go_duration(self.lock_ttl)));
                }
                if self.period != DEFAULT_PERIOD {
                    args.push(format!("--period={}", go_duration(self.period)));
                }
                args.extend(
                    [
                        "--reboot-sentinel=/sentinel/reboot-required",
                        "--reboot-command=/bin/systemctl reboot",
                        "--log-format=text",
                    ]
                    .map(String::from),
                );
                args.push(format!("--concurrency={}", self.concurrency));
                let labels = BTreeMap::from([
                    (
                        "app.kubernetes.io/instance".to_string(),
                        release.to_string(),
                    ),
                    (
                        "app.kubernetes.io/managed-by".to_string(),
                        "Helm".to_string(),
                    ),
                    ("app.kubernetes.io/name".to_string(), "kured".to_string()),
                    ("helm.sh/chart".to_string(), "kured-6.1.0".to_string()),
                ]);
                (
                    ns.to_string(),
                    name,
                    vec!["/usr/bin/kured".to_string()],
                    args,
                    labels,
                )
            }
        };
        DaemonSet {
            namespace,
            name,
            image,
            command,
            args,
            env,
            labels,
            annotations: BTreeMap::new(),
            resource_version: 1,
            active: self.run,
        }
    }
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

// ---------------------------------------------------------------- the lock

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
    fn with_entry(&self, entry: LockValue, max_owners: usize, at: f64) -> Option<MultiLock> {
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
fn holding(shared: &Shared, s: &Settings, me: &str) -> Result<Option<LockValue>> {
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
enum Acquired {
    Yes,
    HeldBy(String),
    Failed(String),
}

/// `Acquire(nodeMeta)`: a read and an Update in one step under the state
/// lock, which is what Kured's retry on Conflict amounts to.
fn acquire(shared: &Shared, s: &Settings, me: &str, unschedulable: bool) -> Result<Acquired> {
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
fn release(shared: &Shared, s: &Settings, me: &str) -> Result<Result<(), String>> {
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

fn set_unschedulable(shared: &Shared, me: &str, on: bool) -> Result<()> {
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

// ---------------------------------------------------------------- the pod

/// A Kured pod on node `me`: started by node-init at every boot while the
/// DaemonSet is active, it waits for its node's kubelet (which would start
/// it), then runs Kured's loop until the node goes down around it.
pub fn pod(me: &str) -> Result<()> {
    let shared = Shared::in_node();
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mut pod = Pod {
        shared,
        me: me.to_string(),
        rng: seed(),
        last_holder: None,
    };
    // The kubelet starts the pod, and the pod needs the API.
    let settings = loop {
        let c = pod.shared.cluster()?;
        let Some(ds) = c.kured.as_ref().filter(|k| k.active) else {
            return Ok(());
        };
        let running = c
            .nodes
            .get(me)
            .and_then(|n| n.kubelet_running())
            .is_some_and(|k| k.boot_id == boot_id);
        if running && c.api_up(now()) {
            break Settings::of(ds);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("kured {me}: started ({settings:?})");
    // Kured's first loop ticks on delaytick(1m); the sim scales that
    // minute down to the period so tests need not wait for it.
    let startup = settings.period.min(60.0);
    pod.sleep_jittered(startup);
    while let Some(lock) = holding(&pod.shared, &settings, me)? {
        if !lock.metadata.unschedulable {
            set_unschedulable(&pod.shared, me, false)?;
            pod.record("uncordon", "ok");
        }
        match release(&pod.shared, &settings, me)? {
            Ok(()) => {
                pod.record("release", "ok");
                break;
            }
            Err(e) => pod.record("release", &format!("failed: {e}")),
        }
        std::thread::sleep(secs(startup));
    }
    pod.sleep_jittered(settings.period);
    loop {
        if pod.tick(&settings)? {
            // Waiting to be killed with the rest of the node.
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        std::thread::sleep(secs(settings.period));
    }
}

struct Pod {
    shared: Shared,
    me: String,
    rng: u64,
    /// Who held the lock when this pod last failed to take it: logged
    /// once per holder, not once per tick.
    last_holder: Option<String>,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    t ^ (std::process::id() as u64).rotate_left(32) | 1
}

impl Pod {
    /// delaytick's first tick: between d/2 and 3d/2.
    fn sleep_jittered(&mut self, d: f64) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let unit = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        std::thread::sleep(secs(d / 2.0 + d * unit));
    }

    /// One tick of the main loop; true once the reboot is under way.
    fn tick(&mut self, s: &Settings) -> Result<bool> {
        let c = self.shared.cluster()?;
        if c.kured.as_ref().is_none_or(|k| !k.active) || !c.api_up(now()) {
            return Ok(false);
        }
        if !Path::new(SENTINEL).exists() {
            return Ok(false);
        }
        let unschedulable = c.nodes.get(&self.me).is_some_and(|n| n.unschedulable);
        if holding(&self.shared, s, &self.me)?.is_none() {
            match acquire(&self.shared, s, &self.me, unschedulable)? {
                Acquired::Yes => {
                    self.last_holder = None;
                    self.record("acquire", "ok");
                }
                Acquired::HeldBy(holder) => {
                    if self.last_holder.as_ref() != Some(&holder) {
                        self.record("acquire", &format!("held by {holder}"));
                        self.last_holder = Some(holder);
                    }
                    return Ok(false);
                }
                Acquired::Failed(e) => {
                    self.record("acquire", &format!("failed: {e}"));
                    return Ok(false);
                }
            }
        }
        set_unschedulable(&self.shared, &self.me, true)?;
        self.record("cordon", "ok");
        // Kured drains without a timeout by default: a budget that blocks
        // an eviction keeps it here, lock held, until the budget allows it.
        let mut told = false;
        while !crate::tools::evictions_refused(
            &self.shared.cluster()?,
            &self.shared.faults()?,
            &self.me,
        )
        .is_empty()
        {
            if !told {
                self.record(
                    "drain",
                    "waiting: Cannot evict pod as it would violate the pod's disruption budget.",
                );
                told = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.record("drain", "ok");
        self.record("reboot", "ok");
        // Kured runs `/bin/systemctl reboot` through nsenter into PID 1's
        // namespaces; the pod already runs in its node's.
        if crate::power::inside_a_real_os_node() {
            let status = std::process::Command::new("/usr/bin/systemctl")
                .arg("reboot")
                .status();
            return match status {
                Ok(s) if s.success() => Ok(true),
                Ok(s) => bail!("systemctl reboot: {s}"),
                Err(e) => bail!("running systemctl reboot: {e}"),
            };
        }
        if !crate::power::inside_a_node() {
            bail!("PID 1 is not node-init: not rebooting the host");
        }
        // SAFETY: signalling our namespace's init, which has a handler.
        unsafe { libc::kill(1, libc::SIGTERM) };
        Ok(true)
    }

    fn record(&self, what: &str, result: &str) {
        eprintln!("kured {}: {what}: {result}", self.me);
        let event = Event {
            t: now(),
            node: self.me.clone(),
            argv: vec!["(kured)".into(), what.into()],
            result: result.into(),
            pins: crate::pins::kubernetes_pins(Path::new(SYSUPDATE_DIR)),
            ..Default::default()
        };
        let _ = self.shared.record(&event);
    }
}

/// The pod's container as the API shows it (one per node).
pub fn container_json(ds: &DaemonSet) -> Value {
    // kured-ds.yaml: `privileged: true # Give permission to nsenter
    // /proc/1/ns/mnt`; the chart's `containerSecurityContext` too.
    let mut c = json!({
        "image": ds.image,
        "imagePullPolicy": "IfNotPresent",
        "name": "kured",
        "securityContext": {"privileged": true},
    });
    if !ds.command.is_empty() {
        c["command"] = json!(ds.command);
    }
    if !ds.args.is_empty() {
        c["args"] = json!(ds.args);
    }
    if !ds.env.is_empty() {
        c["env"] = json!(ds.env);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_and_the_chart() {
        let m = KuredSpec::default().daemonset();
        assert_eq!(
            (m.namespace.as_str(), m.name.as_str()),
            ("kube-system", "kured")
        );
        assert_eq!(
            m.command,
            [
                "/usr/bin/kured",
                "--reboot-sentinel=/sentinel/reboot-required"
            ]
        );
        assert!(m.args.is_empty());
        assert_eq!(m.image, "ghcr.io/kubereboot/kured:1.23.0");
        let h = KuredSpec {
            helm: Some("kured/kured".into()),
            period: 0.5,
            ..Default::default()
        }
        .daemonset();
        assert_eq!((h.namespace.as_str(), h.name.as_str()), ("kured", "kured"));
        assert_eq!(h.command, ["/usr/bin/kured"]);
        assert_eq!(
            &h.args[..3],
            [
                "--ds-name=kured",
                "--ds-namespace=kured",
                "--metrics-port=8080"
            ]
        );
        assert!(h.args.contains(&"--period=500ms".to_string()));
        let other = KuredSpec {
            helm: Some("ops/reboots".into()),
            ..Default::default()
        }
        .daemonset();
        assert_eq!(other.name, "reboots-kured");
        let s = Settings::of(&other);
        assert_eq!(
            (s.ds_namespace.as_str(), s.ds_name.as_str()),
            ("ops", "reboots-kured")
        );
        assert_eq!(s.period, 3600.0);
    }

    #[test]
    fn the_multi_owner_lock_as_can_acquire_multiple_fills_it() {
        let t0 = 1_764_601_445.0;
        let entry = |node: &str, at: f64, ttl: f64| LockValue::new(node, false, at, ttl);
        // Room: appended, whatever the others are.
        let empty = MultiLock::parse(r#"{"maxOwners":2,"locks":null}"#).unwrap();
        let one = empty.with_entry(entry("w-1", t0, 0.0), 2, t0).unwrap();
        assert_eq!(one.max_owners, 2);
        let two = one.with_entry(entry("w-2", t0, 0.0), 2, t0).unwrap();
        assert_eq!(two.locks.as_ref().map(Vec::len), Some(2));
        // Full of unexpired entries: no room.
        assert_eq!(two.with_entry(entry("w-3", t0, 0.0), 2, t0 + 1e6), None);
        // Full, one expired: it makes room.
        let full = MultiLock {
            max_owners: 2,
            locks: Some(vec![entry("w-1", t0, 60.0), entry("w-2", t0, 0.0)]),
        };
        let next = full
            .with_entry(entry("w-3", t0 + 61.0, 0.0), 2, t0 + 61.0)
            .unwrap();
        let ids: Vec<&str> = next
            .locks
            .iter()
            .flatten()
            .map(|l| l.node_id.as_str())
            .collect();
        assert_eq!(ids, ["w-2", "w-3"]);
        // fleetctl's lock with every slot taken, heartbeat fresh: no room.
        let fleetctl = r#"{"maxOwners":2,"locks":[{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":900000000000},{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":900000000000}]}"#;
        let held = MultiLock::parse(fleetctl).unwrap();
        let created = parse_rfc3339("2026-11-29T19:30:12Z").unwrap();
        assert_eq!(
            held.with_entry(entry("w-1", created, 0.0), 2, created + 899.0),
            None
        );
        assert!(
            held.with_entry(entry("w-1", created, 0.0), 2, created + 900.0)
                .is_some()
        );
        // A single-form value reads as an empty multi-owner one.
        let single = MultiLock::parse(&LockValue::new("w-1", false, t0, 0.0).to_json()).unwrap();
        assert_eq!(single.locks, None);
        assert!(MultiLock::parse("not json").is_err());
        assert_eq!(
            Settings::of(
                &KuredSpec {
                    concurrency: 3,
                    ..Default::default()
                }
                .daemonset()
            )
            .concurrency,
            3
        );
    }

    #[test]
    fn lock_values_as_kured_reads_and_writes_them() {
        let v = LockValue::new("w-1", false, 1_764_601_445.5, 0.0);
        assert_eq!(
            v.to_json(),
            r#"{"nodeID":"w-1","metadata":{"unschedulable":false},"created":"2025-12-01T15:04:05.5Z","TTL":0}"#
        );
        assert!(!v.expired(2e9), "TTL 0 never expires");
        let fleetctl = r#"{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false,"fleetctl":{"host":"lap","pid":1,"started":"x"}},"created":"2026-11-29T19:30:12Z","TTL":900000000000}"#;
        let v = LockValue::parse(fleetctl).unwrap();
        let created = parse_rfc3339("2026-11-29T19:30:12Z").unwrap();
        assert!(!v.expired(created + 899.0));
        assert!(v.expired(created + 900.0));
        assert!(LockValue::parse("").is_err());
        let multi = LockValue::parse(r#"{"maxOwners":2,"locks":[]}"#).unwrap();
        assert_eq!(
            multi.node_id, "",
            "a multi-owner value reads as nobody's, forever"
        );
        assert_eq!(
            parse_rfc3339("1970-01-02T00:00:01+01:00"),
            Some(86_401.0 - 3600.0)
        );
    }
}

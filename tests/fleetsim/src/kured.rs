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
//!   share with the host (a test that wants the clocks apart moves a
//!   node's `date`, the scenario's `clock_offset`).
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
//!
//! This file holds the DaemonSet and the pod's loop; `kured/daemonset_lock.rs`
//! the lock itself.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::provision::SYSUPDATE_DIR;
use crate::state::{DaemonSet, Event, Shared, now};
use crate::tools::util::go_duration;

mod daemonset_lock;
use daemonset_lock::{Acquired, acquire, holding, release, set_unschedulable};
pub use daemonset_lock::{LockValue, MultiLock, NodeMeta, Settings, parse_rfc3339, rfc3339_nano};

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
    /// `--blocking-pod-selector`, once per selector (Kured's
    /// `pkg/blockers/kubernetespod.go`: a pod matching one on a node holds
    /// that node's reboot).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocking_pod_selectors: Vec<String>,
    /// `--prometheus-url=` the fleet's Prometheus (`crate::prometheus`),
    /// written once it listens.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub prometheus: bool,
    /// `--alert-filter-regexp`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alert_filter_regexp: Option<String>,
    /// Any other flags, as written (`--reboot-days=sat`, `--start-time=…`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
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
            blocking_pod_selectors: Vec::new(),
            prometheus: false,
            alert_filter_regexp: None,
            extra_args: Vec::new(),
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
        let mut args = args;
        args.extend(
            self.blocking_pod_selectors
                .iter()
                .map(|s| format!("--blocking-pod-selector={s}")),
        );
        args.extend(
            self.alert_filter_regexp
                .iter()
                .map(|r| format!("--alert-filter-regexp={r}")),
        );
        args.extend(self.extra_args.iter().cloned());
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

/// Points Kured's `--prometheus-url` at the fleet's Prometheus, once it
/// listens (its port is known only then).
pub fn set_prometheus_url(ds: &mut DaemonSet, url: &str) {
    ds.args.push(format!("--prometheus-url={url}"));
}

fn dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
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
        while !crate::api::objects::budgets::evictions_refused(
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
mod tests;

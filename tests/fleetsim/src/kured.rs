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
//! This file holds the DaemonSet; `kured/pod_loop.rs` the pod's loop and
//! `kured/daemonset_lock.rs` the lock itself.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::state::DaemonSet;
use crate::tools::util::go_duration;

mod daemonset_lock;
pub use daemonset_lock::{LockValue, MultiLock, NodeMeta, Settings, parse_rfc3339, rfc3339_nano};
mod pod_loop;
pub use pod_loop::pod;

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

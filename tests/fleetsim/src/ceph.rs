//! Rook-Ceph storage, emulated from the cluster state: a `CephCluster`
//! (`ceph.rook.io/v1`) whose `.status.ceph` Rook's operator refreshes every
//! few seconds, and the `rook-ceph-tools` toolbox pod whose `ceph` answers
//! from the same state (`toolbox`).
//!
//! The model follows Ceph's documented behaviour (docs/simulator.md, "Ceph"):
//!
//! - one OSD per worker by default (`osds_per_worker`), each in the CRUSH
//!   host bucket named after its node, as Rook names it;
//! - one replicated pool, `size` 3 (`min_size` 2, Ceph's default of
//!   size - size/2) with host as the failure domain: every placement group
//!   has a replica on `size` distinct hosts;
//! - an OSD is up while its node's kubelet runs (the OSD pod starts a
//!   second after the kubelet, `osd_start`); it stops with the node;
//! - a PG with fewer up replicas than `size` is `active+undersized+degraded`;
//!   fewer than `min_size`, `undersized+degraded+peered` (inactive: no I/O);
//!   once all its OSDs are up again it is `active+recovering+degraded` for
//!   `recovery` seconds (the writes it missed are copied back), then
//!   `active+clean` (doc/rados/operations/pg-states.rst);
//! - the health checks follow doc/rados/operations/health-checks.rst:
//!   `OSD_DOWN` and `OSD_HOST_DOWN` while an OSD is down, `PG_DEGRADED`
//!   while a PG is degraded, `PG_AVAILABILITY` while one is inactive, the
//!   scenario's standing warnings (`warnings`, e.g.
//!   `AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED`) always, and an injected
//!   HEALTH_ERR (`Faults::ceph_health_err`) while it lasts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::state::{Cluster, Faults, Role};
use crate::tools::util::{rfc3339, uid_of};

pub mod toolbox;

/// The label Rook's toolbox Deployment gives its pod (deploy/examples/toolbox.yaml).
pub const TOOLBOX_LABEL: (&str, &str) = ("app", "rook-ceph-tools");

/// A scenario's Rook-Ceph (`ceph:` in the YAML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CephSpec {
    /// The CephCluster's namespace (Rook's examples: `rook-ceph`).
    pub namespace: String,
    /// The CephCluster's name.
    pub name: String,
    pub osds_per_worker: u32,
    /// Placement groups of the one pool.
    pub pgs: u32,
    /// Replicas per PG (the pool's `size`).
    pub size: u32,
    /// Seconds a PG recovers after its OSDs are all up again.
    pub recovery: f64,
    /// Seconds after its node's kubelet starts before an OSD is up.
    pub osd_start: f64,
    /// Seconds between two of the operator's health checks (Rook's
    /// `healthCheck.daemonHealth.status.interval`, 60 s by default).
    pub refresh: f64,
    /// HEALTH_WARN codes that stand whatever happens.
    pub warnings: Vec<String>,
    /// The toolbox Deployment is installed.
    pub toolbox: bool,
    /// When the cluster was created (set when the fleet is provisioned).
    pub created: f64,
}

impl Default for CephSpec {
    fn default() -> Self {
        CephSpec {
            namespace: "rook-ceph".into(),
            name: "rook-ceph".into(),
            osds_per_worker: 1,
            pgs: 32,
            size: 3,
            recovery: 6.0,
            osd_start: 1.0,
            refresh: 3.0,
            warnings: Vec::new(),
            toolbox: true,
            created: 0.0,
        }
    }
}

/// The scenario's pods, and Rook's toolbox pod when it has Ceph with a
/// toolbox: a Deployment's pod (so a drain evicts it and it comes back
/// with its node), on the first control plane, which it tolerates.
pub fn with_toolbox(scenario: &crate::scenario::Scenario) -> Vec<crate::state::PodSpec> {
    let mut pods = scenario.pods.clone();
    let Some(spec) = scenario.ceph.as_ref().filter(|c| c.toolbox) else {
        return pods;
    };
    let Some(node) = scenario.nodes.iter().find(|n| n.role == Role::ControlPlane) else {
        return pods;
    };
    pods.push(crate::state::PodSpec {
        namespace: spec.namespace.clone(),
        name: "rook-ceph-tools-7b75b967db-x8kzq".into(),
        node: node.name.clone(),
        labels: [
            (TOOLBOX_LABEL.0.to_string(), TOOLBOX_LABEL.1.to_string()),
            ("pod-template-hash".to_string(), "7b75b967db".to_string()),
        ]
        .into(),
        annotations: BTreeMap::new(),
        owner: Some("ReplicaSet/rook-ceph-tools-7b75b967db".into()),
        phase: "Running".into(),
        image: Some("quay.io/ceph/ceph:v19.2.3".into()),
    });
    pods
}

/// A standing warning's message, as Ceph words it.
fn warning_message(code: &str) -> String {
    match code {
        "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED" => {
            "mons are allowing insecure global_id reclaim".into()
        }
        "POOL_NO_REDUNDANCY" => "1 pool(s) have no replicas configured".into(),
        "MON_CLOCK_SKEW" => "clock skew detected on mon.b".into(),
        "PG_NOT_DEEP_SCRUBBED" => "4 pgs not deep-scrubbed in time".into(),
        "OSD_FULL" => "1 full osd(s)".into(),
        "PG_DAMAGED" => "Possible data damage: 1 pg inconsistent".into(),
        "MON_DOWN" => "1/3 mons down, quorum a,b".into(),
        other => format!("{other} (raised by fleetsim)"),
    }
}

/// One OSD: its id and node.
#[derive(Debug, Clone, PartialEq)]
pub struct Osd {
    pub id: u32,
    pub host: String,
}

/// The OSDs, workers in name order, `osds_per_worker` each.
pub fn osds(c: &Cluster, spec: &CephSpec) -> Vec<Osd> {
    let mut out = Vec::new();
    for (name, n) in &c.nodes {
        if n.role != Role::Worker {
            continue;
        }
        for _ in 0..spec.osds_per_worker {
            out.push(Osd {
                id: out.len() as u32,
                host: name.clone(),
            });
        }
    }
    out
}

/// When `osd`'s host's OSD came up in its current boot, if it is up at `t`.
fn up_since(c: &Cluster, spec: &CephSpec, osd: &Osd, t: f64) -> Option<f64> {
    let k = c.nodes.get(&osd.host)?.kubelet_running()?;
    let since = k.started_at + spec.osd_start;
    (t >= since).then_some(since)
}

/// The state of the cluster's storage at `t`.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub osds: Vec<(Osd, bool)>,
    /// PG state name → count.
    pub pgs: BTreeMap<String, u32>,
    pub total_pgs: u32,
    /// PG ids (`1.0`, `1.1f`) and their OSD ids, for ok-to-stop.
    pub placement: Vec<(String, Vec<u32>)>,
    /// Health code → (severity, summary).
    pub checks: BTreeMap<String, (String, String)>,
    pub min_size: usize,
}

impl State {
    pub fn health(&self) -> &'static str {
        if self.checks.values().any(|(s, _)| s == "HEALTH_ERR") {
            "HEALTH_ERR"
        } else if self.checks.is_empty() {
            "HEALTH_OK"
        } else {
            "HEALTH_WARN"
        }
    }

    pub fn up(&self, id: u32) -> bool {
        self.osds.iter().any(|(o, up)| o.id == id && *up)
    }
}

/// The storage at `t`, from the nodes' boots and the faults.
pub fn state(c: &Cluster, f: &Faults, spec: &CephSpec, t: f64) -> State {
    let osds = osds(c, spec);
    let since: Vec<Option<f64>> = osds.iter().map(|o| up_since(c, spec, o, t)).collect();
    let hosts: Vec<&String> = {
        let mut h: Vec<&String> = osds.iter().map(|o| &o.host).collect();
        h.dedup();
        h
    };
    let size = (spec.size as usize).min(hosts.len()).max(1);
    let min_size = (size - size / 2).max(1);
    let mut pgs: BTreeMap<String, u32> = BTreeMap::new();
    let mut placement = Vec::new();
    let (mut degraded, mut undersized, mut inactive) = (0u32, 0u32, 0u32);
    for pg in 0..spec.pgs {
        // Replicas on `size` distinct hosts, the first OSD of each.
        let acting: Vec<usize> = (0..size)
            .filter_map(|r| {
                let host = hosts.get((pg as usize + r) % hosts.len().max(1))?;
                osds.iter().position(|o| &o.host == *host)
            })
            .collect();
        let up: Vec<usize> = acting
            .iter()
            .copied()
            .filter(|&i| since[i].is_some())
            .collect();
        let recovering = up
            .iter()
            .any(|&i| since[i].is_some_and(|s| t < s + spec.recovery));
        let name = if up.len() < min_size {
            inactive += 1;
            degraded += 1;
            undersized += 1;
            "undersized+degraded+peered"
        } else if up.len() < size {
            degraded += 1;
            undersized += 1;
            "active+undersized+degraded"
        } else if recovering {
            degraded += 1;
            "active+recovering+degraded"
        } else {
            "active+clean"
        };
        *pgs.entry(name.to_string()).or_default() += 1;
        placement.push((
            format!("1.{pg:x}"),
            acting.iter().map(|&i| osds[i].id).collect(),
        ));
    }
    let mut checks = BTreeMap::new();
    let down: Vec<&Osd> = osds
        .iter()
        .zip(&since)
        .filter(|(_, s)| s.is_none())
        .map(|(o, _)| o)
        .collect();
    if !down.is_empty() {
        let warn = |m: String| ("HEALTH_WARN".to_string(), m);
        checks.insert(
            "OSD_DOWN".to_string(),
            warn(format!("{} osds down", down.len())),
        );
        let mut down_hosts: Vec<&String> = down.iter().map(|o| &o.host).collect();
        down_hosts.dedup();
        checks.insert(
            "OSD_HOST_DOWN".to_string(),
            warn(format!(
                "{} host ({} osds) down",
                down_hosts.len(),
                down.len()
            )),
        );
    }
    if inactive > 0 {
        checks.insert(
            "PG_AVAILABILITY".to_string(),
            (
                "HEALTH_WARN".to_string(),
                format!("Reduced data availability: {inactive} pgs inactive"),
            ),
        );
    }
    if degraded > 0 {
        let mut m = format!("Degraded data redundancy: {degraded} pgs degraded");
        if undersized > 0 {
            m.push_str(&format!(", {undersized} pgs undersized"));
        }
        checks.insert("PG_DEGRADED".to_string(), ("HEALTH_WARN".to_string(), m));
    }
    for w in &spec.warnings {
        checks.insert(w.clone(), ("HEALTH_WARN".to_string(), warning_message(w)));
    }
    if let Some(code) = &f.ceph_health_err {
        checks.insert(
            code.clone(),
            ("HEALTH_ERR".to_string(), warning_message(code)),
        );
    }
    State {
        osds: osds
            .into_iter()
            .zip(since)
            .map(|(o, s)| (o, s.is_some()))
            .collect(),
        pgs,
        total_pgs: spec.pgs,
        placement,
        checks,
        min_size,
    }
}

/// When the operator last checked Ceph's health, as of `now`: every
/// `refresh` seconds since the cluster was created.
pub fn last_checked(spec: &CephSpec, now: f64) -> f64 {
    let period = spec.refresh.max(0.5);
    let since = (now - spec.created).max(0.0);
    spec.created + (since / period).floor() * period
}

/// The CephCluster object as the API serves it: its `.status.ceph` is
/// what Rook's operator wrote at its last check (rook
/// `pkg/apis/ceph.rook.io/v1/types.go`, `CephStatus`: health, details
/// (code → severity and message), lastChecked, lastChanged,
/// previousHealth, capacity, fsid).
pub fn cluster_json(c: &Cluster, f: &Faults, spec: &CephSpec, now: f64) -> Value {
    let mut checked = last_checked(spec, now);
    if let Some(stopped) = f.ceph_operator_stopped {
        checked = checked.min(last_checked(spec, stopped));
    }
    let s = state(c, f, spec, checked);
    let details: serde_json::Map<String, Value> = s
        .checks
        .iter()
        .map(|(code, (sev, msg))| (code.clone(), json!({"severity": sev, "message": msg})))
        .collect();
    let ns = &spec.namespace;
    let name = &spec.name;
    let never_checked = f.ceph_operator_stopped.is_some_and(|t| t < spec.created);
    let mut object = json!({
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephCluster",
        "metadata": {
            "creationTimestamp": rfc3339(spec.created),
            "generation": 1,
            "name": name,
            "namespace": ns,
            "resourceVersion": c.resource_version.to_string(),
            "uid": uid_of(&format!("cephcluster/{ns}/{name}")),
        },
        "spec": {
            "cephVersion": {"image": "quay.io/ceph/ceph:v19.2.3"},
            "dataDirHostPath": "/var/lib/rook",
            "mon": {"count": 3},
            "storage": {"useAllNodes": true, "useAllDevices": true},
        },
        "status": {
            "phase": "Ready",
            "state": "Created",
            "message": "Cluster created successfully",
            "ceph": {
                "health": s.health(),
                "details": details,
                "lastChecked": rfc3339(checked),
                "fsid": uid_of(&format!("fsid/{ns}/{name}")),
                "capacity": {
                    "bytesAvailable": 300_000_000_000u64,
                    "bytesTotal": 322_122_547_200u64,
                    "bytesUsed": 22_122_547_200u64,
                    "lastUpdated": rfc3339(checked),
                },
            },
        },
    });
    if never_checked {
        // Rook writes `.status.ceph` at its first health check.
        if let Some(status) = object["status"].as_object_mut() {
            status.remove("ceph");
        }
    }
    object
}

#[cfg(test)]
mod tests;

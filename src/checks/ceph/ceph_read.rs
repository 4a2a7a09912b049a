//! What the Ceph gate reads, parsed from the real tools' JSON, every read
//! bounded (the cluster is not trusted: a status may be huge or hostile):
//!
//! - `kubectl get cephclusters.v1.ceph.rook.io -A -o json` (by group alone
//!   where v1 is not served: `remote/ceph.sh`): each item's
//!   `.status.ceph` as Rook writes it (rook `pkg/apis/ceph.rook.io/v1/
//!   types.go`, `CephStatus`: `health`, `details` code → `severity` and
//!   `message`, `lastChecked` in RFC 3339);
//! - `ceph health detail --format json`: `status`, `checks` code →
//!   `severity`, `summary.message` (ceph `src/mon/health_check.h`,
//!   `health_check_map_t::dump`);
//! - `ceph pg stat --format json`: `pg_summary.num_pg_by_state` of
//!   `name`/`num` (ceph `src/mon/PGMap.cc`, `PGMapDigest::print_summary`);
//! - `ceph osd tree --format json`: `nodes` with the host buckets' `name`
//!   and `children` (Rook names a host bucket after its node);
//! - `ceph osd ok-to-stop IDS --format json`: `ok_to_stop`, `osds`,
//!   `num_ok_pgs`, `num_not_ok_pgs` (ceph `src/mgr/DaemonServer.h`,
//!   `offline_pg_report::dump`).

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::remote::is_dns_subdomain;

/// The largest JSON document read (a CephCluster list, a status).
const MAX_JSON: usize = 4 << 20;
/// The most health checks, PG states or OSDs kept from one reading.
const MAX_ITEMS: usize = 512;
/// The longest message kept, in characters.
const MAX_TEXT: usize = 240;

/// One health check: `OSD_DOWN`, `HEALTH_WARN`, its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct CephCheck {
    pub code: String,
    pub severity: String,
    pub message: String,
}

/// Ceph's overall status and its checks.
#[derive(Debug, Clone, PartialEq)]
pub struct Health {
    pub status: String,
    pub checks: Vec<CephCheck>,
}

/// One CephCluster as its status says.
#[derive(Debug, Clone, PartialEq)]
pub struct CephClusterStatus {
    /// `namespace/name`.
    pub name: String,
    pub namespace: String,
    /// `None`: no `.status.ceph` (Rook has not reported yet).
    pub health: Option<Health>,
    /// `lastChecked`, seconds since the epoch, when readable.
    pub last_checked: Option<i64>,
    pub last_checked_text: String,
}

/// A running, Ready toolbox pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Toolbox {
    pub namespace: String,
    pub pod: String,
}

/// The discovery script's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// The cluster's clock (seconds since the epoch).
    pub now: Option<i64>,
    /// Every CephCluster (empty: none, or no such resource type: no Rook);
    /// `Err` when they could not be listed.
    pub clusters: Result<Vec<CephClusterStatus>, String>,
    pub toolboxes: Vec<Toolbox>,
}

/// PG state name → count.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PgStates {
    pub by_state: Vec<(String, u64)>,
}

/// `ceph osd ok-to-stop`'s report.
#[derive(Debug, Clone, PartialEq)]
pub struct OkToStop {
    pub ok_to_stop: bool,
    pub osds: Vec<i64>,
    pub num_ok_pgs: u64,
    pub num_not_ok_pgs: u64,
}

/// Printable, one line, at most [`MAX_TEXT`] characters.
fn text(v: &Value) -> String {
    let s = v.as_str().unwrap_or_default();
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX_TEXT)
        .collect();
    if s.chars().count() > MAX_TEXT {
        out.push('…');
    }
    out
}

/// A health code as Ceph spells them (`OSD_DOWN`), else `None`.
fn code(s: &str) -> Option<String> {
    (!s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
    .then(|| s.to_string())
}

fn json(what: &str, s: &str) -> Result<Value> {
    if s.len() > MAX_JSON {
        bail!(
            "{what}: {} bytes of JSON, more than the {MAX_JSON} read",
            s.len()
        );
    }
    serde_json::from_str(s).with_context(|| format!("{what}: not JSON"))
}

/// `checks` of `ceph health detail` (code → `severity`, `summary.message`)
/// or Rook's `details` (code → `severity`, `message`).
fn checks(map: &Value) -> Vec<CephCheck> {
    let Some(map) = map.as_object() else {
        return Vec::new();
    };
    map.iter()
        .take(MAX_ITEMS)
        .map(|(k, c)| CephCheck {
            code: code(k).unwrap_or_else(|| "UNREADABLE_CODE".to_string()),
            severity: text(&c["severity"]),
            message: if c["summary"]["message"].is_string() {
                text(&c["summary"]["message"])
            } else {
                text(&c["message"])
            },
        })
        .collect()
}

pub fn parse_health(s: &str) -> Result<Health> {
    let v = json("ceph health detail", s)?;
    let status = text(&v["status"]);
    if !status.starts_with("HEALTH_") {
        bail!("ceph health detail: no status (`{status}`)");
    }
    Ok(Health {
        status,
        checks: checks(&v["checks"]),
    })
}

pub fn parse_pg_stat(s: &str) -> Result<PgStates> {
    let v = json("ceph pg stat", s)?;
    let list = v["pg_summary"]["num_pg_by_state"]
        .as_array()
        .context("ceph pg stat: no pg_summary.num_pg_by_state")?;
    let by_state = list
        .iter()
        .take(MAX_ITEMS)
        .map(|e| (text(&e["name"]), e["num"].as_u64().unwrap_or(0)))
        .collect();
    Ok(PgStates { by_state })
}

/// A PG state is clean when `active` and `clean` are among its parts
/// (`active+clean+scrubbing` is; doc/rados/operations/pg-states.rst).
pub fn clean(state: &str) -> bool {
    let parts: Vec<&str> = state.split('+').collect();
    parts.contains(&"active") && parts.contains(&"clean")
}

impl PgStates {
    /// The PG states a drain must not start under: not active (no I/O),
    /// degraded or undersized (fewer copies than the pool's size).
    pub fn unsafe_states(&self) -> Vec<String> {
        self.by_state
            .iter()
            .filter(|(s, n)| {
                let parts: Vec<&str> = s.split('+').collect();
                *n > 0
                    && (!parts.contains(&"active")
                        || parts.contains(&"degraded")
                        || parts.contains(&"undersized"))
            })
            .map(|(s, n)| format!("{n} PGs {s}"))
            .collect()
    }

    /// Every PG state that is not active+clean.
    pub fn not_clean(&self) -> Vec<String> {
        if self.by_state.is_empty() {
            return vec!["`ceph pg stat` listed no PG state".into()];
        }
        self.by_state
            .iter()
            .filter(|(s, n)| *n > 0 && !clean(s))
            .map(|(s, n)| format!("{n} PGs {s}"))
            .collect()
    }

    /// `32 active+clean`, for the record.
    pub fn summary(&self) -> String {
        self.by_state
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The OSD ids under the CRUSH host bucket named `node`.
pub fn host_osds(tree: &str, node: &str) -> Result<Vec<u32>> {
    let v = json("ceph osd tree", tree)?;
    let nodes = v["nodes"].as_array().context("ceph osd tree: no nodes")?;
    let mut ids: Vec<u32> = nodes
        .iter()
        .take(MAX_ITEMS * 8)
        .filter(|n| n["type"] == "host" && n["name"] == node)
        .flat_map(|n| n["children"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c.as_u64().and_then(|i| u32::try_from(i).ok()))
        .take(MAX_ITEMS)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

pub fn parse_ok_to_stop(s: &str) -> Result<OkToStop> {
    let v = json("ceph osd ok-to-stop", s)?;
    let ok_to_stop = v["ok_to_stop"]
        .as_bool()
        .context("ceph osd ok-to-stop: no ok_to_stop")?;
    Ok(OkToStop {
        ok_to_stop,
        osds: v["osds"]
            .as_array()
            .map(|a| a.iter().take(MAX_ITEMS).filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
        num_ok_pgs: v["num_ok_pgs"].as_u64().unwrap_or(0),
        num_not_ok_pgs: v["num_not_ok_pgs"].as_u64().unwrap_or(0),
    })
}

/// The CephClusters of `kubectl get cephclusters -A -o json`.
fn parse_clusters(s: &str) -> Result<Vec<CephClusterStatus>> {
    let v = json("kubectl get cephclusters", s)?;
    let items = v["items"]
        .as_array()
        .context("kubectl get cephclusters: no items")?;
    Ok(items
        .iter()
        .take(MAX_ITEMS)
        .map(|item| {
            let namespace = text(&item["metadata"]["namespace"]);
            let name = format!("{namespace}/{}", text(&item["metadata"]["name"]));
            let ceph = &item["status"]["ceph"];
            let last_checked_text = text(&ceph["lastChecked"]);
            let last_checked = last_checked_text
                .parse::<jiff::Timestamp>()
                .ok()
                .map(|t| t.as_second());
            let health = ceph["health"]
                .as_str()
                .filter(|h| h.starts_with("HEALTH_"))
                .map(|h| Health {
                    status: text(&Value::from(h)),
                    checks: checks(&ceph["details"]),
                });
            CephClusterStatus {
                name,
                namespace,
                health,
                last_checked,
                last_checked_text,
            }
        })
        .collect())
}

/// The toolbox pods that run and are Ready, with valid names.
fn parse_toolboxes(s: &str) -> Vec<Toolbox> {
    let Ok(v) = json("kubectl get pods", s) else {
        return Vec::new();
    };
    v["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .take(MAX_ITEMS)
                .filter(|p| p["status"]["phase"] == "Running")
                .filter(|p| {
                    p["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .map(|p| Toolbox {
                    namespace: text(&p["metadata"]["namespace"]),
                    pod: text(&p["metadata"]["name"]),
                })
                .filter(|t| is_dns_subdomain(&t.namespace) && is_dns_subdomain(&t.pod))
                .collect()
        })
        .unwrap_or_default()
}

/// The discovery script's output (`crate::remote::rook::DISCOVER_SCRIPT`).
pub fn read_discovery(output: &str) -> Result<Discovery> {
    let probes = crate::node::parse_probes("ceph", output, &["clock", "clusters", "toolbox"])?;
    let [clock, clusters, toolbox] = <[Result<String, String>; 3]>::try_from(probes)
        .map_err(|_| anyhow::anyhow!("the ceph script's sections are not three"))?;
    let now = clock.ok().and_then(|s| s.trim().parse::<i64>().ok());
    let clusters = match clusters {
        Ok(s) => parse_clusters(&s).map_err(|e| format!("{e:#}")),
        // kubectl's words when the API server does not serve the type:
        // Rook's CRDs are not installed, so there is no Ceph to judge.
        Err(e) if e.contains("doesn't have a resource type") => Ok(Vec::new()),
        Err(e) => Err(e),
    };
    Ok(Discovery {
        now,
        clusters,
        toolboxes: toolbox.map(|s| parse_toolboxes(&s)).unwrap_or_default(),
    })
}

//! Reading Rook-Ceph's state from the first control plane, for the Ceph
//! gate (`crate::steps`' storage gate, journaled) and `status` alike: the
//! discovery script (the cluster's clock, every CephCluster, the toolbox
//! pods), then, for each CephCluster whose namespace runs a Ready toolbox,
//! `ceph health detail`, `pg stat` and `osd tree` through it, and `osd
//! ok-to-stop` for the OSDs of the nodes about to stop. A cluster without
//! a toolbox, or whose toolbox fails, is read from its `.status.ceph`
//! (`crate::checks::ceph` judges both).

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;

use crate::checks::ceph::{self as judge, Discovery, Reading};
use crate::remote;
use crate::ssh::{Output, Session};

/// Runs a command as root on the first control plane.
pub trait RunRoot {
    fn run_root_as(
        &self,
        label: &'static str,
        cmd: String,
    ) -> impl Future<Output = anyhow::Result<Output>> + Send;
    fn node_name(&self) -> String;
}

impl RunRoot for Arc<Session> {
    async fn run_root_as(&self, _label: &'static str, cmd: String) -> anyhow::Result<Output> {
        self.exec_root(&cmd, None).await
    }

    fn node_name(&self) -> String {
        self.node().to_string()
    }
}

/// What the discovery script says.
pub async fn discover(api: &(impl RunRoot + Sync)) -> anyhow::Result<Discovery> {
    let out = api
        .run_root_as(
            "ceph: clusters, toolbox, clock",
            remote::rook::DISCOVER_SCRIPT.to_string(),
        )
        .await?;
    judge::read_discovery(&out.stdout).with_context(|| format!("{}: reading Ceph", api.node_name()))
}

/// Every CephCluster's reading, named `namespace/name`; `None` when the
/// cluster has no CephCluster (or no Rook CRD). `stopping`: the nodes
/// about to go down, whose OSDs `ok-to-stop` is asked about.
pub async fn read(
    api: &(impl RunRoot + Sync),
    stopping: &[String],
) -> anyhow::Result<Option<Vec<(String, Reading)>>> {
    let d = discover(api).await?;
    let clusters = match d.clusters {
        Ok(c) if c.is_empty() => return Ok(None),
        Ok(c) => c,
        Err(e) => {
            return Ok(Some(vec![(
                "Ceph".into(),
                Reading::Unreadable(format!("the CephClusters could not be listed: {e}")),
            )]));
        }
    };
    let now = d.now.unwrap_or(i64::MAX);
    let mut out = Vec::new();
    for status in clusters {
        let name = status.name.clone();
        let toolbox = d.toolboxes.iter().find(|t| t.namespace == status.namespace);
        let reading = match toolbox {
            Some(t) => match from_toolbox(api, &t.namespace, &t.pod, stopping).await {
                Ok(r) => r,
                // The toolbox is a convenience: Rook's status still judges.
                Err(_) => Reading::Status { status, now },
            },
            None => Reading::Status { status, now },
        };
        out.push((name, reading));
    }
    Ok(Some(out))
}

/// One cluster's reading through its toolbox pod `ns/pod`.
async fn from_toolbox(
    api: &(impl RunRoot + Sync),
    ns: &str,
    pod: &str,
    stopping: &[String],
) -> anyhow::Result<Reading> {
    let script = remote::rook::toolbox_script(ns, pod).context("the toolbox's name")?;
    let out = api.run_root_as("ceph: toolbox readings", script).await?;
    let probes =
        crate::node::parse_probes("ceph-toolbox", &out.stdout, &["health", "pgs", "tree"])?;
    let [health, pgs, tree] = <[Result<String, String>; 3]>::try_from(probes)
        .map_err(|_| anyhow::anyhow!("the toolbox script's sections are not three"))?;
    let health = judge::parse_health(&health.map_err(anyhow::Error::msg)?)?;
    let pgs = judge::parse_pg_stat(&pgs.map_err(anyhow::Error::msg)?)?;
    let tree = tree.map_err(anyhow::Error::msg)?;
    let mut ids = Vec::new();
    for node in stopping {
        ids.extend(judge::host_osds(&tree, node)?);
    }
    let stop = if ids.is_empty() {
        None
    } else {
        let cmd = remote::rook::ok_to_stop(ns, pod, &ids).context("the toolbox's name")?;
        let out = api.run_root_as("ceph: osd ok-to-stop", cmd).await?;
        // Exit 16 (EBUSY) says "not ok", with the report on stdout.
        let said: String = out
            .stderr
            .trim()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(240)
            .collect();
        let answer = judge::parse_ok_to_stop(&out.stdout).map_err(|e| format!("{e:#}; {said}"));
        Some((ids, answer))
    };
    Ok(Reading::Toolbox { health, pgs, stop })
}

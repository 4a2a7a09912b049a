//! Facts from every node at once: one SSH connection per node, one round trip
//! for the facts script, plus one more on the first reachable control-plane
//! node for what the API server says. The sessions are kept so that `apply`
//! reuses them.

use std::sync::Arc;

use anyhow::Context;

use crate::inventory::{Inventory, Node, Role};
use crate::node::{self, ClusterFacts, NodeFacts};
use crate::remote;
use crate::ssh::{self, Session};

/// What one node told us, or why it could not.
pub struct NodeReport {
    pub node: Node,
    pub facts: anyhow::Result<NodeFacts>,
    pub session: Option<Arc<Session>>,
}

pub struct Gathered {
    /// In inventory order.
    pub nodes: Vec<NodeReport>,
    /// What the transport wants the operator to see (host key checking off,
    /// a key recorded by accept-new). Each already starts with the name of
    /// the node (or `jump host …`) it is about, as every transport message does.
    pub warnings: Vec<String>,
    /// From the first reachable control-plane node (named), or why not.
    pub cluster: anyhow::Result<(String, ClusterFacts)>,
}

impl Gathered {
    pub fn all_answered(&self) -> bool {
        self.nodes.iter().all(|n| n.facts.is_ok()) && self.cluster.is_ok()
    }
}

pub async fn gather(
    inv: &Inventory,
    opts: &ssh::Options,
    parallel: usize,
) -> anyhow::Result<Gathered> {
    let targets = ssh::resolve_all(inv)?;
    let sessions = ssh::connect_all(&targets, opts, parallel).await;

    let mut tasks = Vec::new();
    for (node, (_, session)) in inv.nodes.iter().zip(sessions) {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            match session {
                Ok(s) => {
                    let s = Arc::new(s);
                    let facts = node_facts(&s).await;
                    NodeReport {
                        node,
                        facts,
                        session: Some(s),
                    }
                }
                Err(e) => NodeReport {
                    node,
                    facts: Err(e),
                    session: None,
                },
            }
        }));
    }
    // The cluster query runs on its own channel while the facts scripts run.
    let mut reports = Vec::with_capacity(tasks.len());
    for t in tasks {
        reports.push(t.await.context("a facts task panicked")?);
    }
    let cluster = cluster_facts(&reports).await;
    let warnings = reports
        .iter()
        .filter_map(|r| r.session.as_ref())
        .flat_map(|s| s.warnings().iter().cloned())
        .collect();
    Ok(Gathered {
        nodes: reports,
        warnings,
        cluster,
    })
}

async fn node_facts(s: &Session) -> anyhow::Result<NodeFacts> {
    let out = s.exec_root(remote::FACTS_SCRIPT, None).await?;
    node::parse_facts(&out.stdout).with_context(|| {
        format!(
            "{}: could not read the facts script's output (stderr: {})",
            s.node(),
            out.stderr.trim()
        )
    })
}

async fn cluster_facts(reports: &[NodeReport]) -> anyhow::Result<(String, ClusterFacts)> {
    let mut errors = Vec::new();
    for r in reports.iter().filter(|r| r.node.role == Role::ControlPlane) {
        let Some(s) = &r.session else { continue };
        match query_cluster(s).await {
            Ok(c) => return Ok((r.node.name.clone(), c)),
            Err(e) => errors.push(format!("{}: {e:#}", r.node.name)),
        }
    }
    if errors.is_empty() {
        anyhow::bail!("no control-plane node was reachable, so the API server could not be asked")
    }
    anyhow::bail!("the API server could not be asked ({})", errors.join("; "))
}

pub async fn query_cluster(s: &Session) -> anyhow::Result<ClusterFacts> {
    let out = s.exec_root(remote::CLUSTER_SCRIPT, None).await?;
    node::parse_cluster(&out.stdout)
}

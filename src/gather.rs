//! Facts from every node at once: one SSH connection per node and one round
//! trip for the facts script; the first control-plane node is also asked what
//! the API server says, on a second channel at the same time. Each node runs
//! its script as soon as it is connected, without waiting for the others.
//! The sessions are kept so that `apply` reuses them. A [`Progress`] counts
//! the nodes that have answered (or failed) as they do.

pub mod kured_reading;
mod roles;
pub mod rook_reading;

pub use roles::disagreements as role_disagreements;

use std::sync::Arc;

use anyhow::Context;
use tokio::sync::Semaphore;

use crate::checks;
use crate::inventory::{Inventory, Node, Role};
use crate::node::{self, ClusterFacts, NodeFacts};
use crate::remote;
use crate::ssh::{self, Session};
use crate::ui::Progress;

mod checks_reading;
mod clock_reading;

pub use checks_reading::check_inputs;
pub use clock_reading::ClockReading;
use clock_reading::read_clock;

/// What one node told us, or why it could not.
pub struct NodeReport {
    pub node: Node,
    pub facts: anyhow::Result<NodeFacts>,
    pub session: Option<Arc<Session>>,
    /// Its clock, read beside the facts; `None` when it was not reached.
    pub clock: Option<ClockReading>,
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
    /// What the cluster script printed for `cluster`: the checks that
    /// follow when planning take what it read instead of asking again
    /// (`check_inputs`).
    pub cluster_output: Option<String>,
    /// Connections that sshd turned away before its banner (MaxStartups)
    /// and that succeeded when tried again: nothing went wrong, shown with `-v`.
    pub retried: Vec<String>,
}

impl Gathered {
    pub fn all_answered(&self) -> bool {
        self.nodes.iter().all(|n| n.facts.is_ok()) && self.cluster.is_ok()
    }
}

/// `progress` advances by one as each node is done; it is cleared before
/// this returns, so the caller's output never lands under a stale bar.
pub async fn gather(
    inv: &Inventory,
    opts: &ssh::Options,
    parallel: usize,
    progress: &Progress,
) -> anyhow::Result<Gathered> {
    // Resolving touches no node: what fails here is the operator's
    // configuration (no user to log in as, a bad ~/.ssh/config), so exit 2.
    let targets = ssh::resolve_all(inv).map_err(|e| crate::usage!("{e:#}"))?;
    // A passphrase asked while connecting must not be drawn over.
    opts.keys.quiet_while_prompting(progress.bar().cloned());
    let _cleared = Cleared(progress, &opts.keys);
    let permits = Arc::new(Semaphore::new(parallel.max(1)));
    let first_control_plane = inv.nodes.iter().position(|n| n.role == Role::ControlPlane);
    let tasks: Vec<_> = inv
        .nodes
        .iter()
        .zip(targets)
        .enumerate()
        .map(|(i, (node, target))| {
            let visit = visit(
                node.clone(),
                target,
                opts.clone(),
                permits.clone(),
                Some(i) == first_control_plane,
            );
            let progress = progress.clone();
            tokio::spawn(async move {
                let done = visit.await;
                progress.advance();
                done
            })
        })
        .collect();

    let mut reports = Vec::with_capacity(tasks.len());
    let mut first_answer = None;
    for (node, task) in inv.nodes.iter().zip(tasks) {
        let (report, cluster) = task
            .await
            .with_context(|| format!("{}: the task gathering its facts failed", node.name))?;
        if let Some(cluster) = cluster {
            first_answer = Some((node.name.clone(), cluster));
        }
        reports.push(report);
    }
    let (cluster, cluster_output) = match cluster_facts(&reports, first_answer).await {
        Ok((node, facts, output)) => (Ok((node, facts)), Some(output)),
        Err(e) => (Err(e), None),
    };
    let sessions = || reports.iter().filter_map(|r| r.session.as_ref());
    let warnings = sessions()
        .flat_map(|s| s.warnings().iter().cloned())
        .collect();
    let retried = sessions()
        .flat_map(|s| s.retried().iter().cloned())
        .collect();
    Ok(Gathered {
        nodes: reports,
        warnings,
        cluster,
        cluster_output,
        retried,
    })
}

/// Clears the progress bar however `gather` returns, and stops passphrase
/// prompts from suspending a bar that is gone.
struct Cleared<'a>(&'a Progress, &'a ssh::KeyCache);

impl Drop for Cleared<'_> {
    fn drop(&mut self) {
        self.1.quiet_while_prompting(None);
        self.0.finish();
    }
}

/// One node from connection to facts, without waiting for the others: the
/// permit bounds how many connect at once, not how many run their script.
/// `ask_cluster`: also ask the API server, on a second channel of the same
/// connection while the facts script runs, so that costs no extra round trip.
async fn visit(
    node: Node,
    target: ssh::Target,
    opts: ssh::Options,
    permits: Arc<Semaphore>,
    ask_cluster: bool,
) -> (NodeReport, Option<anyhow::Result<(ClusterFacts, String)>>) {
    let connected = {
        // The semaphore is never closed; without a permit we still connect.
        let _permit = permits.acquire_owned().await.ok();
        ssh::connect(&target, &opts).await
    };
    let session = match connected {
        Ok(s) => Arc::new(s),
        Err(e) => {
            let report = NodeReport {
                node,
                facts: Err(e),
                session: None,
                clock: None,
            };
            return (report, None);
        }
    };
    // The clock on its own channel while the facts script runs: no round
    // trip added.
    let (facts, cluster, clock) = if ask_cluster {
        let (facts, cluster, clock) = tokio::join!(
            node_facts(&session),
            read_cluster(&session),
            read_clock(&session)
        );
        (facts, Some(cluster), clock)
    } else {
        let (facts, clock) = tokio::join!(node_facts(&session), read_clock(&session));
        (facts, None, clock)
    };
    let report = NodeReport {
        node,
        facts,
        session: Some(session),
        clock: Some(clock),
    };
    (report, cluster)
}

async fn node_facts(s: &Session) -> anyhow::Result<NodeFacts> {
    let out = s.exec_root(remote::FACTS_SCRIPT, None).await?;
    node::parse_facts(&out.stdout).with_context(|| {
        format!(
            "{}: could not read the facts script's output{}",
            s.node(),
            stderr_note(&out.stderr)
        )
    })
}

/// The first control-plane node's answer, or the next reachable one's when
/// it could not give one. Errors name the node they come from.
async fn cluster_facts(
    reports: &[NodeReport],
    first_answer: Option<(String, anyhow::Result<(ClusterFacts, String)>)>,
) -> anyhow::Result<(String, ClusterFacts, String)> {
    let mut errors = Vec::new();
    let mut asked = None;
    if let Some((name, answer)) = first_answer {
        match answer {
            Ok((c, output)) => return Ok((name, c, output)),
            Err(e) => errors.push(format!("{e:#}")),
        }
        asked = Some(name);
    }
    let others = reports
        .iter()
        .filter(|r| r.node.role == Role::ControlPlane && asked.as_ref() != Some(&r.node.name));
    for r in others {
        let Some(s) = &r.session else { continue };
        match read_cluster(s).await {
            Ok((c, output)) => return Ok((r.node.name.clone(), c, output)),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    if errors.is_empty() {
        anyhow::bail!("no control-plane node was reachable over SSH")
    }
    anyhow::bail!("{}", errors.join("; "))
}

pub async fn query_cluster(s: &Session) -> anyhow::Result<ClusterFacts> {
    read_cluster(s).await.map(|(facts, _)| facts)
}

/// [`query_cluster`], with what the script printed.
async fn read_cluster(s: &Session) -> anyhow::Result<(ClusterFacts, String)> {
    let out = s.exec_root(remote::CLUSTER_SCRIPT, None).await?;
    let facts = node::parse_cluster(&out.stdout).with_context(|| {
        format!(
            "{}: could not read what the API server said{}",
            s.node(),
            stderr_note(&out.stderr)
        )
    })?;
    Ok((facts, out.stdout))
}

/// Every etcd member as `via`'s etcd pod sees it (`status`); `Ok(None)`
/// when etcd is not kubeadm's stacked one (nothing of fleetctl's to show).
pub async fn etcd_members(s: &Session, via: &str) -> anyhow::Result<Option<checks::EtcdMembers>> {
    let config = s
        .exec_root(&remote::before_hop::get_kubeadm_config(), None)
        .await?;
    if !config.success() {
        anyhow::bail!("reading kubeadm-config failed: {}", config.stderr.trim());
    }
    if !matches!(
        checks::etcd_topology(&config.stdout)?,
        checks::EtcdTopology::Local { .. }
    ) {
        return Ok(None);
    }
    let (list_cmd, status_cmd) = (
        remote::etcd_status::member_list(via),
        remote::etcd_status::endpoint_status(via),
    );
    let (list, status) =
        tokio::join!(s.exec_root(&list_cmd, None), s.exec_root(&status_cmd, None),);
    let (list, status) = (list?, status?);
    if !list.success() {
        anyhow::bail!(
            "etcdctl member list in etcd-{via} failed: {}",
            list.stderr.trim().lines().last().unwrap_or("no output")
        );
    }
    checks::parse_etcd_members(&list.stdout, &status.stdout, &status.stderr).map(Some)
}

/// ` (stderr: …)` when the script's shell complained, for the error message.
fn stderr_note(stderr: &str) -> String {
    match stderr.trim() {
        "" => String::new(),
        text => format!(" (stderr: {text})"),
    }
}

//! `apply --on-failure rollback`: a node that came back from its reboot
//! but whose new kubelet did not get it Ready (crash-looping, not active,
//! its control plane or the Node not Ready within `--node-timeout`) is
//! rolled back as `fleetctl rollback NODE` does it: the same decision
//! (`crate::plan::rollbacks` on facts read now, with its refusals: no kept
//! image, the skew policy), the same tasks (`script::of_rollbacks`), run by
//! the same executor and journaled. Then apply stops, naming the node and
//! the cause. Nothing else is touched: the other nodes of the batch that
//! came back stay as they are, and a failure of any other kind (a drain, a
//! node that never came back) stops apply as `stop` does.
//!
//! This module decides and words; `execute` runs the tasks (it owns the
//! runner, and this module must not import it back).

use std::sync::Arc;

use anyhow::Context;
use futures_util::future::join_all;

use super::context::{Apply, settled_facts};
use super::script::{self, Task};
use crate::inventory::Role;
use crate::plan::{self, FleetNode, FleetState, Hop, Rollback};
use crate::remote::kubectl;
use crate::ssh;

/// How many automatic restarts of kubelet.service while fleetctl watched
/// the node, with the unit failing still, make it crash-looping
/// (`steps::roll::crash_loop`): a kubelet may fail once or twice while what
/// it needs comes up, but systemd restarting it (`Restart=always`,
/// `RestartSec=10` in the image's unit) three more times under fleetctl's
/// eyes with nothing changing will not end by itself. `--on-failure
/// rollback` gives up on it at once; the default waits out
/// `--node-timeout`, then names it.
pub const CRASH_LOOP_RESTARTS: u32 = 3;

/// What the screen and the journal say of an offline rollback.
pub const OFFLINE: &str = "the lone control plane's API server is down: rolled back offline, \
     NO DRAIN POSSIBLE (its pods were not evicted); pin back, point the symlink back, reboot, then \
     wait for the API to answer";

/// Why a node that came back from its reboot is not up on its new kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    CrashLoop {
        restarts: u32,
    },
    /// kubelet.service not active at the deadline.
    NotActive,
    /// A control plane's static pods not Running at the deadline.
    StaticPods,
    /// The Node not Ready at the deadline.
    NotReady,
}

/// A node not up on its new kubelet; its Display is the message the wait
/// gave, so the error reads as it always did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotUp {
    pub node: String,
    pub cause: Cause,
    /// The kubelet's last line in the unit's journal, when read.
    pub last_log: Option<String>,
    pub message: String,
}

impl std::fmt::Display for NotUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for NotUp {}

impl NotUp {
    /// The cause in a few words, for the closing message.
    pub fn cause_text(&self, timeout: std::time::Duration) -> String {
        let within = humantime::format_duration(timeout);
        let what = match self.cause {
            Cause::CrashLoop { restarts } => {
                format!(
                    "its new kubelet is crash-looping (systemd restarted it {restarts} times while \
                     fleetctl watched)"
                )
            }
            Cause::NotActive => format!("its new kubelet was not active within {within}"),
            Cause::StaticPods => format!("its control plane did not come up within {within}"),
            Cause::NotReady => format!("it was not Ready on its new kubelet within {within}"),
        };
        match &self.last_log {
            Some(line) => format!("{what}; the kubelet's last words: {line}"),
            None => what,
        }
    }
}

/// Several nodes of one batch failed; the nodes not up among them kept.
#[derive(Debug)]
pub struct BatchFailed {
    pub text: String,
    pub not_up: Vec<NotUp>,
}

impl std::fmt::Display for BatchFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for BatchFailed {}

/// The nodes a failed roll left not up on their new kubelet.
pub fn not_up(e: &anyhow::Error) -> Vec<NotUp> {
    for c in e.chain() {
        if let Some(b) = c.downcast_ref::<BatchFailed>() {
            return b.not_up.clone();
        }
        if let Some(n) = c.downcast_ref::<NotUp>() {
            return vec![n.clone()];
        }
    }
    Vec::new()
}

/// The kubelet's own last line in `journalctl -u kubelet` output (not
/// systemd's about it), bounded.
pub fn last_kubelet_line(journal: &[String]) -> Option<String> {
    let line = journal
        .iter()
        .rev()
        .find(|l| l.contains(" kubelet[") || l.contains("\"command failed\""))?;
    let text = line
        .split_once("]: ")
        .map_or(line.as_str(), |(_, t)| t)
        .trim();
    Some(text.chars().take(400).collect())
}

/// The rollback of the nodes a roll left not up, ready to run.
pub struct Prepared {
    pub failed: Vec<NotUp>,
    pub rollbacks: Vec<Rollback>,
    /// One hop per node, in place of the plan's while they run.
    pub hops: Vec<Hop>,
    pub tasks: Vec<Task>,
    /// A lone control plane whose API server is down: rolled back without
    /// the API (`roll::roll_offline`): no drain.
    pub offline: bool,
}

/// Decides the rollback of `failed` on facts read now: their sessions
/// renewed (the ones apply holds are from before the reboot), theirs and
/// the control planes' facts, the cluster's version. `Err`: why not, and
/// then nothing was changed.
pub async fn prepare(apply: &mut Apply<'_>, failed: Vec<NotUp>) -> anyhow::Result<Prepared> {
    let names: Vec<String> = failed.iter().map(|n| n.node.clone()).collect();
    for node in &names {
        reconnect(apply, node).await?;
    }
    let (state, offline) = match fresh_state(apply, &names).await {
        Ok(state) => (state, false),
        Err(e) => match lone_control_plane(apply, &names) {
            Some(node) => (offline_state(apply, node, &e).await?, true),
            None => return Err(e),
        },
    };
    let rollbacks = plan::rollbacks(&state, &names)
        .map_err(|problems| anyhow::anyhow!("{}", problems.join("; ")))?;
    let mut rb_plan = apply.plan.clone();
    rb_plan.hops = rollbacks.iter().map(plan::rollback_hop).collect();
    let tasks = script::of_rollbacks(&rb_plan);
    Ok(Prepared {
        failed,
        rollbacks,
        hops: rb_plan.hops,
        tasks,
        offline,
    })
}

/// The one failed node when it is the inventory's only control plane: its
/// API server is the cluster's, so it is down with its kubelet.
fn lone_control_plane<'n>(apply: &Apply<'_>, names: &'n [String]) -> Option<&'n str> {
    let cps: Vec<&str> = apply
        .inv
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane)
        .map(|n| n.name.as_str())
        .collect();
    match (names, cps.as_slice()) {
        ([node], [cp]) if node == cp => Some(node.as_str()),
        _ => None,
    }
}

/// What `plan::rollbacks` reads, without the API: the node's facts, and
/// the cluster's version from its own last kubeadm step (on a lone control
/// plane, `upgrade apply` set kubeadm-config's to exactly that).
async fn offline_state(
    apply: &Apply<'_>,
    node: &str,
    why: &anyhow::Error,
) -> anyhow::Result<FleetState> {
    let r = apply.remote(node)?;
    // Offline only when the API really is down: an API that answers gets
    // the ordinary rollback (its drain), and the error that stopped it.
    let answers = r
        .run_root("is the API server down", &kubectl::readyz(), None)
        .await
        .is_ok_and(|out| out.exit == Some(0) && out.stdout.trim() == "ok");
    if answers {
        anyhow::bail!("{why:#}");
    }
    let facts = settled_facts(&r).await?;
    lone_state(
        apply.plan.hub.clone(),
        apply.inv.containerd_version,
        node,
        facts,
        why,
    )
}

/// Whether the API answers `/readyz` through `session`'s node (its admin
/// kubeconfig), unjournaled: `fleetctl rollback` asks before it has a
/// journal, to decide whether the offline rollback may be offered at all.
pub async fn api_answers(session: &ssh::Session) -> bool {
    session
        .exec_root(&kubectl::readyz(), None)
        .await
        .is_ok_and(|out| out.exit == Some(0) && out.stdout.trim() == "ok")
}

/// The fleet as an offline rollback of control plane `node` sees it: only
/// its own facts, and the cluster's version from its last kubeadm step (the
/// API that would say it is down: `why`). Shared by `apply --on-failure
/// rollback` and `fleetctl rollback`.
pub fn lone_state(
    hub: String,
    containerd_version: Option<crate::version::Minor>,
    node: &str,
    facts: crate::node::NodeFacts,
    why: &anyhow::Error,
) -> anyhow::Result<FleetState> {
    let version = facts.kubeadm_step.clone().with_context(|| {
        format!(
            "{node}: the API server does not answer ({why:#}), and the node has no record of its \
             last kubeadm step to tell the cluster's version"
        )
    })?;
    Ok(FleetState {
        hub,
        containerd_version,
        nodes: vec![FleetNode {
            name: node.to_string(),
            role: Role::ControlPlane,
            facts,
        }],
        cluster: crate::node::ClusterFacts {
            nodes: Vec::new(),
            version: Some(version),
            kube_proxy: false,
            // The API is down: its kube-apiserver is this very node's,
            // whose version `version` (its last kubeadm step) already is.
            apiservers: Vec::new(),
        },
    })
}

async fn reconnect(apply: &mut Apply<'_>, node: &str) -> anyhow::Result<()> {
    let target = apply
        .settings
        .targets
        .get(node)
        .with_context(|| format!("{node}: no SSH target"))?;
    let session = ssh::connect(target, &apply.settings.ssh)
        .await
        .with_context(|| format!("{node}: reconnecting to roll it back"))?;
    let fresh = apply.remote(node)?.with_session(Arc::new(session));
    apply.set_remote(node, fresh);
    Ok(())
}

/// What `plan::rollbacks` reads: the failed nodes and the control planes
/// (the oldest kube-apiserver), the cluster's version from the API.
async fn fresh_state(apply: &Apply<'_>, names: &[String]) -> anyhow::Result<FleetState> {
    let wanted: Vec<(String, Role)> = apply
        .inv
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane || names.contains(&n.name))
        .map(|n| (n.name.clone(), n.role))
        .collect();
    let reads = wanted.iter().map(|(name, role)| async move {
        let facts = settled_facts(&apply.remote(name)?).await?;
        Ok::<_, anyhow::Error>(FleetNode {
            name: name.clone(),
            role: *role,
            facts,
        })
    });
    let nodes = join_all(reads)
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let api = apply.api()?;
    let cluster = crate::gather::query_cluster(api.session()).await?;
    Ok(FleetState {
        hub: apply.plan.hub.clone(),
        containerd_version: apply.inv.containerd_version,
        nodes,
        cluster,
    })
}

/// The error apply stops with once the rollback ran (`result`), naming each
/// node, its cause, where it is now, and what to do next.
/// `timeout`: `--node-timeout`, which a cause may name.
pub fn outcome(
    timeout: std::time::Duration,
    failure: anyhow::Error,
    prepared: &Prepared,
    result: anyhow::Result<()>,
) -> anyhow::Error {
    let lines: Vec<String> = prepared
        .failed
        .iter()
        .map(|n| {
            let to = prepared
                .rollbacks
                .iter()
                .find(|r| r.node == n.node)
                .map_or_else(|| "its kept image".to_string(), Rollback::to_text);
            format!("{}: {}; rolled back to {to}", n.node, n.cause_text(timeout))
        })
        .collect();
    match result {
        Ok(()) => failure.context(format!(
            "apply stopped: {}. It runs its previous kubelet again, Ready and uncordoned, its \
             sysupdate config pinned to that minor; no other node was touched by the rollback. \
             Fix the cause, then run `fleetctl plan` and `fleetctl apply` again",
            lines.join("; ")
        )),
        Err(rb) => failure.context(format!(
            "apply stopped: {}, BUT THE ROLLBACK FAILED: {rb:#}. Nothing more was touched; check \
             the node (`fleetctl status`), then roll it back yourself (`fleetctl rollback NODE`) \
             or fix its kubelet",
            lines
                .join("; ")
                .replace("; rolled back to", "; rolling back to")
        )),
    }
}

/// The error apply stops with when the rollback was refused or could not
/// be decided: nothing was changed by it.
pub fn refused(failure: anyhow::Error, failed: &[String], why: &anyhow::Error) -> anyhow::Error {
    failure.context(format!(
        "apply stopped: {} did not come up on its new kubelet, and --on-failure rollback did not \
         roll it back: {why:#}. Nothing more was touched; it is still cordoned. Fix its kubelet, \
         or roll it back with `fleetctl rollback NODE` once that is possible",
        failed.join(", ")
    ))
}

/// A failure that is not a node not up on its new kubelet: nothing to roll
/// back, and apply says why it did not.
pub fn not_eligible(failure: anyhow::Error) -> anyhow::Error {
    failure.context(
        "apply stopped; --on-failure rollback rolled nothing back: it rolls back only a node that \
         came back from its reboot but not up on its new kubelet",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_up(node: &str, cause: Cause) -> NotUp {
        NotUp {
            node: node.into(),
            cause,
            last_log: None,
            message: format!("{node}: the wait's own words"),
        }
    }

    #[test]
    fn the_nodes_not_up_are_found_through_context_and_in_a_batch() {
        let one = anyhow::Error::new(not_up("w-1", Cause::NotReady)).context("rolling w-1");
        assert_eq!(super::not_up(&one), vec![not_up("w-1", Cause::NotReady)]);
        assert_eq!(format!("{one:#}"), "rolling w-1: w-1: the wait's own words");
        let batch = anyhow::Error::new(BatchFailed {
            text: "2 nodes of the batch failed".into(),
            not_up: vec![not_up("w-2", Cause::CrashLoop { restarts: 3 })],
        });
        assert_eq!(super::not_up(&batch)[0].node, "w-2");
        assert!(super::not_up(&anyhow::anyhow!("w-1: drain did not finish")).is_empty());
    }

    #[test]
    fn the_kubelets_last_line_is_its_own_not_systemds() {
        let journal: Vec<String> = [
            "Dec 01 15:04:05 w-1 kubelet[812]: E1201 15:04:05.1 812 run.go:72] \"command failed\" err=\"boom\"",
            "Dec 01 15:04:05 w-1 systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE",
            "Dec 01 15:04:15 w-1 systemd[1]: kubelet.service: Scheduled restart job, restart counter is at 3.",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            last_kubelet_line(&journal).as_deref(),
            Some("E1201 15:04:05.1 812 run.go:72] \"command failed\" err=\"boom\"")
        );
        assert_eq!(last_kubelet_line(&journal[1..]), None);
        let long = vec![format!("x kubelet[1]: {}", "a".repeat(1000))];
        assert_eq!(last_kubelet_line(&long).map(|l| l.len()), Some(400));
    }

    #[test]
    fn the_cause_says_what_happened_and_the_kubelets_last_words() {
        let mut n = not_up("w-1", Cause::CrashLoop { restarts: 4 });
        n.last_log = Some("err=\"boom\"".into());
        assert_eq!(
            n.cause_text(std::time::Duration::from_secs(60)),
            "its new kubelet is crash-looping (systemd restarted it 4 times while fleetctl \
             watched); the kubelet's last words: err=\"boom\""
        );
        let n = not_up("w-1", Cause::NotReady);
        assert_eq!(
            n.cause_text(std::time::Duration::from_secs(60)),
            "it was not Ready on its new kubelet within 1m"
        );
    }
}

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

use crate::checks::{self, HubImage, NodeKubeletFiles};
use crate::inventory::{Inventory, Node, Role};
use crate::node::{self, ClusterFacts, NodeFacts};
use crate::plan;
use crate::remote;
use crate::ssh::{self, Session};
use crate::ui::Progress;

mod clock_reading;

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
    let cluster = cluster_facts(&reports, first_answer).await;
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
) -> (NodeReport, Option<anyhow::Result<ClusterFacts>>) {
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
            query_cluster(&session),
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
    first_answer: Option<(String, anyhow::Result<ClusterFacts>)>,
) -> anyhow::Result<(String, ClusterFacts)> {
    let mut errors = Vec::new();
    let mut asked = None;
    if let Some((name, answer)) = first_answer {
        match answer {
            Ok(c) => return Ok((name, c)),
            Err(e) => errors.push(format!("{e:#}")),
        }
        asked = Some(name);
    }
    let others = reports
        .iter()
        .filter(|r| r.node.role == Role::ControlPlane && asked.as_ref() != Some(&r.node.name));
    for r in others {
        let Some(s) = &r.session else { continue };
        match query_cluster(s).await {
            Ok(c) => return Ok((r.node.name.clone(), c)),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    if errors.is_empty() {
        anyhow::bail!("no control-plane node was reachable over SSH")
    }
    anyhow::bail!("{}", errors.join("; "))
}

pub async fn query_cluster(s: &Session) -> anyhow::Result<ClusterFacts> {
    let out = s.exec_root(remote::CLUSTER_SCRIPT, None).await?;
    node::parse_cluster(&out.stdout).with_context(|| {
        format!(
            "{}: could not read what the API server said{}",
            s.node(),
            stderr_note(&out.stderr)
        )
    })
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

/// What the checks before a hop read (`crate::plan::Inputs`): from the
/// first control plane, the checks script, then, only when some budget
/// allows no disruption, the running pods of those budgets' namespaces;
/// from the nodes' facts, their kubelet flag files and architectures.
/// `control_planes`: the inventory's, with their addresses, the only
/// kube-apiservers asked for `/metrics` (`crate::checks::apiservers`).
/// Never fails: a source that could not be read carries why, and its check
/// says so.
pub async fn check_inputs<'a>(
    session: Option<&Session>,
    facts: impl IntoIterator<Item = (&'a str, &'a NodeFacts)>,
    hub_images: Option<Vec<HubImage>>,
    control_planes: &[crate::inventory::Node],
) -> plan::Inputs {
    let mut kubelet_files = Vec::new();
    let mut arches = Vec::new();
    let mut cgroups = Vec::new();
    for (node, f) in facts {
        cgroups.push(checks::NodeCgroup {
            node: node.to_string(),
            v2: f.cgroup.v2,
            kubelet_config: f.cgroup.kubelet_config.clone(),
            instance_config: f.cgroup.instance_config.clone(),
        });
        kubelet_files.push(NodeKubeletFiles {
            node: node.to_string(),
            files: f.kubelet_files.clone(),
            ..Default::default()
        });
        if let Some(arch) = &f.arch {
            arches.push((node.to_string(), arch.clone()));
        }
    }
    let mut inputs = plan::Inputs {
        deprecated_apis: Err("no control-plane node answered".into()),
        budgets: Err("no control-plane node answered".into()),
        pods: Ok(Vec::new()),
        certificates: Err("no control-plane node answered".into()),
        kubelet_files,
        hub_images,
        arches,
        cgroups,
        cluster_configs: Default::default(),
    };
    let Some(s) = session else {
        return inputs;
    };
    let outputs = match s.exec_root(remote::CHECKS_SCRIPT, None).await {
        Ok(out) => node::parse_check_outputs(&out.stdout).map_err(|e| format!("{e:#}")),
        Err(e) => Err(format!("{e:#}")),
    };
    let outputs = match outputs {
        Ok(o) => o,
        Err(e) => {
            let e = format!("{}: {e}", s.node());
            inputs.deprecated_apis = Err(e.clone());
            inputs.budgets = Err(e.clone());
            inputs.cluster_configs = checks::ClusterConfigs {
                kubelet: Err(e.clone()),
                cluster: Err(e.clone()),
            };
            inputs.certificates = Err(e);
            return inputs;
        }
    };
    inputs.cluster_configs = checks::ClusterConfigs {
        kubelet: parsed_found(
            s,
            outputs.kubelet_configmap,
            checks::parse_kubelet_configmap,
        ),
        cluster: parsed_found(
            s,
            outputs.kubeadm_configmap,
            checks::parse_kubeadm_configmap,
        ),
    };
    let control_planes = control_plane_addresses(control_planes, &outputs.control_plane_nodes);
    inputs.deprecated_apis =
        Ok(deprecated_apis(s, outputs.metrics, outputs.apiservers, &control_planes).await);
    inputs.certificates = parsed(s, outputs.certs, checks::parse_check_expiration);
    inputs.budgets = parsed(s, outputs.pdbs, checks::parse_pdbs);
    if let Ok(budgets) = &inputs.budgets {
        let mut namespaces: Vec<&str> = budgets
            .iter()
            .filter(|b| b.disruptions_allowed <= 0)
            .map(|b| b.namespace.as_str())
            .collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        let mut pods = Vec::new();
        for ns in namespaces {
            let read = match s
                .exec_root(&remote::before_hop::get_running_pods_in(ns), None)
                .await
            {
                Ok(out) if out.success() => Ok(out.stdout),
                Ok(out) => Err(format!(
                    "`kubectl get pods -n {ns}` failed: {}",
                    out.stderr.trim()
                )),
                Err(e) => Err(format!("{e:#}")),
            };
            match parsed(s, read, checks::parse_pods) {
                Ok(p) => pods.extend(p),
                Err(e) => {
                    inputs.pods = Err(e);
                    break;
                }
            }
        }
        if inputs.pods.is_ok() {
            inputs.pods = Ok(pods);
        }
    }
    inputs
}

/// The deprecated-API gauge of every kube-apiserver instance, each read at
/// its advertise address through `s` (the first control plane; see
/// `crate::checks::metrics`). When the instances cannot be listed, the one
/// admin.conf reaches stands in, with a warning entry saying the others
/// were not read.
async fn deprecated_apis(
    s: &Session,
    via_admin_conf: Result<String, String>,
    pods: Result<String, String>,
    control_planes: &[checks::ControlPlane],
) -> Vec<checks::InstanceMetrics> {
    let admin_conf = |problem: String| {
        vec![
            checks::InstanceMetrics {
                instance: format!("the API server {}'s admin.conf reaches", s.node()),
                node: String::new(),
                apis: parsed(s, via_admin_conf.clone(), checks::parse_deprecated_apis),
            },
            checks::InstanceMetrics {
                instance: "the other kube-apiserver instances".to_string(),
                node: String::new(),
                apis: Err(problem),
            },
        ]
    };
    let listed = pods.and_then(|json| {
        checks::parse_apiserver_instances(&json, control_planes).map_err(|e| format!("{e:#}"))
    });
    let (instances, problems) = match listed {
        Ok((found, problems)) if !found.is_empty() => (found, problems),
        Ok(_) => {
            return admin_conf(format!(
                "{}: no kube-apiserver pod found in kube-system",
                s.node()
            ));
        }
        Err(e) => {
            return admin_conf(format!(
                "{}: the kube-apiserver pods could not be listed: {e}",
                s.node()
            ));
        }
    };
    let targets: Vec<(String, std::net::SocketAddr)> = instances
        .iter()
        .map(|i| (i.node.clone(), i.endpoint))
        .collect();
    let nodes: Vec<String> = targets.iter().map(|(n, _)| n.clone()).collect();
    let reads = match s
        .exec_root(&remote::instance_metrics_script(&targets), None)
        .await
    {
        Ok(out) => node::parse_instance_metrics(&out.stdout, &nodes).unwrap_or_else(|e| {
            nodes
                .iter()
                .map(|n| (n.clone(), Err(format!("{e:#}"))))
                .collect()
        }),
        Err(e) => nodes
            .iter()
            .map(|n| (n.clone(), Err(format!("{e:#}"))))
            .collect(),
    };
    let mut out: Vec<checks::InstanceMetrics> = instances
        .iter()
        .zip(reads)
        .map(|(i, (_, read))| checks::InstanceMetrics {
            instance: format!("{} ({})", i.node, i.endpoint),
            node: i.node.clone(),
            apis: read.and_then(|text| {
                checks::parse_deprecated_apis(&text).map_err(|e| format!("{e:#}"))
            }),
        })
        .collect();
    out.extend(problems.into_iter().map(|p| checks::InstanceMetrics {
        instance: p.split(':').next().unwrap_or_default().to_string(),
        node: String::new(),
        apis: Err(p),
    }));
    out
}

/// A ConfigMap's probe parsed: `Ok(None)` when the API server says it does
/// not exist; otherwise as [`parsed`].
fn parsed_found<T>(
    s: &Session,
    output: Result<Option<String>, String>,
    parse: impl Fn(&str) -> anyhow::Result<T>,
) -> Result<Option<T>, String> {
    match output {
        Ok(None) => Ok(None),
        Ok(Some(text)) => parsed(s, Ok(text), parse).map(Some),
        Err(e) => Err(format!("{}: {e}", s.node())),
    }
}

/// Each control plane of the inventory with the addresses its kube-apiserver
/// may be asked at: the inventory's (when it is an IP) and its Node's
/// InternalIPs (when the node list could be read).
fn control_plane_addresses(
    nodes: &[crate::inventory::Node],
    listed: &Result<String, String>,
) -> Vec<checks::ControlPlane> {
    let internal = listed
        .as_ref()
        .ok()
        .and_then(|json| checks::parse_internal_ips(json).ok())
        .unwrap_or_default();
    nodes
        .iter()
        .filter(|n| n.role == crate::inventory::Role::ControlPlane)
        .map(|n| {
            let mut addresses: Vec<std::net::IpAddr> = n.address.parse().ok().into_iter().collect();
            addresses.extend(internal.get(&n.name).into_iter().flatten().copied());
            checks::ControlPlane {
                name: n.name.clone(),
                addresses,
            }
        })
        .collect()
}

/// A probe's output parsed, or why not, naming the node it came from.
fn parsed<T>(
    s: &Session,
    output: Result<String, String>,
    parse: impl Fn(&str) -> anyhow::Result<T>,
) -> Result<T, String> {
    output
        .and_then(|text| parse(&text).map_err(|e| format!("{e:#}")))
        .map_err(|e| format!("{}: {e}", s.node()))
}

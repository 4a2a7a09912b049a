//! A hop, as the list of its phases in kubeadm's order (see
//! [`crate::plan::PhaseKind`]): download the image on every node that needs
//! it; the first control plane's `kubeadm upgrade apply`; every other
//! control plane's `upgrade node`; the control planes' reboots, one at a
//! time; the workers' `upgrade node` and staging, in parallel; the workers'
//! reboots, one at a time; the hop's verification; old images removed.
//!
//! A phase whose steps may run in parallel runs them across nodes, bounded
//! by `--parallel`, each node keeping its own order; every other phase runs
//! one step at a time. Every node is marked "in progress" in the saved plan
//! before fleetctl changes it, and re-fingerprinted after its last step of
//! the hop, so a rerun after a failure is not refused as stale while a change
//! made by someone else still is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use futures_util::future::join_all;
use tokio::sync::Semaphore;

use super::context::{Apply, settled_facts};
use super::detached::Reconnect;
use super::kubeadm::{self, Kind};
use super::runner::Remote;
use super::{POLL, download, etcd, gates, hold, last_look, preflight, roll, stage, verify};
use crate::node::NodeFacts;
use crate::plan::{Action, Hop, HopKind, Image, Phase, PhaseKind, Step};
use crate::version::{Minor, Version};

pub async fn run(apply: &mut Apply<'_>) -> anyhow::Result<()> {
    let hops = apply.plan.hops.clone();
    for (i, hop) in hops.iter().enumerate() {
        let what = match hop.kind {
            HopKind::Upgrade => "upgrade to",
            HopKind::Finish => "finish",
            HopKind::Converge => "converge on",
        };
        let version = hop_version(hop);
        apply
            .progress
            .line(&format!("hop {}/{}: {what} {version}", i + 1, hops.len()));
        if let Some(window) = &apply.settings.pace.window {
            // A hop starts only if its first node could still be done.
            let needed = apply.settings.drain_timeout + apply.settings.node_timeout;
            hold::in_window(window, &format!("hop {}/{}", i + 1, hops.len()), needed)?;
        }
        apply.journal_event("hop-start", None, &format!("{what} {version}"));
        let just_judged = i == 0
            && apply
                .settings
                .checks_judged
                .is_some_and(|t| t.elapsed() < preflight::FRESH);
        if !just_judged {
            preflight::checks(apply, hop).await?;
        }
        verify_present_images(apply, hop).await?;
        let last = last_steps(hop);
        let mut verified = false;
        for (p, phase) in hop.phases.iter().enumerate() {
            apply.check_stop(None)?;
            if phase.kind == PhaseKind::Cleanup {
                verify::verify(apply, hop).await?;
                verified = true;
            }
            apply.progress.line(&format!("  {}", phase.kind.title()));
            if phase.kind.parallel() {
                parallel(apply, hop, p, phase, &last).await?;
            } else if phase.kind == PhaseKind::WorkerReboots {
                for batch in worker_batches(apply, phase) {
                    apply.check_stop(None)?;
                    last_look::before_reboot(apply, hop, &batch).await?;
                    let names = batch.join(", ");
                    apply.begin(&names, "drain, reboot, wait, uncordon");
                    roll::roll(apply, &batch, hop.minor, hop.version.as_ref()).await?;
                    for node in &batch {
                        apply.progress.advance();
                        finish_node(apply, node, None).await?;
                    }
                }
            } else {
                for (i, step) in phase.steps.iter().enumerate() {
                    let first_of_node = i == 0 || phase.steps[i - 1].node != step.node;
                    if phase.kind == PhaseKind::ControlPlaneReboots && first_of_node {
                        // Before its pin and stage: a refused control plane
                        // is left unstaged, not armed for a power cut.
                        apply.check_stop(None)?;
                        last_look::before_reboot(apply, hop, std::slice::from_ref(&step.node))
                            .await?;
                    }
                    let finishes = is_last(&last, &step.node, (p, i));
                    one_step(apply, hop, step, finishes).await?;
                }
            }
        }
        if !verified {
            verify::verify(apply, hop).await?;
        }
        apply.progress.line(&format!(
            "hop {}/{} done: every node runs {version}",
            i + 1,
            hops.len()
        ));
        if !apply.settings.pace.soak.is_zero() && apply.back_at.is_some() {
            let what = format!("after hop {}/{}", i + 1, hops.len());
            hold::soak(apply, apply.settings.pace.soak, apply.back_at, &what).await?;
            gates::healthy(apply, &what).await?;
        }
    }
    Ok(())
}

/// The hop's image on the nodes that already had it (a download checks its
/// own): all at once, before anything of the hop runs from it anywhere.
async fn verify_present_images(apply: &Apply<'_>, hop: &Hop) -> anyhow::Result<()> {
    let present = download::present_images(hop);
    if present.is_empty() {
        return Ok(());
    }
    let image = &download::hop_image(hop)?;
    let checks = present.into_iter().map(|node| async move {
        let r = apply.remote(&node)?;
        download::verify(&r, image, "already downloaded").await
    });
    let failures: Vec<String> = join_all(checks)
        .await
        .into_iter()
        .filter_map(|r| r.err().map(|e| format!("{e:#}")))
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    bail!("{}", failures.join("\n"))
}

pub(super) fn hop_version(hop: &Hop) -> String {
    hop.version
        .as_ref()
        .map_or_else(|| hop.minor.to_string(), Version::to_string)
}

/// Where a step is in its hop: (phase, step) indexes.
type At = (usize, usize);

/// Each node's last step of the hop before the clean-up: after it, the
/// node is done and its new state becomes the plan's baseline.
fn last_steps(hop: &Hop) -> BTreeMap<String, At> {
    let mut last = BTreeMap::new();
    for (p, phase) in hop.phases.iter().enumerate() {
        if phase.kind == PhaseKind::Cleanup {
            continue;
        }
        for (i, step) in phase.steps.iter().enumerate() {
            last.insert(step.node.clone(), (p, i));
        }
    }
    last
}

fn is_last(last: &BTreeMap<String, At>, node: &str, at: At) -> bool {
    last.get(node) == Some(&at)
}

/// The step changes what the saved plan fingerprints (configs, symlink,
/// boot, the cluster's version), so the node is marked in progress first.
fn changes_fingerprint(action: &Action) -> bool {
    matches!(
        action,
        Action::Pin { .. } | Action::Stage { .. } | Action::UpgradeApply { .. } | Action::Roll
    )
}

/// One step that runs alone, with the whole apply at hand.
async fn one_step(
    apply: &mut Apply<'_>,
    hop: &Hop,
    step: &Step,
    finishes: bool,
) -> anyhow::Result<()> {
    // Every boundary between two steps is a safe point: a node is never
    // staged before its kubeadm step, and a roll undoes its own drain.
    apply.check_stop(None)?;
    let node = step.node.as_str();
    let text = step.action.describe();
    apply.begin(node, &text);
    apply.progress.step(&format!("{node}: {text}"));
    match &step.action {
        Action::Roll => {
            roll::roll(apply, &[node.to_string()], hop.minor, hop.version.as_ref()).await?;
        }
        Action::UpgradeApply { minor, version } => {
            let api = apply.api()?;
            wait_control_planes_ready(apply, &api).await?;
            if let Some(dir) = apply.settings.etcd_backups.clone() {
                apply.begin(node, "etcd snapshot before upgrade apply");
                etcd::snapshot(apply, node, *minor, &dir).await?;
                apply.begin(node, &text);
            }
            apply.mark(node)?;
            let mut job = Job::of(apply, node, hop)?;
            let v = match version {
                Some(v) => v.clone(),
                None => kubeadm::resolve_image(&job.remote, *minor).await?,
            };
            let result = job.kubeadm(Kind::Apply, &v).await;
            apply.set_remote(node, job.remote);
            result?;
            apply.record_cluster_version(v)?;
        }
        Action::UpgradeNode { .. } if apply.role(node) == crate::inventory::Role::ControlPlane => {
            // Its kubeadm restarts this node's API server: not while
            // another control plane is still coming up.
            let api = apply.api()?;
            wait_control_planes_ready(apply, &api).await?;
            let mut job = Job::of(apply, node, hop)?;
            let result = job.run(&step.action).await;
            apply.set_remote(node, job.remote);
            result?;
        }
        other => {
            if changes_fingerprint(other) {
                apply.mark(node)?;
            }
            let mut job = Job::of(apply, node, hop)?;
            let result = job.run(other).await;
            apply.set_remote(node, job.remote);
            result?;
        }
    }
    apply.progress.advance();
    if finishes {
        finish_node(apply, node, None).await?;
    }
    Ok(())
}

/// A rolling reboot without the rest of a hop (`fleetctl reboot`): each
/// batch (one control plane, or workers of one zone and minor) drained,
/// rebooted onto what it has staged, waited for and uncordoned, then the next.
pub async fn rolls(apply: &mut Apply<'_>, batches: &[(Vec<String>, Minor)]) -> anyhow::Result<()> {
    for (batch, minor) in batches {
        apply.check_stop(None)?;
        let names = batch.join(", ");
        apply.begin(&names, "drain, reboot, wait, uncordon");
        roll::roll(apply, batch, *minor, None).await?;
        for node in batch {
            apply.progress.advance();
            finish_node(apply, node, None).await?;
        }
    }
    Ok(())
}

/// The workers' rolls in batches of `--max-unavailable`, each within one
/// zone (see [`crate::plan::batches`]).
pub fn worker_batches(apply: &Apply<'_>, phase: &Phase) -> Vec<Vec<String>> {
    batches_of(apply.inv, phase, apply.settings.max_unavailable)
}

pub fn batches_of(
    inv: &crate::inventory::Inventory,
    phase: &Phase,
    max: crate::plan::MaxUnavailable,
) -> Vec<Vec<String>> {
    let workers = inv
        .nodes
        .iter()
        .filter(|n| n.role == crate::inventory::Role::Worker)
        .count();
    let nodes: Vec<(&str, Option<&str>)> = phase
        .steps
        .iter()
        .map(|s| {
            let zone = inv.node(&s.node).and_then(|n| n.zone.as_deref());
            (s.node.as_str(), zone)
        })
        .collect();
    crate::plan::batches(&nodes, max.of(workers))
        .into_iter()
        .map(|b| b.into_iter().map(String::from).collect())
        .collect()
}

/// A node is through with the hop: record its state if fleetctl changed it
/// (a roll has already done so), and say so.
async fn finish_node(
    apply: &mut Apply<'_>,
    node: &str,
    facts: Option<NodeFacts>,
) -> anyhow::Result<()> {
    if apply.plan.fingerprint.in_progress.contains(node) {
        let facts = match facts {
            Some(f) => f,
            None => settled_facts(&apply.remote(node)?).await?,
        };
        apply.settle(node, facts)?;
    }
    let took = apply.took(node);
    apply.ledger(|l| {
        if !l.done.iter().any(|d| d == node) {
            l.done.push(node.to_string());
        }
        l.current = None;
    });
    apply.progress.line(&format!(
        "  {node} done ({})",
        humantime::format_duration(took)
    ));
    Ok(())
}

/// kubeadm's own preflight refuses `upgrade apply` while a control-plane
/// Node is NotReady (ControlPlaneNodesReady), and one that just rebooted may
/// still be coming up: wait for them (and `/readyz`) up to the node timeout.
/// The same before a control plane's `upgrade node`, which restarts its API
/// server.
async fn wait_control_planes_ready(apply: &Apply<'_>, api: &Remote) -> anyhow::Result<()> {
    let deadline = apply.deadline();
    loop {
        let problems = gates::control_planes_ready(api).await?;
        if problems.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "not running kubeadm on a control plane: {}. Nothing was changed. Fix it, then run \
                 `fleetctl apply` again",
                problems.join("; ")
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The steps of a parallel phase, one task per node, at most `--parallel`
/// at once. Every node's steps run to their end (or failure) before the
/// phase reports; the nodes that finished are recorded either way.
async fn parallel(
    apply: &mut Apply<'_>,
    hop: &Hop,
    p: usize,
    phase: &Phase,
    last: &BTreeMap<String, At>,
) -> anyhow::Result<()> {
    let mut per_node: BTreeMap<String, Vec<&Step>> = BTreeMap::new();
    let mut finishes: BTreeSet<String> = BTreeSet::new();
    let mut order = Vec::new();
    for (i, s) in phase.steps.iter().enumerate() {
        if !per_node.contains_key(&s.node) {
            order.push(s.node.clone());
        }
        per_node.entry(s.node.clone()).or_default().push(s);
        if is_last(last, &s.node, (p, i)) {
            finishes.insert(s.node.clone());
        }
    }
    for n in &order {
        if per_node[n].iter().any(|s| changes_fingerprint(&s.action)) {
            apply.mark(n)?;
        }
    }
    let names = order.join(", ");
    apply.begin(&names, phase.kind.title());
    apply
        .progress
        .step(&format!("{names}: {}", phase.kind.title()));
    let permits = Arc::new(Semaphore::new(apply.settings.parallel.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for n in &order {
        let mut job = Job::of(apply, n, hop)?;
        let actions: Vec<Action> = per_node[n].iter().map(|s| s.action.clone()).collect();
        let finishing =
            finishes.contains(n) && apply.plan.fingerprint.in_progress.contains(n.as_str());
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            for action in &actions {
                job.run(action).await?;
            }
            let facts = match finishing {
                // Read here, while other nodes may still be working.
                true => Some(settled_facts(&job.remote).await?),
                false => None,
            };
            Ok::<_, anyhow::Error>((job.remote.node().to_string(), facts, job.remote))
        });
    }
    let mut failures = Vec::new();
    let mut finished = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok((node, facts, remote))) => {
                apply.set_remote(&node, remote);
                finished.insert(node, facts);
            }
            Ok(Err(e)) => failures.push(format!("{e:#}")),
            Err(e) => failures.push(format!("a task of this phase failed: {e}")),
        }
    }
    let done: Vec<String> = order
        .iter()
        .filter(|n| finished.contains_key(*n))
        .cloned()
        .collect();
    for n in &done {
        for _ in &per_node[n] {
            apply.progress.advance();
        }
        if finishes.contains(n) {
            let facts = finished.remove(n).flatten();
            finish_node(apply, n, facts).await?;
        }
    }
    if !failures.is_empty() {
        let what = match phase.kind {
            PhaseKind::WorkerPreparation => {
                "workers' kubeadm step and staging stopped; no worker was rebooted"
            }
            PhaseKind::Prepare => "preparing the hop stopped before any kubeadm step or reboot",
            _ => "the phase stopped",
        };
        bail!(
            "{what} (hop {}):\n  {}",
            hop_version(hop),
            failures.join("\n  ")
        );
    }
    Ok(())
}

/// What a step that needs no more than its node, the API node and the hub
/// runs with: cheap to clone into a task of a parallel phase. Its session is
/// replaced if the connection dropped during a detached step.
struct Job {
    remote: Remote,
    api: Remote,
    hub: String,
    deadline: Instant,
    target: Option<crate::ssh::Target>,
    ssh: crate::ssh::Options,
    /// The hop's image and its sha256 from the hub; `None` for a hop whose
    /// steps use no image (re-pinning only), and then no step may use one.
    image: Option<Image>,
    /// Whose lease a kubeadm step must fit in.
    stop: super::Stop,
    /// Which preflight errors of kubeadm the plan lets through on this node.
    preflight: kubeadm::Preflight,
}

impl Job {
    fn of(apply: &Apply<'_>, node: &str, hop: &Hop) -> anyhow::Result<Job> {
        Ok(Job {
            remote: apply.remote(node)?,
            api: apply.api()?,
            hub: apply.plan.hub.clone(),
            deadline: apply.deadline(),
            target: apply.settings.targets.get(node).cloned(),
            ssh: apply.settings.ssh.clone(),
            image: hop.image(),
            stop: apply.stop.clone(),
            preflight: kubeadm::Preflight::of(hop, node),
        })
    }

    /// The hop's image, which must be `version`'s: a step never downloads,
    /// checks or runs an image the plan records no sha256 for.
    fn image(&self, version: &Version) -> anyhow::Result<&Image> {
        download::image_of(self.remote.node(), self.image.as_ref(), version)
    }

    /// Runs a kubeadm step on the job's node, detached, reconnecting if need be.
    async fn kubeadm(&mut self, kind: Kind, v: &crate::version::Version) -> anyhow::Result<()> {
        let reconnect = self.target.as_ref().map(|target| Reconnect {
            target,
            opts: &self.ssh,
        });
        // Never start kubeadm on a lock that could lapse before it ends.
        self.stop.ensure_lease(
            &format!("{}: kubeadm upgrade {}", self.remote.node(), kind.name()),
            kubeadm::TIMEOUT,
        )?;
        let image = download::image_of(self.remote.node(), self.image.as_ref(), v)?.clone();
        if self.preflight == kubeadm::Preflight::SkipSystemVerification {
            self.remote.journal().event(
                "kubeadm-preflight-ignored",
                Some(self.remote.node()),
                &format!(
                    "kubeadm {} {v} runs with --ignore-preflight-errors=SystemVerification: \
                     cgroup v1 node, let through with --ignore-check cgroup",
                    kind.name()
                ),
            );
        }
        kubeadm::run(
            &mut self.remote,
            reconnect.as_ref(),
            kind,
            &image,
            self.preflight,
            &self.hub,
        )
        .await
    }

    async fn run(&mut self, action: &Action) -> anyhow::Result<()> {
        if let Action::UpgradeNode { minor, version } = action {
            let v = match version {
                Some(v) => v.clone(),
                None => kubeadm::resolve_image(&self.remote, *minor).await?,
            };
            return self.kubeadm(Kind::Node, &v).await;
        }
        self.quick(action).await
    }

    /// The steps that run over the session as plain commands.
    async fn quick(&self, action: &Action) -> anyhow::Result<()> {
        let r = &self.remote;
        match action {
            Action::Download { minor, expect, .. } => {
                let image = match expect {
                    Some(v) => self.image(v)?,
                    None => self
                        .image
                        .as_ref()
                        .with_context(|| download::no_sum(r.node(), &minor.to_string()))?,
                };
                download::run(r, &self.hub, *minor, image).await?;
            }
            Action::Pin {
                component,
                path,
                config,
                replaces,
                ..
            } => stage::pin(r, *component, path, config, replaces).await?,
            Action::Stage {
                component,
                minor,
                expect,
            } => {
                stage::stage(r, *component, *minor, expect.as_ref()).await?;
            }
            Action::Uncordon => {
                roll::ready_then_uncordon(&self.api, r.node(), self.deadline).await?;
            }
            Action::RemoveImages { versions } => verify::remove_images(r, versions).await?,
            Action::UpgradeNode { .. } | Action::UpgradeApply { .. } | Action::Roll => {
                bail!(
                    "{}: internal error: `{}` needs the whole apply, not a job",
                    r.node(),
                    action.describe()
                )
            }
        }
        Ok(())
    }
}

//! A phase whose steps may run in parallel, run across nodes at most
//! `--parallel` at once, each node keeping its own order; and the [`Job`]
//! such a step runs with. Its own file because the fan-out and what a task
//! may carry into it are one concept, apart from the order of the run. The
//! fan-out's rules ([`phase`]) are written once over [`PhaseWorld`], so
//! they run on a fake too (`super::parallel_rules`).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use tokio::sync::Semaphore;

use crate::node::NodeFacts;
use crate::plan::{Action, Hop, Image, Phase, PhaseKind, Step};
use crate::steps::context::{Apply, settled_facts};
use crate::steps::detached::Reconnect;
use crate::steps::kubeadm::{self, Kind};
use crate::steps::runner::Remote;
use crate::steps::script::{At, hop_version};
use crate::steps::{download, roll, stage, verify};
use crate::version::Version;

use super::{changes_fingerprint, finish_node, is_last};

/// What a parallel phase needs of the world: its rules ([`phase`]) are
/// written once over it, the run's world (`SshPhase`, over the run's
/// sessions and tokio tasks) and a fake's (`super::parallel_rules`), which
/// checks which nodes run at once and what a failure of one does to the
/// rest.
pub(super) trait PhaseWorld {
    type Job: PhaseJob;
    /// `--parallel`: how many nodes at most at once.
    fn limit(&self) -> usize;
    /// Whether the saved plan marks `node` in progress.
    fn in_progress(&self, node: &str) -> bool;
    fn mark(&mut self, node: &str) -> anyhow::Result<()>;
    fn begin(&mut self, names: &str, what: &str);
    fn say_step(&mut self, text: &str);
    /// What runs `node`'s steps, apart from the world.
    fn job(&mut self, node: &str, hop: &Hop) -> anyhow::Result<Self::Job>;
    /// `node`'s steps all ran: its job handed back (its session, renewed
    /// if a detached step reconnected).
    fn job_done(&mut self, node: &str, job: Self::Job);
    fn advance(&mut self);
    /// `node` is through with the hop (`super::finish_node`).
    async fn finish_node(
        &mut self,
        node: &str,
        facts: Option<<Self::Job as PhaseJob>::Facts>,
    ) -> anyhow::Result<()>;
}

/// One node's steps of a parallel phase, run in a task of their own.
pub(super) trait PhaseJob: Send + 'static {
    /// What the node's new state is read as, once through.
    type Facts: Send + 'static;
    fn step(&mut self, action: Action) -> impl Future<Output = anyhow::Result<()>> + Send;
    /// The node's state, read once its last step of the hop ran.
    fn settled(&self) -> impl Future<Output = anyhow::Result<Self::Facts>> + Send;
}

/// The steps of a parallel phase over the run's sessions.
pub(super) async fn parallel(
    apply: &mut Apply<'_>,
    hop: &Hop,
    p: usize,
    phase_: &Phase,
    last: &BTreeMap<String, At>,
) -> anyhow::Result<()> {
    phase(&mut SshPhase { apply }, hop, p, phase_, last).await
}

/// The steps of a parallel phase, one task per node, at most `--parallel`
/// at once, each node in its own order; every node marked in progress
/// first if a step changes what the plan fingerprints. Every node's steps
/// run to their end (or its failure: the others go on) before the phase
/// reports; the nodes that finished are recorded either way.
pub(super) async fn phase<W: PhaseWorld>(
    w: &mut W,
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
            w.mark(n)?;
        }
    }
    let names = order.join(", ");
    w.begin(&names, phase.kind.title());
    w.say_step(&format!("{names}: {}", phase.kind.title()));
    let permits = Arc::new(Semaphore::new(w.limit().max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    for n in &order {
        let mut job = w.job(n, hop)?;
        let actions: Vec<Action> = per_node[n].iter().map(|s| s.action.clone()).collect();
        let finishing = finishes.contains(n) && w.in_progress(n);
        let permits = permits.clone();
        let node = n.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            for action in actions {
                job.step(action).await?;
            }
            let facts = match finishing {
                // Read here, while other nodes may still be working.
                true => Some(job.settled().await?),
                false => None,
            };
            Ok::<_, anyhow::Error>((node, facts, job))
        });
    }
    let mut failures = Vec::new();
    let mut finished = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok((node, facts, job))) => {
                w.job_done(&node, job);
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
            w.advance();
        }
        if finishes.contains(n) {
            let facts = finished.remove(n).flatten();
            w.finish_node(n, facts).await?;
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

/// The phase's world in the run: the run's sessions, its saved plan, its
/// progress.
struct SshPhase<'r, 'a> {
    apply: &'r mut Apply<'a>,
}

impl PhaseWorld for SshPhase<'_, '_> {
    type Job = Job;

    fn limit(&self) -> usize {
        self.apply.settings.parallel
    }

    fn in_progress(&self, node: &str) -> bool {
        self.apply.plan.fingerprint.in_progress.contains(node)
    }

    fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        self.apply.mark(node)
    }

    fn begin(&mut self, names: &str, what: &str) {
        self.apply.begin(names, what);
    }

    fn say_step(&mut self, text: &str) {
        self.apply.progress.step(text);
    }

    fn job(&mut self, node: &str, hop: &Hop) -> anyhow::Result<Job> {
        Job::of(self.apply, node, hop)
    }

    fn job_done(&mut self, node: &str, job: Job) {
        self.apply.set_remote(node, job.remote);
    }

    fn advance(&mut self) {
        self.apply.progress.advance();
    }

    async fn finish_node(&mut self, node: &str, facts: Option<NodeFacts>) -> anyhow::Result<()> {
        finish_node(self.apply, node, facts).await
    }
}

impl PhaseJob for Job {
    type Facts = NodeFacts;

    async fn step(&mut self, action: Action) -> anyhow::Result<()> {
        self.run(&action).await
    }

    async fn settled(&self) -> anyhow::Result<NodeFacts> {
        settled_facts(&self.remote).await
    }
}

/// What a step that needs no more than its node, the API node and the hub
/// runs with: cheap to clone into a task of a parallel phase. Its session is
/// replaced if the connection dropped during a detached step.
pub(super) struct Job {
    pub(super) remote: Remote,
    api: Remote,
    hub: String,
    deadline: Instant,
    target: Option<crate::ssh::Target>,
    ssh: crate::ssh::Options,
    /// The hop's image and its sha256 from the hub; `None` for a hop whose
    /// steps use no image (re-pinning only), and then no step may use one.
    image: Option<Image>,
    /// Whose lease a kubeadm step must fit in.
    stop: crate::steps::Stop,
    /// Which preflight errors of kubeadm the plan lets through on this node.
    preflight: kubeadm::Preflight,
    rerun: crate::steps::Rerun,
}

impl Job {
    pub(super) fn of(apply: &Apply<'_>, node: &str, hop: &Hop) -> anyhow::Result<Job> {
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
            rerun: apply.settings.rerun,
        })
    }

    /// The hop's image, which must be `version`'s: a step never downloads,
    /// checks or runs an image the plan records no sha256 for.
    pub(super) fn image(&self, version: &Version) -> anyhow::Result<&Image> {
        download::image_of(self.remote.node(), self.image.as_ref(), version)
    }

    /// Runs a kubeadm step on the job's node, detached, reconnecting if need be.
    pub(super) async fn kubeadm(
        &mut self,
        kind: Kind,
        v: &crate::version::Version,
    ) -> anyhow::Result<()> {
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

    pub(super) async fn run(&mut self, action: &Action) -> anyhow::Result<()> {
        if let Action::UpgradeNode { minor, version } = action {
            let v = match version {
                Some(v) => v.clone(),
                None => download::resolve_image(&self.remote, *minor).await?,
            };
            return self.kubeadm(Kind::Node, &v).await;
        }
        self.quick(action).await
    }

    /// The steps that run over the session as plain commands.
    pub(super) async fn quick(&self, action: &Action) -> anyhow::Result<()> {
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
                roll::ready_then_uncordon(&self.api, r.node(), self.deadline, self.rerun).await?;
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

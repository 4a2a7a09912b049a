//! The executor: runs a plan's hops step by step, one node down at a time.
//!
//! Consecutive pin/stage steps run in parallel across nodes (they only
//! download); everything else strictly in order. Before every drain the
//! gates run again (every node reachable and Ready, the API healthy, the
//! operator's health checks). Each node is marked "in progress" in the saved
//! plan before fleetctl changes it and re-fingerprinted when it is done, so a
//! rerun after a failure is not refused as stale while a change made by
//! someone else still is. The first Ctrl-C lets the node in progress reach a
//! consistent point and stops; the caller handles the second.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::actions;
use super::runner::Remote;
use crate::inventory::{Inventory, Role};
use crate::node::{self, ClusterFacts, NodeFacts};
use crate::plan::{self, Action, FleetNode, Hop, HopKind, NodeFingerprint, Plan, Step};
use crate::remote::{self, kubectl};
use crate::ssh;
use crate::ui::Progress;
use crate::version::Version;

/// Ctrl-C presses so far, shared with the signal handler.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicU8>);

impl Stop {
    /// Counts a press; returns how many there have been.
    pub fn press(&self) -> u8 {
        self.0.fetch_add(1, Ordering::SeqCst).saturating_add(1)
    }

    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

/// The run stopped because the operator asked it to.
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

pub struct Settings {
    pub node_timeout: Duration,
    pub drain_timeout: Duration,
    pub ssh: ssh::Options,
    /// For reconnecting after a reboot.
    pub targets: BTreeMap<String, ssh::Target>,
}

/// What each node went through in this run, for the closing report and a
/// second Ctrl-C.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    pub done: Vec<String>,
    /// The node being worked on and the step it is in.
    pub current: Option<(String, String)>,
    /// Nodes fleetctl cordoned and has not uncordoned yet.
    pub cordoned: BTreeSet<String>,
}

pub struct Executor<'a> {
    inv: &'a Inventory,
    settings: Settings,
    remotes: BTreeMap<String, Remote>,
    progress: &'a Progress,
    stop: Stop,
    plan_path: PathBuf,
    plan: Plan,
    /// What Stage put on each node in this run, checked again before its reboot.
    staged: BTreeMap<String, Version>,
    /// When fleetctl started taking each node out, for "w-1 done (42s)".
    began: BTreeMap<String, Instant>,
    pub ledger: Arc<Mutex<Ledger>>,
}

fn is_prep(a: &Action) -> bool {
    matches!(a, Action::Pin { .. } | Action::Stage { .. })
}

impl<'a> Executor<'a> {
    pub fn new(
        inv: &'a Inventory,
        settings: Settings,
        remotes: BTreeMap<String, Remote>,
        progress: &'a Progress,
        stop: Stop,
        plan_path: PathBuf,
        plan: Plan,
    ) -> Executor<'a> {
        Executor {
            inv,
            settings,
            remotes,
            progress,
            stop,
            plan_path,
            plan,
            staged: BTreeMap::new(),
            began: BTreeMap::new(),
            ledger: Arc::new(Mutex::new(Ledger::default())),
        }
    }

    /// The node's current session (a fresh one after its reboot).
    pub fn remote_of(&self, node: &str) -> Option<Remote> {
        self.remotes.get(node).cloned()
    }

    fn remote(&self, node: &str) -> anyhow::Result<&Remote> {
        self.remotes.get(node).with_context(|| {
            format!("{node}: no SSH session (it was not reachable when apply started)")
        })
    }

    /// kubectl runs on the first control-plane node, which has the admin kubeconfig.
    fn api(&self) -> anyhow::Result<&Remote> {
        self.remote(&self.inv.first_control_plane().name)
    }

    fn ledger(&self, f: impl FnOnce(&mut Ledger)) {
        if let Ok(mut l) = self.ledger.lock() {
            f(&mut l);
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.settings.node_timeout
    }

    pub async fn run(&mut self) -> anyhow::Result<()> {
        let hops = self.plan.hops.clone();
        for (i, hop) in hops.iter().enumerate() {
            let what = match hop.kind {
                HopKind::Upgrade => "upgrade to",
                HopKind::Finish => "finish",
                HopKind::Converge => "converge on",
            };
            let version = hop
                .version
                .as_ref()
                .map_or_else(|| hop.minor.to_string(), Version::to_string);
            self.progress
                .line(&format!("hop {}/{}: {what} {version}", i + 1, hops.len()));
            self.journal_event("hop-start", None, &format!("{what} {version}"));
            let mut k = 0;
            while k < hop.steps.len() {
                if is_prep(&hop.steps[k].action) {
                    let end = hop.steps[k..]
                        .iter()
                        .position(|s| !is_prep(&s.action))
                        .map_or(hop.steps.len(), |p| k + p);
                    self.check_stop(None)?;
                    self.prep_group(hop, &hop.steps[k..end]).await?;
                    k = end;
                    continue;
                }
                self.step(hop, &hop.steps[k]).await?;
                k += 1;
            }
            self.verify(hop).await?;
            self.progress.line(&format!(
                "hop {}/{} done: every node runs {version}",
                i + 1,
                hops.len()
            ));
        }
        Ok(())
    }

    fn journal_event(&self, kind: &str, node: Option<&str>, detail: &str) {
        if let Some(r) = self.remotes.values().next() {
            r.journal().event(kind, node, detail);
        }
    }

    /// Between steps: stop if asked. A node that was drained but not yet
    /// rebooted is uncordoned first, so nothing is left cordoned for nothing.
    fn check_stop(&self, drained: Option<&str>) -> anyhow::Result<()> {
        if !self.stop.requested() {
            return Ok(());
        }
        let done = self
            .ledger
            .lock()
            .map(|l| l.done.clone())
            .unwrap_or_default();
        let mut msg = String::from("stopped by Ctrl-C at a safe point");
        if let Some(n) = drained {
            msg.push_str(&format!(
                " ({n} was drained but not rebooted, and was uncordoned again)"
            ));
        }
        if !done.is_empty() {
            msg.push_str(&format!("; finished in this run: {}", done.join(", ")));
        }
        msg.push_str(". Run `fleetctl apply` again to continue where it stopped");
        Err(anyhow::Error::new(Interrupted(msg)))
    }

    async fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        if self.plan.fingerprint.in_progress.contains(node) {
            return Ok(());
        }
        self.plan.fingerprint.mark_in_progress(node);
        plan::save(&self.plan, &self.plan_path)
    }

    /// Records a node's facts, read once its steps are done, as the plan's
    /// new baseline, and clears its in-progress mark.
    fn settle(&mut self, node: &str, facts: NodeFacts) -> anyhow::Result<()> {
        let role = self.inv.node(node).map_or(Role::Worker, |n| n.role);
        let fp = NodeFingerprint::of(&FleetNode {
            name: node.to_string(),
            role,
            facts,
        });
        self.plan.fingerprint.nodes.insert(node.to_string(), fp);
        self.plan.fingerprint.clear_in_progress(node);
        plan::save(&self.plan, &self.plan_path)
    }

    /// Pin and stage on several nodes at once; each node keeps its own order.
    async fn prep_group(&mut self, hop: &Hop, steps: &[Step]) -> anyhow::Result<()> {
        let mut per_node: BTreeMap<String, Vec<Action>> = BTreeMap::new();
        let mut order = Vec::new();
        for s in steps {
            if !per_node.contains_key(&s.node) {
                order.push(s.node.clone());
            }
            per_node
                .entry(s.node.clone())
                .or_default()
                .push(s.action.clone());
        }
        for n in &order {
            self.mark(n).await?;
        }
        let names = order.join(", ");
        self.ledger(|l| l.current = Some((names.clone(), format!("pin and stage {}", hop.minor))));
        self.progress
            .step(&format!("{names}: pin and stage {}", hop.minor));
        let mut tasks = tokio::task::JoinSet::new();
        for n in &order {
            let r = self.remote(n)?.clone();
            let actions = per_node.remove(n).unwrap_or_default();
            let expect_hop = hop.version.clone();
            tasks.spawn(async move {
                let mut staged = None;
                for a in actions {
                    match a {
                        Action::Pin {
                            component,
                            path,
                            config,
                            replaces,
                            ..
                        } => actions::pin(&r, component, &path, &config, &replaces).await?,
                        Action::Stage {
                            component,
                            minor,
                            expect,
                        } => {
                            let want = expect.or_else(|| {
                                (component == plan::Component::Kubernetes)
                                    .then(|| expect_hop.clone())
                                    .flatten()
                            });
                            let v = actions::stage(&r, component, minor, want.as_ref()).await?;
                            if component == plan::Component::Kubernetes {
                                staged = Some(v);
                            }
                        }
                        _ => {}
                    }
                }
                // Read here, while other nodes may still be staging.
                let facts = settled_facts(&r).await?;
                Ok::<_, anyhow::Error>((r.node().to_string(), staged, facts))
            });
        }
        let mut failures = Vec::new();
        let mut settled = BTreeMap::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok((node, staged, facts))) => {
                    if let Some(v) = staged {
                        self.staged.insert(node.clone(), v);
                    }
                    settled.insert(node, facts);
                }
                Ok(Err(e)) => failures.push(format!("{e:#}")),
                Err(e) => failures.push(format!("a staging task failed: {e}")),
            }
        }
        if !failures.is_empty() {
            bail!(
                "staging stopped before any reboot:\n  {}",
                failures.join("\n  ")
            );
        }
        for n in &order {
            self.progress.advance();
            let facts = settled.remove(n).with_context(|| {
                format!("{n}: internal error: its facts after staging are missing")
            })?;
            self.settle(n, facts)?;
        }
        self.progress.line(&format!(
            "  pinned and staged {} on {names}",
            hop.version
                .as_ref()
                .map_or_else(|| hop.minor.to_string(), Version::to_string)
        ));
        Ok(())
    }

    async fn step(&mut self, hop: &Hop, step: &Step) -> anyhow::Result<()> {
        let node = step.node.as_str();
        let text = step.action.describe();
        self.ledger(|l| l.current = Some((node.to_string(), text.clone())));
        self.progress.step(&format!("{node}: {text}"));
        self.began
            .entry(node.to_string())
            .or_insert_with(Instant::now);
        match &step.action {
            Action::Pin { .. } | Action::Stage { .. } => unreachable_prep()?,
            Action::Drain => {
                self.check_stop(None)?;
                self.gates(node).await?;
                self.mark(node).await?;
                self.ledger(|l| {
                    l.cordoned.insert(node.to_string());
                });
                let api = self.api()?.clone();
                if let Err(e) = actions::drain(&api, node, self.settings.drain_timeout).await {
                    let still = e.to_string().contains("STILL CORDONED");
                    self.ledger(|l| {
                        if !still {
                            l.cordoned.remove(node);
                        }
                    });
                    return Err(e);
                }
            }
            Action::Reboot => {
                if self.stop.requested() {
                    let cordoned = self
                        .ledger
                        .lock()
                        .map(|l| l.cordoned.contains(node))
                        .unwrap_or(false);
                    if cordoned {
                        actions::uncordon(self.api()?, node).await?;
                        self.ledger(|l| {
                            l.cordoned.remove(node);
                        });
                        self.check_stop(Some(node))?;
                    }
                    self.check_stop(None)?;
                }
                self.reboot(hop, node).await?;
            }
            Action::UpgradeApply { version, .. } => {
                self.mark(node).await?;
                let r = self.remote(node)?.clone();
                actions::wait_api(&r, self.deadline()).await?;
                let v = match version {
                    Some(v) => v.clone(),
                    None => self.running_kubelet(&r).await?,
                };
                actions::upgrade_apply(&r, &v).await?;
                self.plan.fingerprint.cluster_version = Some(v);
                plan::save(&self.plan, &self.plan_path)?;
            }
            Action::UpgradeNode => {
                self.mark(node).await?;
                let api = self.api()?.clone();
                actions::wait_api(&api, self.deadline()).await?;
                actions::upgrade_node(self.remote(node)?).await?;
            }
            Action::Uncordon => {
                self.mark(node).await?;
                let api = self.api()?.clone();
                let r = self.remote(node)?.clone();
                let deadline = self.deadline();
                let back = async {
                    actions::wait_api(&api, deadline).await?;
                    actions::ready_then_uncordon(&api, node, deadline).await
                };
                // Nothing changes on the node any more (kubeadm is done), so
                // its facts are read while the API server reports it Ready,
                // not after: one round trip less between two reboots.
                let (back, facts) = tokio::join!(back, settled_facts(&r));
                back?;
                self.ledger(|l| {
                    l.cordoned.remove(node);
                    l.done.push(node.to_string());
                    l.current = None;
                });
                self.settle(node, facts?)?;
                let took = self
                    .began
                    .remove(node)
                    .map(|t| t.elapsed())
                    .unwrap_or_default();
                self.progress.line(&format!(
                    "  {node} done ({})",
                    humantime::format_duration(round(took))
                ));
            }
        }
        self.progress.advance();
        Ok(())
    }

    async fn running_kubelet(&self, r: &Remote) -> anyhow::Result<Version> {
        let out = r
            .check_root("kubelet version", remote::upgrade::KUBELET_VERSION)
            .await?;
        out.stdout
            .trim()
            .strip_prefix("Kubernetes ")
            .unwrap_or(out.stdout.trim())
            .parse()
            .with_context(|| {
                format!(
                    "{}: kubelet --version said `{}`",
                    r.node(),
                    out.stdout.trim()
                )
            })
    }

    async fn reboot(&mut self, hop: &Hop, node: &str) -> anyhow::Result<()> {
        let r = self.remote(node)?.clone();
        let expect = self
            .staged
            .get(node)
            .cloned()
            .or_else(|| hop.version.clone());
        let actions::BeforeReboot {
            staged,
            boot_id: before,
        } = actions::before_reboot(&r, hop.minor, expect.as_ref()).await?;
        self.mark(node).await?;
        r.journal()
            .event("reboot", Some(node), &format!("boot id {before}"));
        actions::send_reboot(&r).await?;
        self.progress.step(&format!(
            "{node}: rebooting (the connection drops; waiting for it to come back)"
        ));
        let target = self
            .settings
            .targets
            .get(node)
            .with_context(|| format!("{node}: no SSH target"))?;
        let deadline = self.deadline();
        let session = actions::wait_rebooted(
            node,
            target,
            &self.settings.ssh,
            &before,
            deadline,
            self.settings.node_timeout,
        )
        .await?;
        let fresh = actions::rewrap(&r, session);
        self.remotes.insert(node.to_string(), fresh.clone());
        self.progress
            .step(&format!("{node}: back; waiting for kubelet {staged}"));
        actions::wait_kubelet(&fresh, &staged, deadline).await
    }

    /// Before every drain (so before every reboot): every node reachable and
    /// Ready, nothing else cordoned, the API healthy, the operator's checks.
    /// The probes are independent, so they all run at once: one round trip
    /// instead of one per probe, on the path between two reboots.
    async fn gates(&self, node: &str) -> anyhow::Result<()> {
        let api = self.api()?.clone();
        let readyz = kubectl::kubectl(&["get", "--raw", "/readyz"]);
        let (mut problems, ready, cluster, checks) = tokio::join!(
            self.reachable(),
            api.run_root("gate: API readyz", &readyz, None),
            self.cluster(&api),
            self.health_checks(&api),
        );
        let ready = ready?;
        if !(ready.success() && ready.stdout.trim() == "ok") {
            problems.push(format!(
                "the API server is not healthy (/readyz: {})",
                ready.stderr.trim()
            ));
        } else {
            let cluster = cluster?;
            for n in &self.inv.nodes {
                match cluster.nodes.iter().find(|c| c.name == n.name) {
                    None => problems.push(format!("{} is not known to the API server", n.name)),
                    Some(c) if !c.ready => problems.push(format!("{} is not Ready", n.name)),
                    Some(c) if c.cordoned && c.name != node => problems.push(format!(
                        "{} is cordoned: fleetctl takes one node out at a time",
                        c.name
                    )),
                    _ => {}
                }
            }
        }
        problems.extend(checks?);
        if problems.is_empty() {
            return Ok(());
        }
        bail!(
            "not taking {node} down: the fleet is not healthy enough:\n  - {}\nNothing was changed on {node}. \
             Fix these, then run `fleetctl apply` again",
            problems.join("\n  - ")
        )
    }

    /// Gate: every node answers a command over its session.
    async fn reachable(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut probes = tokio::task::JoinSet::new();
        for n in &self.inv.nodes {
            match self.remotes.get(&n.name) {
                Some(r) => {
                    let r = r.clone();
                    probes.spawn(async move {
                        let res = r.run("gate: reachable", "true", None).await;
                        (r.node().to_string(), res.map(|o| o.success()))
                    });
                }
                None => problems.push(format!("{} has no SSH session", n.name)),
            }
        }
        while let Some(j) = probes.join_next().await {
            match j {
                Ok((_, Ok(true))) => {}
                Ok((n, Ok(false))) => problems.push(format!("{n} does not run commands")),
                Ok((n, Err(e))) => problems.push(format!("{n} is not reachable: {e:#}")),
                Err(e) => problems.push(format!("a probe failed: {e}")),
            }
        }
        problems
    }

    /// Gate: the operator's health checks, all at once; one problem per
    /// failed check, in inventory order.
    async fn health_checks(&self, api: &Remote) -> anyhow::Result<Vec<String>> {
        let mut runs = tokio::task::JoinSet::new();
        for (i, check) in self.inv.health_checks.iter().enumerate() {
            let api = api.clone();
            let check = check.clone();
            runs.spawn(async move {
                let label = format!("health check {}", check.name);
                let out = api.run_root(&label, &check.command, None).await;
                (i, check, out)
            });
        }
        let mut results = Vec::new();
        while let Some(joined) = runs.join_next().await {
            results.push(joined.context("a health check task failed")?);
        }
        results.sort_by_key(|(i, _, _)| *i);
        let mut problems = Vec::new();
        for (_, check, out) in results {
            let out = out?;
            let text = format!("{}{}", out.stdout, out.stderr);
            if !out.success() || !text.contains(&check.expect) {
                problems.push(format!(
                    "health check `{}` failed: `{}` printed `{}` ({}), expected it to contain `{}`",
                    check.name,
                    check.command,
                    text.trim(),
                    out.exit.map_or_else(
                        || "no exit status".to_string(),
                        |c| format!("exit status {c}")
                    ),
                    check.expect
                ));
            }
        }
        Ok(problems)
    }

    async fn cluster(&self, api: &Remote) -> anyhow::Result<ClusterFacts> {
        let out = api
            .run_root("cluster facts", remote::CLUSTER_SCRIPT, None)
            .await?;
        node::parse_cluster(&out.stdout)
    }

    /// End of a hop: every node runs the hop's version, the cluster is on it,
    /// and kube-proxy has not come back.
    async fn verify(&self, hop: &Hop) -> anyhow::Result<()> {
        let cluster = self.cluster(self.api()?).await?;
        let mut problems = Vec::new();
        for n in &self.inv.nodes {
            let Some(c) = cluster.nodes.iter().find(|c| c.name == n.name) else {
                problems.push(format!("{} is not known to the API server", n.name));
                continue;
            };
            let ok = match (&hop.version, &c.kubelet_version) {
                (Some(want), Some(have)) => want == have,
                (None, Some(have)) => have.minor() == hop.minor,
                (_, None) => false,
            };
            if !ok {
                problems.push(format!(
                    "{} reports kubelet {}, expected {}",
                    n.name,
                    c.kubelet_version
                        .as_ref()
                        .map_or_else(|| "unknown".into(), Version::to_string),
                    hop.version
                        .as_ref()
                        .map_or_else(|| hop.minor.to_string(), Version::to_string)
                ));
            }
        }
        if hop.kind != HopKind::Converge
            && cluster.version.as_ref().map(Version::minor) != Some(hop.minor)
        {
            problems.push(format!(
                "the cluster (kubeadm-config) is at {}, expected {}",
                cluster
                    .version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), Version::to_string),
                hop.minor
            ));
        }
        if cluster.kube_proxy {
            problems.push(
                "a kube-proxy DaemonSet exists: something ran kubeadm without --skip-phases addon/kube-proxy; \
                 delete it (kubectl -n kube-system delete ds kube-proxy) — Cilium replaces it"
                    .into(),
            );
        }
        if problems.is_empty() {
            return Ok(());
        }
        bail!("after hop {}: {}", hop.minor, problems.join("; "))
    }
}

/// A node's facts once fleetctl is done changing it, for [`Executor::settle`].
async fn settled_facts(r: &Remote) -> anyhow::Result<NodeFacts> {
    let out = r.run_root("facts", remote::FACTS_SCRIPT, None).await?;
    node::parse_facts(&out.stdout)
        .with_context(|| format!("{}: reading facts after its steps", r.node()))
}

fn unreachable_prep() -> anyhow::Result<()> {
    bail!("internal error: a pin/stage step outside a staging group")
}

fn round(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

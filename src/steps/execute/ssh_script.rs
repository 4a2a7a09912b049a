//! The real world of the script ([`ScriptWorld`]): each task delegates to
//! the step function that carries it out over SSH; none is rewritten here.

use std::time::Duration;

use anyhow::bail;
use futures_util::FutureExt;
use futures_util::future::join_all;

use super::dry_script::DryScript;
use super::parallel_phase::{Job, parallel};
use super::script_world::{OnFailureWorld, ScriptWorld};
use super::{finish_node, wait_control_planes_ready};
use crate::plan::{Action, Hop, Plan};
use crate::steps::context::{Apply, OnFailure};
use crate::steps::kubeadm::Kind;
use crate::steps::on_failure::{self, NotUp, Prepared};
use crate::steps::script::last_steps;
use crate::steps::{
    download, etcd, hold, kept_images, last_look, preflight, roll, storage_gate, verify,
};
use crate::version::{Minor, Version};

/// The script over the run's sessions.
pub(super) struct SshScript<'r, 'a> {
    pub(super) apply: &'r mut Apply<'a>,
    /// The API is down (a lone control plane rolled back): a roll is
    /// `roll::roll_offline`'s, no holds, no gates, no drain.
    pub(super) offline: bool,
}

impl SshScript<'_, '_> {
    /// Journals what `--dry-run` shows for the step about to run, line by
    /// line (`Journal::line`): the dry world's own lines for the same call
    /// (`DryScript`), so the journal holds every line the dry run prints,
    /// prose included, under the task that runs it, before its commands.
    fn show(&self, step: impl FnOnce(&mut DryScript<'_>) -> Option<anyhow::Result<()>>) {
        let apply = &*self.apply;
        let mut dry = DryScript::new(&apply.plan, apply.inv, &apply.settings);
        if self.offline {
            dry = dry.offline();
        }
        let ran = step(&mut dry);
        for (node, text) in dry.shown(ran) {
            apply.journal_line(&node, &text);
        }
    }
}

impl ScriptWorld for SshScript<'_, '_> {
    fn plan(&self) -> &Plan {
        &self.apply.plan
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        self.apply.check_stop(None)
    }

    fn task_starts(&mut self, n: usize, total: usize, title: &str, node: Option<&str>) {
        self.apply
            .journal_event("task", node, &format!("{n}/{total} {title}"));
    }

    fn say(&mut self, text: &str) {
        self.apply.progress.line(text);
    }

    fn say_step(&mut self, text: &str) {
        self.apply.progress.step(text);
    }

    fn advance(&mut self) {
        self.apply.progress.advance();
    }

    fn journal(&mut self, kind: &str, node: Option<&str>, what: &str) {
        self.apply.journal_event(kind, node, what);
    }

    fn begin(&mut self, names: &str, what: &str) {
        self.apply.begin(names, what);
    }

    fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        self.apply.mark(node)
    }

    fn in_window(&mut self, h: usize) -> anyhow::Result<()> {
        self.show(|d| Some(d.in_window(h)));
        let settings = &self.apply.settings;
        if let Some(window) = &settings.pace.window {
            // A hop starts only if its first node could still be done.
            let needed = settings.drain_timeout + settings.node_timeout;
            let of = format!("hop {}/{}", h + 1, self.apply.plan.hops.len());
            hold::in_window(window, &of, needed, settings.rerun)?;
        }
        Ok(())
    }

    async fn checks(&mut self, h: usize, hop: &Hop) -> anyhow::Result<()> {
        self.show(|d| d.checks(h, hop).now_or_never());
        let just_judged = h == 0
            && self
                .apply
                .settings
                .checks_judged
                .is_some_and(|t| t.elapsed() < preflight::FRESH);
        if !just_judged {
            preflight::checks(self.apply, hop).await?;
        }
        Ok(())
    }

    async fn present_images(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.show(|d| d.present_images(hop, nodes).now_or_never());
        verify_present_images(self.apply, hop, nodes).await
    }

    async fn ceph_before_upgrade(&mut self, node: &str) -> anyhow::Result<()> {
        self.show(|d| d.ceph_before_upgrade(node).now_or_never());
        storage_gate::before_upgrade(self.apply, node).await
    }

    async fn control_planes_ready(&mut self, node: &str) -> anyhow::Result<()> {
        self.show(|d| d.control_planes_ready(node).now_or_never());
        let api = self.apply.api()?;
        wait_control_planes_ready(self.apply, &api).await
    }

    async fn etcd_snapshot(&mut self, node: &str, minor: Minor) -> anyhow::Result<()> {
        self.show(|d| d.etcd_snapshot(node, minor).now_or_never());
        let Some(dir) = self.apply.settings.etcd_backups.clone() else {
            bail!("internal error: an etcd snapshot task without a backups directory");
        };
        etcd::snapshot(self.apply, node, minor, &dir).await?;
        Ok(())
    }

    async fn action(&mut self, hop: &Hop, node: &str, action: &Action) -> anyhow::Result<()> {
        self.show(|d| d.action(hop, node, action).now_or_never());
        let apply = &mut *self.apply;
        let mut job = Job::of(apply, node, hop)?;
        match action {
            Action::UpgradeApply { minor, version } => {
                let v = match version {
                    Some(v) => v.clone(),
                    None => download::resolve_image(&job.remote, *minor).await?,
                };
                let result = job.kubeadm(Kind::Apply, &v).await;
                apply.set_remote(node, job.remote);
                result?;
                apply.record_cluster_version(v)
            }
            other => {
                let result = job.run(other).await;
                apply.set_remote(node, job.remote);
                result
            }
        }
    }

    async fn parallel(&mut self, hop: &Hop, phase: usize) -> anyhow::Result<()> {
        self.show(|d| d.parallel(hop, phase).now_or_never());
        let last = last_steps(hop);
        parallel(self.apply, hop, phase, &hop.phases[phase], &last).await
    }

    async fn last_look(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        self.show(|d| d.last_look(hop, nodes).now_or_never());
        last_look::before_reboot(self.apply, hop, nodes).await
    }

    async fn roll(
        &mut self,
        nodes: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()> {
        self.show(|d| d.roll(nodes, minor, expect, rollback).now_or_never());
        if self.offline {
            let node = nodes.join(", ");
            return roll::roll_offline(self.apply, &node, minor, expect).await;
        }
        roll::roll(self.apply, nodes, minor, expect, rollback).await
    }

    async fn finish_node(&mut self, node: &str) -> anyhow::Result<()> {
        finish_node(self.apply, node, None).await
    }

    async fn verify(&mut self, hop: &Hop) -> anyhow::Result<()> {
        self.show(|d| d.verify(hop).now_or_never());
        verify::verify(self.apply, hop).await
    }

    async fn soak(&mut self, h: usize) -> anyhow::Result<()> {
        self.show(|d| d.soak(h).now_or_never());
        let what = format!("after hop {}/{}", h + 1, self.apply.plan.hops.len());
        hold::after_hop(self.apply, &what).await
    }

    async fn kept_images(&mut self, hop: &Hop, node: &str) -> anyhow::Result<()> {
        self.show(|d| d.kept_images(hop, node).now_or_never());
        let r = self.apply.remote(node)?;
        kept_images::verify(&r, &self.apply.plan.hub, hop).await
    }
}

impl OnFailureWorld for SshScript<'_, '_> {
    fn on_failure(&self) -> OnFailure {
        self.apply.settings.on_failure
    }

    fn node_timeout(&self) -> Duration {
        self.apply.settings.node_timeout
    }

    async fn prepare_rollback(&mut self, failed: Vec<NotUp>) -> anyhow::Result<Prepared> {
        on_failure::prepare(self.apply, failed).await
    }

    fn swap_hops(&mut self, hops: Vec<Hop>) -> Vec<Hop> {
        std::mem::replace(&mut self.apply.plan.hops, hops)
    }

    fn set_offline(&mut self, offline: bool) -> bool {
        std::mem::replace(&mut self.offline, offline)
    }

    fn save_plan(&mut self) -> anyhow::Result<()> {
        self.apply.save()
    }

    fn rolled_back(&mut self, names: &[String]) {
        self.apply.ledger(|l| {
            l.done.retain(|d| !names.contains(d));
            l.current = Some((
                names.join(", "),
                "rolled back (--on-failure rollback)".into(),
            ));
        });
    }
}

/// The hop's image on the nodes that already had it (a download checks its
/// own): all at once, before anything of the hop runs from it anywhere.
async fn verify_present_images(
    apply: &Apply<'_>,
    hop: &Hop,
    present: &[String],
) -> anyhow::Result<()> {
    let image = &download::hop_image(hop)?;
    let checks = present.iter().map(|node| async move {
        let r = apply.remote(node)?;
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

//! The real world of the roll ([`RollWorld`]): each step delegates to the
//! function that carries it out over SSH; none is rewritten here.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::future::join_all;

use super::after_reboot::{Wait, uncordon};
use super::world::RollWorld;
use super::{BeforeReboot, DrainFailed, before_reboot, drain, send_reboot};
use crate::inventory::Role;
use crate::steps::context::Apply;
use crate::steps::kured_labels::When;
use crate::steps::{gates, hold};
use crate::version::{Minor, Version};

/// The roll over the run's sessions.
pub(super) struct SshRoll<'r, 'a> {
    pub(super) apply: &'r mut Apply<'a>,
}

impl RollWorld for SshRoll<'_, '_> {
    fn drain_timeout(&self) -> Duration {
        self.apply.settings.drain_timeout
    }

    fn node_timeout(&self) -> Duration {
        self.apply.settings.node_timeout
    }

    fn stop_requested(&self) -> bool {
        self.apply.stop.requested()
    }

    fn check_stop(&self, drained: Option<&str>) -> anyhow::Result<()> {
        self.apply.check_stop(drained)
    }

    fn ensure_lease(&self, step: &str, bound: Duration) -> anyhow::Result<()> {
        self.apply.stop.ensure_lease(step, bound)
    }

    fn say(&mut self, text: &str) {
        self.apply.progress.step(text);
    }

    fn begin(&mut self, names: &str, what: &str) {
        self.apply.begin(names, what);
    }

    fn mark(&mut self, node: &str) -> anyhow::Result<()> {
        self.apply.mark(node)
    }

    fn note_cordoned(&mut self, nodes: &[String], cordoned: bool) {
        self.apply.ledger(|l| {
            for n in nodes {
                match cordoned {
                    true => l.cordoned.insert(n.clone()),
                    false => l.cordoned.remove(n),
                };
            }
        });
    }

    fn still_cordoned(&self, batch: &[String]) -> Vec<String> {
        self.apply
            .ledger
            .lock()
            .map(|l| {
                batch
                    .iter()
                    .filter(|n| l.cordoned.contains(*n))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn hold(&mut self, batch: &[String]) -> anyhow::Result<()> {
        let apply = &*self.apply;
        let needed = apply.settings.drain_timeout + apply.settings.node_timeout;
        hold::before_node(apply, &apply.settings.pace, apply.back_at, batch, needed).await
    }

    async fn gates(&mut self, batch: &[String], rollback: bool) -> anyhow::Result<bool> {
        let spared = gates::before_drain(self.apply, batch, rollback).await?;
        Ok(spared != gates::Spared::NoCeph)
    }

    async fn kured_labels(&mut self, nodes: &[String], when: When) -> anyhow::Result<()> {
        crate::steps::kured_labels::set(self.apply, nodes, when).await
    }

    async fn drain(&mut self, batch: &[String]) -> Vec<(String, Result<(), DrainFailed>)> {
        let api = match self.apply.api() {
            Ok(api) => api,
            Err(error) => {
                let failed = |n: &String| {
                    let error = anyhow::anyhow!("{n}: not drained: {error:#}");
                    (
                        n.clone(),
                        Err(DrainFailed {
                            error,
                            uncordoned: true,
                        }),
                    )
                };
                return batch.iter().map(failed).collect();
            }
        };
        let timeout = self.apply.settings.drain_timeout;
        let rerun = self.apply.settings.rerun;
        join_all(batch.iter().map(|n| {
            let api = api.clone();
            async move { (n.clone(), drain(&api, n, timeout, rerun).await) }
        }))
        .await
    }

    async fn uncordon(&mut self, node: &str) -> anyhow::Result<()> {
        uncordon(&self.apply.api()?, node).await
    }

    async fn before_reboot(
        &mut self,
        node: &str,
        minor: Minor,
        expect: Option<&Version>,
    ) -> anyhow::Result<BeforeReboot> {
        before_reboot(&self.apply.remote(node)?, minor, expect).await
    }

    async fn reboot(&mut self, befores: &[(String, BeforeReboot)]) -> anyhow::Result<()> {
        let mut remotes = Vec::new();
        for (node, before) in befores {
            let r = self.apply.remote(node)?;
            r.journal()
                .event("reboot", Some(node), &format!("boot id {}", before.boot_id));
            remotes.push(r);
        }
        join_all(remotes.iter().map(send_reboot))
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<()>>>()?;
        Ok(())
    }

    async fn wait_back(
        &mut self,
        befores: Vec<(String, BeforeReboot)>,
        minor: Minor,
        rollback: bool,
        offline: bool,
    ) -> anyhow::Result<(Vec<String>, Vec<anyhow::Error>)> {
        let apply = &mut *self.apply;
        let names = befores
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        // The API the waits ask; a lone control plane rolled back offline
        // has none but its own new session, once its API server is back.
        let api = match offline {
            true => None,
            false => Some(apply.api()?),
        };
        let api_node = apply.inv.first_control_plane().name.clone();
        let deadline = apply.deadline();
        let cluster_version = apply.plan.fingerprint.cluster_version.clone();
        let mut waits = tokio::task::JoinSet::new();
        for (node, before) in befores {
            let r = apply.remote(&node)?;
            let wait = Wait {
                target: apply
                    .settings
                    .targets
                    .get(&node)
                    .with_context(|| format!("{node}: no SSH target"))?
                    .clone(),
                ssh: apply.settings.ssh.clone(),
                timeout: apply.settings.node_timeout,
                deadline,
                // The first control plane answers for the API, unless it is
                // the node rebooting: then its own new session does.
                api: api.clone().filter(|_| node != api_node),
                control_plane: (apply.role(&node) == Role::ControlPlane).then(|| {
                    // A rollback leaves the static pods where kubeadm put
                    // them, at the cluster's version, ahead of the kubelet.
                    cluster_version
                        .clone()
                        .filter(|v: &Version| rollback || v.minor() == minor)
                }),
                minor,
                etcd_peer: (apply.role(&node) == Role::ControlPlane)
                    .then(|| crate::steps::etcd_gate::peer(apply.inv, &node)),
                etcd_stacked: apply.etcd_stacked.clone(),
                on_failure: apply.settings.on_failure,
                rollback,
                rerun: apply.settings.rerun,
            };
            waits.spawn(async move {
                let result = wait.run(&node, &r, &before).await;
                (node, result)
            });
        }
        let mut failures = Vec::new();
        let mut back = Vec::new();
        while let Some(joined) = waits.join_next().await {
            match joined {
                Ok((node, Ok((fresh, facts)))) => {
                    back.push(node.clone());
                    apply.set_remote(&node, fresh);
                    apply.ledger(|l| {
                        l.cordoned.remove(&node);
                    });
                    apply.settle(&node, facts)?;
                }
                Ok((_, Err(e))) => failures.push(e),
                Err(e) => failures.push(anyhow::anyhow!("waiting for {names} failed: {e}")),
            }
        }
        Ok((back, failures))
    }

    async fn ceph_after(&mut self, batch: &[String]) -> anyhow::Result<()> {
        crate::steps::storage_gate::after_return(self.apply, batch).await
    }

    fn came_back(&mut self) {
        self.apply.back_at = Some(Instant::now());
    }
}

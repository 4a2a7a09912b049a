//! The dry world of the roll ([`RollWorld`]), for `--dry-run`: each step
//! records the commands and waits it would run, with their words, as
//! `(node, line)`, and answers as the plan expects: the holds and gates let
//! the batch go, every drain finishes, each node comes back on what it
//! staged. The dry script (`crate::steps::execute`) runs the roll's own order (`super::flow`)
//! over it, so the dry run cannot part from the run.

use std::time::Duration;

use futures_util::FutureExt;

use super::world::RollWorld;
use super::{BeforeReboot, DrainFailed, drain_command, flow};
use crate::inventory::{Inventory, Role};
use crate::plan::Plan;
use crate::remote::{alerts, kubectl, upgrade};
use crate::steps::context::{OnFailure, Settings};
use crate::steps::kured_labels::When;
use crate::steps::on_failure::CRASH_LOOP_RESTARTS;
use crate::version::{Minor, Version};

/// The lines of one roll's dry run, as `(node, text)`: `-` for what runs
/// on no node, `*` for every node.
pub fn lines(
    plan: &Plan,
    inv: &Inventory,
    settings: &Settings,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
    rollback: bool,
) -> Vec<(String, String)> {
    let mut dry = DryRoll::new(plan, inv, settings, expect, false);
    // Nothing in the dry world waits: the roll completes on its first poll.
    let ran = flow::roll_batch(&mut dry, batch, minor, expect, rollback).now_or_never();
    dry.rendered(ran)
}

/// The lines of a roll offline (`super::roll_offline`: a lone control
/// plane rolled back while its API is down): no hold, no gates, no drain;
/// the reboot and the waits.
pub fn offline_lines(
    plan: &Plan,
    inv: &Inventory,
    settings: &Settings,
    batch: &[String],
    minor: Minor,
    expect: Option<&Version>,
) -> Vec<(String, String)> {
    let mut dry = DryRoll::new(plan, inv, settings, expect, true);
    // As `roll_offline` calls it: a rollback, offline, Ceph's recovery
    // waited for once it is back.
    let ran =
        flow::reboot_and_wait(&mut dry, batch, minor, expect, true, true, true).now_or_never();
    dry.rendered(ran)
}

/// The gates before a node goes down (`crate::steps::gates`), also shown
/// after a soak.
pub fn gate_lines(inv: &Inventory) -> Vec<(String, String)> {
    let api = inv.first_control_plane().name.clone();
    let mut lines = vec![
        (
            "*".to_string(),
            format!("(gates, all at once: {} on every node)", upgrade::ALIVE),
        ),
        (
            api.clone(),
            "(the gates script, at once: /readyz, every node Ready, no other node cordoned)"
                .to_string(),
        ),
    ];
    for check in &inv.health_checks {
        lines.push((api.clone(), check.command.clone()));
    }
    lines
}

/// What a node may take, its drain and its reboot, as the window judges it.
pub fn per_node(settings: &Settings) -> String {
    human(settings.drain_timeout + settings.node_timeout)
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

struct DryRoll<'a> {
    plan: &'a Plan,
    inv: &'a Inventory,
    settings: &'a Settings,
    api: String,
    expect: Option<Version>,
    lines: Vec<(String, String)>,
    /// A roll offline: no lock is held, so no Kured label is set.
    offline: bool,
}

impl<'a> DryRoll<'a> {
    fn new(
        plan: &'a Plan,
        inv: &'a Inventory,
        settings: &'a Settings,
        expect: Option<&Version>,
        offline: bool,
    ) -> DryRoll<'a> {
        DryRoll {
            plan,
            inv,
            settings,
            api: inv.first_control_plane().name.clone(),
            expect: expect.cloned(),
            lines: Vec::new(),
            offline,
        }
    }

    /// Its lines once the roll ran over it (`None`: it waited, which no
    /// dry step does).
    fn rendered(mut self, ran: Option<anyhow::Result<()>>) -> Vec<(String, String)> {
        match ran {
            Some(Ok(())) => {}
            Some(Err(e)) => self.line("-", &format!("(cannot render: {e:#})")),
            None => self.line("-", "(cannot render: the roll waited)"),
        }
        self.lines
    }

    fn line(&mut self, node: &str, text: &str) {
        self.lines.push((node.to_string(), text.to_string()));
    }

    fn api_line(&mut self, text: &str) {
        let api = self.api.clone();
        self.line(&api, text);
    }

    fn control_plane(&self, node: &str) -> bool {
        self.inv
            .node(node)
            .is_some_and(|x| x.role == Role::ControlPlane)
    }

    /// Kured's blockers, judged before the drain when the lock is Kured's
    /// (`crate::steps::kured_gates`, after the alert gate).
    fn kured_blockers(&mut self, nodes: &[String]) {
        if !self.settings.kured_gates {
            self.line("-", "(Kured's blockers are not judged: --no-kured-gates)");
            return;
        }
        let alerts = match &self.settings.pace.alert_gate {
            Some(_) => "",
            None => "the alerts at its --prometheus-url, then ",
        };
        for node in nodes {
            self.api_line(&format!(
                "(when the lock is Kured's, the Kured blockers taken over, until none holds: \
                 {alerts}the pods matching its --blocking-pod-selector on {node}, up to {}) {}",
                human(self.settings.node_timeout),
                crate::remote::kured_pods::blocking_pods("<selector>", node)
            ));
        }
    }

    /// The Ceph gate before the drain (`crate::steps::storage_gate`).
    fn ceph_before(&mut self, nodes: &[String]) {
        let ceph = &self.settings.pace.ceph;
        if !ceph.enabled {
            self.line("-", "(the Ceph gate is OFF: --no-ceph-gate)");
            return;
        }
        let text = format!(
            "(when a CephCluster exists: the Ceph gate, until Ceph can spare {}: `ceph osd \
             ok-to-stop` in Rook's toolbox, else the CephCluster's .status.ceph, with no PG \
             degraded, undersized or inactive and no health code that holds; up to {})",
            nodes.join(", "),
            human(ceph.timeout)
        );
        self.api_line(&text);
    }

    /// The version the node must come back on, in words.
    fn version(&self, minor: Minor) -> String {
        self.expect
            .as_ref()
            .map_or_else(|| format!("its staged {minor} patch"), Version::to_string)
    }
}

impl RollWorld for DryRoll<'_> {
    fn drain_timeout(&self) -> Duration {
        self.settings.drain_timeout
    }

    fn node_timeout(&self) -> Duration {
        self.settings.node_timeout
    }

    fn stop_requested(&self) -> bool {
        false
    }

    fn check_stop(&self, _: Option<&str>) -> anyhow::Result<()> {
        Ok(())
    }

    fn ensure_lease(&self, _: &str, _: Duration) -> anyhow::Result<()> {
        Ok(())
    }

    fn say(&mut self, _: &str) {}

    fn begin(&mut self, _: &str, _: &str) {}

    fn mark(&mut self, _: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn note_cordoned(&mut self, _: &[String], _: bool) {}

    fn still_cordoned(&self, _: &[String]) -> Vec<String> {
        Vec::new()
    }

    async fn hold(&mut self, batch: &[String]) -> anyhow::Result<()> {
        let pace = &self.settings.pace;
        if !pace.soak.is_zero() {
            let text = format!(
                "(soak: wait until {} after the last node came back)",
                human(pace.soak)
            );
            self.line("-", &text);
        }
        if let Some(window) = &pace.window {
            let text = format!(
                "(window: not started unless {} still fits in {window})",
                per_node(self.settings)
            );
            self.line("-", &text);
        }
        if let Some(gate) = &pace.alert_gate {
            let text = format!(
                "(alert gate: until no alert holds, up to {}) {}",
                human(gate.timeout),
                alerts::query(&gate.query_url)
            );
            self.api_line(&text);
        }
        self.kured_blockers(batch);
        Ok(())
    }

    async fn gates(&mut self, batch: &[String], _: bool) -> anyhow::Result<bool> {
        self.lines.extend(gate_lines(self.inv));
        self.ceph_before(batch);
        if batch.iter().any(|n| self.control_plane(n)) {
            self.api_line(
                "(with a stacked etcd: the etcd gate, until every member is healthy and etcd \
                 keeps quorum without this one)",
            );
        }
        if batch.len() > 1 {
            let text = format!(
                "# batch: {} (drained and rebooted together)",
                batch.join(", ")
            );
            self.line("-", &text);
        }
        Ok(true)
    }

    async fn kured_labels(&mut self, nodes: &[String], when: When) -> anyhow::Result<()> {
        if !self.settings.kured_gates || self.offline {
            return Ok(());
        }
        let flag = match when {
            When::BeforeDrain => "pre-reboot-node-labels",
            When::AfterUncordon => "post-reboot-node-labels",
        };
        for node in nodes {
            self.api_line(&format!(
                "(when the lock is Kured's and it sets --{flag}) {}",
                kubectl::label_node(node, &["<its labels>".to_string()])
            ));
        }
        Ok(())
    }

    async fn drain(&mut self, batch: &[String]) -> Vec<(String, Result<(), DrainFailed>)> {
        for node in batch {
            self.api_line(&upgrade::start_detached(
                &format!("drain-{node}"),
                &format!("cordon and drain {node}"),
                &drain_command(node, self.settings.drain_timeout),
                crate::steps::detached::WAIT_TENTHS,
            ));
        }
        batch.iter().map(|n| (n.clone(), Ok(()))).collect()
    }

    async fn uncordon(&mut self, node: &str) -> anyhow::Result<()> {
        self.api_line(&kubectl::uncordon(node));
        Ok(())
    }

    async fn before_reboot(
        &mut self,
        node: &str,
        minor: Minor,
        expect: Option<&Version>,
    ) -> anyhow::Result<BeforeReboot> {
        self.line(node, &upgrade::before_reboot());
        Ok(BeforeReboot {
            staged: expect.cloned().unwrap_or(minor.with_patch(0)),
            boot_id: "<boot id>".to_string(),
        })
    }

    async fn reboot(&mut self, befores: &[(String, BeforeReboot)]) -> anyhow::Result<()> {
        for (node, _) in befores {
            self.line(node, upgrade::REBOOT);
        }
        Ok(())
    }

    async fn wait_back(
        &mut self,
        befores: Vec<(String, BeforeReboot)>,
        minor: Minor,
        rollback: bool,
        _: bool,
    ) -> anyhow::Result<(Vec<String>, Vec<anyhow::Error>)> {
        let version = self.version(minor);
        let timeout = human(self.settings.node_timeout);
        let mut back = Vec::new();
        for (node, _) in befores {
            self.line(
                &node,
                &format!(
                    "(reconnect until the boot id changes, then until kubelet.service is active \
                     at {version}, up to {timeout}) {}",
                    upgrade::KUBELET_STATE
                ),
            );
            if self.control_plane(&node) {
                // A rollback leaves them at the cluster's version.
                let pods = match (&self.plan.cluster_from, rollback) {
                    (Some(cluster), true) => cluster.to_string(),
                    _ => version.clone(),
                };
                self.api_line(&format!(
                    "(until its mirror pods are Running at {pods}, etcd's too when stacked) {}",
                    kubectl::get_static_pods(&node)
                ));
                self.api_line(&format!(
                    "(with a stacked etcd: until {node}'s member is healthy and caught up with \
                     the leader, as `etcdctl endpoint status --cluster` in etcd-{} says)",
                    crate::steps::etcd_gate::peer(self.inv, &node)
                ));
            }
            self.api_line(&format!(
                "(until Ready) {}",
                kubectl::ready_then_uncordon(&node)
            ));
            self.line(
                &node,
                "(the facts script, to record the node's new state in the plan)",
            );
            if !rollback && self.settings.on_failure == OnFailure::Rollback {
                self.line(
                    &node,
                    &format!(
                        "(on failure: kubelet restarted {CRASH_LOOP_RESTARTS} times at {version} \
                         while watched and failing still, or not up within {timeout}: {node} is \
                         rolled back to its kept image as `fleetctl rollback {node}` does, then \
                         apply stops) {}",
                        upgrade::KUBELET_UNIT
                    ),
                );
            }
            back.push(node);
        }
        Ok((back, Vec::new()))
    }

    async fn ceph_after(&mut self, _: &[String]) -> anyhow::Result<()> {
        let ceph = &self.settings.pace.ceph;
        if ceph.enabled {
            let text = format!(
                "(when a CephCluster exists: the Ceph gate, until every PG is active+clean \
                 again, up to {})",
                human(ceph.recovery_timeout)
            );
            self.api_line(&text);
        }
        Ok(())
    }

    fn came_back(&mut self) {}
}

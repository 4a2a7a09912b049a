//! The dry world of the script ([`ScriptWorld`]), for `--dry-run`: each
//! task records the commands and waits it would run, with their words, and
//! answers as the plan expects (every check passes, every step succeeds).
//! Commands are built by the same functions the steps run them with. A
//! roll's lines are the roll's own order over its dry world
//! (`crate::steps::roll::dry_world`).

use std::time::Duration;

use super::script_world::ScriptWorld;
use crate::inventory::Inventory;
use crate::plan::{Action, Component, Hop, Plan};
use crate::remote::{before_hop, kubectl, snapshot_file, upgrade};
use crate::steps::context::Settings;
use crate::steps::roll::dry_world;
use crate::steps::script::hop_version;
use crate::steps::{download, kept_images, kubeadm, stage, verify};
use crate::version::{Minor, Version};

/// The dry run's listing, as it is written.
pub(super) struct DryScript<'a> {
    plan: &'a Plan,
    inv: &'a Inventory,
    settings: &'a Settings,
    api: String,
    out: Out,
    /// The API is down: a roll is `roll::roll_offline`'s.
    offline: bool,
}

impl<'a> DryScript<'a> {
    pub(super) fn new(plan: &'a Plan, inv: &'a Inventory, settings: &'a Settings) -> Self {
        DryScript {
            plan,
            inv,
            settings,
            api: inv.first_control_plane().name.clone(),
            out: Out::default(),
            offline: false,
        }
    }

    pub(super) fn offline(self) -> Self {
        DryScript {
            offline: true,
            ..self
        }
    }

    pub(super) fn lock_taken(&mut self) {
        self.out.line(
            &self.api,
            "(take the lock: Kured's annotation if Kured runs, else configmap \
             kube-system/fleetctl-lock)",
        );
    }

    pub(super) fn lock_released(&mut self) {
        self.out.line(&self.api, "(release the lock)");
    }

    /// A task the dry world could not follow to its end.
    pub(super) fn cannot_render(&mut self, why: &str) {
        self.out.line("-", &format!("(cannot render: {why})"));
    }

    pub(super) fn text(self) -> String {
        self.out.text
    }

    /// Its `(node, text)` lines once one step ran over it (`None`: it
    /// waited, which no dry step does), as `dry_tasks` renders a task: the
    /// lines the run journals for that step (`super::ssh_script`).
    pub(super) fn shown(mut self, ran: Option<anyhow::Result<()>>) -> Vec<(String, String)> {
        match ran {
            Some(Ok(())) => {}
            Some(Err(e)) => self.cannot_render(&format!("{e:#}")),
            None => self.cannot_render("the task waited"),
        }
        self.out.shown
    }

    fn lines(&mut self, lines: Vec<(String, String)>) {
        for (node, text) in lines {
            self.out.line(&node, &text);
        }
    }
}

impl ScriptWorld for DryScript<'_> {
    fn plan(&self) -> &Plan {
        self.plan
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        Ok(())
    }

    fn task_starts(&mut self, n: usize, total: usize, title: &str, _: Option<&str>) {
        self.out.push(&format!("== {n}/{total} {title}\n"));
    }

    fn say(&mut self, _: &str) {}

    fn say_step(&mut self, _: &str) {}

    fn advance(&mut self) {}

    fn journal(&mut self, _: &str, _: Option<&str>, _: &str) {}

    fn begin(&mut self, _: &str, _: &str) {}

    fn mark(&mut self, _: &str) -> anyhow::Result<()> {
        Ok(())
    }

    fn in_window(&mut self, _: usize) -> anyhow::Result<()> {
        if let Some(window) = &self.settings.pace.window {
            self.out.line(
                "-",
                &format!(
                    "(window: the hop starts only if {} still fits in {window})",
                    dry_world::per_node(self.settings)
                ),
            );
        }
        Ok(())
    }

    async fn checks(&mut self, h: usize, _: &Hop) -> anyhow::Result<()> {
        self.out.line(
            "*",
            "(the facts script on every node, for its kubelet's flag files)",
        );
        self.out.line(
            &self.api,
            "(the deprecated-API gauge of /metrics, every PodDisruptionBudget, kubeadm certs \
             check-expiration; a block stops here)",
        );
        if h == 0 {
            self.out.line(
                "-",
                "(skipped when apply judged the same checks less than a minute ago, with --yes)",
            );
        }
        Ok(())
    }

    async fn present_images(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        for node in nodes {
            if let Some(check) = image_check(hop, hop.version.as_ref()) {
                self.out.line(
                    node,
                    &format!("(must print ok, else the file is removed) {check}"),
                );
            }
        }
        Ok(())
    }

    async fn ceph_before_upgrade(&mut self, node: &str) -> anyhow::Result<()> {
        // As `storage_gate::before_upgrade` reads it: Ceph's health alone,
        // no OSD is about to stop.
        let ceph = &self.settings.pace.ceph;
        if !ceph.enabled {
            self.out.line("-", "(the Ceph gate is OFF: --no-ceph-gate)");
            return Ok(());
        }
        let text = format!(
            "(when a CephCluster exists: the Ceph gate before {node}'s control-plane upgrade, \
             until no PG is degraded, undersized or inactive and no health code holds, in \
             Rook's toolbox, else the CephCluster's .status.ceph; up to {})",
            human(ceph.timeout)
        );
        self.out.line(&self.api, &text);
        Ok(())
    }

    async fn control_planes_ready(&mut self, _: &str) -> anyhow::Result<()> {
        self.out.line(
            &self.api,
            &format!(
                "(the gates script until /readyz is ok and every control-plane Node Ready, up to \
                 {})",
                human(self.settings.node_timeout)
            ),
        );
        Ok(())
    }

    async fn etcd_snapshot(&mut self, node: &str, minor: Minor) -> anyhow::Result<()> {
        etcd(&mut self.out, node, minor);
        Ok(())
    }

    async fn action(&mut self, hop: &Hop, n: &str, action: &Action) -> anyhow::Result<()> {
        let out = &mut self.out;
        match action {
            Action::Download { minor, expect, .. } => {
                let definition = download::definition(*minor, &self.plan.hub).map_or_else(
                    |e| format!("(cannot render: {e:#})"),
                    |d| d.len().to_string(),
                );
                out.line(
                    n,
                    &format!(
                        "# stdin: the pinned {minor} transfer without CurrentSymlink=, \
                         InstancesMax={} ({definition} bytes)",
                        download::KEEP_ALL
                    ),
                );
                out.line(n, &upgrade::download(Component::Kubernetes.name()));
                if let Some(check) = image_check(hop, expect.as_ref()) {
                    out.line(
                        n,
                        &format!("(must print ok, else the file is removed) {check}"),
                    );
                }
            }
            Action::UpgradeApply { minor, version } => out.line(
                n,
                &kubeadm_line(hop, n, kubeadm::Kind::Apply, *minor, version),
            ),
            Action::UpgradeNode { minor, version } => out.line(
                n,
                &kubeadm_line(hop, n, kubeadm::Kind::Node, *minor, version),
            ),
            Action::Pin {
                path,
                config,
                replaces,
                ..
            } => {
                out.line(
                    n,
                    &format!(
                        "# write {path} (the pinned config on stdin, {} bytes)",
                        config.len()
                    ),
                );
                out.line(n, &upgrade::pin_config(path, replaces));
            }
            Action::Stage {
                component,
                minor,
                expect,
            } => out.line(n, &stage::command(*component, *minor, expect.as_ref())),
            Action::Roll => out.line(n, "(a roll: its own task)"),
            Action::Uncordon => out.line(
                &self.api,
                &format!("(until Ready) {}", kubectl::ready_then_uncordon(n)),
            ),
            Action::RemoveImages { versions } => out.line(n, &verify::command(versions)),
        }
        Ok(())
    }

    async fn parallel(&mut self, hop: &Hop, phase: usize) -> anyhow::Result<()> {
        for step in &hop.phases[phase].steps {
            self.action(hop, &step.node, &step.action).await?;
        }
        Ok(())
    }

    async fn last_look(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()> {
        let minor = hop.minor;
        for node in nodes {
            self.out.line(
                node,
                &format!(
                    "(the facts script: the {minor} kubelet's flag files and cgroup checked; a \
                     refusal unstages the node and stops)"
                ),
            );
        }
        Ok(())
    }

    async fn roll(
        &mut self,
        nodes: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()> {
        if self.offline {
            let lines =
                dry_world::offline_lines(self.plan, self.inv, self.settings, nodes, minor, expect);
            self.lines(lines);
            return Ok(());
        }
        let lines = dry_world::lines(
            self.plan,
            self.inv,
            self.settings,
            nodes,
            minor,
            expect,
            rollback,
        );
        self.lines(lines);
        Ok(())
    }

    async fn finish_node(&mut self, _: &str) -> anyhow::Result<()> {
        Ok(())
    }

    async fn verify(&mut self, hop: &Hop) -> anyhow::Result<()> {
        self.out.line(
            &self.api,
            &format!(
                "(cluster facts script: every kubelet at {}, kubeadm-config at {}, no kube-proxy)",
                hop_version(hop),
                hop.minor
            ),
        );
        Ok(())
    }

    async fn soak(&mut self, _: usize) -> anyhow::Result<()> {
        self.out.line(
            "-",
            &format!(
                "(soak: watch the fleet until {} after the last node came back)",
                human(self.settings.pace.soak)
            ),
        );
        self.lines(dry_world::gate_lines(self.inv));
        Ok(())
    }

    async fn kept_images(&mut self, hop: &Hop, node: &str) -> anyhow::Result<()> {
        for (component, version) in kept_images::kept_of(hop, node) {
            let name = component.name();
            let v = version.to_string();
            let url = kept_images::sums_url(&self.plan.hub, component);
            self.out.line(node, &upgrade::fetch(&url));
            self.out.line(
                node,
                &format!(
                    "(must print ok, else the rollback is refused and the file kept) {}",
                    upgrade::image_sha256(name, &v, &format!("<its sum in {url}>"))
                ),
            );
        }
        Ok(())
    }
}

#[derive(Default)]
struct Out {
    text: String,
    /// Each `[node] text` line as `(node, text)`, unescaped: the journal
    /// escapes its own.
    shown: Vec<(String, String)>,
}

impl Out {
    fn line(&mut self, node: &str, text: &str) {
        self.push(&format!("[{node}] {text}\n"));
        self.shown.push((node.to_string(), text.to_string()));
    }

    /// Every byte of the listing passes here, escaped: remote text reaches
    /// it (a stray sysupdate config's file name in a pin, a version), and
    /// the listing has no colours of its own, so nothing in it may reach
    /// `Printer::out` as an ESC it would keep as fleetctl's colour (issue 38).
    fn push(&mut self, text: &str) {
        self.text
            .push_str(&crate::ui::escape::escape_controls(text));
    }
}

/// The sha256 check of the hop's image, when the step's is the hop's.
fn image_check(hop: &Hop, version: Option<&Version>) -> Option<String> {
    match (&hop.version, version, &hop.sha256) {
        (Some(h), Some(v), Some(sum)) if h == v => Some(upgrade::image_sha256(
            Component::Kubernetes.name(),
            &v.to_string(),
            sum,
        )),
        _ => None,
    }
}

/// The kubeadm step's command; without a known patch, the newest image of
/// the minor on the node (the placeholder shows where it goes).
fn kubeadm_line(
    hop: &Hop,
    node: &str,
    kind: kubeadm::Kind,
    minor: Minor,
    version: &Option<Version>,
) -> String {
    let preflight = kubeadm::Preflight::of(hop, node);
    // Without a sum, apply refuses the plan before it runs anything; the
    // dry run still shows where the sum goes.
    let sha256 = match (&hop.version, version, &hop.sha256) {
        (Some(h), Some(v), Some(sum)) if h == v => sum.as_str(),
        _ => "<no-sha256-apply-refuses>",
    };
    match version {
        Some(v) => kubeadm::detached_command(kind, v, sha256, preflight),
        None => format!(
            "(with the newest {minor} image on the node) {}",
            kubeadm::detached_command(kind, &minor.with_patch(0), sha256, preflight).replace(
                &minor.with_patch(0).to_string(),
                &format!("<newest {minor}>")
            )
        ),
    }
}

/// The etcd snapshot before `upgrade apply` (see `crate::steps::etcd`); the
/// file names carry the time it runs.
fn etcd(out: &mut Out, node: &str, minor: Minor) {
    let file = format!("fleetctl-etcd-{minor}-<time>.db");
    let on_node = format!("<etcd.local.dataDir>/{file}");
    out.line(node, &before_hop::get_kubeadm_config());
    out.line(
        node,
        &format!(
            "(stacked etcd only; an external one is not snapshotted) {}",
            before_hop::etcd_snapshot_save(node, "<etcd.local.dataDir>", &file)
        ),
    );
    out.line(node, &before_hop::etcdutl_snapshot_status(node, &on_node));
    out.line(node, &snapshot_file::sha256(&on_node));
    out.line(
        node,
        &format!(
            "(copied to .fleetctl/backups/<cluster>-{minor}-<time>.db, sha256 compared) {}",
            snapshot_file::cat(&on_node)
        ),
    );
    out.line(node, &snapshot_file::remove(&on_node));
}

fn human(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests;

//! `--dry-run`: the script ([`super::script`]) rendered instead of run.
//! Each task is headed by the title the run journals when it starts it
//! (`== 7/31 cp-1: wait until every control plane is Ready…`), then what
//! it runs, one line per command, `[node] command`. A command the run
//! repeats until something holds, or runs only in some cases, carries that
//! in a leading parenthesis: `[cp-1] (until Ready) kubectl …`. Commands are
//! built by the same functions the steps run them with; a placeholder in
//! angle brackets stands for what is only known when it runs (a time, a
//! directory read from the cluster). A roll is not copied here: its lines
//! are the roll's own order run over the dry world (`roll::dry_world`).

use std::time::Duration;

use super::context::Settings;
use super::kubeadm;
use super::roll::dry_world;
use super::script::{Task, hop_version};
use crate::inventory::Inventory;
use crate::plan::{Action, Component, Hop, Plan};
use crate::remote::{before_hop, kubectl, snapshot_file, upgrade};
use crate::version::{Minor, Version};

/// The whole dry run: the lock, every task, the lock given back.
pub fn render(tasks: &[Task], plan: &Plan, inv: &Inventory, settings: &Settings) -> String {
    let api = inv.first_control_plane().name.clone();
    let mut out = Out::default();
    out.line(
        &api,
        "(take the lock: Kured's annotation if Kured runs, else configmap kube-system/fleetctl-lock)",
    );
    let ctx = Ctx {
        plan,
        inv,
        settings,
        api: &api,
    };
    for (i, task) in tasks.iter().enumerate() {
        out.push(&format!(
            "== {}/{} {}\n",
            i + 1,
            tasks.len(),
            task.title(plan)
        ));
        ctx.task(&mut out, task);
    }
    out.line(&api, "(release the lock)");
    out.text
}

#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, node: &str, text: &str) {
        self.push(&format!("[{node}] {text}\n"));
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

struct Ctx<'a> {
    plan: &'a Plan,
    inv: &'a Inventory,
    settings: &'a Settings,
    api: &'a str,
}

impl Ctx<'_> {
    fn task(&self, out: &mut Out, task: &Task) {
        let api = self.api;
        match task {
            Task::HopStart { .. } => {
                if let Some(window) = &self.settings.pace.window {
                    out.line(
                        "-",
                        &format!(
                            "(window: the hop starts only if {} still fits in {window})",
                            dry_world::per_node(self.settings)
                        ),
                    );
                }
            }
            Task::Checks { hop } => {
                out.line(
                    "*",
                    "(the facts script on every node, for its kubelet's flag files)",
                );
                out.line(
                    api,
                    "(the deprecated-API gauge of /metrics, every PodDisruptionBudget, kubeadm \
                     certs check-expiration; a block stops here)",
                );
                if *hop == 0 {
                    out.line(
                        "-",
                        "(skipped when apply judged the same checks less than a minute ago, with --yes)",
                    );
                }
            }
            Task::PresentImages { hop, nodes } => {
                let hop = &self.plan.hops[*hop];
                for node in nodes {
                    if let Some(check) = image_check(hop, hop.version.as_ref()) {
                        out.line(node, &format!("(must print ok, else the file is removed) {check}"));
                    }
                }
            }
            Task::Phase { .. } | Task::HopDone { .. } => {}
            Task::ControlPlanesReady { .. } => out.line(
                api,
                &format!(
                    "(the gates script until /readyz is ok and every control-plane Node Ready, up \
                     to {})",
                    human(self.settings.node_timeout)
                ),
            ),
            Task::EtcdSnapshot { node, minor } => etcd(out, node, *minor),
            Task::Step {
                hop, phase, step, ..
            } => {
                let hop = &self.plan.hops[*hop];
                let step = &hop.phases[*phase].steps[*step];
                self.action(out, hop, &step.node, &step.action);
            }
            Task::Parallel { hop, phase } => {
                let hop = &self.plan.hops[*hop];
                for step in &hop.phases[*phase].steps {
                    self.action(out, hop, &step.node, &step.action);
                }
            }
            Task::LastLook { hop, nodes } => {
                let minor = self.plan.hops[*hop].minor;
                for node in nodes {
                    out.line(
                        node,
                        &format!(
                            "(the facts script: the {minor} kubelet's flag files and cgroup \
                             checked; a refusal unstages the node and stops)"
                        ),
                    );
                }
            }
            Task::Roll {
                nodes,
                minor,
                expect,
                rollback,
                ..
            } => self.lines(
                out,
                dry_world::lines(
                    self.plan,
                    self.inv,
                    self.settings,
                    nodes,
                    *minor,
                    expect.as_ref(),
                    *rollback,
                ),
            ),
            Task::Verify { hop } => out.line(
                api,
                &format!(
                    "(cluster facts script: every kubelet at {}, kubeadm-config at {}, no kube-proxy)",
                    hop_version(&self.plan.hops[*hop]),
                    self.plan.hops[*hop].minor
                ),
            ),
            Task::Soak { .. } => {
                out.line(
                    "-",
                    &format!(
                        "(soak: watch the fleet until {} after the last node came back)",
                        human(self.settings.pace.soak)
                    ),
                );
                self.lines(out, dry_world::gate_lines(self.inv));
            }
            Task::KeptImages { hop, node } => {
                let hop = &self.plan.hops[*hop];
                for (component, version) in super::kept_images::kept_of(hop, node) {
                    let name = component.name();
                    let v = version.to_string();
                    let url = super::kept_images::sums_url(&self.plan.hub, component);
                    out.line(node, &upgrade::fetch(&url));
                    out.line(
                        node,
                        &format!(
                            "(must print ok, else the rollback is refused and the file kept) {}",
                            upgrade::image_sha256(name, &v, &format!("<its sum in {url}>"))
                        ),
                    );
                }
            }
        }
    }

    fn action(&self, out: &mut Out, hop: &Hop, n: &str, action: &Action) {
        match action {
            Action::Download { minor, expect, .. } => {
                let definition = super::download::definition(*minor, &self.plan.hub).map_or_else(
                    |e| format!("(cannot render: {e:#})"),
                    |d| d.len().to_string(),
                );
                out.line(
                    n,
                    &format!(
                        "# stdin: the pinned {minor} transfer without CurrentSymlink=, \
                         InstancesMax={} ({definition} bytes)",
                        super::download::KEEP_ALL
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
            } => out.line(
                n,
                &super::stage::command(*component, *minor, expect.as_ref()),
            ),
            Action::Roll => out.line(n, "(a roll: its own task)"),
            Action::Uncordon => out.line(
                self.api,
                &format!("(until Ready) {}", kubectl::ready_then_uncordon(n)),
            ),
            Action::RemoveImages { versions } => out.line(n, &super::verify::command(versions)),
        }
    }

    fn lines(&self, out: &mut Out, lines: Vec<(String, String)>) {
        for (node, text) in lines {
            out.line(&node, &text);
        }
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

/// The etcd snapshot before `upgrade apply` (see [`super::etcd`]); the file
/// names carry the time it runs.
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
mod tests {
    use super::*;

    #[test]
    fn the_listing_cannot_carry_our_colours_or_act_on_the_terminal() {
        let hostile = crate::ui::escape::HOSTILE;
        let mut out = Out::default();
        out.push(&format!("== 1/1 {hostile}\n"));
        // A stray config's file name, as the node listed it, in a pin.
        out.line(
            "w-1",
            &upgrade::pin_config("/etc/sysupdate.d/k.conf", &[hostile.into()]),
        );
        crate::ui::escape::assert_inert(&out.text);
    }
}

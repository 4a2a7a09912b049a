//! `apply --dry-run`: every command apply would run, on which node, in
//! order, phase by phase, built by the same functions the steps run.

use super::{download, gates, kubeadm, roll, stage, verify};
use crate::inventory::{Inventory, Role};
use crate::plan::{Action, Plan};
use crate::remote::{before_hop, kubectl, snapshot_file, upgrade};
use crate::version::Version;

pub fn render(
    plan: &Plan,
    inv: &Inventory,
    max_unavailable: crate::plan::MaxUnavailable,
    etcd_snapshot: bool,
) -> String {
    let api = inv.first_control_plane().name.clone();
    let mut out = String::new();
    let mut line = |node: &str, cmd: &str| out.push_str(&format!("[{node}] {cmd}\n"));
    line(
        &api,
        "(take the lock: Kured's annotation if Kured runs, else configmap kube-system/fleetctl-lock)",
    );
    for hop in &plan.hops {
        let version = hop
            .version
            .as_ref()
            .map_or_else(|| hop.minor.to_string(), Version::to_string);
        line("-", &format!("# hop: {:?} {version}", hop.kind));
        line("*", "(the facts script, for every kubelet's flag files)");
        line(
            &api,
            "(the checks before the hop: the deprecated-API gauge of /metrics, every \
             PodDisruptionBudget, kubeadm certs check-expiration; stop on a block)",
        );
        if let (Some(v), Some(sum)) = (&hop.version, &hop.sha256) {
            for node in download::present_images(hop) {
                let check = crate::remote::upgrade::image_sha256("kubernetes", &v.to_string(), sum);
                line(
                    &node,
                    &format!(
                        "(already downloaded: must print ok, else the file is removed) {check}"
                    ),
                );
            }
        }
        for phase in &hop.phases {
            let how = if phase.kind.parallel() {
                ", nodes in parallel"
            } else {
                ", one step at a time"
            };
            line("-", &format!("# phase: {}{how}", phase.kind.title()));
            if phase.kind == crate::plan::PhaseKind::Cleanup {
                verify_lines(&mut line, &api, hop.minor, &version);
            }
            if phase.kind == crate::plan::PhaseKind::WorkerReboots {
                let batches = super::hop::batches_of(inv, phase, max_unavailable);
                if batches.iter().any(|b| b.len() > 1) {
                    for b in &batches {
                        line(
                            "-",
                            &format!("# batch: {} (drained and rebooted together)", b.join(", ")),
                        );
                    }
                }
            }
            for step in &phase.steps {
                let n = step.node.as_str();
                match &step.action {
                    Action::Download { minor, expect, .. } => {
                        for cmd in download::commands(&plan.hub, *minor) {
                            line(n, &cmd);
                        }
                        if let (Some(v), Some(sum)) = (expect, image_sha(hop, expect)) {
                            let check = crate::remote::upgrade::image_sha256(
                                "kubernetes",
                                &v.to_string(),
                                sum,
                            );
                            line(
                                n,
                                &format!("(must print ok, else the file is removed) {check}"),
                            );
                        }
                    }
                    Action::UpgradeApply { minor, version } => {
                        let sha256 = image_sha(hop, version);
                        line(
                            &api,
                            &format!(
                                "(until ok, and every control-plane Node Ready) {}",
                                kubectl::readyz()
                            ),
                        );
                        if etcd_snapshot {
                            etcd_lines(&mut line, n, *minor);
                        }
                        line(
                            n,
                            &kubeadm_line(
                                kubeadm::Kind::Apply,
                                *minor,
                                version,
                                sha256,
                                kubeadm::Preflight::of(hop, n),
                            ),
                        );
                    }
                    Action::UpgradeNode { minor, version } => {
                        let sha256 = image_sha(hop, version);
                        line(
                            n,
                            &kubeadm_line(
                                kubeadm::Kind::Node,
                                *minor,
                                version,
                                sha256,
                                kubeadm::Preflight::of(hop, n),
                            ),
                        );
                    }
                    Action::Pin {
                        path,
                        config,
                        replaces,
                        ..
                    } => {
                        line(
                            n,
                            &format!(
                                "# write {path} (the pinned config on stdin, {} bytes)",
                                config.len()
                            ),
                        );
                        line(n, &upgrade::pin_config(path, replaces));
                    }
                    Action::Stage {
                        component,
                        minor,
                        expect,
                    } => line(
                        n,
                        &stage::stage_command(*component, *minor, expect.as_ref()),
                    ),
                    Action::Roll => {
                        for (node, cmd) in gates::commands(&api, &inv.health_checks) {
                            line(&node, &cmd);
                        }
                        let control_plane =
                            inv.node(n).is_some_and(|x| x.role == Role::ControlPlane);
                        for (node, cmd) in roll::commands(&api, n, control_plane, &version) {
                            line(&node, &cmd);
                        }
                        line(
                            n,
                            "(facts script, while waiting for Ready: to record the node's new state in the plan)",
                        );
                    }
                    Action::Uncordon => {
                        line(
                            &api,
                            &format!("(until Ready) {}", kubectl::ready_then_uncordon(n)),
                        );
                    }
                    Action::RemoveImages { versions } => line(n, &verify::command(versions)),
                }
            }
        }
        if !hop
            .phases
            .iter()
            .any(|p| p.kind == crate::plan::PhaseKind::Cleanup)
        {
            verify_lines(&mut line, &api, hop.minor, &version);
        }
    }
    line(&api, "(release the lock)");
    out
}

fn verify_lines(
    line: &mut impl FnMut(&str, &str),
    api: &str,
    minor: crate::version::Minor,
    version: &str,
) {
    line(
        api,
        &format!(
            "(verify: every kubelet at {version}, kubeadm-config at {minor}, no kube-proxy) cluster facts script"
        ),
    );
}

/// The kubeadm step's command; without a known patch, the newest image of
/// the minor on the node (the placeholder shows where it goes).
fn kubeadm_line(
    kind: kubeadm::Kind,
    minor: crate::version::Minor,
    version: &Option<Version>,
    sha256: Option<&str>,
    preflight: kubeadm::Preflight,
) -> String {
    // Without a sum, apply refuses the plan before it runs anything; the
    // dry run still shows where the sum goes.
    let sha256 = sha256.unwrap_or(NO_SUM);
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

/// Where the dry run of a plan without a sum shows it: such a plan is
/// refused by apply (no step runs an image it cannot check).
const NO_SUM: &str = "<no-sha256-apply-refuses>";

/// The hub's sha256 for the step's image, when it is the hop's.
fn image_sha<'a>(hop: &'a crate::plan::Hop, version: &Option<Version>) -> Option<&'a str> {
    match (&hop.version, version, &hop.sha256) {
        (Some(h), Some(v), Some(sum)) if h == v => Some(sum),
        _ => None,
    }
}

/// `reboot --dry-run`: the lock, then per batch the gates and each node's roll.
pub fn render_reboots(batches: &[(Vec<String>, crate::version::Minor)], inv: &Inventory) -> String {
    let api = inv.first_control_plane().name.clone();
    let mut out = String::new();
    let mut line = |node: &str, cmd: &str| out.push_str(&format!("[{node}] {cmd}\n"));
    line(
        &api,
        "(take the lock: Kured's annotation if Kured runs, else configmap kube-system/fleetctl-lock)",
    );
    for (batch, minor) in batches {
        line(
            "-",
            &format!(
                "# batch: {} (drained and rebooted together)",
                batch.join(", ")
            ),
        );
        for (node, cmd) in gates::commands(&api, &inv.health_checks) {
            line(&node, &cmd);
        }
        for n in batch {
            let control_plane = inv.node(n).is_some_and(|x| x.role == Role::ControlPlane);
            for (node, cmd) in
                roll::commands(&api, n, control_plane, &format!("its staged {minor} patch"))
            {
                line(&node, &cmd);
            }
        }
    }
    line(&api, "(release the lock)");
    out
}

/// The etcd snapshot before `upgrade apply` (see [`super::etcd`]); the file
/// names carry the time it runs.
fn etcd_lines(line: &mut impl FnMut(&str, &str), node: &str, minor: crate::version::Minor) {
    let file = format!("fleetctl-etcd-{minor}-<time>.db");
    line(node, &before_hop::get_kubeadm_config());
    line(
        node,
        &format!(
            "(stacked etcd only; an external one is not snapshotted) {}",
            before_hop::etcd_snapshot_save(node, "<etcd.local.dataDir>", &file)
        ),
    );
    line(
        node,
        &before_hop::etcdutl_snapshot_status(node, &format!("<etcd.local.dataDir>/{file}")),
    );
    let on_node = format!("<etcd.local.dataDir>/{file}");
    line(node, &snapshot_file::sha256(&on_node));
    line(
        node,
        &format!(
            "(copied to .fleetctl/backups/<cluster>-{minor}-<time>.db, sha256 compared) {}",
            snapshot_file::cat(&on_node)
        ),
    );
    line(node, &snapshot_file::remove(&on_node));
}

//! `apply --dry-run`: every command apply would run, on which node, in
//! order, built by the same `crate::remote` functions the executor uses.

use super::actions;
use crate::inventory::Inventory;
use crate::plan::{Action, Plan};
use crate::remote::{kubectl, upgrade};
use crate::version::Version;

pub fn render(plan: &Plan, inv: &Inventory) -> String {
    let api = &inv.first_control_plane().name;
    let mut out = String::new();
    let mut line = |node: &str, cmd: &str| out.push_str(&format!("[{node}] {cmd}\n"));
    line(
        api,
        "(take the lock: Kured's annotation if Kured runs, else configmap kube-system/fleetctl-lock)",
    );
    for hop in &plan.hops {
        let version = hop
            .version
            .as_ref()
            .map_or_else(|| hop.minor.to_string(), Version::to_string);
        line("-", &format!("# hop: {:?} {version}", hop.kind));
        for step in &hop.steps {
            let n = step.node.as_str();
            match &step.action {
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
                Action::Stage { component, .. } => line(n, &upgrade::stage(component.name())),
                Action::Drain => {
                    line(
                        "*",
                        "# gates, all at once: `true` on every node; /readyz; every node Ready; health checks",
                    );
                    line(api, &kubectl::kubectl(&["get", "--raw", "/readyz"]));
                    line(
                        api,
                        "(cluster facts script: kubectl get nodes -o json, kubeadm-config, kube-proxy)",
                    );
                    for c in &inv.health_checks {
                        line(api, &c.command);
                    }
                    line(
                        api,
                        &actions::cordon_and_drain(n, "--timeout=<drain-timeout>"),
                    );
                }
                Action::Reboot => {
                    line(n, &actions::before_reboot_cmd());
                    line(n, upgrade::REBOOT);
                    line(
                        n,
                        &format!(
                            "(reconnect until {} changes, then `{}` until it reports {version})",
                            upgrade::BOOT_ID,
                            upgrade::KUBELET_VERSION
                        ),
                    );
                }
                Action::UpgradeApply { version: v, .. } => {
                    line(
                        n,
                        &format!(
                            "(until ok) {}",
                            kubectl::kubectl(&["get", "--raw", "/readyz"])
                        ),
                    );
                    let v = v.as_ref().map_or_else(
                        || "<the node's kubelet version>".to_string(),
                        Version::to_string,
                    );
                    line(n, &upgrade::upgrade_apply(&v));
                }
                Action::UpgradeNode => {
                    line(
                        api,
                        &format!(
                            "(until ok) {}",
                            kubectl::kubectl(&["get", "--raw", "/readyz"])
                        ),
                    );
                    line(n, &upgrade::upgrade_node());
                }
                Action::Uncordon => {
                    line(
                        api,
                        &format!("(until Ready) {}", actions::ready_then_uncordon_cmd(n)),
                    );
                    line(
                        n,
                        "(facts script, while waiting for Ready: to record the node's new state in the plan)",
                    );
                }
            }
        }
        line(
            api,
            &format!(
                "(verify: every kubelet at {version}, kubeadm-config at {}, no kube-proxy) {}",
                hop.minor, "cluster facts script"
            ),
        );
    }
    line(api, "(release the lock)");
    out
}

//! `kubeadm upgrade node`: a worker's kubelet config and post-upgrade
//! phases, a control plane's static pods and (since v1.32) the addons on
//! the last control plane to upgrade.

use anyhow::Result;

use super::*;

pub(super) fn upgrade_node(
    env: &mut Env,
    args: &[String],
    skip: &[String],
    ignore: &[String],
) -> Result<i32> {
    let boot = env.boot()?;
    let kubeadm = env.binary_version(NAME)?;
    let with_addons = kubeadm.minor >= NODE_ADDONS_SINCE_MINOR;
    let mut known = NODE_PHASES.to_vec();
    if with_addons {
        known.extend_from_slice(NODE_ADDON_PHASES);
    }
    if let Some(msg) = invalid_phase(skip, &known) {
        return Ok(fail(env, args, &msg));
    }
    let control_plane = boot.role == Role::ControlPlane;
    let kubeconfig = if control_plane {
        ADMIN_CONF
    } else {
        "/etc/kubernetes/kubelet.conf"
    };
    if control_plane && !env.path(ADMIN_CONF).is_file() {
        return Ok(fail(env, args, &admin_conf_error()));
    }
    reading_config(env);
    let cluster = match cluster_via_api(env, kubeconfig)? {
        Ok(c) => c,
        Err(msg) => return Ok(fail(env, args, &msg)),
    };
    say!(env, "[upgrade/preflight] Running pre-flight checks");
    if let Err(msg) = system_verification(env, kubeadm, ignore) {
        return Ok(fail(env, args, &msg));
    }
    if injected_node_failure(env, &boot.name)? {
        let msg = if control_plane {
            "error execution phase control-plane: couldn't complete the upgrade for the control plane components \
             on this node: timed out waiting for the condition (fleetsim: injected fault fail_upgrade_node)"
                .to_string()
        } else {
            let addr = api_address(env, kubeconfig);
            format!(
                "error execution phase kubelet-config: failed to download the kubelet configuration: Get \
                 \"https://{addr}/api/v1/namespaces/kube-system/configmaps/kubelet-config?timeout=10s\": \
                 context deadline exceeded (fleetsim: injected fault fail_upgrade_node)"
            )
        };
        return Ok(fail(env, args, &msg));
    }
    if let Some(code) = work(env, args, &boot.name, false)? {
        return Ok(code);
    }
    if control_plane {
        upgrade_control_plane_node(env, args, skip, &boot.name, kubeadm, &cluster)
    } else {
        say!(
            env,
            "[upgrade/preflight] Skipping prepull. Not a control plane node."
        );
        say!(
            env,
            "[upgrade/control-plane] Skipping phase. Not a control plane node."
        );
        if let Err(msg) = kubelet_config_phase(env, kubeadm, skip) {
            return Ok(fail(env, args, &msg));
        }
        if with_addons {
            say!(
                env,
                "[upgrade/addon] Skipping the addon/coredns phase. Not a control plane node."
            );
            say!(
                env,
                "[upgrade/addon] Skipping the addon/kube-proxy phase. Not a control plane node."
            );
        }
        if let Err(msg) = post_upgrade_phase(env, kubeadm, skip) {
            return Ok(fail(env, args, &msg));
        }
        env.record(NAME, args, "ok");
        Ok(0)
    }
}

/// The kubelet-config phase, the same on every node: config.yaml written
/// afresh from the kubelet-config ConfigMap; `Err` is kubeadm's message.
fn kubelet_config_phase(
    env: &mut Env,
    kubeadm: KubeVersion,
    skip: &[String],
) -> Result<(), String> {
    if skipped(skip, "kubelet-config") {
        return Ok(());
    }
    say!(
        env,
        "[kubelet-start] Writing kubelet configuration to file \"/var/lib/kubelet/config.yaml\""
    );
    write_kubelet_config(env, kubeadm)?;
    say!(
        env,
        "[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!"
    );
    Ok(())
}

/// The post-upgrade phase (`post_upgrade`), then kubeadm's last line.
fn post_upgrade_phase(env: &mut Env, kubeadm: KubeVersion, skip: &[String]) -> Result<(), String> {
    if !skipped(skip, "post-upgrade") {
        post_upgrade::run(env, kubeadm)?;
    }
    say!(
        env,
        "[upgrade] The upgrade for this node was successfully completed!"
    );
    Ok(())
}

fn upgrade_control_plane_node(
    env: &mut Env,
    args: &[String],
    skip: &[String],
    node: &str,
    kubeadm: KubeVersion,
    cluster: &Cluster,
) -> Result<i32> {
    let Some(target) = KubeVersion::parse(&cluster.version) else {
        let msg = format!(
            "[upgrade/versions] FATAL: couldn't parse kubernetesVersion {:?}",
            cluster.version
        );
        return Ok(fail(env, args, &msg));
    };
    if kubeadm < target {
        let msg = format!(
            "error execution phase control-plane: couldn't complete the static pod upgrade: the kubeadm version \
             \"{kubeadm}\" is lower than the cluster version \"{target}\"; upgrade kubeadm on this node first"
        );
        return Ok(fail(env, args, &msg));
    }
    let with_addons = kubeadm.minor >= NODE_ADDONS_SINCE_MINOR;
    let upgrade_cp = !skipped(skip, "control-plane");
    let proxy = with_addons && !skipped(skip, "addon/kube-proxy");
    if upgrade_cp {
        say!(
            env,
            "[upgrade/control-plane] Upgrading the control plane instance to version \"{target}\"..."
        );
    }
    let pods = upgrade_static_pods(env, node, &target.to_string(), upgrade_cp)?;
    if let Some(msg) = pods.failure(node) {
        return Ok(fail(env, args, &msg));
    }
    if let StaticPods::Upgraded = pods {
        record_static_pods(env, node, &target.to_string());
        say!(
            env,
            "[upgrade/control-plane] The control plane instance for this node was successfully upgraded!"
        );
    }
    let outcome = env.shared().update_cluster(|c| {
        let last = c
            .nodes
            .values()
            .filter(|n| n.role == Role::ControlPlane)
            .all(|n| n.control_plane_version.as_deref() == Some(c.version.as_str()));
        if last && proxy && !c.kube_proxy {
            c.kube_proxy = true;
            c.resource_version += 1;
        }
        Ok(last)
    })?;
    if let Err(msg) = kubelet_config_phase(env, kubeadm, skip) {
        return Ok(fail(env, args, &msg));
    }
    if with_addons {
        for (phase, addon) in [
            ("addon/coredns", "CoreDNS"),
            ("addon/kube-proxy", "kube-proxy"),
        ] {
            if skipped(skip, phase) {
                continue;
            }
            if outcome {
                say!(env, "[addons] Applied essential addon: {addon}");
            } else {
                say!(
                    env,
                    "[upgrade/addon] Skipping the {phase} phase. Not all control plane instances have been upgraded"
                );
            }
        }
    }
    if let Err(msg) = post_upgrade_phase(env, kubeadm, skip) {
        return Ok(fail(env, args, &msg));
    }
    renew_certs(env)?;
    env.record(NAME, args, "ok");
    Ok(0)
}

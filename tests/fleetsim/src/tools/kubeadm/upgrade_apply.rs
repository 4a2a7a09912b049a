//! `kubeadm upgrade apply` on the first control plane: the health check
//! and version policy before anything changes, then its phases in order
//! (control-plane, upload-config, kubelet-config, addons, post-upgrade).

use anyhow::Result;

use super::*;

pub(super) fn apply(env: &mut Env, args: &[String], cli: &ApplyCli) -> Result<i32> {
    if let Some(msg) = invalid_phase(&cli.skip, APPLY_PHASES) {
        return Ok(fail(env, args, &msg));
    }
    let boot = env.boot()?;
    if boot.role != Role::ControlPlane || !env.path(ADMIN_CONF).is_file() {
        return Ok(fail(env, args, &admin_conf_error()));
    }
    let kubeadm = env.binary_version(NAME)?;
    reading_config(env);
    let cluster = match cluster_via_api(env, ADMIN_CONF)? {
        Ok(c) => c,
        Err(msg) => return Ok(fail(env, args, &msg)),
    };
    say!(env, "[upgrade/preflight] Running preflight checks");
    if let Err(msg) = system_verification(env, kubeadm, &cli.ignore) {
        return Ok(fail(env, args, &msg));
    }
    say!(env, "[upgrade] Running cluster health checks");
    let not_ready = not_ready_control_planes(&cluster);
    if !not_ready.is_empty() {
        let finding = format!(
            "ControlPlaneNodesReady]: there are NotReady control-planes in the cluster: [{}]",
            not_ready.join(" ")
        );
        if !cli.ignores("ControlPlaneNodesReady") {
            let msg = format!(
                "[upgrade/health] FATAL: [preflight] Some fatal errors occurred:\n\t[ERROR {finding}\n\
                 [preflight] If you know what you are doing, you can make a check non-fatal with \
                 `--ignore-preflight-errors=...`"
            );
            return Ok(fail(env, args, &msg));
        }
        say!(env, "\t[WARNING {finding}");
    }
    if let Some(lines) = feature_gates::refused(kubeadm.minor, cluster.kubeadm_feature_gates.keys())
    {
        for line in lines {
            say!(env, "{line}");
        }
        return Ok(fail(env, args, feature_gates::FATAL));
    }
    let Some(target) = KubeVersion::parse(&cli.version) else {
        let msg = format!(
            "[upgrade/version] FATAL: unable to parse normalized version {:?} as a semantic version",
            cli.version
        );
        return Ok(fail(env, args, &msg));
    };
    say!(
        env,
        "[upgrade/preflight] You have chosen to upgrade the cluster version to \"{target}\""
    );
    say!(
        env,
        "[upgrade/versions] Cluster version: {}",
        cluster.version
    );
    say!(env, "[upgrade/versions] kubeadm version: {kubeadm}");
    let (fatal, skippable) = match version_policy(&cluster, target, kubeadm) {
        Ok(p) => p,
        Err(msg) => return Ok(fail(env, args, &msg)),
    };
    if !fatal.is_empty() {
        let msg = format!(
            "[upgrade/version] FATAL: the --version argument is invalid due to these fatal errors:\n\n{}\n\
             Please fix the misalignments highlighted above and try upgrading again",
            format_errors(&fatal)
        );
        return Ok(fail(env, args, &msg));
    }
    if !skippable.is_empty() {
        if !cli.force {
            let msg = format!(
                "[upgrade/version] FATAL: the --version argument is invalid due to these errors:\n\n{}\n\
                 Can be bypassed if you pass the --force flag",
                format_errors(&skippable)
            );
            return Ok(fail(env, args, &msg));
        }
        say!(
            env,
            "[upgrade/version] Found {} potential version compatibility errors but skipping since the --force flag is set: \n\n{}",
            skippable.len(),
            format_errors(&skippable)
        );
    }
    if !(cli.yes || cli.force || confirm(env)) {
        return Ok(fail(
            env,
            args,
            "won't proceed; the user didn't answer (Y|y) in order to continue",
        ));
    }
    run_apply(env, args, cli, &boot.name, kubeadm, target)
}

/// Control-plane Nodes the API does not report Ready, by name: kubeadm's
/// ControlPlaneNodesReady health check.
fn not_ready_control_planes(cluster: &Cluster) -> Vec<String> {
    let now = crate::state::now();
    cluster
        .nodes
        .iter()
        .filter(|(name, n)| n.role == Role::ControlPlane && !cluster.node_ready(name, now))
        .map(|(name, _)| name.clone())
        .collect()
}

fn run_apply(
    env: &mut Env,
    args: &[String],
    cli: &ApplyCli,
    node: &str,
    kubeadm: KubeVersion,
    target: KubeVersion,
) -> Result<i32> {
    if !cli.skips("preflight") {
        say!(
            env,
            "[upgrade/preflight] Pulling images required for setting up a Kubernetes cluster"
        );
        say!(
            env,
            "[upgrade/preflight] This might take a minute or two, depending on the speed of your internet connection"
        );
        say!(
            env,
            "[upgrade/preflight] You can also perform this action beforehand using 'kubeadm config images pull'"
        );
    }
    if !cli.skips("control-plane") {
        say!(
            env,
            "[upgrade/control-plane] Upgrading your static Pod-hosted control plane to version \"{target}\" (timeout: {})...",
            go_duration(300.0)
        );
        let injected = env.shared().update_faults(|f| {
            let fail = f.fail_upgrade_apply > 0;
            f.fail_upgrade_apply = f.fail_upgrade_apply.saturating_sub(1);
            fail
        })?;
        if injected {
            let msg = "error execution phase control-plane: couldn't complete the upgrade for the control plane \
                       components on this node: timed out waiting for the condition (fleetsim: injected \
                       fault fail_upgrade_apply)";
            return Ok(fail(env, args, msg));
        }
    }
    if let Some(code) = work(env, args, node, true)? {
        return Ok(code);
    }
    let pods = upgrade_static_pods(env, node, &target.to_string(), !cli.skips("control-plane"))?;
    if let Some(msg) = pods.failure(node) {
        return Ok(fail(env, args, &msg));
    }
    if let StaticPods::Upgraded = pods {
        record_static_pods(env, node, &target.to_string());
    }
    let skips_proxy = cli.skips("addon/kube-proxy");
    let applied = env.shared().update_cluster(|c| {
        if !c.api_up(crate::state::now()) {
            return Ok(false);
        }
        if !cli.skips("upload-config/kubeadm") {
            c.version = target.to_string();
        }
        if !skips_proxy {
            c.kube_proxy = true;
        }
        c.resource_version += 1;
        Ok(true)
    })?;
    if !applied {
        let msg = "error execution phase upload-config: the API server went away";
        return Ok(fail(env, args, msg));
    }
    if !cli.skips("kubelet-config")
        && let Err(msg) = write_kubelet_config(env, kubeadm)
    {
        return Ok(fail(env, args, &msg));
    }
    if !cli.skips("post-upgrade")
        && let Err(msg) = post_upgrade::run(env, kubeadm)
    {
        return Ok(fail(env, args, &msg));
    }
    print_apply_phases(env, cli, target);
    renew_certs(env)?;
    env.record(NAME, args, "ok");
    Ok(0)
}

fn print_apply_phases(env: &mut Env, cli: &ApplyCli, target: KubeVersion) {
    if !cli.skips("control-plane") {
        say!(
            env,
            "[upgrade/control-plane] The control plane instance for this node was successfully upgraded!"
        );
    }
    if !cli.skips("upload-config/kubeadm") {
        say!(
            env,
            "[upload-config] Storing the configuration used in ConfigMap \"kubeadm-config\" in the \"kube-system\" Namespace"
        );
    }
    if !cli.skips("upload-config/kubelet") {
        say!(
            env,
            "[kubelet] Creating a ConfigMap \"kubelet-config\" in namespace kube-system with the configuration for the kubelets in the cluster"
        );
    }
    if !cli.skips("kubelet-config") {
        say!(
            env,
            "[kubelet-start] Writing kubelet configuration to file \"/var/lib/kubelet/config.yaml\""
        );
        say!(
            env,
            "[upgrade/kubelet-config] The kubelet configuration for this node was successfully upgraded!"
        );
    }
    if !cli.skips("bootstrap-token") {
        say!(
            env,
            "[upgrade/bootstrap-token] Configuring bootstrap token and cluster-info RBAC rules"
        );
    }
    if !cli.skips("addon/coredns") {
        say!(env, "[addons] Applied essential addon: CoreDNS");
    }
    if !cli.skips("addon/kube-proxy") {
        say!(env, "[addons] Applied essential addon: kube-proxy");
    }
    say!(env, "");
    say!(
        env,
        "[upgrade] SUCCESS! A control plane node of your cluster was upgraded to \"{target}\"."
    );
    say!(env, "");
    say!(
        env,
        "[upgrade] Now please proceed with upgrading the rest of the nodes by following the right order."
    );
}

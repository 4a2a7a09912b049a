//! `kubeadm upgrade apply` on the first control plane: its flags, the
//! version policy (kubeadm's EnforceVersionPolicies), the
//! ControlPlaneNodesReady health check and SystemVerification preflight,
//! the confirmation, then its phases in kubeadm's order.

use anyhow::Result;

use super::*;

/// Flags of `upgrade apply`.
pub(super) struct ApplyCli {
    version: String,
    yes: bool,
    force: bool,
    skip: Vec<String>,
    ignore: Vec<String>,
}

impl ApplyCli {
    pub(super) fn parse(rest: &[&str]) -> Option<ApplyCli> {
        let mut cli = ApplyCli {
            version: String::new(),
            yes: false,
            force: false,
            skip: Vec::new(),
            ignore: Vec::new(),
        };
        let mut it = rest.iter();
        while let Some(a) = it.next() {
            match *a {
                "-y" | "--yes" => cli.yes = true,
                "-f" | "--force" => cli.force = true,
                "--skip-phases" => cli.skip.extend(split_phases(it.next()?)),
                s if s.starts_with("--skip-phases=") => {
                    cli.skip.extend(split_phases(&s["--skip-phases=".len()..]));
                }
                "--ignore-preflight-errors" => cli.ignore.extend(split_phases(it.next()?)),
                s if s.starts_with("--ignore-preflight-errors=") => {
                    cli.ignore
                        .extend(split_phases(&s["--ignore-preflight-errors=".len()..]));
                }
                s if s.starts_with("--v=") => {}
                s if s.starts_with('-') => return None,
                s if cli.version.is_empty() => cli.version = s.to_string(),
                _ => return None,
            }
        }
        (!cli.version.is_empty()).then_some(cli)
    }

    fn skips(&self, phase: &str) -> bool {
        skipped(&self.skip, phase)
    }

    fn ignores(&self, check: &str) -> bool {
        ignores(&self.ignore, check)
    }
}

/// Version-skew findings: (fatal, bypassable with --force).
fn version_policy(
    cluster: &Cluster,
    target: KubeVersion,
    kubeadm: KubeVersion,
) -> Result<(Vec<String>, Vec<String>), String> {
    let current = KubeVersion::parse(&cluster.version).ok_or_else(|| {
        format!(
            "[upgrade/versions] FATAL: Unable to fetch cluster version: couldn't parse kubernetesVersion {:?}",
            cluster.version
        )
    })?;
    let (mut fatal, mut skippable) = (Vec::new(), Vec::new());
    if target.minor > current.minor + 1 {
        fatal.push(format!(
            "Specified version to upgrade to \"{target}\" is too high; kubeadm can upgrade only 1 minor version at a time"
        ));
    }
    if target.minor + 1 < current.minor {
        fatal.push(format!(
            "Specified version to downgrade to \"{target}\" is too low; kubeadm can downgrade only 1 minor version at a time"
        ));
    }
    if kubeadm < target {
        if target.minor > kubeadm.minor {
            fatal.push(format!(
                "Specified version to upgrade to \"{target}\" is at least one minor release higher than the kubeadm minor release ({} > {}). Such an upgrade is not supported",
                target.minor, kubeadm.minor
            ));
        } else {
            skippable.push(format!(
                "Specified version to upgrade to \"{target}\" is higher than the kubeadm version \"{kubeadm}\". Upgrade kubeadm first using the tool you used to install kubeadm"
            ));
        }
    }
    if kubeadm.major > target.major || kubeadm.minor > target.minor {
        skippable.push(format!(
            "Kubeadm version {kubeadm} can only be used to upgrade to Kubernetes version {}.{}",
            kubeadm.major, kubeadm.minor
        ));
    }
    let too_old: Vec<String> = cluster
        .nodes
        .values()
        .filter_map(|n| KubeVersion::parse(&n.kubelet_version))
        .filter(|k| target.minor > k.minor + KUBELET_SKEW)
        .map(|k| k.to_string())
        .collect();
    if !too_old.is_empty() {
        skippable.push(format!(
            "There are kubelets in this cluster that are too old that have these versions [{}]",
            too_old.join(" ")
        ));
    }
    Ok((fatal, skippable))
}

fn format_errors(errors: &[String]) -> String {
    errors.iter().map(|e| format!("\t- {e}\n")).collect()
}

/// Asks `[upgrade/confirm] … [y/N]:` on stdout; only y/yes goes on (EOF aborts).
fn confirm(env: &mut Env) -> bool {
    let _ = std::io::Write::write_all(
        &mut *env.out,
        b"[upgrade/confirm] Are you sure you want to proceed? [y/N]: ",
    );
    let _ = env.out.flush();
    let mut answer = String::new();
    match env.input.read_line(&mut answer) {
        Ok(_) => matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}

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
    match pods {
        StaticPods::ApiGone => {
            let msg = "error execution phase control-plane: couldn't upgrade control plane: the API server went away";
            return Ok(fail(env, args, msg));
        }
        StaticPods::NoKubelet => return Ok(fail(env, args, &no_kubelet_error(node))),
        StaticPods::Upgraded => record_static_pods(env, node, &target.to_string()),
        StaticPods::Skipped => {}
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

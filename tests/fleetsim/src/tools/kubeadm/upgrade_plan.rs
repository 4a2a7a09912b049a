//! `kubeadm upgrade plan`.

use anyhow::Result;

use super::*;

/// `upgrade plan`: what `apply` could do, with kubeadm's own version as the
/// target since the nodes cannot reach dl.k8s.io (the real fallback).
pub(super) fn plan(env: &mut Env) -> Result<i32> {
    let boot = env.boot()?;
    if boot.role != Role::ControlPlane || !env.path(ADMIN_CONF).is_file() {
        complain!(env, "{}", admin_conf_error());
        complain!(env, "{STACK_HINT}");
        return Ok(1);
    }
    let kubeadm = env.binary_version(NAME)?;
    say!(env, "[preflight] Running pre-flight checks.");
    reading_config(env);
    let cluster = match cluster_via_api(env, ADMIN_CONF)? {
        Ok(c) => c,
        Err(msg) => {
            complain!(env, "{msg}");
            complain!(env, "{STACK_HINT}");
            return Ok(1);
        }
    };
    let Some(current) = KubeVersion::parse(&cluster.version) else {
        anyhow::bail!(
            "the cluster state has no valid version: {:?}",
            cluster.version
        );
    };
    say!(env, "[upgrade] Running cluster health checks");
    if let Some(lines) = feature_gates::refused(kubeadm.minor, cluster.kubeadm_feature_gates.keys())
    {
        for line in lines {
            say!(env, "{line}");
        }
        complain!(env, "{}", feature_gates::FATAL);
        complain!(env, "{STACK_HINT}");
        return Ok(1);
    }
    say!(env, "[upgrade] Fetching available versions to upgrade to");
    say!(env, "[upgrade/versions] Cluster version: {current}");
    say!(env, "[upgrade/versions] kubeadm version: {kubeadm}");
    let now = crate::state::now();
    complain!(
        env,
        "{} {:>5} version.go:104] could not fetch a Kubernetes version from the internet: unable to get URL \
         \"https://dl.k8s.io/release/stable-1.txt\": Get \"https://dl.k8s.io/release/stable-1.txt\": dial tcp: \
         lookup dl.k8s.io on 127.0.0.53:53: no such host",
        super::super::util::glog_prefix('W', now),
        std::process::id()
    );
    complain!(
        env,
        "{} {:>5} version.go:105] falling back to the local client version: {kubeadm}",
        super::super::util::glog_prefix('W', now),
        std::process::id()
    );
    say!(env, "[upgrade/versions] Target version: {kubeadm}");
    say!(
        env,
        "[upgrade/versions] Latest version in the v{}.{} series: {current}",
        current.major,
        current.minor
    );
    say!(env, "");
    if kubeadm == current {
        say!(env, "Awesome, you're up-to-date! Enjoy!");
        return Ok(0);
    }
    if kubeadm < current || kubeadm.minor > current.minor + 1 {
        return Ok(0);
    }
    print_plan_tables(env, &cluster, current, kubeadm);
    Ok(0)
}

fn print_plan_tables(env: &mut Env, cluster: &Cluster, current: KubeVersion, target: KubeVersion) {
    let header = || {
        ["COMPONENT", "NODE", "CURRENT", "TARGET"]
            .map(String::from)
            .to_vec()
    };
    say!(
        env,
        "Components that must be upgraded manually after you have upgraded the control plane with 'kubeadm upgrade apply':"
    );
    let mut rows = vec![header()];
    for (name, n) in &cluster.nodes {
        rows.push(vec![
            "kubelet".into(),
            name.clone(),
            n.kubelet_version.clone(),
            target.to_string(),
        ]);
    }
    let _ = write!(env.out, "{}", super::super::util::table(&rows, 3));
    say!(env, "");
    say!(env, "Upgrade to the latest stable version:");
    say!(env, "");
    let mut rows = vec![header()];
    for (name, n) in cluster
        .nodes
        .iter()
        .filter(|(_, n)| n.role == Role::ControlPlane)
    {
        let have = n
            .control_plane_version
            .clone()
            .unwrap_or_else(|| current.to_string());
        for component in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ] {
            rows.push(vec![
                component.into(),
                name.clone(),
                have.clone(),
                target.to_string(),
            ]);
        }
    }
    if cluster.kube_proxy {
        rows.push(vec![
            "kube-proxy".into(),
            String::new(),
            current.to_string(),
            target.to_string(),
        ]);
    }
    let _ = write!(env.out, "{}", super::super::util::table(&rows, 3));
    say!(env, "");
    say!(
        env,
        "You can now apply the upgrade by executing the following command:"
    );
    say!(env, "");
    say!(env, "\tkubeadm upgrade apply {target}");
    say!(env, "");
    say!(
        env,
        "_____________________________________________________________________"
    );
}

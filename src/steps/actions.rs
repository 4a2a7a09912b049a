//! What each plan action does on a node, and what it waits for. Every
//! command comes from `crate::remote`; every run goes through a journaled
//! [`Remote`]. Failures say what happened, on which node, the state the node
//! is left in, and what to do next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::runner::{Remote, succeeded};
use crate::node;
use crate::plan::Component;
use crate::remote::{kubectl, upgrade};
use crate::ssh::{self, Session};
use crate::version::{Minor, Version};

/// How long sysupdate may take to download an image.
const STAGE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long kubeadm may take.
const KUBEADM_TIMEOUT: Duration = Duration::from_secs(1200);
/// Between polls while a node boots or an API server starts.
const POLL: Duration = Duration::from_millis(300);
/// How long a reconnected node may take to print its boot id.
const BOOT_ID_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes the pinned config (atomically, with a backup), disables stray
/// configs, and reads the file back.
pub async fn pin(
    r: &Remote,
    component: Component,
    path: &str,
    config: &str,
    disable: &[String],
) -> anyhow::Result<()> {
    let label = format!("pin {component} config");
    let out = r
        .run_root(
            &label,
            &upgrade::pin_config(path, disable),
            Some(config.as_bytes()),
        )
        .await?;
    let out = succeeded(r.node(), &label, out)?;
    if out.stdout != config {
        bail!(
            "{}: {path} reads back different from what fleetctl wrote (a full disk, or something rewriting it?); \
             the previous file is kept as {path}.fleetctl-backup",
            r.node()
        );
    }
    Ok(())
}

/// Runs systemd-sysupdate and returns what the symlink now points at,
/// refusing anything outside the pinned minor or other than `expect`.
pub async fn stage(
    r: &Remote,
    component: Component,
    minor: Minor,
    expect: Option<&Version>,
) -> anyhow::Result<Version> {
    let label = format!(
        "stage {component} {}",
        expect.map_or_else(|| minor.to_string(), Version::to_string)
    );
    let out = r
        .run_root_timeout(
            &label,
            &upgrade::stage(component.name()),
            None,
            STAGE_TIMEOUT,
        )
        .await?;
    let out = succeeded(r.node(), &label, out).with_context(|| {
        format!(
            "{}: systemd-sysupdate could not stage {component} {minor} (is the hub reachable from the node?); \
             nothing was rebooted — fix it and run `fleetctl apply` again",
            r.node()
        )
    })?;
    let staged = staged_version(component, out.stdout.trim()).with_context(|| {
        format!(
            "{}: after staging, {component} points at `{}`",
            r.node(),
            out.stdout.trim()
        )
    })?;
    check_staged(r.node(), component, &staged, minor, expect)?;
    Ok(staged)
}

fn staged_version(component: Component, link_target: &str) -> anyhow::Result<Version> {
    let file = link_target.rsplit('/').next().unwrap_or(link_target);
    node::image_version(component.name(), file)
        .with_context(|| format!("`{file}` is not a {component} image name"))
}

/// A node that staged something else is stopped explicitly, never silently:
/// another minor would put a kubelet ahead of the API server, another patch
/// means the hub changed since the plan.
fn check_staged(
    node: &str,
    component: Component,
    staged: &Version,
    minor: Minor,
    expect: Option<&Version>,
) -> anyhow::Result<()> {
    if staged.minor() != minor {
        bail!(
            "{node}: {component} {staged} is staged, but this hop pins {minor}: a config outside fleetctl's \
             control moved it. Nothing was rebooted. Look at /etc/sysupdate.{component}.d/ on {node}, \
             then run `fleetctl plan` and `fleetctl apply` again"
        );
    }
    if let Some(want) = expect
        && staged != want
    {
        bail!(
            "{node}: staged {component} {staged}, but the plan expected {want}: the hub's newest {minor} patch \
             changed since the plan was made. Nothing was rebooted. Run `fleetctl plan` again to plan with \
             {staged}, then `fleetctl apply`"
        );
    }
    Ok(())
}

/// What a node is about to reboot into, and from which boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeforeReboot {
    pub staged: Version,
    pub boot_id: String,
}

/// Right before a reboot: the node's own sysupdate timer may have moved the
/// symlink since it was staged. The boot id is read in the same command,
/// to recognise the new boot afterwards.
pub async fn before_reboot(
    r: &Remote,
    minor: Minor,
    expect: Option<&Version>,
) -> anyhow::Result<BeforeReboot> {
    let out = r
        .check_root(
            "check staged kubernetes, read the boot id",
            &before_reboot_cmd(),
        )
        .await?;
    let (link, boot_id) = link_and_boot_id(&out.stdout).with_context(|| {
        format!(
            "{}: expected the target of /etc/extensions/kubernetes.raw and the boot id, got `{}`",
            r.node(),
            out.stdout.trim()
        )
    })?;
    let staged = staged_version(Component::Kubernetes, link).with_context(|| {
        format!(
            "{}: /etc/extensions/kubernetes.raw points at `{link}`",
            r.node()
        )
    })?;
    check_staged(r.node(), Component::Kubernetes, &staged, minor, expect)?;
    Ok(BeforeReboot {
        staged,
        boot_id: boot_id.to_string(),
    })
}

/// Prints the kubernetes symlink's target, then the boot id.
pub fn before_reboot_cmd() -> String {
    format!(
        "{} && {}",
        upgrade::staged_target("kubernetes"),
        upgrade::BOOT_ID
    )
}

/// The two lines [`before_reboot`]'s command prints.
fn link_and_boot_id(stdout: &str) -> anyhow::Result<(&str, &str)> {
    let mut lines = stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    match (lines.next(), lines.next(), lines.next()) {
        (Some(link), Some(id), None) => Ok((link, id)),
        _ => bail!("not two lines"),
    }
}

/// Names of the pods a drain could not evict, from kubectl's messages.
pub fn blocked_pods(stderr: &str) -> Vec<String> {
    let mut pods: Vec<String> = stderr
        .lines()
        .filter_map(|l| {
            let at = l.find("pods/")?;
            let rest = &l[at + 5..];
            let name: String = rest
                .trim_start_matches('"')
                .chars()
                .take_while(|c| *c != '"' && !c.is_whitespace())
                .collect();
            let ns = l[at..]
                .split(" -n ")
                .nth(1)
                .and_then(|s| s.trim_start_matches('"').split('"').next());
            (!name.is_empty()).then(|| match ns {
                Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
                _ => name,
            })
        })
        .collect();
    pods.sort();
    pods.dedup();
    pods
}

/// The exit status of [`drain`]'s command when the cordon itself failed
/// and the drain never ran (kubectl exits 1 on its errors).
const CORDON_FAILED: u32 = 97;

/// `kubectl cordon` then `kubectl drain` (`timeout_flag` is its
/// `--timeout=…`), in one command: one round trip instead of two, and the
/// drain starts the moment the cordon is done.
pub fn cordon_and_drain(node: &str, timeout_flag: &str) -> String {
    let cordon = kubectl::kubectl(&["cordon", node]);
    let drain = kubectl::kubectl(&[
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        timeout_flag,
    ]);
    format!("{cordon} || exit {CORDON_FAILED}; {drain}")
}

/// Cordons and drains `node` through the API node. A drain that fails is
/// undone (uncordon: nothing was rebooted) and reported with the pods that
/// blocked it.
pub async fn drain(api: &Remote, node: &str, timeout: Duration) -> anyhow::Result<()> {
    let secs = format!("--timeout={}s", timeout.as_secs().max(1));
    let out = api
        .run_root_timeout(
            &format!("cordon and drain {node}"),
            &cordon_and_drain(node, &secs),
            None,
            timeout + Duration::from_secs(60),
        )
        .await?;
    if out.success() {
        return Ok(());
    }
    if out.exit == Some(CORDON_FAILED) {
        bail!(
            "{node}: kubectl cordon {node} failed: {}. Nothing was drained or rebooted; run `fleetctl apply` \
             again once the API server accepts it",
            out.stderr
                .trim()
                .lines()
                .last()
                .unwrap_or("it printed nothing")
        );
    }
    let undo = api
        .check_root(
            &format!("uncordon {node} after a failed drain"),
            &kubectl::kubectl(&["uncordon", node]),
        )
        .await;
    let state = match undo {
        Ok(_) => format!("{node} was uncordoned again; nothing was rebooted"),
        Err(e) => format!(
            "{node} is STILL CORDONED (uncordon failed: {e:#}); run `kubectl uncordon {node}`"
        ),
    };
    let pods = blocked_pods(&out.stderr);
    let why = if pods.is_empty() {
        format!(
            "kubectl said: {}",
            out.stderr.trim().lines().last().unwrap_or("nothing")
        )
    } else {
        format!("a PodDisruptionBudget blocks evicting {}", pods.join(", "))
    };
    bail!(
        "{node}: drain did not finish within {}: {why}. {state}. Make room for the pods (scale the workload \
         or relax the budget), then run `fleetctl apply` again",
        humantime::format_duration(timeout)
    )
}

/// Sends the reboot. The connection dropping is what success looks like.
pub async fn send_reboot(r: &Remote) -> anyhow::Result<()> {
    match r
        .run_root_timeout("reboot", upgrade::REBOOT, None, Duration::from_secs(30))
        .await
    {
        Ok(out) if out.exit.is_none_or(|c| c == 0) => Ok(()),
        Ok(out) => Err(anyhow::Error::new(super::runner::CommandFailed::new(
            r.node(),
            "reboot",
            &out,
        ))),
        Err(e) if ssh::is_disconnected(&e) || e.chain().any(|c| c.is::<ssh::CommandTimedOut>()) => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Reconnects until the node answers with a boot id other than `before`.
/// The first attempt is immediate: a node still shutting down refuses it
/// or shows its old boot id, both cheap.
pub async fn wait_rebooted(
    node: &str,
    target: &ssh::Target,
    opts: &ssh::Options,
    before: &str,
    deadline: Instant,
    timeout: Duration,
) -> anyhow::Result<Session> {
    let mut last = String::from("no answer yet");
    loop {
        if Instant::now() >= deadline {
            bail!(
                "{node} did not come back from its reboot within {} ({last}). It is cordoned. \
                 Once it is back (check its console), run `fleetctl apply` again: it resumes with this node",
                humantime::format_duration(timeout)
            );
        }
        let mut quick = opts.clone();
        quick.connect_timeout = quick.connect_timeout.min(Duration::from_secs(5));
        match ssh::connect(target, &quick).await {
            // Bounded: a node half-way through its shutdown must not hold
            // this attempt until the 10-minute command timeout.
            Ok(s) => match s
                .exec_timeout(upgrade::BOOT_ID, None, BOOT_ID_TIMEOUT)
                .await
            {
                Ok(out)
                    if out.success()
                        && out.stdout.trim() != before
                        && !out.stdout.trim().is_empty() =>
                {
                    return Ok(s);
                }
                Ok(_) => last = "still the old boot".into(),
                Err(e) => last = format!("{e:#}"),
            },
            Err(e) => last = format!("{:#}", e),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `kubelet --version` until it reports `want`: the sysext merged at boot.
pub async fn wait_kubelet(r: &Remote, want: &Version, deadline: Instant) -> anyhow::Result<()> {
    let expected = format!("Kubernetes {want}");
    loop {
        let out = r
            .run_root("kubelet version", upgrade::KUBELET_VERSION, None)
            .await?;
        if out.stdout.trim() == expected {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{}: after the reboot kubelet reports `{}`, expected {want}: the staged sysext was not merged. \
                 Check `systemd-sysext status` and /etc/extensions/ on the node",
                r.node(),
                out.stdout.trim()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the API server answers `/readyz` (which covers etcd) through `api`.
pub async fn wait_api(api: &Remote, deadline: Instant) -> anyhow::Result<()> {
    loop {
        let out = api
            .run_root(
                "API readyz",
                &kubectl::kubectl(&["get", "--raw", "/readyz"]),
                None,
            )
            .await?;
        if out.success() && out.stdout.trim() == "ok" {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "the API server (through {}) is not ready: {}",
                api.node(),
                out.stderr
                    .trim()
                    .lines()
                    .last()
                    .unwrap_or(out.stdout.trim())
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The exit status of [`ready_then_uncordon`]'s command while `kubectl
/// wait` has not seen the node Ready (and so the uncordon did not run).
const NOT_READY: u32 = 98;

/// `kubectl wait` for the node's Ready condition, then `kubectl uncordon`
/// only once it is Ready: one command, so the uncordon follows at once.
pub fn ready_then_uncordon_cmd(node: &str) -> String {
    let target = format!("node/{node}");
    let wait = kubectl::kubectl(&["wait", "--for=condition=Ready", &target, "--timeout=10s"]);
    let uncordon = kubectl::kubectl(&["uncordon", node]);
    format!("{wait} || exit {NOT_READY}; {uncordon}")
}

/// Waits until the API server reports `node` Ready (`kubectl wait`, in
/// short rounds so a dropped API connection is retried), then uncordons it.
pub async fn ready_then_uncordon(
    api: &Remote,
    node: &str,
    deadline: Instant,
) -> anyhow::Result<()> {
    let cmd = ready_then_uncordon_cmd(node);
    let label = format!("wait for {node} Ready, then uncordon it");
    loop {
        let out = api.run_root(&label, &cmd, None).await?;
        if out.success() {
            return Ok(());
        }
        if out.exit != Some(NOT_READY) {
            return Err(anyhow::Error::new(super::runner::CommandFailed::new(
                api.node(),
                &format!("uncordon {node}"),
                &out,
            )));
        }
        if Instant::now() >= deadline {
            bail!(
                "{node} is not Ready ({}); it is still cordoned. Check its kubelet, then run `fleetctl apply` again",
                out.stderr.trim().lines().last().unwrap_or("no answer")
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

pub async fn upgrade_apply(r: &Remote, version: &Version) -> anyhow::Result<()> {
    let label = format!("kubeadm upgrade apply {version}");
    let out = r
        .run_root_timeout(
            &label,
            &upgrade::upgrade_apply(&version.to_string()),
            None,
            KUBEADM_TIMEOUT,
        )
        .await?;
    succeeded(r.node(), &label, out).with_context(|| {
        format!(
            "{node}: kubeadm upgrade apply {version} failed. {node} runs the {minor} kubelet and is cordoned; \
             the API server is still on the previous minor. Read the journal, fix the cause, and run \
             `fleetctl apply` again: it resumes with upgrade apply",
            node = r.node(),
            minor = version.minor()
        )
    })?;
    Ok(())
}

pub async fn upgrade_node(r: &Remote) -> anyhow::Result<()> {
    let out = r
        .run_root_timeout(
            "kubeadm upgrade node",
            &upgrade::upgrade_node(),
            None,
            KUBEADM_TIMEOUT,
        )
        .await?;
    succeeded(r.node(), "kubeadm upgrade node", out).with_context(|| {
        format!(
            "{}: kubeadm upgrade node failed; the node runs its new kubelet and is cordoned. Fix the cause and \
             run `fleetctl apply` again",
            r.node()
        )
    })?;
    Ok(())
}

pub async fn uncordon(api: &Remote, node: &str) -> anyhow::Result<()> {
    api.check_root(
        &format!("uncordon {node}"),
        &kubectl::kubectl(&["uncordon", node]),
    )
    .await?;
    Ok(())
}

/// A fresh session wrapped for the journal.
pub fn rewrap(r: &Remote, s: Session) -> Remote {
    r.with_session(Arc::new(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_pods_a_budget_protects() {
        let stderr = "evicting pod default/web-7d9f\n\
            error when evicting pods/\"web-7d9f\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n\
            error when evicting pods/\"web-7d9f\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n\
            error: unable to drain node \"w-1\" due to error: [error when evicting pods/\"db-0\" -n \"data\": global timeout reached: 2s], continuing command...";
        assert_eq!(blocked_pods(stderr), vec!["data/db-0", "default/web-7d9f"]);
        assert!(blocked_pods("node/w-1 cordoned\n").is_empty());
    }

    /// Runs `script` with a fake `kubectl` first in PATH that appends its
    /// verb to a log and exits with `$FAIL_<VERB>` (0 when unset).
    fn with_fake_kubectl(script: &str, fail: &[(&str, u32)]) -> (Option<i32>, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("kubectl");
        std::fs::write(
            &fake,
            "#!/bin/sh\nfor a; do case $a in --*) ;; *) verb=$a; break;; esac; done\n\
             echo \"$verb\" >> \"$LOG\"\neval \"exit \\${FAIL_$verb:-0}\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.path().join("log");
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    dir.path().display(),
                    std::env::var("PATH").unwrap()
                ),
            )
            .env("LOG", &log);
        for (verb, code) in fail {
            cmd.env(format!("FAIL_{verb}"), code.to_string());
        }
        let status = cmd.status().unwrap();
        (
            status.code(),
            std::fs::read_to_string(&log).unwrap_or_default(),
        )
    }

    #[test]
    fn cordon_and_drain_is_one_command_that_tells_a_failed_cordon_apart() {
        let cmd = cordon_and_drain("w-1", "--timeout=300s");
        assert_eq!(
            cmd,
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s cordon w-1 || exit 97; \
             kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s drain w-1 \
             --ignore-daemonsets --delete-emptydir-data --timeout=300s"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[]),
            (Some(0), "cordon\ndrain\n".into())
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("drain", 1)]),
            (Some(1), "cordon\ndrain\n".into()),
            "a failed drain is the drain's own status"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("cordon", 1)]),
            (Some(CORDON_FAILED as i32), "cordon\n".into()),
            "no drain without a cordon"
        );
    }

    #[test]
    fn uncordon_runs_only_once_the_node_is_ready() {
        let cmd = ready_then_uncordon_cmd("w-1");
        assert_eq!(
            cmd,
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s wait --for=condition=Ready \
             node/w-1 --timeout=10s || exit 98; \
             kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s uncordon w-1"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[]),
            (Some(0), "wait\nuncordon\n".into())
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("wait", 1)]),
            (Some(NOT_READY as i32), "wait\n".into()),
            "not Ready: never uncordoned"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("uncordon", 1)]),
            (Some(1), "wait\nuncordon\n".into()),
            "a failed uncordon is its own status"
        );
    }

    #[test]
    fn the_command_before_a_reboot_prints_the_link_then_the_boot_id() {
        assert_eq!(
            before_reboot_cmd(),
            "readlink '/etc/extensions/kubernetes.raw' && cat /proc/sys/kernel/random/boot_id"
        );
        assert_eq!(
            link_and_boot_id(
                "../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw\nb1c2\n"
            )
            .unwrap(),
            (
                "../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw",
                "b1c2"
            )
        );
        for bad in ["", "only-a-link\n", "a\nb\nc\n"] {
            assert!(link_and_boot_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn staged_versions_come_from_the_link_target() {
        let v = staged_version(
            Component::Kubernetes,
            "../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw",
        )
        .unwrap();
        assert_eq!(v, Version::new(1, 35, 3));
        assert!(staged_version(Component::Kubernetes, "").is_err());
    }

    #[test]
    fn another_minor_or_patch_staged_is_refused_explicitly() {
        let m = Minor::new(1, 35);
        let want = Version::new(1, 35, 3);
        assert!(check_staged("w-1", Component::Kubernetes, &want, m, Some(&want)).is_ok());
        let e = check_staged(
            "w-1",
            Component::Kubernetes,
            &Version::new(1, 35, 4),
            m,
            Some(&want),
        )
        .unwrap_err();
        assert!(e.to_string().contains("the plan expected v1.35.3"), "{e}");
        let e = check_staged(
            "w-1",
            Component::Kubernetes,
            &Version::new(1, 36, 0),
            m,
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("this hop pins v1.35"), "{e}");
    }
}

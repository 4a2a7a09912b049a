//! The kubeadm step, in kubeadm's own order: the *downloaded* image's
//! kubeadm runs while the node's old kubelet keeps running, before the node
//! is staged or rebooted. `upgrade apply` on the first control-plane node
//! moves the control plane (and writes that node's kubelet config);
//! `upgrade node` on every other node writes its kubelet config (kubeadm
//! v1.35's also strips `--pod-infra-container-image`, which kubelet v1.35
//! refuses to start with). Only then may the new kubelet boot.
//!
//! Undo: a node whose kubeadm step failed is put back as it was: if it was
//! staged (a rerun that found it so), its symlink and config go back to
//! what it runs, so no reboot, expected or not, starts a kubelet whose
//! kubeadm step did not run.

use std::time::Duration;

use anyhow::bail;

use super::context::settled_facts;
use super::detached::{self, Reconnect};
use super::runner::{CommandFailed, Remote, succeeded};
use crate::plan::{self, Component, Image};
use crate::remote::upgrade::{self, KubeadmStep, kubeadm_exit};
use crate::version::Version;

/// How long kubeadm may take. The lock's TTL outlasts it
/// (`steps::lock::keeper::lock_ttl`).
pub const TIMEOUT: Duration = Duration::from_secs(1200);

/// Which kubeadm upgrade a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `upgrade apply`, on the first control-plane node.
    Apply,
    /// `upgrade node`, on every other node.
    Node,
}

impl Kind {
    fn args(self, version: &Version, preflight: Preflight) -> Vec<String> {
        let ignored: &[&str] = match preflight {
            Preflight::All => &[],
            Preflight::SkipSystemVerification => &[upgrade::SYSTEM_VERIFICATION],
        };
        match self {
            Kind::Apply => upgrade::upgrade_apply_args(&version.to_string(), ignored),
            Kind::Node => upgrade::upgrade_node_args(ignored),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Apply => "upgrade apply",
            Kind::Node => "upgrade node",
        }
    }
}

/// Which of kubeadm's preflight errors stop the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preflight {
    All,
    /// `--ignore-preflight-errors=SystemVerification`: a cgroup v1 node the
    /// operator let through with `--ignore-check cgroup`
    /// (`crate::checks::skips_system_verification`).
    SkipSystemVerification,
}

impl Preflight {
    /// For `node` in `hop`, as the plan decided.
    pub fn of(hop: &crate::plan::Hop, node: &str) -> Preflight {
        if hop.skip_system_verification.iter().any(|n| n == node) {
            Preflight::SkipSystemVerification
        } else {
            Preflight::All
        }
    }
}

/// The detached step's id (its unit is `fleetctl-<id>`) and what it does.
fn step_id(kind: Kind, version: &Version) -> (String, String) {
    (
        format!("kubeadm-{}-{version}", kind.name().replace(' ', "-")),
        format!("kubeadm {} with the {version} image's kubeadm", kind.name()),
    )
}

/// What `--dry-run` shows: the step as the transient unit it runs in.
/// `sha256` is the image's (the dry run shows a placeholder when the plan
/// has none; apply refuses such a plan before it runs anything).
pub fn detached_command(
    kind: Kind,
    version: &Version,
    sha256: &str,
    preflight: Preflight,
) -> String {
    let (id, label) = step_id(kind, version);
    upgrade::start_detached(
        &id,
        &label,
        &command(kind, version, sha256, preflight),
        detached::WAIT_TENTHS,
    )
}

/// The step's script for the node: it checks the image against `sha256`
/// before mounting it, always.
pub fn command(kind: Kind, version: &Version, sha256: &str, preflight: Preflight) -> String {
    let image = format!(
        "{}/{}",
        upgrade::images_dir(Component::Kubernetes.name()),
        upgrade::image_file(Component::Kubernetes.name(), &version.to_string())
    );
    upgrade::kubeadm_step(&KubeadmStep {
        image: &image,
        version: &version.to_string(),
        args: &kind.args(version, preflight),
        run_dir: "/run",
        marker: upgrade::KUBEADM_STEP_MARKER,
        sha256,
    })
}

/// Runs the step on `r` with `image`'s kubeadm, once the image on the
/// node has the image's sha256; on failure,
/// unstages the node if it was staged and says what state it is in.
/// The step runs detached from the SSH session (see [`super::detached`]), so
/// a dropped connection or a killed fleetctl never stops kubeadm halfway.
pub async fn run(
    r: &mut Remote,
    reconnect: Option<&Reconnect<'_>>,
    kind: Kind,
    image: &Image,
    preflight: Preflight,
    hub: &str,
) -> anyhow::Result<()> {
    let version = image.version();
    let (id, label) = step_id(kind, version);
    let script = command(kind, version, image.sha256(), preflight);
    let out = detached::run(r, reconnect, &id, &label, &script, TIMEOUT).await?;
    if out.success() {
        return Ok(());
    }
    let node = r.node().to_string();
    let why = match out.exit {
        Some(kubeadm_exit::NO_IMAGE) => format!(
            "the {version} image is not in /opt/extensions/kubernetes/ (was it removed?); run `fleetctl \
             apply` again to download it"
        ),
        Some(kubeadm_exit::WRONG_VERSION) => format!(
            "the kubeadm inside the {version} image does not report {version} (see the journal): the file \
             is not what its name says. Remove it from /opt/extensions/kubernetes/ and run `fleetctl apply` again"
        ),
        Some(kubeadm_exit::CHECKSUM) => format!(
            "the {version} image on the node does not have the sha256 the hub's SHA256SUMS gave when the \
             plan was made: it was corrupted or tampered with. Nothing was run from it. Remove it from \
             /opt/extensions/kubernetes/ and run `fleetctl apply` again"
        ),
        Some(kubeadm_exit::MOUNT) => format!(
            "the {version} image could not be mounted read-only (`mount -o loop,ro`): check that loop \
             devices work on the node (`losetup -f`) and that the file is a sysext image"
        ),
        Some(kubeadm_exit::MARKER) => format!(
            "kubeadm succeeded, but {} could not be written; free space in /var and run `fleetctl apply` \
             again (the step is repeated, which is harmless for `upgrade node`)",
            upgrade::KUBEADM_STEP_MARKER
        ),
        _ => {
            let failed = CommandFailed::new(&node, &label, &out);
            match kind {
                Kind::Apply => format!(
                    "{failed}. kubeadm rolls its own control-plane changes back; the API server stays on the \
                     previous minor. Read the journal, fix the cause, then run `fleetctl apply` again: it \
                     repeats upgrade apply"
                ),
                Kind::Node => format!(
                    "{failed}. Read the journal, fix the cause, then run `fleetctl apply` again: it repeats \
                     upgrade node"
                ),
            }
        }
    };
    let state = match undo(r, hub).await {
        Ok(s) => s,
        Err(e) => format!(
            "COULD NOT CHECK OR UNSTAGE {node} ({e:#}): make sure /etc/extensions/kubernetes.raw points \
             at the image it runs before it reboots"
        ),
    };
    bail!("{node}: kubeadm {} failed: {why}. {state}", kind.name())
}

/// Puts a node whose kubeadm step failed back to booting what it runs:
/// when its symlink points at a newer minor than its kubelet, the symlink
/// and the pinned config go back to the running version. Says what it did.
pub async fn undo(r: &Remote, hub: &str) -> anyhow::Result<String> {
    let facts = settled_facts(r).await?;
    let node = r.node();
    let k8s = &facts.kubernetes;
    let (Some(running), Some(staged)) = (&k8s.running, &k8s.staged) else {
        return Ok(format!(
            "{node} was not staged by fleetctl: it boots what it boots now"
        ));
    };
    if staged.minor() <= running.minor() {
        return Ok(format!(
            "{node} was not staged: it still boots kubernetes {staged}; nothing was rebooted"
        ));
    }
    if let Some(refusal) = super::stage::unstage_refusal(node, k8s, hub) {
        return Ok(refusal);
    }
    let minor = running.minor();
    let config = plan::render_config(Component::Kubernetes, minor, hub)?;
    let path = Component::Kubernetes.config_path();
    let out = r
        .run_root(
            &format!("unstage: pin kubernetes back to {minor}"),
            &upgrade::pin_config(&path, &[]),
            Some(config.as_bytes()),
        )
        .await?;
    succeeded(node, "unstage: pin the config back", out)?;
    r.check_root(
        &format!("unstage: point the symlink back at {running}"),
        &upgrade::stage_image(Component::Kubernetes.name(), &running.to_string()),
    )
    .await?;
    Ok(format!(
        "{node} was staged with {staged} and has been unstaged: it boots {running} again, pinned to \
         {minor}; nothing was rebooted"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tests/cli/kubeadm_writes.rs proved it on a fleet: only the nodes the
    /// plan lets past kubeadm's SystemVerification preflight (cgroup v1,
    /// `--ignore-check cgroup`) run kubeadm with
    /// `--ignore-preflight-errors=SystemVerification`; every other node's
    /// kubeadm runs every preflight.
    #[test]
    fn only_the_nodes_the_plan_names_skip_system_verification() {
        let mut hop = crate::steps::script::tests::plan().hops.remove(0);
        hop.skip_system_verification = vec!["w-1".into()];
        let v: Version = "v1.35.3".parse().unwrap();
        let sha = "a".repeat(64);
        let flag = "--ignore-preflight-errors=SystemVerification";
        for (node, kind) in [
            ("cp-1", Kind::Apply),
            ("w-1", Kind::Node),
            ("w-2", Kind::Node),
        ] {
            let preflight = Preflight::of(&hop, node);
            let cmd = command(kind, &v, &sha, preflight);
            assert_eq!(cmd.contains(flag), node == "w-1", "{node}: {cmd}");
        }
        hop.skip_system_verification.clear();
        assert_eq!(Preflight::of(&hop, "w-1"), Preflight::All);
    }
}

//! Staging: the pinned sysupdate config, and the symlink that decides what
//! the next boot merges. For kubernetes this runs only after the node's
//! kubeadm step, and only points the symlink at the image already
//! downloaded; containerd, which needs no kubeadm step, is staged by
//! `systemd-sysupdate --component=containerd` itself. Neither touches
//! /run/reboot-required: fleetctl owns the reboot, and a marker there would
//! let Kured reboot the node on its own once the lock is gone.

use anyhow::{Context, bail};

use super::download;
use super::runner::{Remote, succeeded};
use crate::node;
use crate::plan::Component;
use crate::remote::{stage_record, upgrade};
use crate::version::{Minor, Version};

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

/// Stages `component` and returns what the symlink now points at, refusing
/// anything outside `minor` or other than `expect`.
pub async fn stage(
    r: &Remote,
    component: Component,
    minor: Minor,
    expect: Option<&Version>,
) -> anyhow::Result<Version> {
    let (label, cmd) = match component {
        Component::Kubernetes => {
            let version = match expect {
                Some(v) => v.clone(),
                None => download::resolve_image(r, minor).await?,
            };
            let label = format!("stage kubernetes {version}");
            (label, command(component, minor, Some(&version)))
        }
        Component::Containerd => (
            format!("stage {component} {minor}"),
            command(component, minor, expect),
        ),
    };
    let out = r.run_root(&label, &cmd, None).await?;
    let out = succeeded(r.node(), &label, out).with_context(|| {
        format!(
            "{}: could not stage {component} {minor}; nothing was rebooted. Fix it and run `fleetctl apply` again",
            r.node()
        )
    })?;
    let target = out.stdout.trim();
    let staged = staged_version(component, target).with_context(|| {
        format!(
            "{}: after staging, {component} points at `{target}`",
            r.node()
        )
    })?;
    check_staged(r.node(), component, &staged, minor, expect)?;
    Ok(staged)
}

/// Why a node cannot be unstaged back to what it runs, if it cannot: the
/// image of its running version is gone from /opt/extensions/kubernetes/
/// (see [`node::running_image_gone`]), so pointing the symlink back would
/// leave it dangling and the next boot would merge nothing. The node is
/// left as it is, staged, and the message says what to do.
pub fn unstage_refusal(node: &str, k8s: &node::Extension, hub: &str) -> Option<String> {
    let running = node::running_image_gone(k8s)?;
    let staged = k8s.staged.as_ref().map_or_else(
        || "what its symlink points at".to_string(),
        Version::to_string,
    );
    let file = upgrade::image_file(Component::Kubernetes.name(), &running.to_string());
    Some(format!(
        "{node} was NOT unstaged: it runs kubernetes {running}, but that image is gone from \
         /opt/extensions/kubernetes/ (removed while merged), so there is nothing to point its symlink \
         back at; it still boots {staged} next. Do not reboot {node}. Either fix the cause and run \
         `fleetctl apply` again (it repeats the kubeadm step and goes on to {staged}), or copy {file} from \
         {hub}/kubernetes/ back into /opt/extensions/kubernetes/ (check it against the hub's SHA256SUMS) \
         and run `fleetctl apply` again to unstage it",
        hub = hub.trim_end_matches('/'),
    ))
}

/// The command that stages `component`: for kubernetes, pointing the
/// symlink at `expect`'s image (`<newest …>` until it is resolved on the node).
/// Either records the move of the symlink (`remote::stage_record`), for a
/// rollback to tell what the reboot changed.
pub fn command(component: Component, minor: Minor, expect: Option<&Version>) -> String {
    let name = component.name();
    let stage = match (component, expect) {
        (Component::Kubernetes, _) => upgrade::stage_image(
            name,
            &expect.map_or_else(|| format!("<newest {minor}>"), Version::to_string),
        ),
        (Component::Containerd, Some(v)) => upgrade::sysupdate_stage_version(name, &v.to_string()),
        (Component::Containerd, None) => upgrade::sysupdate_stage(name),
    };
    stage_record::recorded(name, &stage)
}

pub fn staged_version(component: Component, link_target: &str) -> anyhow::Result<Version> {
    let file = link_target.rsplit('/').next().unwrap_or(link_target);
    node::image_version(component.name(), file)
        .with_context(|| format!("`{file}` is not a {component} image name"))
}

/// A node that staged something else is stopped explicitly, never silently:
/// another minor would put a kubelet ahead of the API server, another patch
/// means the hub changed since the plan.
pub fn check_staged(
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_node_whose_running_image_is_gone_is_not_unstaged() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        let mut k8s = node::Extension {
            running: Some(v("v1.34.2")),
            staged: Some(v("v1.35.3")),
            staged_target: Some(
                "../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw".into(),
            ),
            images: vec![v("v1.35.3")],
            configs: Vec::new(),
        };
        let why = unstage_refusal("w-1", &k8s, "http://hub:8080/ext/").unwrap();
        assert!(
            why.starts_with(
                "w-1 was NOT unstaged: it runs kubernetes v1.34.2, but that image is gone from \
                 /opt/extensions/kubernetes/"
            ),
            "{why}"
        );
        assert!(
            why.contains("it still boots v1.35.3 next. Do not reboot w-1."),
            "{why}"
        );
        assert!(
            why.contains("copy kubernetes-v1.34.2-x86-64.raw from http://hub:8080/ext/kubernetes/"),
            "{why}"
        );
        k8s.images.push(v("v1.34.2"));
        assert_eq!(unstage_refusal("w-1", &k8s, "http://hub"), None);
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

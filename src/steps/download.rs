//! Download: the hop's image onto a node, without staging it. The transfer
//! definition is sysext-bakery's pinned config without `CurrentSymlink=`,
//! handed to `systemd-sysupdate --definitions=`: the image lands in
//! `/opt/extensions/kubernetes/` and the symlink the next boot merges does
//! not move, so an unexpected reboot still boots the kubelet the node runs.
//! Nothing to undo: an unstaged image changes nothing.
//!
//! That private definition also keeps every image ([`KEEP_ALL`]): sysupdate
//! makes room *before* it downloads (systemd v255–v257, src/sysupdate/
//! sysupdate.c `context_apply` → `context_vacuum(c, 1, us->version)`), and
//! `transfer_vacuum` (src/sysupdate/sysupdate-transfer.c) removes the oldest
//! images of the pattern's series until `InstancesMax − 1` remain, sparing
//! only `ProtectVersion=` and the version being installed — not the image
//! `CurrentSymlink=` points at. With the bakery's `InstancesMax=3`, a node
//! holding three images of its minor would lose the one it runs (or the one
//! staged) to a same-minor download, and "unstage back to the running
//! image" would have nothing to go back to. fleetctl's own clean-up phase
//! removes old images afterwards, never the one the symlink resolves to.

use std::time::Duration;

use anyhow::{Context, bail};

use super::runner::{Remote, succeeded};
use crate::node;
use crate::plan::{self, Action, Component, Hop, Image};
use crate::remote::upgrade;
use crate::version::{Minor, Version};

/// How long sysupdate may take to download an image.
const TIMEOUT: Duration = Duration::from_secs(600);

/// `InstancesMax=` of the private download definition: `UINT64_MAX`, which
/// `transfer_vacuum` reads as "keep infinite instances" (its limit is then
/// never reached), so the room-making before the download removes nothing.
/// `config_parse_instances_max` reads it with `safe_atou64`.
pub const KEEP_ALL: u64 = u64::MAX;

/// The bakery's pinned transfer for `minor` without `CurrentSymlink=` and
/// with `InstancesMax=` [`KEEP_ALL`]: what `systemd-sysupdate
/// --definitions=` runs for a download.
pub fn definition(minor: Minor, hub: &str) -> anyhow::Result<String> {
    let bakery = plan::render_download_config(Component::Kubernetes, minor, hub)?;
    let mut replaced = 0;
    let text: String = bakery
        .lines()
        .map(|l| {
            if l.starts_with("InstancesMax=") {
                replaced += 1;
                format!("InstancesMax={KEEP_ALL}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    anyhow::ensure!(
        replaced == 1,
        "the {minor} download definition has {replaced} InstancesMax= lines, expected one"
    );
    Ok(text)
}

/// The image a step without a known patch uses: the newest of `minor` on the node.
/// Both the kubeadm step (which runs that image's kubeadm) and staging (which
/// points the symlink at it) resolve it here, among the downloaded images.
pub async fn resolve_image(r: &Remote, minor: Minor) -> anyhow::Result<Version> {
    let dir = upgrade::images_dir(Component::Kubernetes.name());
    let out = r
        .check_root(
            "list kubernetes images",
            &upgrade::list_images(Component::Kubernetes.name()),
        )
        .await?;
    out.stdout
        .lines()
        .filter_map(|l| node::image_version(Component::Kubernetes.name(), l.trim()))
        .filter(|v| v.minor() == minor)
        .max()
        .with_context(|| {
            format!(
                "{}: no kubernetes {minor} image in {dir}/ to run kubeadm from",
                r.node()
            )
        })
}

/// Downloads the newest `minor` image the hub serves, refusing another
/// patch than `image`'s (the hub changed since the plan), and checks the
/// downloaded file against `image`'s sha256 (the hub's `SHA256SUMS`,
/// recorded in the plan): a file that does not match is removed and
/// nothing goes on. There is no download without a sum to check.
pub async fn run(r: &Remote, hub: &str, minor: Minor, image: &Image) -> anyhow::Result<Version> {
    let expect = image.version();
    let definition = definition(minor, hub)?;
    let label = format!("download kubernetes {expect}");
    let out = r
        .run_root_timeout(
            &label,
            &upgrade::download(Component::Kubernetes.name()),
            Some(definition.as_bytes()),
            TIMEOUT,
        )
        .await?;
    // systemd-sysupdate checks every download against the hub's own
    // SHA256SUMS (through systemd-pull, which it runs for url-file sources
    // with the sum as `--checksum=`) and says so. Up to 257 (Flatcar's
    // 255/256; Debian 13's 257 on the sim's real-OS nodes) pull_verify() in
    // src/import/pull-common.c says "DOWNLOAD INVALID: Checksum of URL file
    // did not check out, file has been tampered with."; later releases check
    // in src/import/pull-job.c: "Checksum of downloaded resource does not
    // match expected checksum, yikes."
    let tampered = out
        .stderr
        .contains("file did not check out, file has been tampered with")
        || out.stderr.contains("does not match expected checksum");
    let out = succeeded(r.node(), &label, out).with_context(|| {
        if tampered {
            format!(
                "{}: the hub's kubernetes {minor} image does not match the hub's own SHA256SUMS, so \
                 systemd-sysupdate refused it: the hub serves a corrupted or tampered file. Nothing \
                 was staged or rebooted; fix the hub, then run `fleetctl apply` again",
                r.node()
            )
        } else {
            format!(
                "{}: systemd-sysupdate could not download kubernetes {minor} (is the hub reachable \
                 from the node?). Nothing was staged or rebooted; fix it and run `fleetctl apply` again",
                r.node()
            )
        }
    })?;
    let got = newest_of(&out.stdout, minor).with_context(|| {
        format!(
            "{}: systemd-sysupdate succeeded but /opt/extensions/kubernetes/ holds no {minor} image \
             (it lists: {})",
            r.node(),
            out.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    })?;
    if &got != expect {
        bail!(
            "{node}: downloaded kubernetes {got}, but the plan expected {expect}: the hub's newest {minor} \
             patch changed since the plan was made. Nothing was staged or rebooted. Run `fleetctl plan` \
             again, then `fleetctl apply`",
            node = r.node()
        );
    }
    verify(r, image, "downloaded").await?;
    Ok(got)
}

/// The nodes of `hop` that will run or boot its image without downloading
/// it in this hop (it was already in /opt/extensions/kubernetes/): the
/// file there is checked too, before anything runs from it on any node.
pub fn present_images(hop: &Hop) -> Vec<String> {
    let downloads: Vec<&str> = hop
        .steps()
        .filter(|s| matches!(s.action, Action::Download { .. }))
        .map(|s| s.node.as_str())
        .collect();
    let mut nodes: Vec<String> = hop
        .steps()
        .filter(|s| {
            matches!(
                s.action,
                Action::UpgradeApply { .. }
                    | Action::UpgradeNode { .. }
                    | Action::Stage {
                        component: Component::Kubernetes,
                        ..
                    }
            )
        })
        .map(|s| s.node.clone())
        .filter(|n| !downloads.contains(&n.as_str()))
        .collect();
    nodes.sort();
    nodes.dedup();
    nodes
}

/// The image's sha256 is the hub's; a mismatching file is removed, so that
/// the next run downloads it again. `what`: how it got there, for the message.
pub async fn verify(r: &Remote, image: &Image, what: &str) -> anyhow::Result<()> {
    let component = Component::Kubernetes.name();
    let v = image.version().to_string();
    let want = image.sha256();
    let out = r
        .check_root(
            &format!("sha256 of kubernetes {v}"),
            &upgrade::image_sha256(component, &v, want),
        )
        .await?;
    if out.stdout.trim() == "ok" {
        return Ok(());
    }
    let got = out.stdout.split_whitespace().next().unwrap_or("(none)");
    let removed = r
        .check_root(
            &format!("remove kubernetes {v}: its sha256 is wrong"),
            &upgrade::remove_image(component, &v),
        )
        .await
        .map_or_else(
            |e| format!("could not remove it ({e:#})"),
            |_| "it was removed".to_string(),
        );
    bail!(
        "{node}: the {what} kubernetes {v} image has sha256 {got}, but the hub's SHA256SUMS gave {want} \
         when the plan was made: the image was corrupted or tampered with. Nothing ran from it and nothing \
         was staged or rebooted; {removed}. Check the hub, then run `fleetctl plan` and `fleetctl apply` \
         again",
        node = r.node()
    )
}

/// The newest `minor` image in an `ls -1` of the images directory.
fn newest_of(listing: &str, minor: Minor) -> Option<Version> {
    listing
        .lines()
        .filter_map(|l| node::image_version(Component::Kubernetes.name(), l.trim()))
        .filter(|v| v.minor() == minor)
        .max()
}

/// The hop's image, for the steps that check one already on the nodes.
pub(super) fn hop_image(hop: &Hop) -> anyhow::Result<Image> {
    let what = hop
        .version
        .as_ref()
        .map_or_else(|| hop.minor.to_string(), Version::to_string);
    hop.image().with_context(|| no_sum("the fleet", &what))
}

/// `image` if it is `version`'s, else why no step may go on.
pub(super) fn image_of<'a>(
    node: &str,
    image: Option<&'a Image>,
    version: &Version,
) -> anyhow::Result<&'a Image> {
    match image {
        Some(image) if image.version() == version => Ok(image),
        Some(image) => bail!(
            "{node}: the step needs the kubernetes {version} image, but the plan's hop is for {}, the \
             only one it records a sha256 for; nothing was run from it. Run `fleetctl plan` again",
            image.version()
        ),
        None => Err(anyhow::anyhow!(no_sum(node, &version.to_string()))),
    }
}

/// Why a step refuses an image the plan records no sha256 for.
pub(super) fn no_sum(node: &str, what: &str) -> String {
    format!(
        "{node}: the plan records no sha256 for the kubernetes {what} image, so it cannot be checked: \
         nothing was downloaded or run from it. Fix the hub (one sha256 per image in its SHA256SUMS), \
         then run `fleetctl plan` and `fleetctl apply` again"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_image_of_the_minor_is_what_was_downloaded() {
        let ls = "kubernetes-v1.34.2-x86-64.raw\nkubernetes-v1.35.1-x86-64.raw\n\
                  kubernetes-v1.35.3-x86-64.raw\n.#sysupdate.kubernetes-v1.36.0-x86-64.raw\n";
        assert_eq!(
            newest_of(ls, Minor::new(1, 35)),
            Some(Version::new(1, 35, 3))
        );
        assert_eq!(newest_of(ls, Minor::new(1, 36)), None);
    }

    #[test]
    fn the_download_definition_keeps_every_image_and_stages_nothing() {
        let d = definition(Minor::new(1, 35), "https://hub.example/ext").unwrap();
        assert_eq!(
            d,
            "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\n\
             Path=https://hub.example/ext/kubernetes/\nMatchPattern=kubernetes-v1.35.@v-%a.raw\n\n\
             [Target]\nInstancesMax=18446744073709551615\nType=regular-file\n\
             Path=/opt/extensions/kubernetes\n"
        );
    }

    #[test]
    fn no_step_gets_an_image_the_plan_records_no_sum_for() {
        let v: Version = "v1.35.3".parse().unwrap();
        let image = Image::new(v.clone(), &"a".repeat(64)).unwrap();
        assert_eq!(image_of("w-1", Some(&image), &v).unwrap(), &image);
        let other: Version = "v1.35.4".parse().unwrap();
        let err = format!("{:#}", image_of("w-1", Some(&image), &other).unwrap_err());
        assert!(
            err.starts_with("w-1: the step needs the kubernetes v1.35.4 image"),
            "{err}"
        );
        let err = format!("{:#}", image_of("w-1", None, &v).unwrap_err());
        assert!(
            err.contains("w-1: the plan records no sha256 for the kubernetes v1.35.3 image"),
            "{err}"
        );
    }
}

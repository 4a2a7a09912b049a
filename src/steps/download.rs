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
use crate::plan::{self, Action, Component, Hop, is_sha256};
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

/// Downloads the newest `minor` image the hub serves and returns its
/// version, refusing another patch than `expect` (the hub changed since the plan).
/// With `sha256` (from the hub's `SHA256SUMS`, recorded in the plan), the
/// downloaded file is checked against it; a file that does not match is
/// removed and nothing goes on.
pub async fn run(
    r: &Remote,
    hub: &str,
    minor: Minor,
    expect: Option<&Version>,
    sha256: Option<&str>,
) -> anyhow::Result<Version> {
    let definition = definition(minor, hub)?;
    let label = format!(
        "download kubernetes {}",
        expect.map_or_else(|| minor.to_string(), Version::to_string)
    );
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
    if let Some(want) = expect
        && &got != want
    {
        bail!(
            "{node}: downloaded kubernetes {got}, but the plan expected {want}: the hub's newest {minor} \
             patch changed since the plan was made. Nothing was staged or rebooted. Run `fleetctl plan` \
             again, then `fleetctl apply`",
            node = r.node()
        );
    }
    if let Some(want) = sha256 {
        verify(r, &got, want, "downloaded").await?;
    }
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
pub async fn verify(r: &Remote, version: &Version, want: &str, what: &str) -> anyhow::Result<()> {
    let component = Component::Kubernetes.name();
    let v = version.to_string();
    if !is_sha256(want) {
        bail!(
            "{node}: the plan's sha256 for kubernetes {v} is `{want}`, not 64 hexadecimal characters, \
             so it cannot vouch for the image. Nothing ran from it; run `fleetctl plan` again",
            node = r.node()
        );
    }
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

/// What `--dry-run` shows for a download.
pub fn commands(hub: &str, minor: Minor) -> Vec<String> {
    let definition = definition(minor, hub).map_or_else(
        |e| format!("(cannot render: {e:#})"),
        |d| d.len().to_string(),
    );
    vec![
        format!(
            "# stdin: the pinned {minor} transfer without CurrentSymlink=, InstancesMax={KEEP_ALL} \
             ({definition} bytes)"
        ),
        upgrade::download(Component::Kubernetes.name()),
    ]
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
        let shown = commands("https://hub.example/ext", Minor::new(1, 35));
        assert!(
            shown[0].contains("InstancesMax=18446744073709551615"),
            "{shown:?}"
        );
    }
}

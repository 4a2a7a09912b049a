//! Download: the hop's image onto a node, without staging it. The transfer
//! definition is sysext-bakery's pinned config without `CurrentSymlink=`,
//! handed to `systemd-sysupdate --definitions=`: the image lands in
//! `/opt/extensions/kubernetes/` and the symlink the next boot merges does
//! not move, so an unexpected reboot still boots the kubelet the node runs.
//! Nothing to undo: an unstaged image changes nothing.

use std::time::Duration;

use anyhow::{Context, bail};

use super::runner::{Remote, succeeded};
use crate::node;
use crate::plan::{self, Component};
use crate::remote::upgrade;
use crate::version::{Minor, Version};

/// How long sysupdate may take to download an image.
const TIMEOUT: Duration = Duration::from_secs(600);

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
    let definition = plan::render_download_config(Component::Kubernetes, minor, hub)?;
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
    let out = succeeded(r.node(), &label, out).with_context(|| {
        format!(
            "{}: systemd-sysupdate could not download kubernetes {minor} (is the hub reachable from \
             the node?). Nothing was staged or rebooted; fix it and run `fleetctl apply` again",
            r.node()
        )
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
        verify(r, &got, want).await?;
    }
    Ok(got)
}

/// The downloaded image's sha256 is the hub's; a mismatching file is
/// removed, so that the next download fetches it again.
async fn verify(r: &Remote, version: &Version, want: &str) -> anyhow::Result<()> {
    let component = Component::Kubernetes.name();
    let v = version.to_string();
    let out = r
        .check_root(
            &format!("sha256 of kubernetes {v}"),
            &upgrade::image_sha256(component, &v),
        )
        .await?;
    let got = out.stdout.split_whitespace().next().unwrap_or_default();
    if got.eq_ignore_ascii_case(want) {
        return Ok(());
    }
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
        "{node}: the downloaded kubernetes {v} has sha256 {got}, but the hub's SHA256SUMS gave {want} when \
         the plan was made: the image was corrupted or tampered with on the way. Nothing was staged or \
         rebooted; {removed}. Check the hub, then run `fleetctl plan` and `fleetctl apply` again",
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
    let definition = plan::render_download_config(Component::Kubernetes, minor, hub).map_or_else(
        |e| format!("(cannot render: {e:#})"),
        |d| d.len().to_string(),
    );
    vec![
        format!(
            "# stdin: the pinned {minor} transfer without CurrentSymlink= ({definition} bytes)"
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
}

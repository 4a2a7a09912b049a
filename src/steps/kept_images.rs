//! A rollback verifies what it boots (issue 38, item 5): before the first
//! step of a node's rollback (its pinned config) moves anything, every kept
//! image the rollback will point a symlink at — kubernetes, and containerd
//! when it goes back too — is checked against the sha256 the hub publishes
//! for it. A file that does not match, or a hub that publishes no single
//! sum for it, refuses the rollback of that node and leaves the node as it
//! was: the kept image sat on the node for weeks, out of fleetctl's sight,
//! and the next boot would merge whatever it now holds into `/usr` as root.
//!
//! The reference is the hub's `SHA256SUMS`, read fresh through the node:
//! the very list the image was checked against when it came (fleetctl's
//! download checks kubernetes against the sum the plan took from it,
//! `super::download::verify`; systemd-sysupdate checks containerd against
//! it, `pull_verify()` in systemd's src/import/pull-common.c). A sum
//! journaled at download would be no better: the journal is per run and
//! bounded, and containerd's downloads are sysupdate's own, so there is
//! none for it.
//!
//! The file is not removed on a mismatch (unlike a fresh download's): it is
//! the node's only way back, and the operator decides what replaces it.
//! One function for every path that rolls back: `fleetctl rollback`, `apply
//! --on-failure rollback`, the offline rollback; each runs the rollback's
//! tasks from `script::of_rollbacks`, which puts [`Task::KeptImages`]
//! before each node's first step.
//!
//! [`Task::KeptImages`]: super::script::Task::KeptImages

use anyhow::{Context, bail};

use super::runner::Remote;
use crate::hub::is_sha256;
use crate::plan::{Action, Component, Hop};
use crate::remote::upgrade;
use crate::version::Version;

/// The images `node`'s steps of `hop` stage by version: what its rollback
/// points the symlinks at.
pub fn kept_of(hop: &Hop, node: &str) -> Vec<(Component, Version)> {
    hop.steps()
        .filter(|s| s.node == node)
        .filter_map(|s| match &s.action {
            Action::Stage {
                component,
                expect: Some(v),
                ..
            } => Some((*component, v.clone())),
            _ => None,
        })
        .collect()
}

/// `<hub>/<component>/SHA256SUMS`.
pub fn sums_url(hub: &str, component: Component) -> String {
    format!(
        "{}/{}/SHA256SUMS",
        hub.trim_end_matches('/'),
        component.name()
    )
}

/// The one sha256 a `SHA256SUMS` text gives for `file` (`<hex>  <file>`,
/// or `<hex> *<file>` in binary mode), lower-cased; `None` when it gives
/// none, or two different ones (then neither is trusted, as
/// `crate::hub::HubVersions::from_sha256sums` does).
pub fn published_sum(sums: &str, file: &str) -> Option<String> {
    let mut found: Option<String> = None;
    for line in sums.lines() {
        let mut fields = line.split_whitespace();
        let (Some(hash), Some(name), None) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if name.strip_prefix('*').unwrap_or(name) != file || !is_sha256(hash) {
            continue;
        }
        let hash = hash.to_ascii_lowercase();
        match &found {
            Some(known) if *known != hash => return None,
            _ => found = Some(hash),
        }
    }
    found
}

/// Checks every kept image of `node`'s rollback in `hop`; the first that
/// cannot be vouched for refuses the rollback, naming the image, the
/// expected and the found digest, and what to do.
pub async fn verify(r: &Remote, hub: &str, hop: &Hop) -> anyhow::Result<()> {
    for (component, version) in kept_of(hop, r.node()) {
        verify_one(r, hub, component, &version).await?;
    }
    Ok(())
}

async fn verify_one(
    r: &Remote,
    hub: &str,
    component: Component,
    version: &Version,
) -> anyhow::Result<()> {
    let node = r.node();
    let name = component.name();
    let file = upgrade::image_file(name, &version.to_string());
    let path = format!("{}/{file}", upgrade::images_dir(name));
    let url = sums_url(hub, component);
    let nothing = format!(
        "The rollback of {node} was refused before it changed anything: its config, its symlink \
         and its boot are as they were"
    );
    let sums = r
        .check(&format!("read {url}"), &upgrade::fetch(&url))
        .await
        .with_context(|| {
            format!(
                "{node}: cannot read the hub's {url}, so the kept {path} cannot be checked before \
                 the node boots it. {nothing}; make the hub reachable from {node} and run the \
                 rollback again"
            )
        })?;
    let Some(want) = published_sum(&sums.stdout, &file) else {
        bail!(
            "{node}: the hub's {url} gives no single sha256 for {file}, so the kept {path} cannot \
             be checked before the node boots it (expected: none published; found: not computed). \
             {nothing}. Publish its sum on the hub (or copy the image and its sum back from a \
             source you trust), then run the rollback again"
        );
    };
    let out = r
        .check_root(
            &format!("sha256 of the kept {name} {version}"),
            &upgrade::image_sha256(name, &version.to_string(), &want),
        )
        .await
        .with_context(|| format!("{node}: cannot read the kept {path} to check it. {nothing}"))?;
    if out.stdout.trim() == "ok" {
        return Ok(());
    }
    let got = out
        .stdout
        .split_whitespace()
        .next()
        .filter(|g| is_sha256(g))
        .unwrap_or("(unreadable)");
    bail!(
        "{node}: the kept {path} has sha256 {got}, but the hub's {url} gives {want}: the image \
         was corrupted or tampered with since it was downloaded. {nothing}; the file is kept for \
         you to inspect. Replace it with {file} from the hub (checked against its SHA256SUMS), \
         then run the rollback again"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzkit;
    use proptest::prelude::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB";

    #[test]
    fn the_one_sum_published_for_the_exact_file_is_the_reference() {
        let file = "kubernetes-v1.36.3-x86-64.raw";
        let sums = format!(
            "{A}  kubernetes-v1.36.3-x86-64.raw.bak\n{A}  xkubernetes-v1.36.3-x86-64.raw\n\
             {B} *{file}\nnot a line\n"
        );
        assert_eq!(published_sum(&sums, file), Some(B.to_ascii_lowercase()));
        // The same sum twice is one sum; two different ones are none.
        let twice = format!("{A}  {file}\n{A}  {file}\n");
        assert_eq!(published_sum(&twice, file), Some(A.into()));
        let two = format!("{A}  {file}\n{B}  {file}\n");
        assert_eq!(published_sum(&two, file), None);
        // Not 64 hex characters, or not listed: no reference.
        assert_eq!(published_sum(&format!("{}  {file}\n", &A[1..]), file), None);
        assert_eq!(published_sum("", file), None);
    }

    #[test]
    fn a_rollback_checks_the_images_it_stages_by_version() {
        let v = |s: &str| s.parse::<Version>().unwrap();
        let r = crate::plan::Rollback {
            node: "w-1".into(),
            role: crate::inventory::Role::Worker,
            from: v("v1.37.1"),
            to: v("v1.36.3"),
            pin: Action::RemoveImages {
                versions: Vec::new(),
            },
            containerd: None,
        };
        let hop = crate::plan::rollback_hop(&r);
        assert_eq!(
            kept_of(&hop, "w-1"),
            vec![(Component::Kubernetes, v("v1.36.3"))]
        );
        assert!(kept_of(&hop, "w-2").is_empty());
    }

    #[test]
    fn a_mebibyte_of_sums_is_read_in_linear_time() {
        let line = format!("{A}  kubernetes-v1.36.3-x86-64.raw\n");
        fuzzkit::linear(&line, std::time::Duration::from_secs(3), |t| {
            published_sum(t, "kubernetes-v1.36.3-x86-64.raw");
        });
    }

    proptest! {
        #![proptest_config(fuzzkit::config())]
        #[test]
        fn any_sums_text_is_read_without_panic(text in fuzzkit::text()) {
            let _ = published_sum(&text, "kubernetes-v1.36.3-x86-64.raw");
        }
    }
}

//! The pinned sysupdate config, byte for byte what sysext-bakery publishes as
//! `kubernetes-vX.Y.conf`. Pinning the MatchPattern to one minor is what
//! keeps a node from staging a release kubeadm cannot reach in one step, so
//! rendering refuses anything that could come out floating or malformed.

use anyhow::{Context, bail, ensure};

use crate::version::Minor;

use super::model::Component;

/// The config for `component` pinned to `minor`, fetching from `hub`
/// (`<hub>/<component>/`). Ends with exactly one newline.
pub fn render_config(component: Component, minor: Minor, hub: &str) -> anyhow::Result<String> {
    let hub = checked_hub(hub)?;
    let name = component.name();
    let series = component.series(minor);
    let text = format!(
        "[Transfer]\n\
         Verify=false\n\
         \n\
         [Source]\n\
         Type=url-file\n\
         Path={hub}/{name}/\n\
         MatchPattern={name}-{series}.@v-%a.raw\n\
         \n\
         [Target]\n\
         InstancesMax=3\n\
         Type=regular-file\n\
         Path=/opt/extensions/{name}\n\
         CurrentSymlink=/etc/extensions/{name}.raw\n"
    );
    ensure_pinned(&text, component, minor)
        .with_context(|| format!("rendering the {name} {minor} config for hub {hub}"))?;
    Ok(text)
}

/// The same transfer without its `CurrentSymlink=` line: handed to
/// `systemd-sysupdate --definitions=DIR`, it downloads the image into the
/// same place and moves no symlink (the option is optional in sysupdate.d(5)),
/// so the node does not boot the new minor before its kubeadm step ran.
pub fn render_download_config(
    component: Component,
    minor: Minor,
    hub: &str,
) -> anyhow::Result<String> {
    let full = render_config(component, minor, hub)?;
    Ok(full
        .lines()
        .filter(|l| !l.starts_with("CurrentSymlink="))
        .map(|l| format!("{l}\n"))
        .collect())
}

/// The hub URL as it goes into `Path=`: without a trailing slash, and
/// refused when it could break the file or be read as a sysupdate specifier.
fn checked_hub(hub: &str) -> anyhow::Result<&str> {
    let trimmed = hub.trim_end_matches('/');
    if trimmed.is_empty() {
        bail!("the hub URL is empty");
    }
    if !trimmed.contains("://") {
        bail!("hub `{hub}` is not a URL (expected e.g. https://extensions.flatcar.org/extensions)");
    }
    if let Some(c) = trimmed
        .chars()
        .find(|c| c.is_whitespace() || c.is_control())
    {
        bail!(
            "hub `{}` contains {c:?}, which would break the config file",
            hub.escape_debug()
        );
    }
    if trimmed.contains('%') || trimmed.contains("@v") {
        bail!("hub `{hub}` contains `%` or `@v`, which sysupdate reads as a pattern or specifier");
    }
    Ok(trimmed)
}

/// The rendered text must carry exactly one MatchPattern, pinned to `minor`:
/// the guarantee the rest of fleetctl relies on, checked on the output
/// rather than assumed from the template.
fn ensure_pinned(text: &str, component: Component, minor: Minor) -> anyhow::Result<()> {
    let patterns: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("MatchPattern="))
        .collect();
    ensure!(
        patterns.len() == 1,
        "expected one MatchPattern, found {}",
        patterns.len()
    );
    let expected = format!("{}-{}.@v-%a.raw", component.name(), component.series(minor));
    ensure!(
        patterns[0] == expected,
        "MatchPattern `{}` is not pinned to {minor}",
        patterns[0]
    );
    ensure!(
        text.matches("@v").count() == 1,
        "the config would carry more than one version pattern"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BAKERY_1_37: &str = "[Transfer]
Verify=false

[Source]
Type=url-file
Path=https://extensions.flatcar.org/extensions/kubernetes/
MatchPattern=kubernetes-v1.37.@v-%a.raw

[Target]
InstancesMax=3
Type=regular-file
Path=/opt/extensions/kubernetes
CurrentSymlink=/etc/extensions/kubernetes.raw
";

    const LOCAL_1_30: &str = "[Transfer]
Verify=false

[Source]
Type=url-file
Path=http://10.0.0.1:8080/hub/kubernetes/
MatchPattern=kubernetes-v1.30.@v-%a.raw

[Target]
InstancesMax=3
Type=regular-file
Path=/opt/extensions/kubernetes
CurrentSymlink=/etc/extensions/kubernetes.raw
";

    const CONTAINERD_2_1: &str = "[Transfer]
Verify=false

[Source]
Type=url-file
Path=https://mirror.example/ext/containerd/
MatchPattern=containerd-2.1.@v-%a.raw

[Target]
InstancesMax=3
Type=regular-file
Path=/opt/extensions/containerd
CurrentSymlink=/etc/extensions/containerd.raw
";

    #[test]
    fn kubernetes_config_is_byte_identical_to_sysext_bakery() {
        let got = render_config(
            Component::Kubernetes,
            Minor::new(1, 37),
            "https://extensions.flatcar.org/extensions",
        )
        .unwrap();
        assert_eq!(got.as_bytes(), BAKERY_1_37.as_bytes());
        assert!(got.ends_with("raw\n") && !got.ends_with("\n\n"));
    }

    #[test]
    fn other_versions_and_hubs_render_the_same_shape() {
        let got = render_config(
            Component::Kubernetes,
            Minor::new(1, 30),
            "http://10.0.0.1:8080/hub",
        )
        .unwrap();
        assert_eq!(got, LOCAL_1_30);
        // A trailing slash on the hub must not produce `//kubernetes/`.
        let slashed = render_config(
            Component::Kubernetes,
            Minor::new(1, 30),
            "http://10.0.0.1:8080/hub/",
        )
        .unwrap();
        assert_eq!(slashed, LOCAL_1_30);
        let ctr = render_config(
            Component::Containerd,
            Minor::new(2, 1),
            "https://mirror.example/ext",
        )
        .unwrap();
        assert_eq!(ctr, CONTAINERD_2_1);
    }

    #[test]
    fn every_minor_is_pinned_in_the_match_pattern() {
        for minor in 20..45 {
            let m = Minor::new(1, minor);
            let text = render_config(Component::Kubernetes, m, "https://h.example").unwrap();
            let line = format!("MatchPattern=kubernetes-v1.{minor}.@v-%a.raw\n");
            assert!(text.contains(&line), "{text}");
            assert!(!text.contains("kubernetes-@v"));
        }
    }

    #[test]
    fn refuses_hubs_that_would_break_or_float_the_config() {
        for hub in [
            "",
            "/",
            "extensions.flatcar.org",
            "https://h.example/x\nMatchPattern=kubernetes-@v-%a.raw",
            "https://h.example/a b",
            "https://h.example/%a",
            "https://h.example/@v",
        ] {
            let err = render_config(Component::Kubernetes, Minor::new(1, 37), hub);
            assert!(err.is_err(), "hub {hub:?} should be refused");
        }
    }
}

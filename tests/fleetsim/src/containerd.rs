//! The containerd sysext as flatcar/sysext-bakery builds and names it
//! (`containerd.sysext/create.sh`): versions are containerd's release tags
//! without their `v` (`list_available_versions` strips it), so images are
//! `containerd-2.1.4-x86-64.raw`; the image holds the release's binaries in
//! `usr/bin`, the bakery's `containerd.service` and its
//! `multi-user.target.d` drop-in, `usr/share/containerd/config.toml`, and
//! the extension-release of `lib/generate.sh` (`RELOAD_SERVICES_ON_MERGE`).
//! The hub serves them under `containerd/` with a SHA256SUMS; a node has
//! them in `/opt/extensions/containerd/`, linked from
//! `/etc/extensions/containerd.raw`, with the OS's own containerd masked
//! (`/etc/extensions/containerd-flatcar.raw` → `/dev/null`), and
//! `/etc/sysupdate.containerd.d/containerd.conf` from the bakery's template.

use anyhow::{Result, bail};

use crate::image::{Entry, TOOL_DIR, TOOL_VERSION_ENV};

/// The sysupdate component and the extension's name.
pub const NAME: &str = "containerd";
pub const SYSUPDATE_DIR: &str = "/etc/sysupdate.containerd.d";
pub const IMAGES_DIR: &str = "/opt/extensions/containerd";
pub const CURRENT_SYMLINK: &str = "/etc/extensions/containerd.raw";
/// Flatcar's built-in containerd extension, masked when the sysext replaces it.
pub const OS_EXTENSION: &str = "/etc/extensions/containerd-flatcar.raw";
pub const RELEASE_FILE: &str = "usr/lib/extension-release.d/extension-release.containerd";

/// A containerd release as the bakery names it: `2.1.4`, no `v`.
pub fn check_version(v: &str) -> Result<()> {
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        bail!("`{v}` is not a containerd version as the bakery names them (`2.1.4`: no `v`)");
    }
    Ok(())
}

pub fn image_name(version: &str) -> String {
    format!("{NAME}-{version}-x86-64.raw")
}

/// `2.1`, for the pinned MatchPattern.
pub fn minor(version: &str) -> &str {
    version.rsplit_once('.').map_or(version, |(m, _)| m)
}

/// The bakery's pin for one minor series: `containerd-2.1.@v-%a.raw`.
pub fn pinned_pattern(version: &str) -> String {
    format!("{NAME}-{}.@v-%a.raw", minor(version))
}

/// The bakery's own `containerd.conf`: every version.
pub const FLOATING_PATTERN: &str = "containerd-@v-%a.raw";

/// The bakery's `sysupdate.conf.tmpl` for containerd, with `hub_url`.
pub fn sysupdate_conf(hub_url: &str, pattern: &str) -> String {
    format!(
        "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\nPath={hub_url}/{NAME}/\nMatchPattern={pattern}\n\n\
         [Target]\nInstancesMax=3\nType=regular-file\nPath={IMAGES_DIR}\nCurrentSymlink={CURRENT_SYMLINK}\n"
    )
}

const SERVICE: &str = "\
[Unit]
Description=containerd container runtime
After=network.target
[Service]
Delegate=yes
Environment=CONTAINERD_CONFIG=/usr/share/containerd/config.toml
ExecStart=/usr/bin/containerd --config ${CONTAINERD_CONFIG}
KillMode=process
Restart=always
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity
[Install]
WantedBy=multi-user.target
";

/// Everything in the image for `version`.
pub fn tree(version: &str) -> Vec<Entry> {
    let wrapper = format!(
        "#!/bin/sh\n\
         # containerd {version} as fleetsim emulates it (see docs/simulator.md, \"containerd\").\n\
         export {TOOL_VERSION_ENV}={version}\n\
         exec {TOOL_DIR}/containerd \"$@\"\n"
    );
    let entry = |path: &str, mode: u32, content: String| Entry {
        path: path.into(),
        mode,
        content,
    };
    vec![
        entry("usr/bin/containerd", 0o755, wrapper),
        entry(
            RELEASE_FILE,
            0o644,
            "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\nEXTENSION_RELOAD_MANAGER=1\n".into(),
        ),
        entry("usr/lib/systemd/system/containerd.service", 0o644, SERVICE.into()),
        entry(
            "usr/lib/systemd/system/multi-user.target.d/10-containerd-service.conf",
            0o644,
            "[Unit]\nUpholds=containerd.service\n".into(),
        ),
        entry(
            "usr/share/containerd/config.toml",
            0o644,
            "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = true\n".into(),
        ),
    ]
}

/// The containerd Flatcar itself ships (its built-in `containerd-flatcar`
/// sysext), which a node runs when it has no bakery containerd: the
/// bakery's image, merged above it, takes its place.
pub const FLATCAR_CONTAINERD: &str = "1.7.23";

/// `/usr/bin/containerd` of the OS's own containerd.
pub fn os_wrapper() -> String {
    format!(
        "#!/bin/sh\n\
         # Flatcar's own containerd {FLATCAR_CONTAINERD} as fleetsim emulates it.\n\
         export {TOOL_VERSION_ENV}={FLATCAR_CONTAINERD}\n\
         exec {TOOL_DIR}/containerd \"$@\"\n"
    )
}

/// The version a merged image's wrapper runs (its `FLEETSIM_TOOL_VERSION`).
pub fn wrapper_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("export {TOOL_VERSION_ENV}=")))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_and_pinned_as_the_bakery_does() {
        assert_eq!(image_name("2.1.9"), "containerd-2.1.9-x86-64.raw");
        assert_eq!(pinned_pattern("2.1.9"), "containerd-2.1.@v-%a.raw");
        assert!(check_version("v2.1.4").is_err(), "the bakery strips the v");
        check_version("2.1.4").unwrap();
        let conf = sysupdate_conf("http://127.0.0.1:1", FLOATING_PATTERN);
        assert!(
            conf.contains(
                "Path=http://127.0.0.1:1/containerd/\nMatchPattern=containerd-@v-%a.raw\n"
            )
        );
        assert!(conf.ends_with(
            "Path=/opt/extensions/containerd\nCurrentSymlink=/etc/extensions/containerd.raw\n"
        ));
        let t = tree("2.1.4");
        assert_eq!(wrapper_version(&t[0].content).as_deref(), Some("2.1.4"));
    }
}

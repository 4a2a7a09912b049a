//! What `fleetsim up` checks before it builds anything: root, the host's
//! tools, loop devices and squashfs, and a state directory overlayfs can
//! use.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::layout::OVERLAID;

pub(super) fn preflight() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("fleetsim up must run as root: it creates namespaces and mounts overlays (try sudo)");
    }
    for (path, package) in [
        ("/usr/sbin/sshd", "openssh-server"),
        ("/usr/bin/ssh-keygen", "openssh-client"),
        ("/usr/bin/unshare", "util-linux"),
        ("/usr/bin/mount", "mount"),
        ("/usr/bin/sudo", "sudo"),
        ("/usr/bin/mksquashfs", "squashfs-tools"),
        ("/usr/bin/unsquashfs", "squashfs-tools"),
        crate::etcd_pod::HOST_BINARIES[0],
        crate::etcd_pod::HOST_BINARIES[1],
    ] {
        if !Path::new(path).exists() {
            bail!("{path} is missing: apt-get install -y {package}");
        }
    }
    // Nodes loop-mount their sysext images; there is no fake to fall back
    // on, so a machine that cannot must say so before anything starts.
    if let Err(e) = File::options()
        .read(true)
        .write(true)
        .open("/dev/loop-control")
    {
        bail!(
            "loop devices are not available here: opening /dev/loop-control: {e} \
             (every node loop-mounts its kubernetes sysext image; a container needs them passed in)"
        );
    }
    if !kernel_has("squashfs") {
        // Built as a module and not loaded yet: mount would load it, but say
        // so now if it cannot be loaded at all.
        let _ = Command::new("modprobe").args(["-q", "squashfs"]).status();
        if !kernel_has("squashfs") {
            bail!(
                "this kernel cannot mount squashfs (not in /proc/filesystems, and modprobe squashfs failed): \
                 the nodes' sysext images are squashfs"
            );
        }
    }
    Ok(())
}

/// A file system type the running kernel supports now.
fn kernel_has(fs_type: &str) -> bool {
    fs::read_to_string("/proc/filesystems")
        .map(|t| {
            t.lines()
                .any(|l| l.split_whitespace().last() == Some(fs_type))
        })
        .unwrap_or(false)
}

/// Creates the state directory and refuses places overlayfs cannot use.
pub(super) fn prepare_dir(dir: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let text = dir.to_string_lossy();
    if text.contains([',', ':', ' ', '\t', '\n']) {
        bail!(
            "state directory {text}: overlayfs options cannot carry `,`, `:` or spaces; pick another --dir"
        );
    }
    if let Some(top) = OVERLAID.iter().find(|t| dir.starts_with(format!("/{t}"))) {
        bail!(
            "state directory {text} is under /{top}, which every node overlays (its layers would overlap): use a directory under /tmp"
        );
    }
    for held in ["cluster", "nodes"] {
        if dir.join(held).exists() {
            bail!("{text} already holds a fleet ({held}/ exists): use an empty --dir");
        }
    }
    Ok(dir)
}

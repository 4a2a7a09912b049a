//! The root image of a real-OS node: `tests/fleetsim/rootfs.sh`, embedded in
//! the binary so `fleetsim up` builds (or finds in its cache) the same root
//! the script would, keyed by the script's own hash.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::layout::FleetDir;

/// The recipe; its sha256 names the cached root.
pub const SCRIPT: &str = include_str!("../../rootfs.sh");

/// Where the supervisor writes the root's path for realos-init.
pub fn root_file(fleet: &FleetDir) -> PathBuf {
    fleet.root().join("realos-root")
}

/// Builds the root unless cached; returns its path. The first build runs
/// debootstrap (minutes); its progress goes to our stderr.
pub fn ensure(fleet: &FleetDir) -> Result<PathBuf> {
    let script = fleet.root().join("bin").join("rootfs.sh");
    fs::create_dir_all(fleet.root().join("bin")).context("creating DIR/bin")?;
    fs::write(&script, SCRIPT).with_context(|| format!("writing {}", script.display()))?;
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", script.display()))?;
    let out = Command::new("/bin/bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running rootfs.sh (the real-OS node root)")?;
    if !out.status.success() {
        bail!(
            "building the real-OS node root failed ({}); see the rootfs.sh lines above; \
             it needs root, debootstrap (apt-get install debootstrap) and the Debian mirror",
            out.status
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let root = PathBuf::from(text.lines().last().unwrap_or("").trim());
    check(&root)?;
    fs::write(root_file(fleet), root.as_os_str().as_encoded_bytes())
        .context("writing DIR/realos-root")?;
    Ok(root)
}

/// A finished root: what the script marks complete, with systemd in it.
pub fn check(root: &Path) -> Result<()> {
    if !root.is_absolute() || !root.join(".fleetsim-rootfs-complete").is_file() {
        bail!(
            "{} is not a finished real-OS node root (rootfs.sh marks one with .fleetsim-rootfs-complete)",
            root.display()
        );
    }
    if !root.join("usr/lib/systemd/systemd").is_file() {
        bail!("{} has no /usr/lib/systemd/systemd", root.display());
    }
    Ok(())
}

/// The root the supervisor chose for this fleet.
pub fn read(fleet: &FleetDir) -> Result<PathBuf> {
    let path = root_file(fleet);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let root = PathBuf::from(text.trim());
    check(&root)?;
    Ok(root)
}

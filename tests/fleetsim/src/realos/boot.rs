//! What the supervisor records once a real-OS node is up. On an emulated
//! node, node-init merges the sysext and writes the `(boot)` event; on a
//! real-OS node the real systemd-sysext merged it (systemd-sysext.service
//! runs before sysinit.target, so before ssh.service), and the supervisor
//! reads what was merged through `/proc/<init>/root`, the node's own view.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::layout::FleetDir;
use crate::state::{Event, NodeBoot, Shared};

/// The versions merged into the node's `/usr`, read through its root.
pub struct Merged {
    pub kubernetes: Option<String>,
    pub containerd: Option<String>,
}

pub fn merged(init_pid: i32) -> Merged {
    let root = PathBuf::from(format!("/proc/{init_pid}/root"));
    let kubernetes = fs::read_to_string(root.join(crate::image::VERSION_FILE))
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|v| !v.is_empty());
    let containerd = fs::read_to_string(root.join("usr/bin/containerd"))
        .ok()
        .and_then(|t| crate::containerd::wrapper_version(&t))
        .filter(|v| v != crate::containerd::FLATCAR_CONTAINERD);
    Merged {
        kubernetes,
        containerd,
    }
}

/// Writes the merged versions into the boot record (for the supervisor,
/// the harness and `fleetsim ctl`). It is replaced, not rewritten in place,
/// so no reader sees it half-written; the node's read-only bind keeps the
/// copy of boot time (its `kubernetes` empty: no tool inside reads it).
pub fn set_versions(node_json: &Path, merged: &Merged) -> Result<()> {
    let bytes = fs::read(node_json).with_context(|| format!("reading {}", node_json.display()))?;
    let mut boot: NodeBoot = serde_json::from_slice(&bytes)
        .with_context(|| format!("parsing {}", node_json.display()))?;
    boot.kubernetes = merged.kubernetes.clone().unwrap_or_default();
    boot.containerd = merged.containerd.clone().unwrap_or_default();
    let json = serde_json::to_vec_pretty(&boot).context("serializing the boot record")?;
    let tmp = node_json.with_extension("json.tmp");
    fs::write(&tmp, &json).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, node_json).with_context(|| format!("replacing {}", node_json.display()))
}

/// The `(boot)` event with the merged version, as node-init records it.
pub fn record(fleet: &FleetDir, name: &str, merged: &Merged, notes: &[String]) -> Result<()> {
    let mut notes: Vec<String> = notes.to_vec();
    if merged.kubernetes.is_none() {
        notes.push("no kubernetes sysext merged (systemd-sysext merged none; see journalctl -u systemd-sysext on the node)".into());
    }
    let result = if notes.is_empty() {
        "ok".to_string()
    } else {
        format!("warning: {}", notes.join("; "))
    };
    let pins = fleet
        .in_upper(name, crate::provision::SYSUPDATE_DIR)
        .map(|d| crate::pins::kubernetes_pins(&d))
        .unwrap_or_default();
    let event = Event {
        t: crate::state::now(),
        node: name.to_string(),
        argv: vec!["(boot)".into()],
        result,
        pins,
        version: merged.kubernetes.clone(),
        ..Default::default()
    };
    Shared::new(fleet.cluster()).record(&event)
}

/// A scenario may start a node with an image staged but not running (the
/// link already points at it). systemd-sysext merges whatever the link
/// points at, so for the first boot the link points at the running image
/// (`image`, from `InitConfig::sysext_image`), and [`restage`] moves it
/// back once the node is up, as sysupdate would have after that boot.
/// Returns the staged target to restore, if the link had one.
pub fn pin_first_image(fleet: &FleetDir, name: &str, image: &str) -> Result<Option<String>> {
    let Some(link) = fleet.in_upper(name, crate::provision::CURRENT_SYMLINK) else {
        return Ok(None);
    };
    let staged = match fs::read_link(&link) {
        Ok(t) => t.to_string_lossy().into_owned(),
        Err(_) => return Ok(None),
    };
    if Path::new(&staged).file_name() == Path::new(image).file_name() {
        return Ok(None);
    }
    replace_link(&link, image)?;
    Ok(Some(staged))
}

/// Points the running node's link at `target` again, through the node's
/// own root (an overlay write, not one under a mounted overlay's feet).
pub fn restage(init_pid: i32, target: &str) -> Result<()> {
    let link = PathBuf::from(format!("/proc/{init_pid}/root"))
        .join(crate::provision::CURRENT_SYMLINK.trim_start_matches('/'));
    replace_link(&link, target)
}

fn replace_link(link: &Path, target: &str) -> Result<()> {
    let tmp = link.with_extension("raw.fleetsim-tmp");
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .with_context(|| format!("linking {} → {target}", tmp.display()))?;
    fs::rename(&tmp, link).with_context(|| format!("replacing {}", link.display()))
}

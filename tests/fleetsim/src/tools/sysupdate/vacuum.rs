//! systemd-sysupdate's clean-up, as systemd v255–v257 does it: `context_apply`
//! (src/sysupdate/sysupdate.c) calls `context_vacuum(c, 1, us->version)`
//! before any download, and `transfer_vacuum` (src/sysupdate/
//! sysupdate-transfer.c) removes the target's `.#` temporaries, then the
//! oldest instances until at most `InstancesMax - 1` remain, sparing only
//! `ProtectVersion=` and the version being installed — not the image
//! `CurrentSymlink=` points at. `UINT64_MAX` keeps every instance.

use std::fs;

use super::config::Transfer;
use super::{Env, Glyphs, Instance, Report};

/// `transfer_vacuum(t, space=1, protected)`: removes leftover `.#`
/// temporaries, then the oldest instances until at most InstancesMax-1
/// remain. Only `ProtectVersion=` and `protected` (the version being
/// installed) are spared: the image `CurrentSymlink=` points at, the one
/// the node booted, is not. Returns how many it removed, or the error line.
pub(super) fn vacuum(
    env: &Env,
    t: &Transfer,
    installed: &[Instance],
    protected: &str,
    g: Glyphs,
    rep: &mut Report,
) -> Result<usize, String> {
    remove_temporaries(env, t);
    let space = 1u64;
    let limit = if t.instances_max == u64::MAX {
        usize::MAX
    } else if space >= t.instances_max {
        return Err(
            "Asked to delete all possible instances, can't allow that. One instance must always remain."
                .to_string(),
        );
    } else {
        usize::try_from(t.instances_max - space).unwrap_or(usize::MAX)
    };
    let mut remaining: Vec<&Instance> = installed.iter().collect();
    let mut removed = 0;
    while remaining.len() > limit {
        let Some(pos) = remaining
            .iter()
            .position(|i| i.version != protected && !t.protected_versions.contains(&i.version))
        else {
            break;
        };
        let old = remaining.remove(pos);
        let shown = format!("{}/{}", t.target_path, old.file);
        rep.log(format!(
            "{}Removing old '{shown}' (regular-file).",
            g.recycle
        ));
        match fs::remove_file(env.path(&shown)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(format!(
                    "Failed to make room, deleting '{shown}' failed: {e}"
                ));
            }
        }
        removed += 1;
    }
    Ok(removed)
}

/// `transfer_remove_temporary`: every `.#` entry of the target directory.
fn remove_temporaries(env: &Env, t: &Transfer) {
    let Ok(entries) = fs::read_dir(env.path(&t.target_path)) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        if e.file_name().to_string_lossy().starts_with(".#") {
            let _ = fs::remove_file(e.path());
        }
    }
}

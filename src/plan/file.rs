//! The saved plan: what `plan` hands to `apply`. YAML so an operator can
//! read (and review in a change ticket) exactly what will run; written
//! atomically so an interrupted save never leaves half a plan for apply.
//! This is the only file I/O in the plan module.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::inventory::Inventory;

use super::model::Plan;

/// Bumped when the saved shape changes incompatibly.
/// 2: hops are phases in kubeadm's order (download, kubeadm, stage, roll).
const FORMAT: u32 = 2;

const HEADER: &str = "\
# fleetctl plan: the steps `fleetctl apply` runs, in order.
# It was computed from the fleet state fingerprinted below: apply refuses it
# if a node rebooted, staged something else or had its sysupdate config
# changed since. Do not edit it; run `fleetctl plan` again instead.
";

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct SavedPlan {
    format: u32,
    plan: Plan,
}

/// `.fleetctl/plan.yaml` beside the inventory.
pub fn default_path(inventory: &Inventory) -> PathBuf {
    inventory.state_dir().join("plan.yaml")
}

/// Writes the plan to `path` (creating its directory), replacing any
/// previous plan only once the new one is fully on disk.
pub fn save(plan: &Plan, path: &Path) -> anyhow::Result<()> {
    let saved = SavedPlan {
        format: FORMAT,
        plan: plan.clone(),
    };
    let yaml = serde_saphyr::to_string(&saved).context("serialising the plan to YAML")?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir)
        .with_context(|| format!("creating {} for the saved plan", dir.display()))?;
    let file_name = path
        .file_name()
        .with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        file_name.to_string_lossy(),
        std::process::id()
    ));
    write_synced(&tmp, &format!("{HEADER}{yaml}"))
        .with_context(|| format!("writing the plan to {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| {
        let _ = fs::remove_file(&tmp);
        format!("moving {} to {}", tmp.display(), path.display())
    })
}

fn write_synced(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// Reads a plan saved by [`save`].
pub fn load(path: &Path) -> anyhow::Result<Plan> {
    let text = fs::read_to_string(path).with_context(|| {
        format!(
            "reading the saved plan {} (run `fleetctl plan` first)",
            path.display()
        )
    })?;
    let saved: SavedPlan = serde_saphyr::from_str(&text).with_context(|| {
        format!(
            "{} is not a plan fleetctl can read; run `fleetctl plan` again",
            path.display()
        )
    })?;
    if saved.format != FORMAT {
        bail!(
            "{} has plan format {}, this fleetctl reads format {FORMAT}; \
             run `fleetctl plan` again with this version",
            path.display(),
            saved.format
        );
    }
    Ok(saved.plan)
}

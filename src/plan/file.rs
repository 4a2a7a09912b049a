//! The saved plan: what `plan` hands to `apply`. YAML so an operator can
//! read (and review in a change ticket) exactly what will run; written
//! atomically so an interrupted save never leaves half a plan for apply.
//! This is the only file I/O in the plan module. The temporary file is
//! created new, never through a link, 0600 (crate::local_fs); the state
//! directory `.fleetctl` must be the user's own.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::inventory::Inventory;
use crate::local_fs;

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

/// The name of the state directory ([`Inventory::state_dir`]).
const STATE_DIR: &str = ".fleetctl";

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
    if dir.file_name().is_some_and(|n| n == STATE_DIR) {
        local_fs::private_dir(&dir).context("the state directory for the saved plan")?;
    } else {
        fs::create_dir_all(&dir)
            .with_context(|| format!("creating {} for the saved plan", dir.display()))?;
    }
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

fn write_synced(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut f = local_fs::create_new_or_fail(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(())
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::*;
    use crate::plan::testkit::{fleet, hub};

    fn a_plan() -> Plan {
        let state = fleet("v1.34.2").cp("cp-1", "v1.34.2").build();
        crate::plan::plan(&state, &"v1.35".parse().unwrap(), &hub(&[(34, 2), (35, 3)])).unwrap()
    }

    #[test]
    fn the_plan_is_private_and_never_written_through_a_planted_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".fleetctl");
        let path = dir.join("plan.yaml");
        std::fs::create_dir(&dir).unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let tmp_name = dir.join(format!(".plan.yaml.tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp_name).unwrap();
        let err = format!("{:#}", save(&a_plan(), &path).unwrap_err());
        assert!(err.contains("already exists (or is a link)"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!path.exists());

        std::fs::remove_file(&tmp_name).unwrap();
        save(&a_plan(), &path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_state_directory_others_can_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".fleetctl");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = format!("{:#}", save(&a_plan(), &dir.join("plan.yaml")).unwrap_err());
        assert!(err.contains("is writable by its group or others"), "{err}");
        assert!(!dir.join("plan.yaml").exists());
    }
}

//! The cgroup hierarchy a node booted with, as `/sys/fs/cgroup` shows it,
//! independent of the host running the fleet: every node is on cgroup v2
//! unless its scenario says `cgroup_v1: true` (a Flatcar node installed
//! before 2969.0.0, or booted with `systemd.unified_cgroup_hierarchy=0`).
//!
//! On cgroup v2 `/sys/fs/cgroup` is the unified hierarchy, whose root has
//! `cgroup.controllers`; on v1 (systemd's legacy or hybrid layout) it is a
//! tmpfs holding one directory per controller hierarchy, plus `systemd` and,
//! hybrid, `unified`, and no `cgroup.controllers` at its root. Tools tell
//! them apart by that root (runc's `IsCgroup2UnifiedMode` by the file
//! system's magic; fleetctl and the sim's kubelet by `cgroup.controllers`).
//! node-init mounts a tmpfs there in the node's own mount namespace and
//! fills it with [`populate`]; nothing inside is a live cgroup.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// Where every node's cgroup hierarchy is mounted.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// Present at the root of a cgroup v2 hierarchy only.
pub const CONTROLLERS: &str = "/sys/fs/cgroup/cgroup.controllers";

/// The controllers a Flatcar kernel enables (`cat cgroup.controllers`).
const V2_CONTROLLERS: &str = "cpuset cpu io memory hugetlb pids rdma misc\n";
/// systemd's v1 layout (hybrid: `unified` holds the v2 hierarchy systemd uses).
const V1_HIERARCHIES: &[&str] = &[
    "blkio",
    "cpu,cpuacct",
    "cpuset",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "misc",
    "net_cls,net_prio",
    "perf_event",
    "pids",
    "rdma",
    "systemd",
    "unified",
];

/// Fills `root`'s `/sys/fs/cgroup` (an empty directory) as a node on
/// cgroup v1 or v2 shows it.
pub fn populate(root: &Path, v1: bool) -> Result<()> {
    let dir = root.join(CGROUP_ROOT.trim_start_matches('/'));
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if v1 {
        for h in V1_HIERARCHIES {
            fs::create_dir_all(dir.join(h))
                .with_context(|| format!("creating {}/{h}", dir.display()))?;
        }
        fs::write(dir.join("unified/cgroup.controllers"), "")
            .with_context(|| format!("writing {}/unified", dir.display()))?;
    } else {
        for (file, content) in [
            ("cgroup.controllers", V2_CONTROLLERS),
            ("cgroup.subtree_control", "cpuset cpu io memory pids\n"),
            ("cgroup.procs", ""),
        ] {
            fs::write(dir.join(file), content)
                .with_context(|| format!("writing {}/{file}", dir.display()))?;
        }
        for slice in ["init.scope", "system.slice", "user.slice"] {
            fs::create_dir_all(dir.join(slice))
                .with_context(|| format!("creating {}/{slice}", dir.display()))?;
        }
    }
    Ok(())
}

/// Whether the node whose root is `root` runs cgroup v2.
pub fn is_v2(root: &Path) -> bool {
    root.join(CONTROLLERS.trim_start_matches('/')).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_has_per_controller_hierarchies_and_no_root_controllers() {
        let v1 = tempfile::tempdir().unwrap();
        populate(v1.path(), true).unwrap();
        assert!(!is_v2(v1.path()));
        assert!(v1.path().join("sys/fs/cgroup/memory").is_dir());
        let v2 = tempfile::tempdir().unwrap();
        populate(v2.path(), false).unwrap();
        assert!(is_v2(v2.path()));
        assert!(!v2.path().join("sys/fs/cgroup/memory").exists());
    }
}

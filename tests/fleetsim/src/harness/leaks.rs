//! What a fleet leaves on the host, for the tests that prove it leaves
//! nothing: its processes (by command line and PID namespace), the loop
//! devices its sysext images are attached to, and mounts under its
//! directory.

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// A process, identified so that a reused pid is not mistaken for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    /// Start time in clock ticks since boot (/proc/PID/stat field 22).
    pub start: u64,
    pub cmdline: String,
}

/// Every process that belongs to the fleet in `dir`: whatever mentions the
/// directory on its command line (supervisor, unshare, node-init) and every
/// process in a node's PID namespace (sshd, sessions).
pub fn fleet_processes(dir: &Path) -> Vec<Proc> {
    let needle = dir.to_string_lossy().to_string();
    let all = all_processes();
    let own_ns = pid_namespace(std::process::id());
    // node-init's unshare parent matches too, but lives in our namespace.
    let node_ns: Vec<String> = all
        .iter()
        .filter(|p| p.cmdline.contains(&needle) && p.cmdline.contains("node-init"))
        // A real-OS node's init has exec'd systemd: found as unshare's child.
        .chain(all.iter().filter(|p| {
            p.cmdline.starts_with("/usr/lib/systemd/systemd")
                && unshare_child_of(&all, p.pid, &needle)
        }))
        .filter_map(|p| pid_namespace(p.pid))
        .filter(|ns| Some(ns) != own_ns.as_ref())
        .collect();
    all.into_iter()
        .filter(|p| {
            p.cmdline.contains(&needle)
                || pid_namespace(p.pid).is_some_and(|ns| node_ns.contains(&ns))
        })
        .collect()
}

/// Whether `pid`'s parent is the fleet's `unshare … realos-init`.
fn unshare_child_of(all: &[Proc], pid: u32, needle: &str) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ppid = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse::<u32>().ok());
    all.iter().any(|p| {
        Some(p.pid) == ppid && p.cmdline.contains(needle) && p.cmdline.contains("realos-init")
    })
}

/// Those of `procs` that still exist (same pid, same start time).
pub fn still_running(procs: &[Proc]) -> Vec<Proc> {
    procs
        .iter()
        .filter(|p| proc_start(p.pid) == Some(p.start))
        .cloned()
        .collect()
}

pub(super) fn all_processes() -> Vec<Proc> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            Some(Proc {
                pid,
                start: proc_start(pid)?,
                cmdline: cmdline.trim().to_string(),
            })
        })
        .collect()
}

fn proc_start(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields resume after ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn pid_namespace(pid: u32) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/ns/pid"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// A loop device and the inode of the file behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopDevice {
    pub name: String,
    pub inode: u64,
}

/// Loop devices backed by an image on the node disks of the fleet in `dir`.
/// Inside a node the backing file's path is the node's own (`/opt/…`), the
/// same for every node and fleet, so they are told apart by inode.
pub fn fleet_loop_devices(dir: &Path) -> Result<Vec<LoopDevice>> {
    let mut inodes = std::collections::BTreeSet::new();
    let nodes = dir.join("nodes");
    for node in fs::read_dir(&nodes).with_context(|| format!("listing {}", nodes.display()))? {
        let disk = node.context("listing the nodes")?.path().join("upper");
        collect_images(&disk, &mut inodes);
    }
    Ok(loop_devices()?
        .into_iter()
        .filter(|d| inodes.contains(&d.inode))
        .collect())
}

/// Those of `devices` still attached (same name, same backing inode).
pub fn still_attached(devices: &[LoopDevice]) -> Result<Vec<LoopDevice>> {
    let now = loop_devices()?;
    Ok(devices
        .iter()
        .filter(|d| now.contains(d))
        .cloned()
        .collect())
}

fn collect_images(dir: &Path, inodes: &mut std::collections::BTreeSet<u64>) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let Ok(meta) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            collect_images(&e.path(), inodes);
        } else if meta.is_file() && e.path().extension().is_some_and(|x| x == "raw") {
            inodes.insert(meta.ino());
        }
    }
}

fn loop_devices() -> Result<Vec<LoopDevice>> {
    let out = Command::new("losetup")
        .args(["--list", "--json", "-O", "NAME,BACK-INO"])
        .output()
        .context("running losetup")?;
    if !out.status.success() {
        bail!(
            "losetup --list: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    if out.stdout.iter().all(u8::is_ascii_whitespace) {
        return Ok(Vec::new());
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing losetup --json")?;
    let devices = doc["loopdevices"].as_array().cloned().unwrap_or_default();
    Ok(devices
        .iter()
        .filter_map(|d| {
            Some(LoopDevice {
                name: d["name"].as_str()?.to_string(),
                inode: d["back-ino"].as_u64()?,
            })
        })
        .collect())
}

/// Lines of the host's mount table that mention `dir`.
pub fn host_mounts_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().to_string();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&needle))
        .map(String::from)
        .collect()
}

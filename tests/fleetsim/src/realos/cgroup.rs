//! Each boot of a real-OS node runs in a fresh cgroup of its own, created
//! under the supervisor's own cgroup in the host's cgroup2 hierarchy and
//! made the root of the node's cgroup namespace (`unshare --cgroup` runs
//! inside it). systemd in the node then owns that subtree as a container
//! manager's payload would (systemd docs/CGROUP_DELEGATION.md). Nothing
//! depends on the host's layout: it only needs a cgroup2 hierarchy mounted
//! somewhere (hybrid hosts mount it on /sys/fs/cgroup/unified), and no
//! controllers are required (systemd runs without them; none are enabled
//! in a cgroup that has processes, like the supervisor's).

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where the host mounts cgroup2, from /proc/self/mountinfo.
pub fn hierarchy() -> Result<PathBuf> {
    let text =
        fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    for line in text.lines() {
        // `id parent maj:min root mountpoint options... - fstype source superopts`
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() == Some("cgroup2")
            && let Some(point) = left.split_whitespace().nth(4)
        {
            return Ok(PathBuf::from(point.replace("\\040", " ")));
        }
    }
    bail!(
        "no cgroup2 hierarchy is mounted on this host; real-OS nodes need one (mount -t cgroup2 none /sys/fs/cgroup/unified)"
    )
}

/// The supervisor's own cgroup2 path (`0::/path` in /proc/self/cgroup).
fn own() -> Result<String> {
    let text = fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_start_matches('/').to_string())
        .context("/proc/self/cgroup has no cgroup2 line (0::)")
}

/// A node's cgroup for one boot.
#[derive(Debug, Clone)]
pub struct NodeCgroup {
    pub path: PathBuf,
    procs: CString,
}

impl NodeCgroup {
    /// Creates `fleetsim-<supervisor pid>-<node>` beside nothing else of ours.
    pub fn create(node: &str) -> Result<NodeCgroup> {
        let base = hierarchy()?.join(own()?);
        sweep_orphans(&base);
        let path = base.join(format!("fleetsim-{}-{node}", std::process::id()));
        if path.exists() {
            remove_tree(&path)?;
        }
        fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
        let procs = CString::new(path.join("cgroup.procs").as_os_str().as_bytes())
            .context("cgroup path contains a NUL byte")?;
        Ok(NodeCgroup { path, procs })
    }

    /// Moves the calling process into this cgroup. Async-signal-safe (for
    /// `pre_exec`): open, write and close only.
    pub fn enter_raw(&self) -> std::io::Result<()> {
        // SAFETY: a valid NUL-terminated path; the fd is closed below.
        let fd = unsafe { libc::open(self.procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // "0" means the writing process.
        // SAFETY: writes one valid byte from a static buffer.
        let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        let err = std::io::Error::last_os_error();
        // SAFETY: fd was opened above.
        unsafe { libc::close(fd) };
        if n != 1 {
            return Err(err);
        }
        Ok(())
    }

    /// Every pid in the node (this cgroup and below).
    pub fn pids(&self) -> Vec<i32> {
        let mut out = Vec::new();
        collect_pids(&self.path, &mut out);
        out
    }

    /// Removes the (empty) tree once the node's namespace is gone.
    pub fn remove(&self) -> Result<()> {
        remove_tree(&self.path)
    }
}

/// Removes the cgroups a killed supervisor could not (`fleetsim-<pid>-…`
/// whose supervisor is gone); empty once its nodes died with it.
fn sweep_orphans(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("fleetsim-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = remove_tree(&e.path());
        }
    }
}

fn collect_pids(dir: &Path, out: &mut Vec<i32>) {
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        out.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
    }
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_pids(&e.path(), out);
            }
        }
    }
}

/// rmdir bottom-up (cgroupfs directories only go with rmdir). A cgroup whose
/// last process just died may be busy for a moment: retried briefly.
fn remove_tree(dir: &Path) -> Result<()> {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path())?;
            }
        }
    }
    let mut last = None;
    for _ in 0..50 {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(last.map_or_else(|| anyhow::anyhow!("unknown error"), anyhow::Error::from))
        .with_context(|| format!("removing cgroup {}", dir.display()))
}

/// Proportional set size of `pids`, in KiB (`Pss:` of smaps_rollup): the
/// memory the node costs, shared pages split among their users.
pub fn pss_kib(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|p| fs::read_to_string(format!("/proc/{p}/smaps_rollup")).ok())
        .filter_map(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .sum()
}

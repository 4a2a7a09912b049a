//! `fleetsim realos-init`: PID 1 of a real-OS node until it execs systemd.
//! The supervisor starts it with `unshare --mount --pid --fork --uts
//! --cgroup --mount-proc --propagation private`, already inside the node's
//! own cgroup ([`super::cgroup`]), so the cgroup namespace's root is that
//! cgroup. It assembles the node's root the way issue 18's recipe does:
//!
//! 1. the cached root read-only, with an overlay per top-level directory the
//!    node changes (lower: the root's directory, upper: the node's disk,
//!    the same `DIR/nodes/NAME/upper/TOP` provisioning writes);
//! 2. a fresh `/proc`, a read-only `/sys` with `cgroup2` on `/sys/fs/cgroup`,
//!    tmpfs `/run` and `/tmp`, the host's `/dev` (loop devices appear there
//!    when systemd-sysext attaches an image) but for `/dev/console`, which
//!    is the node's `dev-console.log` (below, in `assemble`);
//! 3. the shared cluster directory, the boot record and the boot id, as
//!    node-init binds them;
//! 4. `pivot_root` (not `chroot`: systemd checks it runs in a real root), then
//!    `/` made recursively shared: systemd-sysext 257 merges in a child mount
//!    namespace and the merge only propagates back to the node if `/` is
//!    shared (systemd `src/sysext/sysext.c`: `merge()` forks `(sd-merge)`
//!    with `FORK_NEW_MOUNTNS` and bind-mounts the overlay onto the hierarchy
//!    from there);
//! 5. exec `/usr/lib/systemd/systemd` with `container=other`, which tells
//!    systemd it runs in a container (systemd `src/basic/virt.c`,
//!    `detect_container()` reads PID 1's `container=` environment).

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::sys::{bind, mount, pivot_root, set_hostname};
use crate::layout::{FleetDir, OVERLAID};
use crate::node_init::InitConfig;
use crate::state::{CLUSTER_DIR, NODE_FILE};

const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";
pub const SYSTEMD: &str = "/usr/lib/systemd/systemd";

pub fn run(dir: &Path, name: &str) -> Result<()> {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        bail!(
            "realos-init must be PID 1 of a new PID namespace; the supervisor starts it (fleetsim up with os_layer: systemd)"
        );
    }
    let fleet = FleetDir::new(dir);
    let config: InitConfig = {
        let path = fleet.init_json(name);
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))?
    };
    let rootfs = super::rootfs::read(&fleet)?;
    set_hostname(&config.name)?;
    let new_root = fleet.node(name).join("root");
    fs::create_dir_all(&new_root).with_context(|| format!("creating {}", new_root.display()))?;
    assemble(&fleet, name, &rootfs, &new_root)?;
    if config.reboot_required {
        let flag = new_root.join("run/reboot-required");
        fs::write(&flag, b"").context("creating /run/reboot-required")?;
    }
    pivot_root(&new_root)?;
    let shared = libc::MS_REC | libc::MS_SHARED;
    mount("none", Path::new("/"), None, shared, None)?;
    let err = Command::new(SYSTEMD)
        .env_clear()
        .env("container", "other")
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin")
        .exec();
    bail!("exec {SYSTEMD}: {err}")
}

fn assemble(fleet: &FleetDir, name: &str, rootfs: &Path, root: &Path) -> Result<()> {
    bind(rootfs, root, false, true)?;
    for top in OVERLAID {
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            rootfs.join(top).display(),
            fleet.upper(name, top).display(),
            fleet.work(name, top).display()
        );
        mount(
            "overlay",
            &root.join(top),
            Some("overlay"),
            0,
            Some(&options),
        )?;
    }
    let nosuid = libc::MS_NOSUID | libc::MS_NODEV;
    let noexec = nosuid | libc::MS_NOEXEC;
    mount("proc", &root.join("proc"), Some("proc"), noexec, None)?;
    mount(
        "sysfs",
        &root.join("sys"),
        Some("sysfs"),
        noexec | libc::MS_RDONLY,
        None,
    )?;
    let cgroup = root.join("sys/fs/cgroup");
    mount("cgroup2", &cgroup, Some("cgroup2"), noexec, None)?;
    bind(Path::new("/dev"), &root.join("dev"), true, false)?;
    // The host's /dev/console is the machine's own console (a serial port
    // on a VM): systemd as PID 1 writes every unit's start and stop there
    // (ShowStatus), one slow write at a time, and a dozen nodes booting at
    // once would fill the machine's console. A node's console is a plain
    // file of its own instead, as a headless VM's serial log would be,
    // emptied at each boot: what systemd says before journald runs, such
    // as why it gives up on a boot (in a container it then exits 255:
    // systemd `src/core/main.c`, `freeze_or_exit_or_reboot`), is where the
    // supervisor quotes it from, not lost in /dev/null. (It gives up
    // without a word when no inotify instance is left: super::limits.) Not
    // console.log itself: systemd opens /dev/console without O_APPEND, and
    // a `> /dev/console` in the node would truncate it.
    let console = fleet.console_device(name);
    fs::write(&console, b"").with_context(|| format!("creating {}", console.display()))?;
    bind(&console, &root.join("dev/console"), false, false)?;
    mount(
        "tmpfs",
        &root.join("run"),
        Some("tmpfs"),
        nosuid,
        Some("mode=0755"),
    )?;
    mount(
        "tmpfs",
        &root.join("tmp"),
        Some("tmpfs"),
        nosuid,
        Some("mode=1777"),
    )?;
    let in_root = |p: &str| root.join(p.trim_start_matches('/'));
    let cluster = in_root(CLUSTER_DIR);
    fs::create_dir_all(&cluster).with_context(|| format!("creating {}", cluster.display()))?;
    bind(&fleet.cluster(), &cluster, false, false)?;
    let node_file = in_root(NODE_FILE);
    if !node_file.exists() {
        fs::write(&node_file, b"").with_context(|| format!("creating {}", node_file.display()))?;
    }
    bind(&fleet.node_json(name), &node_file, false, true)?;
    // The kernel's sysctls are the host's: a node (systemd-sysctl, say)
    // must not change them. systemd-sysctl.service skips a read-only
    // /proc/sys (ConditionPathIsReadWrite=/proc/sys/), as under nspawn.
    let sys = root.join("proc/sys");
    bind(&sys, &sys, true, true)?;
    let trigger = root.join("proc/sysrq-trigger");
    if trigger.exists() {
        bind(&trigger, &trigger, false, true)?;
    }
    bind(&fleet.boot_id(name), &root.join(BOOT_ID), false, true)?;
    Ok(())
}

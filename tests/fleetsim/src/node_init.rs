//! node-init: PID 1 of a node. The supervisor starts it with
//! `unshare --mount --pid --fork --uts --mount-proc`, so everything mounted
//! here exists only in the node's mount namespace and nothing can leak onto
//! the host. It assembles the node's filesystem (one overlay per top-level
//! directory the node changes, fresh /run and /tmp, the shared cluster dir,
//! the boot record and boot id), merges the kubernetes sysext into /usr
//! (`crate::merge`), records the `(boot)`, starts sshd, reaps orphans, and
//! exits on SIGTERM. Its exit *is* the reboot: when a PID namespace's init dies the
//! kernel kills every process in it, so SSH sessions drop for real.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::layout::{FleetDir, OVERLAID, SSHD_CONFIG};
use crate::merge::Merged;
use crate::provision::SYSUPDATE_DIR;
use crate::service::Kubelet;
use crate::state::{CLUSTER_DIR, Event, NODE_FILE, Shared};

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// What node-init needs for one boot, written by the supervisor to
/// `DIR/nodes/<name>/init.json` while the node is down.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InitConfig {
    pub name: String,
    /// Create `/run/reboot-required` at this boot (a reboot was already
    /// pending when the scenario begins).
    pub reboot_required: bool,
    /// The image to merge instead of what `/etc/extensions/kubernetes.raw`
    /// points at: set for the first boot, which runs what the scenario says
    /// runs even when the link already points at a staged image.
    #[serde(default)]
    pub sysext_image: Option<String>,
    /// What the supervisor could not do before this boot (e.g. apply a
    /// staged OS update), for the `(boot)` event.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Seconds between a failed kubelet and its next start (RestartSec).
    #[serde(default = "default_restart")]
    pub kubelet_restart: f64,
    /// A light node: the sysext merged from an unpacked tree, the kubelet's
    /// start done in node-init (docs/simulator.md, "Light fleets").
    #[serde(default)]
    pub light: bool,
    /// The node boots on cgroup v1 (`crate::cgroup`).
    #[serde(default)]
    pub cgroup_v1: bool,
}

fn default_restart() -> f64 {
    10.0
}

pub fn run(dir: &Path, name: &str) -> Result<()> {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        bail!(
            "node-init must be PID 1 of a new PID namespace; the supervisor starts it (fleetsim up)"
        );
    }
    let fleet = FleetDir::new(dir);
    let config = read_config(&fleet, name)?;
    crate::sig::block(true)?;
    set_hostname(&config.name)?;
    let merged = mount_filesystems(&fleet, name, &config)?;
    prepare_run(&config)?;
    record_boot(&config, &merged);
    let sshd = start_sshd()?;
    eprintln!("node-init {name}: up, sshd pid {sshd}");
    let boot_id = fs::read_to_string(BOOT_ID)
        .map(|s| s.trim().to_string())
        .with_context(|| format!("reading {BOOT_ID}"))?;
    let restart = Duration::from_secs_f64(config.kubelet_restart.max(0.0));
    let kubelet = Kubelet::boot(name, &boot_id, restart, config.light);
    start_kured_pod(name);
    supervise(name, sshd, kubelet);
    eprintln!("node-init {name}: going down");
    Ok(())
}

fn read_config(fleet: &FleetDir, name: &str) -> Result<InitConfig> {
    let path = fleet.init_json(name);
    let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

fn set_hostname(name: &str) -> Result<()> {
    // SAFETY: pointer and length describe `name`'s bytes.
    let rc = unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) };
    if rc != 0 {
        bail!("sethostname({name}): {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// The same mount(2) as a real-OS node's init makes, with a `&str` target.
fn mount(
    src: &str,
    target: &str,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Result<()> {
    crate::realos::sys::mount(src, Path::new(target), fstype, flags, data)
}

fn bind(src: &Path, target: &str, read_only: bool) -> Result<()> {
    let src = src.to_string_lossy();
    mount(&src, target, None, libc::MS_BIND, None)?;
    if read_only {
        let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        mount(&src, target, None, flags, None)?;
    }
    Ok(())
}

/// Everything that refers to the state directory is mounted before /tmp is
/// replaced, because the state directory usually lives under /tmp. /run
/// comes first: the loop mount of the sysext image records itself there.
fn mount_filesystems(fleet: &FleetDir, name: &str, config: &InitConfig) -> Result<Merged> {
    for top in OVERLAID {
        let options = format!(
            "lowerdir=/{top},upperdir={},workdir={}",
            fleet.upper(name, top).display(),
            fleet.work(name, top).display()
        );
        mount(
            "overlay",
            &format!("/{top}"),
            Some("overlay"),
            0,
            Some(&options),
        )?;
    }
    bind(&fleet.cluster(), CLUSTER_DIR, false)?;
    let nosuid = libc::MS_NOSUID | libc::MS_NODEV;
    mount("tmpfs", "/run", Some("tmpfs"), nosuid, Some("mode=0755"))?;
    // The node's own cgroup hierarchy as /sys/fs/cgroup shows it, not the
    // host's; read-only, as a v1 node's tmpfs is.
    let cgroup = crate::cgroup::CGROUP_ROOT;
    mount("tmpfs", cgroup, Some("tmpfs"), nosuid, Some("mode=0755"))?;
    crate::cgroup::populate(Path::new("/"), config.cgroup_v1)?;
    mount(
        "tmpfs",
        cgroup,
        None,
        libc::MS_REMOUNT | libc::MS_RDONLY | nosuid,
        Some("mode=0755"),
    )?;
    let unpacked = config.light.then(|| fleet.root().join("light"));
    let merged = crate::merge::merge(
        &fleet.sysext_staging(name),
        config.sysext_image.as_deref(),
        unpacked.as_deref(),
    );
    // The boot record names what was merged; it is read-only from here on.
    let kubernetes = merged.version.map(|v| v.to_string()).unwrap_or_default();
    let containerd = merged.containerd.clone().unwrap_or_default();
    crate::boot::set_kubernetes(&fleet.node_json(name), &kubernetes, &containerd)?;
    bind(&fleet.node_json(name), NODE_FILE, true)?;
    bind(&fleet.boot_id(name), BOOT_ID, true)?;
    mount("tmpfs", "/tmp", Some("tmpfs"), nosuid, Some("mode=1777"))?;
    Ok(merged)
}

/// The `(boot)` event, before sshd (and, later, the kubelet) starts, so
/// everything else this boot does comes after it in the log. Its version is
/// the kubelet the boot merged.
fn record_boot(config: &InitConfig, merged: &Merged) {
    let notes: Vec<&String> = config.notes.iter().chain(&merged.notes).collect();
    let result = if notes.is_empty() {
        "ok".to_string()
    } else {
        let text: Vec<&str> = notes.iter().map(|n| n.as_str()).collect();
        format!("warning: {}", text.join("; "))
    };
    let event = Event {
        t: crate::state::now(),
        node: config.name.clone(),
        argv: vec!["(boot)".into()],
        result,
        pins: crate::pins::kubernetes_pins(Path::new(SYSUPDATE_DIR)),
        version: merged.version.map(|v| v.to_string()),
        ..Default::default()
    };
    if let Err(e) = Shared::in_node().record(&event) {
        eprintln!("node-init {}: recording (boot): {e:#}", config.name);
    }
}

fn prepare_run(config: &InitConfig) -> Result<()> {
    for (dir, mode) in [("/run/sshd", 0o755), ("/run/lock", 0o1777)] {
        fs::create_dir_all(dir).with_context(|| format!("creating {dir}"))?;
        fs::set_permissions(dir, fs::Permissions::from_mode(mode))
            .with_context(|| format!("chmod {dir}"))?;
    }
    if config.reboot_required {
        fs::write("/run/reboot-required", b"").context("creating /run/reboot-required")?;
    }
    Ok(())
}

fn start_sshd() -> Result<i32> {
    let child = Command::new("/usr/sbin/sshd")
        .args(["-D", "-e", "-f", SSHD_CONFIG])
        .stdin(Stdio::null())
        .spawn()
        .context("starting /usr/sbin/sshd (apt-get install openssh-server)")?;
    // Reaped by `supervise` with waitpid(-1), like every other child of init.
    Ok(child.id() as i32)
}

/// Kured's pod on this node, when its DaemonSet is installed and active:
/// the same binary (through /proc/self/exe, since the state directory is no
/// longer reachable by path here) as `kured`. It waits for this boot's
/// kubelet itself, as a pod would, and dies with the node.
fn start_kured_pod(name: &str) {
    let active = Shared::in_node()
        .cluster()
        .is_ok_and(|c| c.kured.is_some_and(|k| k.active));
    if !active {
        return;
    }
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0("kured").arg(name).stdin(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // node-init blocks the stop signals; a pod must die of them like a Go program.
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            Ok(())
        });
    }
    if let Err(e) = cmd.spawn() {
        eprintln!("node-init {name}: starting the Kured pod: {e}");
    }
}

/// Reaps children and restarts a failed kubelet when due, until asked to
/// stop. Returns on SIGTERM, SIGINT or SIGHUP.
fn supervise(name: &str, sshd: i32, mut kubelet: Kubelet) {
    loop {
        let timeout = kubelet.next_timeout().unwrap_or(Duration::from_secs(3600));
        match crate::sig::wait(true, timeout) {
            Some(libc::SIGCHLD) => reap(name, sshd, &mut kubelet),
            Some(_) => return,
            None => {}
        }
        kubelet.tick();
    }
}

fn reap(name: &str, sshd: i32, kubelet: &mut Kubelet) {
    loop {
        let mut status = 0;
        // SAFETY: WNOHANG poll of any child; `status` is a valid out pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if kubelet.reaped(pid, status) {
            continue;
        }
        if pid == sshd {
            eprintln!(
                "node-init {name}: sshd exited (wait status {status}); the node stays up without it"
            );
        }
    }
}

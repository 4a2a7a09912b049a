//! The test harness: start a fleet from a [`Scenario`], talk to its nodes
//! through the real `ssh` client, inspect the shared state, and tear it all
//! down on drop. Used by fleetsim's own tests and by fleetctl's.
//!
//! ```no_run
//! use fleetsim::scenario::Scenario;
//! let fleet = Scenario::new().control_planes(1).workers(2).kubernetes("v1.34.2").start()?;
//! let out = fleet.ssh("w-1", "root", "cat /etc/os-release")?;
//! # anyhow::Ok(())
//! ```
//!
//! `start()` runs `fleetsim up` from the cargo target directory of the
//! running test and builds nothing: build it first (`cargo build -p
//! fleetsim`; fleetsim's own tests get it from cargo).

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::layout::FleetDir;
use crate::scenario::Scenario;
use crate::state::{Cluster, Event, Faults, NodeBoot, Shared};
use crate::supervisor::FleetInfo;
use crate::version::Version;

mod leaks;
pub use leaks::*;

/// How long `wait_*` helpers wait before failing.
pub const WAIT: Duration = Duration::from_secs(30);

/// A running fleet. Dropping it stops the supervisor (SIGTERM, then SIGKILL
/// after 15 s) and removes the temporary state directory, unless
/// `FLEETSIM_KEEP` is set (then the path is printed for a post-mortem):
/// `FLEETSIM_KEEP=failed` keeps only the fleets of tests that fail (the
/// thread is panicking when the fleet drops), any other value every fleet.
pub struct Fleet {
    fleet: FleetDir,
    supervisor: Option<Child>,
    info: FleetInfo,
    real_os: bool,
}

impl Scenario {
    /// Starts the fleet with the `fleetsim` binary found in the cargo target
    /// directory of the current executable.
    pub fn start(&self) -> Result<Fleet> {
        self.start_with(&find_binary()?)
    }

    /// Starts the fleet with `binary` (fleetsim's own tests pass
    /// `env!("CARGO_BIN_EXE_fleetsim")`) and waits until every node is up.
    pub fn start_with(&self, binary: &Path) -> Result<Fleet> {
        self.validate()?;
        let dir = make_temp_dir()?;
        let fleet = FleetDir::new(&dir);
        let real_os = self.os_layer == crate::scenario::Os::Systemd;
        // The root's first build takes minutes, outside the boot's deadline;
        // later fleets find it cached (`fleetsim up` checks it again).
        if real_os {
            crate::realos::rootfs::ensure(&fleet)?;
        }
        let _booting = real_os.then(BootGate::enter);
        let scenario_path = dir.join("scenario.yaml");
        fs::write(&scenario_path, self.to_yaml()?)
            .with_context(|| format!("writing {}", scenario_path.display()))?;
        let log =
            fs::File::create(dir.join("supervisor.log")).context("creating supervisor.log")?;
        let child = Command::new(binary)
            .arg("up")
            .arg("--scenario")
            .arg(&scenario_path)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("duplicating the log handle")?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {} up", binary.display()))?;
        let mut started = Fleet {
            fleet,
            supervisor: Some(child),
            info: FleetInfo {
                hub: String::new(),
                prometheus: String::new(),
                port: 0,
                supervisor_pid: 0,
                nodes: Vec::new(),
            },
            real_os,
        };
        // A real-OS node boots a whole systemd (docs/simulator.md).
        let base = match self.os_layer {
            crate::scenario::Os::Systemd => Duration::from_secs(120),
            crate::scenario::Os::Emulated => Duration::from_secs(30),
        };
        started.wait_fleet_ready(base, self.nodes.len())?;
        started.info = FleetInfo::load(&started.fleet)?;
        Ok(started)
    }
}

/// Held while a real-OS fleet of this process boots: at most two boot at
/// once. A dozen systemd boots at once on two shared cores each take long
/// enough to miss sshd's deadline, where a few at a time each boot in
/// seconds (docs/simulator.md, "Real-OS nodes").
struct BootGate;

static BOOTING: std::sync::Mutex<u32> = std::sync::Mutex::new(0);
static BOOT_DONE: std::sync::Condvar = std::sync::Condvar::new();
const REAL_OS_BOOTS_AT_ONCE: u32 = 2;

impl BootGate {
    fn enter() -> BootGate {
        let mut booting = BOOTING.lock().unwrap_or_else(|e| e.into_inner());
        while *booting >= REAL_OS_BOOTS_AT_ONCE {
            booting = BOOT_DONE.wait(booting).unwrap_or_else(|e| e.into_inner());
        }
        *booting += 1;
        BootGate
    }
}

impl Drop for BootGate {
    fn drop(&mut self) {
        *BOOTING.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        BOOT_DONE.notify_one();
    }
}

/// `<target>/debug/fleetsim`, looked up from the running executable
/// (`<target>/debug/deps/test-…`) upwards.
pub fn find_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the current executable")?;
    for dir in exe.ancestors().skip(1) {
        let candidate = dir.join("fleetsim");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no fleetsim binary next to {} or above it: run `cargo build -p fleetsim` first",
        exe.display()
    )
}

fn make_temp_dir() -> Result<PathBuf> {
    let template = CString::new("/tmp/fleetsim-XXXXXX").context("temp dir template")?;
    let mut bytes = template.into_bytes_with_nul();
    // SAFETY: `bytes` is a writable NUL-terminated template, as mkdtemp needs.
    let p = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if p.is_null() {
        bail!(
            "mkdtemp /tmp/fleetsim-XXXXXX: {}",
            std::io::Error::last_os_error()
        );
    }
    bytes.pop();
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

impl Fleet {
    fn wait_fleet_ready(&mut self, base: Duration, nodes: usize) -> Result<()> {
        let timeout = base + Duration::from_millis(200 * nodes as u64);
        let deadline = Instant::now() + timeout;
        loop {
            if self.fleet.ready().exists() {
                return Ok(());
            }
            if let Some(child) = self.supervisor.as_mut()
                && let Some(status) = child.try_wait().context("waiting for the supervisor")?
            {
                bail!(
                    "fleetsim up exited ({status}) before the fleet was ready:\n{}",
                    self.log()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the fleet was not ready after {} s:\n{}",
                    timeout.as_secs(),
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The supervisor's output so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.fleet.root().join("supervisor.log")).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        self.fleet.root()
    }

    pub fn layout(&self) -> &FleetDir {
        &self.fleet
    }

    pub fn inventory(&self) -> PathBuf {
        self.fleet.inventory()
    }

    pub fn hub_url(&self) -> &str {
        &self.info.hub
    }

    /// The fleet's Prometheus (and Alertmanager under `/api/v2/alerts`).
    pub fn prometheus_url(&self) -> &str {
        &self.info.prometheus
    }

    pub fn info(&self) -> &FleetInfo {
        &self.info
    }

    pub fn supervisor_pid(&self) -> Option<u32> {
        self.supervisor.as_ref().map(|c| c.id())
    }

    /// Whether the nodes boot the real systemd (`os_layer: systemd`).
    pub fn real_os(&self) -> bool {
        self.real_os
    }

    /// What `node`'s sshd has logged this far. node-init's sshd writes to
    /// the node's console; a real-OS node's runs as `ssh.service`, whose
    /// lines are in the node's journal, read here with the node's own
    /// journalctl entered from the host (an SSH login would add to them).
    /// By sshd's syslog identifiers, not `-u ssh.service`: each connection's
    /// sshd-session logs over /dev/log and exits, and journald finds a
    /// datagram's unit from its sender's cgroup in /proc, so a connection's
    /// last line can land outside the unit (systemd/systemd#2913; a refused
    /// host key's `[preauth]` line went missing under load).
    pub fn sshd_log(&self, node: &str) -> Result<String> {
        if !self.real_os {
            let path = self.fleet.console_log(node);
            return fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()));
        }
        let init = self.real_os_init(node)?;
        let out = Command::new("nsenter")
            .arg(format!("--target={init}"))
            .args(["--mount", "--pid", "--", "journalctl"])
            .args(["-t", "sshd", "-t", "sshd-session", "-t", "sshd-auth"])
            .args(["--output=cat", "--no-pager"])
            .stdin(Stdio::null())
            .output()
            .context("running nsenter … journalctl")?;
        if !out.status.success() {
            bail!(
                "{node}: journalctl -t sshd: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// A real-OS node's systemd, PID 1 of its namespace, as the host sees it:
    /// the child of the supervisor's `unshare … realos-init --node NODE`.
    fn real_os_init(&self, node: &str) -> Result<u32> {
        let needle = self.fleet.root().to_string_lossy().to_string();
        let all = all_processes();
        let unshare = all
            .iter()
            .find(|p| {
                p.cmdline.starts_with("/usr/bin/unshare")
                    && p.cmdline.contains(&needle)
                    && p.cmdline.contains("realos-init")
                    && p.cmdline.ends_with(&format!(" --node {node}"))
            })
            .with_context(|| format!("{node} is not running (no realos-init for it)"))?;
        let children = fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.pid))
            .with_context(|| format!("reading the children of {}", unshare.pid))?;
        children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .with_context(|| format!("{node}: its unshare has no child"))
    }

    pub fn address(&self, node: &str) -> Result<String> {
        self.info
            .nodes
            .iter()
            .find(|n| n.name == node)
            .map(|n| n.address.clone())
            .with_context(|| format!("no node {node} in this fleet"))
    }

    /// The `ssh` command for `user@node` with the fleet's key and known_hosts.
    pub fn ssh_command(&self, node: &str, user: &str) -> Result<Command> {
        let address = self.address(node)?;
        let mut cmd = Command::new("ssh");
        cmd.args([
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=5",
        ])
        // The post-quantum default costs the client ~0.15 s of CPU per login.
        .args(["-o", "KexAlgorithms=curve25519-sha256"])
        .args([
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
        ])
        .args(["-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR"])
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            self.fleet.known_hosts().display()
        ))
        .arg("-i")
        .arg(self.fleet.identity())
        .args(["-p", &self.info.port.to_string()])
        .arg(format!("{user}@{address}"))
        .stdin(Stdio::null());
        Ok(cmd)
    }

    /// Runs `cmd` on `node` as `user` through the real ssh client.
    pub fn ssh(&self, node: &str, user: &str, cmd: &str) -> Result<Output> {
        self.ssh_command(node, user)?
            .arg("--")
            .arg(cmd)
            .output()
            .with_context(|| format!("running ssh {user}@{node} (apt-get install openssh-client)"))
    }

    /// Like [`Fleet::ssh`], but a non-zero exit is an error carrying stderr.
    pub fn ssh_ok(&self, node: &str, user: &str, cmd: &str) -> Result<String> {
        let out = self.ssh(node, user, cmd)?;
        if !out.status.success() {
            bail!(
                "`{cmd}` as {user} on {node} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    pub fn shared(&self) -> Shared {
        Shared::new(self.fleet.cluster())
    }

    pub fn events(&self) -> Result<Vec<Event>> {
        self.shared().events()
    }

    pub fn cluster(&self) -> Result<Cluster> {
        self.shared().cluster()
    }

    pub fn faults(&self, f: impl FnOnce(&mut Faults)) -> Result<()> {
        self.shared().update_faults(f)
    }

    /// Adds an image to the hub, as `fleetsim ctl publish` does.
    pub fn publish(&self, version: &str) -> Result<()> {
        let cache = crate::image::Cache::default_location()?;
        crate::hub::publish(&self.fleet.hub(), &cache, &Version::parse(version)?)?;
        Ok(())
    }

    /// Adds a containerd image (`2.1.5`) to the hub, as `fleetsim ctl
    /// publish-containerd` does.
    pub fn publish_containerd(&self, version: &str) -> Result<()> {
        let cache = crate::image::Cache::default_location()?;
        crate::hub::publish_containerd(&self.fleet.hub(), &cache, version)?;
        Ok(())
    }

    /// Pulls `node`'s plug, as `fleetsim ctl power-cycle` does: node-init is
    /// killed outright and the node boots again with whatever is staged.
    /// Returns once the request is filed; `wait_rebooted` follows it.
    pub fn power_cycle(&self, node: &str) -> Result<()> {
        let argv = ["power-cycle".to_string(), node.to_string()];
        crate::ctl::run(
            &self.fleet,
            &crate::ctl::Ctl::PowerCycle(node.into()),
            &argv,
        )?;
        Ok(())
    }

    /// Cuts `node`'s SSH connections, as `fleetsim ctl drop-ssh` does: every
    /// sshd session process of the node is killed, its listener stays.
    /// Returns once the supervisor has done it.
    pub fn drop_ssh(&self, node: &str) -> Result<()> {
        let argv = ["drop-ssh".to_string(), node.to_string()];
        crate::ctl::run(&self.fleet, &crate::ctl::Ctl::DropSsh(node.into()), &argv)?;
        Ok(())
    }

    /// Lets a node held by the `hang_on_reboot` fault boot.
    pub fn release(&self, node: &str) -> Result<()> {
        self.faults(|f| f.hang_on_reboot.retain(|n| n != node))
    }

    /// The node's current boot record, read on the host.
    pub fn boot(&self, node: &str) -> Result<NodeBoot> {
        read_boot(&self.fleet, node)
    }

    /// Polls `check` against cluster.json until it holds or [`WAIT`] passes.
    pub fn wait_for(&self, what: &str, check: impl Fn(&Cluster) -> bool) -> Result<Cluster> {
        let deadline = Instant::now() + WAIT;
        loop {
            let c = self.cluster()?;
            if check(&c) {
                return Ok(c);
            }
            if Instant::now() > deadline {
                bail!("timed out after {} s waiting until {what}", WAIT.as_secs());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until `node`'s sshd answers (cluster.json says up).
    pub fn wait_up(&self, node: &str) -> Result<()> {
        self.wait_for(&format!("{node} is up"), |c| {
            c.nodes.get(node).is_some_and(|n| n.up)
        })?;
        Ok(())
    }

    /// Waits until `node` is Ready: up, its kubelet started this boot and
    /// `kubelet_delay` passed.
    pub fn wait_ready(&self, node: &str) -> Result<()> {
        self.wait_for(&format!("{node} is Ready"), |c| {
            c.node_ready(node, crate::state::now())
        })?;
        Ok(())
    }

    pub fn wait_down(&self, node: &str) -> Result<()> {
        self.wait_for(&format!("{node} is down"), |c| {
            c.nodes.get(node).is_some_and(|n| !n.up)
        })?;
        Ok(())
    }

    /// Waits until `node` has booted after the boot whose id was `boot_id`.
    pub fn wait_rebooted(&self, node: &str, boot_id: &str) -> Result<NodeBoot> {
        let deadline = Instant::now() + WAIT;
        loop {
            let up = self.cluster()?.nodes.get(node).is_some_and(|n| n.up);
            let boot = self.boot(node)?;
            if up && boot.boot_id != boot_id {
                return Ok(boot);
            }
            if Instant::now() > deadline {
                bail!(
                    "{node} did not come back from its reboot within {} s",
                    WAIT.as_secs()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the supervisor without removing the directory (drop still removes it).
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.supervisor.take() else {
            return Ok(());
        };
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if child
                .try_wait()
                .context("waiting for the supervisor")?
                .is_some()
            {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(10));
        }
        child.kill().context("killing the supervisor")?;
        child.wait().context("reaping the supervisor")?;
        bail!(
            "the supervisor ignored SIGTERM for 15 s and was killed:\n{}",
            self.log()
        )
    }

    /// SIGKILLs the supervisor (for tests of what a crash leaves behind).
    pub fn kill_supervisor(&mut self) -> Result<()> {
        if let Some(mut child) = self.supervisor.take() {
            child.kill().context("killing the supervisor")?;
            child.wait().context("reaping the supervisor")?;
        }
        Ok(())
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("fleetsim harness: {e:#}");
        }
        let keep = match std::env::var("FLEETSIM_KEEP") {
            Ok(v) if v == "failed" => std::thread::panicking(),
            Ok(_) => true,
            Err(std::env::VarError::NotUnicode(_)) => true,
            Err(std::env::VarError::NotPresent) => false,
        };
        if keep {
            eprintln!("fleetsim harness: kept {}", self.dir().display());
            return;
        }
        if let Err(e) = fs::remove_dir_all(self.dir()) {
            eprintln!("fleetsim harness: removing {}: {e}", self.dir().display());
        }
    }
}

/// A node's current boot record (`DIR/nodes/<node>/node.json`).
pub fn read_boot(fleet: &FleetDir, node: &str) -> Result<NodeBoot> {
    let path = fleet.node_json(node);
    let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

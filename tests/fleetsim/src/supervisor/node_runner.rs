//! One node's lifecycle, on its own thread: write the boot record, start
//! the node in fresh namespaces, wait for its sshd, and when its init exits
//! (a reboot, a power cut) mark it down, wait out the boot delay and any
//! fault, apply what was staged, and boot it again.

use super::*;

/// One node's lifecycle, on its own thread.
pub(super) struct NodeRunner {
    pub(super) fleet: FleetDir,
    pub(super) plan: NodePlan,
    pub(super) shared: Shared,
    pub(super) boot_delay: f64,
    pub(super) pending_reboot: bool,
    /// What the first boot merges (the scenario's running image).
    pub(super) first_image: String,
    pub(super) kubelet_restart: f64,
    /// Workers of a light fleet (`Scenario::light`).
    pub(super) light: bool,
    /// A real-OS node (`Scenario::os`, `crate::realos`): systemd as PID 1.
    pub(super) real_os: bool,
    /// A real-OS node's cgroup for the current boot.
    pub(super) cgroup: Mutex<Option<NodeCgroup>>,
    /// Bounds how many nodes boot at once.
    pub(super) gate: Arc<Gate>,
    pub(super) stop: Arc<AtomicBool>,
}

/// A counting semaphore: a fleet of hundreds booting all at once would
/// starve every node of CPU until each missed its sshd deadline, where a
/// few at a time each boot in a fraction of a second.
pub(super) struct Gate {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Gate {
    pub(super) fn new(n: usize) -> Gate {
        Gate {
            free: Mutex::new(n.max(1)),
            freed: Condvar::new(),
        }
    }

    fn enter(&self) -> GateGuard<'_> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        GateGuard(self)
    }
}

pub(super) struct GateGuard<'a>(&'a Gate);

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// Eight boots per CPU at a time (a boot mostly waits for sshd), at least eight.
pub(super) fn boot_parallelism() -> usize {
    thread::available_parallelism().map_or(8, |n| (8 * n.get()).max(8))
}

pub(super) enum Exit {
    Stopped,
    Down(ExitStatus),
    /// `fleetsim ctl power-cycle`: the plug was pulled.
    PowerCycled,
}

impl NodeRunner {
    fn name(&self) -> &str {
        &self.plan.spec.name
    }

    pub(super) fn run(self, first: NodeBoot, started: Sender<Result<String>>) {
        let mut started = Some(started);
        let mut boot = first;
        let mut init = InitConfig {
            name: self.name().to_string(),
            reboot_required: self.pending_reboot,
            sysext_image: Some(self.first_image.clone()),
            notes: Vec::new(),
            kubelet_restart: self.kubelet_restart,
            light: self.light,
            cgroup_v1: self.plan.spec.cgroup_v1,
        };
        loop {
            let child = match self.boot_once(&boot, init.clone()) {
                Ok(child) => child,
                Err(e) => {
                    let e = e.context(format!("node {} did not boot", self.name()));
                    match started.take() {
                        Some(tx) => {
                            let _ = tx.send(Err(e));
                        }
                        None => {
                            eprintln!("fleetsim: {e:#}; it stays down");
                            self.record("(boot)", &format!("failed: {e:#}"));
                            self.wait_for_stop();
                        }
                    }
                    return;
                }
            };
            if let Some(tx) = started.take() {
                let _ = tx.send(Ok(self.name().to_string()));
            }
            let exit = self.wait_exit(child);
            self.release_cgroup();
            // `systemctl poweroff` or `halt` on a real-OS node: init ends
            // with SIGINT (reboot_pid_ns()), and the machine stays off.
            let off = matches!(&exit, Exit::Down(s) if self.real_os && ended_by(s, libc::SIGINT));
            match exit {
                Exit::Stopped => return,
                Exit::Down(status) => self.went_down(Some(status)),
                Exit::PowerCycled => self.went_down(None),
            }
            if off && !self.wait_power_on() {
                return;
            }
            if !self.stay_down() {
                return;
            }
            match next_boot(&self.fleet, &boot) {
                Ok((next, notes)) => {
                    boot = next;
                    init = InitConfig {
                        name: self.name().to_string(),
                        reboot_required: false,
                        sysext_image: None,
                        notes,
                        kubelet_restart: self.kubelet_restart,
                        light: self.light,
                        cgroup_v1: self.plan.spec.cgroup_v1,
                    };
                }
                Err(e) => {
                    eprintln!(
                        "fleetsim: node {}: preparing the next boot: {e:#}; it stays down",
                        self.name()
                    );
                    self.wait_for_stop();
                    return;
                }
            }
        }
    }

    /// Writes the boot record, starts node-init and waits for sshd.
    /// node-init records the `(boot)` (it knows what it merged) before sshd
    /// starts, so whoever waits for `up` finds the event in the log.
    fn boot_once(&self, boot: &NodeBoot, init: InitConfig) -> Result<Child> {
        let _turn = self.gate.enter();
        write_boot(&self.fleet, boot)?;
        let path = self.fleet.init_json(self.name());
        fs::write(&path, serde_json::to_vec_pretty(&init)?)
            .with_context(|| format!("writing {}", path.display()))?;
        let restage = match (&init.sysext_image, self.real_os) {
            (Some(image), true) => {
                crate::realos::boot::pin_first_image(&self.fleet, self.name(), image)?
            }
            _ => None,
        };
        let mut child = self.spawn()?;
        if let Err(e) = self.wait_listening(&mut child) {
            match self.real_os {
                true => pull_the_plug(&mut child),
                false => kill_node(&mut child),
            }
            self.release_cgroup();
            return Err(e.context(self.console_tail()));
        }
        if self.real_os
            && let Some(init_pid) = node_inits(&child).first()
        {
            let merged = crate::realos::boot::merged(*init_pid);
            crate::realos::boot::set_versions(&self.fleet.node_json(self.name()), &merged)?;
            crate::realos::boot::record(&self.fleet, self.name(), &merged, &init.notes)?;
            if let Some(target) = restage {
                crate::realos::boot::restage(*init_pid, &target)?;
            }
        }
        // The kubelet reports its own version when it starts (it may
        // already have); until then the API shows the last one it knew.
        self.shared.update_cluster(|c| {
            c.resource_version += 1;
            if let Some(n) = c.nodes.get_mut(self.name()) {
                n.up = true;
                n.booted_at = now();
                n.os = boot.os.clone();
                n.boot_id = boot.boot_id.clone();
            }
            Ok(())
        })?;
        Ok(child)
    }

    fn spawn(&self) -> Result<Child> {
        let log_path = self.fleet.console_log(self.name());
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("opening {}", log_path.display()))?;
        let log2 = log
            .try_clone()
            .context("duplicating the console log handle")?;
        let cgroup = match self.real_os {
            true => Some(NodeCgroup::create(self.name())?),
            false => None,
        };
        let mut cmd = Command::new("/usr/bin/unshare");
        cmd.args([
            "--mount",
            "--pid",
            "--fork",
            "--uts",
            "--mount-proc",
            "--propagation",
            "private",
            "--kill-child",
        ]);
        let init = match self.real_os {
            true => {
                cmd.arg("--cgroup");
                "realos-init"
            }
            false => "node-init",
        };
        cmd.arg(self.fleet.binary())
            .arg(init)
            .arg("--dir")
            .arg(self.fleet.root())
            .arg("--node")
            .arg(self.name())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        // SAFETY: only async-signal-safe calls between fork and exec.
        let enter = cgroup.clone();
        *self.cgroup.lock().unwrap_or_else(|e| e.into_inner()) = cgroup;
        unsafe {
            cmd.pre_exec(move || {
                // A real-OS node's cgroup becomes the root of its cgroup namespace.
                if let Some(cg) = &enter {
                    cg.enter_raw()?;
                }
                // Die with this thread (and so with the supervisor).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Keep a terminal's Ctrl-C for the supervisor, which tears down in order.
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.spawn()
            .with_context(|| format!("starting unshare for node {}", self.name()))
    }

    fn wait_listening(&self, child: &mut Child) -> Result<()> {
        let timeout = match self.real_os {
            true => crate::realos::SSHD_TIMEOUT,
            false => SSHD_TIMEOUT,
        };
        let deadline = Instant::now() + timeout;
        loop {
            // sshd writes its PidFile once its listen socket is bound: a
            // stat is cheap, where a read of /proc/net/tcp walks the
            // kernel's whole established-socket hash (milliseconds of
            // system time on a big host, a core's worth at this poll
            // rate), so /proc/net/tcp only has the last word. unshare forks
            // the node's init a moment after it starts, and until init
            // mounts its own /run the path is the host's.
            if sshd_pid_written(child) && net::listening(self.plan.address, self.plan.port)? {
                return Ok(());
            }
            if let Some(status) = child.try_wait().context("waiting for node-init")? {
                let hint = match self.real_os {
                    true => crate::realos::limits::boot_failure_hint(&status),
                    false => None,
                };
                match hint {
                    Some(hint) => bail!("node-init exited ({status}) before sshd listened: {hint}"),
                    None => bail!("node-init exited ({status}) before sshd listened"),
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                bail!("stopped while booting");
            }
            if Instant::now() > deadline {
                bail!(
                    "sshd did not listen on {}:{} within {} s",
                    self.plan.address,
                    self.plan.port,
                    timeout.as_secs()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Removes a real-OS node's cgroup once its namespace is gone.
    fn release_cgroup(&self) {
        let cgroup = self.cgroup.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(cg) = cgroup
            && let Err(e) = cg.remove()
        {
            eprintln!("fleetsim: node {}: {e:#}", self.name());
        }
    }

    /// The last lines of the node's console log and, on a real-OS node
    /// that wrote any, of this boot's `/dev/console`.
    fn console_tail(&self) -> String {
        let tail = |path: &Path| {
            let text = console::read_end(path, console::TAIL_BYTES);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        let log = self.fleet.console_log(self.name());
        let mut out = format!("last lines of {}:\n{}", log.display(), tail(&log));
        let device = self.fleet.console_device(self.name());
        let said = tail(&device);
        if self.real_os && !said.is_empty() {
            out.push_str(&format!("\nlast lines of {}:\n{said}", device.display()));
        }
        out
    }

    fn wait_exit(&self, mut child: Child) -> Exit {
        let power = self.fleet.power_cycle_request(self.name());
        let drop_ssh = self.fleet.drop_ssh_request(self.name());
        loop {
            if drop_ssh.exists() {
                for init in node_inits(&child) {
                    let ns = fs::read_link(format!("/proc/{init}/ns/pid")).ok();
                    let n = crate::sessions::cut(Path::new("/proc"), init, ns.as_deref());
                    eprintln!(
                        "fleetsim: node {}: cut {n} SSH session processes",
                        self.name()
                    );
                }
                let _ = fs::remove_file(&drop_ssh);
            }
            if self.stop.load(Ordering::SeqCst) {
                // systemd as PID 1 takes SIGTERM as "re-execute": a
                // teardown pulls a real-OS node's plug instead.
                match self.real_os {
                    true => pull_the_plug(&mut child),
                    false => kill_node(&mut child),
                }
                return Exit::Stopped;
            }
            if power.exists() {
                let _ = fs::remove_file(&power);
                pull_the_plug(&mut child);
                return Exit::PowerCycled;
            }
            match child.try_wait() {
                Ok(Some(status)) => return Exit::Down(status),
                Ok(None) => thread::sleep(POLL),
                Err(e) => {
                    eprintln!("fleetsim: node {}: waiting for node-init: {e}", self.name());
                    thread::sleep(POLL);
                }
            }
        }
    }

    /// Marks the node down; `None` is a power cycle (no clean shutdown).
    fn went_down(&self, status: Option<ExitStatus>) {
        // How systemd's reboot and power-off end a real-OS node: expected.
        let by_systemd = |s: &ExitStatus| {
            self.real_os && (ended_by(s, libc::SIGHUP) || ended_by(s, libc::SIGINT))
        };
        if let Some(status) = status.filter(|s| !s.success() && !by_systemd(s)) {
            eprintln!(
                "fleetsim: node {}: node-init ended with {status}; rebooting it (see {})",
                self.name(),
                self.fleet.console_log(self.name()).display()
            );
        }
        let result = match status {
            Some(_) => "ok",
            None => "power cycle: node-init killed, no clean shutdown",
        };
        // On the record before the node is marked down, so whoever waits
        // for it to be down finds the event already in the log.
        self.record("(shutdown)", result);
        let marked = self.shared.update_cluster(|c| {
            c.resource_version += 1;
            if let Some(n) = c.nodes.get_mut(self.name()) {
                n.up = false;
                n.kubelet = None;
            }
            Ok(())
        });
        if let Err(e) = marked {
            eprintln!("fleetsim: node {}: marking it down: {e:#}", self.name());
        }
    }

    /// A powered-off real-OS node stays off until `fleetsim ctl
    /// power-cycle` turns it on. Returns false when the fleet is stopping.
    fn wait_power_on(&self) -> bool {
        let power = self.fleet.power_cycle_request(self.name());
        eprintln!(
            "fleetsim: node {} powered off; `fleetsim ctl power-cycle {}` turns it on",
            self.name(),
            self.name()
        );
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            if power.exists() {
                let _ = fs::remove_file(&power);
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The boot delay, then as long as a hang fault holds the node. Returns
    /// false when the fleet is stopping.
    fn stay_down(&self) -> bool {
        let faults = self.shared.faults().unwrap_or_default();
        let extra = faults.slow_boot.get(self.name()).copied().unwrap_or(0.0);
        let delay = Duration::from_secs_f64((self.boot_delay + extra).max(0.0));
        let until = Instant::now() + delay;
        // A node that is off already has nothing to lose.
        let _ = fs::remove_file(self.fleet.power_cycle_request(self.name()));
        while Instant::now() < until {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
        }
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            let hung = self
                .shared
                .faults()
                .map(|f| f.hang_on_reboot.iter().any(|n| n == self.name()))
                .unwrap_or(false);
            if !hung {
                return true;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for_stop(&self) {
        while !self.stop.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(100));
        }
    }

    fn record(&self, what: &str, result: &str) {
        let conf_dir = self.fleet.in_upper(self.name(), SYSUPDATE_DIR);
        let event = Event {
            t: now(),
            node: self.name().to_string(),
            argv: vec![what.to_string()],
            result: result.to_string(),
            pins: conf_dir
                .map(|d| crate::pins::kubernetes_pins(&d))
                .unwrap_or_default(),
            ..Default::default()
        };
        if let Err(e) = self.shared.record(&event) {
            eprintln!("fleetsim: node {}: recording {what}: {e:#}", self.name());
        }
    }
}

/// Whether unshare ended with its child's `signal`: unshare re-raises it
/// (older ones exit 128 + the signal). A PID namespace's init that calls
/// reboot(2) is killed with SIGHUP for a restart, SIGINT for a power-off or
/// halt (kernel/pid_namespace.c, reboot_pid_ns()).
pub(super) fn ended_by(status: &ExitStatus, signal: i32) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(signal) || status.code() == Some(128 + signal)
}

/// A power loss: SIGKILL to node-init, so nothing in the node gets to run
/// another instruction, then wait for unshare (the namespace is gone then).
pub(super) fn pull_the_plug(child: &mut Child) {
    for init in node_inits(child) {
        // SAFETY: plain kill(2) of a process we started (through unshare).
        unsafe { libc::kill(init, libc::SIGKILL) };
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Whether the sshd in `child`'s node has written its PidFile: the node's
/// init is up and its own `/run` (a tmpfs, never the host's) holds
/// `sshd.pid`.
pub(super) fn sshd_pid_written(child: &Child) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some(init) = node_inits(child).first().copied() else {
        return false;
    };
    let run = PathBuf::from(format!("/proc/{init}/root/run"));
    let (Ok(node), Ok(host)) = (fs::metadata(&run), fs::metadata("/run")) else {
        return false;
    };
    node.dev() != host.dev() && run.join("sshd.pid").exists()
}

/// node-init's pid(s): the children of unshare.
pub(super) fn node_inits(child: &Child) -> Vec<i32> {
    let pid = child.id();
    fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Stops a node: SIGTERM to its init (found through unshare's children),
/// exactly like a reboot, so the kernel kills the whole PID namespace;
/// unshare exits once everything in it is gone (and its mounts with it), so
/// returning means nothing is left. SIGKILL if that takes too long.
pub(super) fn kill_node(child: &mut Child) {
    let inits = node_inits(child);
    for init in &inits {
        // SAFETY: plain kill(2) of a process we started (through unshare).
        unsafe { libc::kill(*init, libc::SIGTERM) };
    }
    if inits.is_empty() {
        let _ = child.kill();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    for init in &inits {
        // SAFETY: as above; node-init ignored SIGTERM for 5 s.
        unsafe { libc::kill(*init, libc::SIGKILL) };
    }
    let _ = child.kill();
    let _ = child.wait();
}

//! What every integration test needs: a fleet, and a way to run the real
//! `fleetctl` against it and look at what came out.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub use fleetsim::Scenario;
pub use fleetsim::harness::Fleet;
pub use fleetsim::scenario::Os;

/// The fleetctl binary cargo built for these tests.
pub fn fleetctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetctl"))
}

/// A scenario whose kubectl answers in 10 ms: the tests are about what
/// fleetctl does, not how long a real API round trip takes (the benchmarks
/// keep the simulator's realistic 100 ms start + 150 ms per request). Its
/// nodes boot the real OS layer (systemd 257 as PID 1, the real
/// systemd-sysext, systemd-sysupdate, systemd-run, systemctl, journald:
/// docs/simulator.md "Real-OS nodes") unless `FLEETSIM_OS_LAYER=emulated`
/// says otherwise ([`os_layer_or`]).
pub fn scenario() -> Scenario {
    base().os_layer(os_layer_or(Os::Systemd))
}

/// `scenario` on node-init's emulated OS layer whatever
/// `FLEETSIM_OS_LAYER` says, for the one thing a real-OS node cannot be: a
/// node booted on cgroup v1 (realos-init mounts the cgroup2 hierarchy only,
/// and systemd 257 in a namespace would need the legacy hierarchy mounted
/// for it; docs/simulator.md "Real-OS nodes").
pub fn on_emulated_os(scenario: Scenario) -> Scenario {
    scenario.os_layer(Os::Emulated)
}

/// A `--node-timeout` that a healthy reboot fits in, for a test that waits
/// it out on a node that never returns: `emulated` on node-init nodes; 30 s
/// on real-OS nodes, whose reboot is a whole systemd shutdown and boot (4
/// s on a quiet machine, past 8 s at a load of 20 on two cores).
pub fn node_timeout(os: Os, emulated: &'static str) -> &'static str {
    match os {
        Os::Emulated => emulated,
        Os::Systemd => "30s",
    }
}

fn base() -> Scenario {
    Scenario::new().api_latency(0.01)
}

/// The OS layer of the suite's fleets: `FLEETSIM_OS_LAYER=emulated` boots
/// every test's nodes (but the pinned ones, [`on_emulated_os`]) on
/// node-init, to tell a fleetctl bug from a real-OS one; `systemd` or unset,
/// on the real systemd.
pub fn os_layer_or(default: Os) -> Os {
    match std::env::var("FLEETSIM_OS_LAYER").as_deref() {
        Err(_) | Ok("") => default,
        Ok("emulated") => Os::Emulated,
        Ok("systemd") => Os::Systemd,
        Ok(other) => panic!("FLEETSIM_OS_LAYER={other}: expected `emulated` or `systemd`"),
    }
}

/// A fleet from a scenario, once its API server answers and every kubelet
/// is Ready (the fleet's `ready` only means every sshd answers, and fleetctl
/// rightly refuses to plan against an API server still starting); panics
/// with the supervisor's log when it does not get there. A test that needs
/// the moment before calls `Scenario::start` itself.
pub fn start(scenario: Scenario) -> Fleet {
    let fleet = match scenario.start() {
        Ok(f) => f,
        Err(e) => panic!("the simulated fleet did not start: {e:#}"),
    };
    let healthy = fleet.wait_for("the API server answers and every node is Ready", |c| {
        let now = fleetsim::state::now();
        c.api_up(now) && c.nodes.keys().all(|n| c.node_ready(n, now))
    });
    if let Err(e) = healthy {
        panic!("{e:#}\n{}", fleet.log());
    }
    fleet
}

// ---------------------------------------------------------------------------
// Shared fleets: the tests that only read one

/// A fleet booted at most once per test process and lent to every test that
/// only reads it: `status`, `plan`, `apply --dry-run`, refusals that change
/// nothing on the nodes or the API server. Declared as a static beside its
/// tests (`static FLEET: SharedFleet = SharedFleet::new("name", scenario)`);
/// the first test to ask boots it, the others wait for that boot and then
/// run beside one another.
///
/// What a test may do with it: run fleetctl against its own
/// [`ReadOnly::inventory`] and read the fleet (`cluster`, `events`,
/// `boot`, `ssh_ok` of commands that change nothing). Whatever writes — a
/// lock, a file on a node, a cordon, a fault, a reboot — needs a fleet of
/// its own (`start`): the other tests compare the event log, the API
/// server's state and the nodes' files before and after their own runs.
///
/// A static is never dropped, so the fleets are stopped (and their
/// directories removed) by an `atexit` hook when the test process ends; a
/// process killed outright takes its fleets with it anyway (the supervisor
/// tears down once its parent is gone, `fleetsim::supervisor`).
pub struct SharedFleet {
    name: &'static str,
    scenario: fn() -> Scenario,
    /// Serialises the first boot; a boot that panicked is tried again by the
    /// next test.
    booting: Mutex<()>,
    fleet: RwLock<Option<Fleet>>,
    /// The inventory `fleetsim up` wrote; every test gets a copy.
    inventory: OnceLock<String>,
}

/// The shared fleets this process booted, for the exit hook.
static BOOTED: Mutex<Vec<&'static SharedFleet>> = Mutex::new(Vec::new());

impl SharedFleet {
    pub const fn new(name: &'static str, scenario: fn() -> Scenario) -> SharedFleet {
        SharedFleet {
            name,
            scenario,
            booting: Mutex::new(()),
            fleet: RwLock::new(None),
            inventory: OnceLock::new(),
        }
    }

    /// This test's read-only seat on the fleet, booting it first if no test
    /// has yet (with [`start`]: every node Ready, the API server up).
    pub fn get(&'static self) -> ReadOnly {
        {
            let _booting = self.booting.lock().unwrap_or_else(|e| e.into_inner());
            if self.inventory.get().is_none() {
                let fleet = start((self.scenario)());
                // The fleet's own inventory goes out of the way, so that a
                // test which reached it through `Deref` (`Fleet::inventory`)
                // fails loudly instead of sharing a state directory.
                let original = fleet.inventory();
                let text = std::fs::read_to_string(&original).expect("reading the inventory");
                std::fs::rename(&original, fleet.dir().join("inventory.shared.yaml"))
                    .expect("moving the shared fleet's inventory aside");
                *self.fleet.write().unwrap_or_else(|e| e.into_inner()) = Some(fleet);
                let _ = self.inventory.set(text);
                let mut booted = BOOTED.lock().unwrap_or_else(|e| e.into_inner());
                if booted.is_empty() {
                    // SAFETY: registering a plain `extern "C"` function.
                    let registered = unsafe { libc::atexit(stop_shared_fleets) };
                    assert_eq!(registered, 0, "atexit");
                }
                booted.push(self);
            }
        }
        let fleet = self.fleet.read().unwrap_or_else(|e| e.into_inner());
        let shared = fleet.as_ref().expect("a booted shared fleet");
        let dir = tempfile::Builder::new()
            .prefix("reader-")
            .tempdir_in(shared.dir())
            .expect("a directory for the test");
        let inventory = dir.path().join("inventory.yaml");
        std::fs::write(&inventory, self.inventory.get().expect("booted"))
            .expect("writing the test's inventory");
        ReadOnly {
            name: self.name,
            fleet,
            dir: Some(dir),
            inventory,
        }
    }
}

/// Stops every shared fleet, all at once (each stop waits for its
/// supervisor's teardown), when the test process exits.
extern "C" fn stop_shared_fleets() {
    let _ = std::panic::catch_unwind(|| {
        let booted: Vec<&'static SharedFleet> =
            std::mem::take(&mut *BOOTED.lock().unwrap_or_else(|e| e.into_inner()));
        thread::scope(|s| {
            for shared in booted {
                let fleet = shared
                    .fleet
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                s.spawn(move || drop(fleet));
            }
        });
    });
}

/// One test's seat on a [`SharedFleet`]: the fleet (through `Deref`), and an
/// inventory of the test's own in a directory of its own, so its plan file,
/// `.fleetctl/` state and HOME (`fleetctl` puts HOME beside the inventory)
/// are nobody else's. On a failure it prints the fleet's supervisor log and
/// keeps the directory.
pub struct ReadOnly {
    name: &'static str,
    fleet: RwLockReadGuard<'static, Option<Fleet>>,
    dir: Option<tempfile::TempDir>,
    inventory: PathBuf,
}

impl ReadOnly {
    /// This test's copy of the fleet's inventory.
    pub fn inventory(&self) -> PathBuf {
        self.inventory.clone()
    }

    /// This test's directory: its inventory, `.fleetctl/` and HOME.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("the test's directory").path()
    }
}

impl std::ops::Deref for ReadOnly {
    type Target = Fleet;

    fn deref(&self) -> &Fleet {
        self.fleet.as_ref().expect("a booted shared fleet")
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        if thread::panicking() {
            let dir = self.dir.take().map(|d| d.keep());
            eprintln!(
                "--- the shared fleet `{}` (this test's directory: {:?}); its supervisor log:\n{}",
                self.name,
                dir,
                self.log()
            );
        }
    }
}

/// What a test runs fleetctl against: a fleet of its own, or its seat on a
/// [`SharedFleet`]. Helpers that serve both take `&impl Seat`, so a seat's
/// own inventory and directory are the ones they use.
pub trait Seat {
    /// The inventory fleetctl is run with.
    fn inventory(&self) -> PathBuf;
    /// The directory of that inventory: its `.fleetctl/`, and HOME.
    fn dir(&self) -> &Path;
    /// The fleet itself.
    fn fleet(&self) -> &Fleet;
}

impl Seat for Fleet {
    fn inventory(&self) -> PathBuf {
        Fleet::inventory(self)
    }

    fn dir(&self) -> &Path {
        Fleet::dir(self)
    }

    fn fleet(&self) -> &Fleet {
        self
    }
}

impl Seat for ReadOnly {
    fn inventory(&self) -> PathBuf {
        ReadOnly::inventory(self)
    }

    fn dir(&self) -> &Path {
        ReadOnly::dir(self)
    }

    fn fleet(&self) -> &Fleet {
        self
    }
}

/// `fleetctl -i <fleet inventory> --no-color ARGS`, with HOME pointing at an
/// empty directory so the operator's own ~/.ssh/config cannot leak in, and no
/// ssh-agent.
pub fn fleetctl(inventory: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(fleetctl_bin());
    cmd.arg("-i").arg(inventory).arg("--no-color").args(args);
    let home = inventory.parent().unwrap_or(Path::new("/")).join("home");
    // Nor this machine's /etc/ssh/ssh_known_hosts, which fleetctl reads
    // as ssh does: a test must not pass or fail by what the host trusts.
    let ssh_dir = home.join(".ssh");
    let _ = std::fs::create_dir_all(&ssh_dir);
    let config = ssh_dir.join("config");
    if !config.exists() {
        let _ = std::fs::write(&config, "Host *\n    GlobalKnownHostsFile /dev/null\n");
    }
    cmd.env("HOME", home)
        .env_remove("SSH_AUTH_SOCK")
        .env_remove("FLEETCTL_INVENTORY");
    cmd.env("NO_COLOR", "1").stdin(Stdio::null());
    // The simulated hub is plain http:// on loopback; tests/cli/integrity.rs
    // removes this to see apply refuse it.
    cmd.env("FLEETCTL_ALLOW_INSECURE_HUB", "true");
    cmd
}

/// What a run of fleetctl produced, decoded.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the exit code is `code`.
    pub fn expect_code(self, code: i32) -> Run {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

pub fn run(inventory: &Path, args: &[&str]) -> Run {
    Run::of(
        fleetctl(inventory, args)
            .output()
            .expect("running fleetctl"),
    )
}

/// fleetctl with `args` against `fleet`'s inventory.
pub fn run_on(fleet: &impl Seat, args: &[&str]) -> Run {
    run(&fleet.inventory(), args)
}

/// One control plane and one worker at v1.34.2.
pub fn pair() -> Scenario {
    scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.2")
}

/// `fleetctl apply ARGS`, timed, so the test's output says what each run
/// cost.
pub fn apply(fleet: &impl Seat, args: &[&str]) -> Run {
    let mut all = vec!["apply"];
    all.extend_from_slice(args);
    let started = Instant::now();
    let run = run(&fleet.inventory(), &all);
    eprintln!(
        "fleetctl {} took {:.1} s (exit {:?})",
        all.join(" "),
        started.elapsed().as_secs_f64(),
        run.code
    );
    run
}

/// How long a test waits for a running fleetctl before it gives up (a
/// watchdog against a hang, not a timing assertion).
const WATCHDOG: Duration = Duration::from_secs(600);

/// A fleetctl run in the background with its stderr read as it comes, so a
/// test can wait for a step to start and then signal it.
pub struct Running {
    child: Child,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<String>>,
}

impl Running {
    pub fn spawn(inventory: &Path, args: &[&str]) -> Running {
        Running::spawn_command(fleetctl(inventory, args))
    }

    /// [`Running::spawn`] of a command built by [`fleetctl`] and changed
    /// (a test-only environment variable).
    pub fn spawn_command(mut cmd: Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting fleetctl");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut out = child.stdout.take().expect("piped stdout");
        let mut err = child.stderr.take().expect("piped stderr");
        let seen = stderr.clone();
        let readers = vec![
            thread::spawn(move || {
                let mut text = String::new();
                let _ = out.read_to_string(&mut text);
                text
            }),
            thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
                String::new()
            }),
        ];
        Running {
            child,
            stderr,
            readers,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr shows `needle` (the plain, timestamped progress
    /// lines: stderr is not a terminal). Panics if fleetctl ends first.
    pub fn wait_for(&mut self, needle: &str) {
        let deadline = Instant::now() + WATCHDOG;
        loop {
            if self.stderr().contains(needle) {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!(
                    "fleetctl ended ({status}) before printing `{needle}`:\n{}",
                    self.stderr()
                );
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("fleetctl never printed `{needle}`:\n{}", self.stderr());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kill -SIG pid`, as a terminal (`INT`: Ctrl-C), a supervisor or an
    /// operator would.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .args([&format!("-{sig}"), &self.pid().to_string()])
            .status()
            .expect("running kill");
        assert!(status.success(), "kill -{sig} {} failed", self.pid());
    }

    /// Waits for fleetctl to end by itself.
    pub fn finish(mut self) -> Run {
        let deadline = Instant::now() + WATCHDOG;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("fleetctl did not end on its own:\n{}", self.stderr());
            }
            thread::sleep(Duration::from_millis(50));
        };
        // Join both readers, so stderr is complete before it is read.
        let texts: Vec<String> = std::mem::take(&mut self.readers)
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect();
        Run {
            code: status.code(),
            stdout: texts.into_iter().next().unwrap_or_default(),
            stderr: self.stderr(),
        }
    }
}

// ---------------------------------------------------------------------------
// The fleet's event log. Tests judge fleetctl by what happened on the nodes
// and the API server, not by what it printed; these read the log the way a
// reviewer would: who was cordoned, who was down, who ran what and when.

pub use fleetsim::state::{Cluster, Event};

type NodeSet = std::collections::BTreeSet<String>;

/// Every event as one line (`index t node argv → result [pins]`), for
/// failure messages that show the whole story.
pub fn describe(events: &[Event]) -> String {
    let t0 = events.first().map_or(0.0, |e| e.t);
    events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            format!(
                "{i:4} {:8.3} {:<10} {} → {} {:?}\n",
                e.t - t0,
                e.node,
                e.argv.join(" "),
                e.result,
                e.pins
            )
        })
        .collect()
}

pub fn is_ok(e: &Event) -> bool {
    e.result == "ok"
}

/// `systemd-run` starting a detached step: the command it wraps is
/// recorded as its own event when the unit runs it.
pub fn is_unit_start(e: &Event) -> bool {
    program(e) == Some("systemd-run")
}

/// apply's lock (fleetctl's configmap, or Kured's annotation) being taken,
/// refreshed, read or given back: apply holds it before it looks at the
/// fleet, so even a run that changes nothing takes and releases it.
pub fn is_lock(e: &Event) -> bool {
    e.argv
        .iter()
        .any(|a| a.contains("fleetctl-lock") || a.contains("kured-node-lock"))
}

/// The supervisor brought the node up (sshd answers).
/// fleetctl removing its configmap lock: a preconditioned `delete --raw`
/// with the DeleteOptions on stdin.
pub fn deletes_lock_configmap(e: &Event) -> bool {
    kubectl_words(e).is_some_and(|w| w.first() == Some(&"delete"))
        && e.argv.iter().any(|a| a == "--raw")
        && e.argv
            .iter()
            .any(|a| a == "/api/v1/namespaces/kube-system/configmaps/fleetctl-lock")
        && e.argv.windows(2).any(|w| w == ["-f", "-"])
}

pub fn is_boot(e: &Event) -> bool {
    e.argv.len() == 1 && e.argv[0] == "(boot)"
}

/// The supervisor saw the node go down.
pub fn is_shutdown(e: &Event) -> bool {
    e.argv.len() == 1 && e.argv[0] == "(shutdown)"
}

fn program(e: &Event) -> Option<&str> {
    e.argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a.as_str()))
}

/// `fleetctl status --output json`'s report, parsed.
pub fn status_report(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "status --output json is not JSON ({e}):\n{}\n{}",
            run.stdout, run.stderr
        )
    })
}

/// The node called `node` in a status report.
pub fn status_node<'a>(report: &'a serde_json::Value, node: &str) -> &'a serde_json::Value {
    report["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["name"] == node))
        .unwrap_or_else(|| panic!("no node {node} in {report:#}"))
}

/// The nodes that rebooted (successfully asked to) in `log`.
pub fn rebooted_nodes(log: &[Event]) -> std::collections::BTreeSet<&str> {
    log.iter()
        .filter(|e| is_reboot(e) && is_ok(e))
        .map(|e| e.node.as_str())
        .collect()
}

/// A reboot asked for on the node itself. On an emulated node `reboot`,
/// `systemctl reboot` and `shutdown -r` all end in the node's reboot tool,
/// which records it; a real-OS node's reboot is systemd's, and a unit of its
/// `reboot.target` records it (fleetsim `realos::record`).
pub fn is_reboot(e: &Event) -> bool {
    matches!(program(e), Some("reboot" | "shutdown"))
        || (e.argv.len() == 1 && e.argv[0] == fleetsim::realos::record::REBOOT_EVENT)
}

/// kubectl's flags that take their value as the next word when not written `--flag=value`.
const KUBECTL_VALUE_FLAGS: &[&str] = &[
    "-n",
    "--namespace",
    "-o",
    "--output",
    "--kubeconfig",
    "--timeout",
    "--for",
    "--from-literal",
    "--resource-version",
    "--grace-period",
    "--request-timeout",
    "--raw",
];

/// A kubectl call's positional words with every flag removed:
/// `kubectl --kubeconfig=… -n kube-system delete configmap x` →
/// `["delete", "configmap", "x"]`. `None` for anything but kubectl.
pub fn kubectl_words(e: &Event) -> Option<Vec<&str>> {
    if program(e) != Some("kubectl") {
        return None;
    }
    let mut words = Vec::new();
    let mut args = e.argv[1..].iter();
    while let Some(a) = args.next() {
        if KUBECTL_VALUE_FLAGS.contains(&a.as_str()) {
            args.next();
        } else if !a.starts_with('-') {
            words.push(a.as_str());
        }
    }
    Some(words)
}

/// What a successful kubectl call did to a node's schedulability:
/// `("cordon" | "drain" | "uncordon", node)`.
pub fn schedulability(e: &Event) -> Option<(&str, &str)> {
    if !is_ok(e) {
        return None;
    }
    match kubectl_words(e)?.as_slice() {
        [verb @ ("cordon" | "drain" | "uncordon"), node, ..] => Some((verb, node)),
        _ => None,
    }
}

/// A `kubeadm upgrade` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeadmUpgrade {
    /// `kubeadm upgrade apply VERSION …`
    Apply(String),
    /// `kubeadm upgrade node …`
    Node,
}

pub fn kubeadm_upgrade(e: &Event) -> Option<KubeadmUpgrade> {
    if program(e) != Some("kubeadm") || e.argv.get(1).map(String::as_str) != Some("upgrade") {
        return None;
    }
    match e.argv.get(2).map(String::as_str) {
        Some("node") => Some(KubeadmUpgrade::Node),
        Some("apply") => {
            let mut rest = e.argv[3..].iter();
            let mut version = String::new();
            while let Some(a) = rest.next() {
                if a == "--skip-phases" || a == "--config" {
                    rest.next();
                } else if !a.starts_with('-') {
                    version = a.clone();
                    break;
                }
            }
            Some(KubeadmUpgrade::Apply(version))
        }
        _ => None,
    }
}

/// The call skips kubeadm's kube-proxy addon phase (`--skip-phases
/// addon/kube-proxy`, alone or in a comma list, either spelling).
pub fn skips_kube_proxy(argv: &[String]) -> bool {
    let listed = |v: &str| v.split(',').any(|p| p.trim() == "addon/kube-proxy");
    argv.windows(2)
        .any(|w| w[0] == "--skip-phases" && listed(&w[1]))
        || argv
            .iter()
            .filter_map(|a| a.strip_prefix("--skip-phases="))
            .any(listed)
}

/// The MatchPattern of a kubernetes sysupdate config pinned to `minor` (`v1.35`).
pub fn pinned_pattern(minor: &str) -> String {
    format!("kubernetes-{minor}.@v-%a.raw")
}

/// Replays the log: after each event, the nodes that are out of service,
/// i.e. cordoned (a successful cordon or drain, until a successful
/// uncordon) or down (from their reboot until their next boot).
pub fn out_of_service(events: &[Event]) -> Vec<NodeSet> {
    let mut cordoned = NodeSet::new();
    let mut down = NodeSet::new();
    events
        .iter()
        .map(|e| {
            match schedulability(e) {
                Some(("uncordon", node)) => {
                    cordoned.remove(node);
                }
                Some((_, node)) => {
                    cordoned.insert(node.to_string());
                }
                None => {}
            }
            if (is_reboot(e) && is_ok(e)) || is_shutdown(e) {
                down.insert(e.node.clone());
            } else if is_boot(e) {
                down.remove(&e.node);
            }
            cordoned.union(&down).cloned().collect()
        })
        .collect()
}

/// fleetctl's own lock when Kured is absent, as `Cluster::configmaps` keys it.
pub const LOCK_CONFIGMAP: &str = "kube-system/fleetctl-lock";

/// Only `cordoned` (if any) of `nodes` is unschedulable, and fleetctl's
/// lock is gone.
pub fn assert_consistent(fleet: &Fleet, nodes: &[&str], cordoned: Option<&str>) -> Cluster {
    let c = fleet.cluster().unwrap();
    for &n in nodes {
        assert_eq!(
            c.nodes[n].unschedulable,
            Some(n) == cordoned,
            "{n}: unschedulable is {} (only {cordoned:?} may be)\n{c:#?}",
            c.nodes[n].unschedulable
        );
    }
    assert!(
        !c.configmaps.contains_key(LOCK_CONFIGMAP),
        "apply ended without releasing its lock: {:?}",
        c.configmaps.get(LOCK_CONFIGMAP)
    );
    c
}

/// Every one of `nodes` up, schedulable and booted on `version` (kubelet
/// and merged sysext), a control plane's static pods and kubeadm-config on
/// it, no kube-proxy, the lock released.
pub fn assert_on_target(fleet: &Fleet, nodes: &[&str], version: &fleetctl::version::Version) {
    let want = version.to_string();
    let c = assert_consistent(fleet, nodes, None);
    assert_eq!(c.version, want, "kubeadm-config");
    assert!(!c.kube_proxy, "kube-proxy came back");
    for &n in nodes {
        let node = &c.nodes[n];
        assert!(node.up, "{n} is down");
        assert_eq!(node.kubelet_version, want, "{n}'s kubelet");
        assert_eq!(fleet.boot(n).unwrap().kubernetes, want, "{n}'s sysext");
        if node.role == fleetsim::state::Role::ControlPlane {
            assert_eq!(
                node.control_plane_version.as_deref(),
                Some(want.as_str()),
                "{n}'s static pods"
            );
        }
    }
}

pub fn assert_has(text: &str, needles: &[&str]) {
    for n in needles {
        assert!(text.contains(n), "no `{n}` in:\n{text}");
    }
}

/// The simulator's own invariants of the upgrade order (no kubelet newer
/// than a running kube-apiserver, none booted before its kubeadm step,
/// none crashed) hold over `events`.
pub fn assert_invariants_hold(events: &[Event]) {
    let violations = fleetsim::invariants::check(events);
    assert!(
        violations.is_empty(),
        "the simulator's invariants are broken:\n{}\n{}",
        violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        describe(events)
    );
}

/// Never two nodes cordoned or down at the same time, replayed over the
/// whole log.
pub fn assert_one_node_out_at_a_time(events: &[Event]) {
    for (i, out) in out_of_service(events).iter().enumerate() {
        assert!(
            out.len() <= 1,
            "after event {i}, {out:?} were cordoned or down at once:\n{}",
            describe(events)
        );
    }
}

/// Every successful reboot was preceded by a drain of that node (the last
/// thing done to its schedulability before it) and followed, after the node
/// came back, by an uncordon (the next thing done to it).
pub fn assert_reboots_drained_then_uncordoned(events: &[Event]) {
    for (i, e) in events.iter().enumerate() {
        if !(is_reboot(e) && is_ok(e)) {
            continue;
        }
        let node = e.node.as_str();
        fn about<'a>(x: &'a Event, node: &str) -> Option<(&'a str, &'a str)> {
            schedulability(x).filter(|(_, n)| *n == node)
        }
        let before = events[..i].iter().rev().find_map(|x| about(x, node));
        assert!(
            matches!(before, Some(("drain", _))),
            "{node} rebooted at event {i} without being drained first (last: {before:?}):\n{}",
            describe(events)
        );
        let boot = events[i..]
            .iter()
            .position(|x| is_boot(x) && x.node == node)
            .map(|p| p + i);
        let after = events[i..]
            .iter()
            .enumerate()
            .find_map(|(j, x)| about(x, node).map(|s| (j + i, s)));
        match (boot, after) {
            (Some(b), Some((u, ("uncordon", _)))) => assert!(
                b < u,
                "{node} was uncordoned (event {u}) before it came back (event {b}):\n{}",
                describe(events)
            ),
            _ => panic!(
                "{node}'s reboot at event {i} was not followed by a boot and an uncordon \
                 (boot {boot:?}, next: {after:?}):\n{}",
                describe(events)
            ),
        }
    }
}

pub fn v(text: &str) -> fleetctl::version::Version {
    text.parse().unwrap()
}

pub fn m(text: &str) -> fleetctl::version::Minor {
    text.parse().unwrap()
}

/// The newest patch of `minor` the fleet's hub really serves, read from its
/// SHA256SUMS on disk (not through fleetctl's parser).
pub fn newest_on_hub(fleet: &Fleet, minor: &str) -> fleetctl::version::Version {
    let sums = fleet.layout().hub().join("kubernetes/SHA256SUMS");
    let text = std::fs::read_to_string(&sums).unwrap();
    let prefix = format!("kubernetes-{minor}.");
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|name| name.strip_prefix(&prefix)?.strip_suffix("-x86-64.raw"))
        .map(|patch| v(&format!("{minor}.{patch}")))
        .max()
        .unwrap_or_else(|| panic!("the hub serves no {minor} image:\n{text}"))
}

/// How often the fleet's journals say a command labelled `label` ran on
/// `node`: its records, plus the identical answers counted rather than
/// copied.
pub fn times_run(fleet: &Fleet, node: &str, label: &str) -> u64 {
    let counted = format!("{label}: the same answer ");
    journal_records(fleet)
        .iter()
        .filter(|r| r["node"] == node)
        .map(|r| match (r["kind"].as_str(), r["detail"].as_str()) {
            (Some("command"), Some(d)) if d == label => 1,
            (Some("repeated"), Some(d)) => d
                .strip_prefix(&counted)
                .and_then(|n| n.split_whitespace().next()?.parse().ok())
                .unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// Every record of the `.jsonl` journals apply wrote.
pub fn journal_records(fleet: &Fleet) -> Vec<serde_json::Value> {
    let dir = fleet.dir().join(".fleetctl/journal");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

//! The supervisor (`fleetsim up`): builds a fleet from a scenario, boots
//! every node, and runs in the foreground until SIGTERM/SIGINT (or until the
//! process that started it goes away), then tears everything down.
//!
//! Each node has a thread that owns its lifecycle: write the boot record,
//! start node-init in fresh namespaces, wait for sshd, and when node-init
//! exits (a reboot) mark the node down, wait the boot delay (and any fault),
//! apply what was staged, and boot again. Node processes are started with
//! PR_SET_PDEATHSIG and `unshare --kill-child`, so even a SIGKILLed
//! supervisor takes its nodes with it.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::boot::{first_boot, first_image, next_boot, write_boot};
use crate::hub::{self, Hub};
use crate::image::Cache;
use crate::layout::{FleetDir, OVERLAID};
use crate::net::{self, Subnet};
use crate::node_init::InitConfig;
use crate::provision::{Disk, NodePlan, SYSUPDATE_DIR, generate_key, host_key, provision};
use crate::realos::cgroup::NodeCgroup;
use crate::scenario::{Os, Scenario};
use crate::state::{Cluster, ClusterNode, Event, NodeBoot, Role, Shared, now};
use crate::version::Version;

/// How long sshd may take to listen after node-init starts.
const SSHD_TIMEOUT: Duration = Duration::from_secs(15);
/// How often node threads look at their node-init and at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// What the supervisor tells the harness and `fleetsim ctl` about a running
/// fleet (`DIR/fleet.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetInfo {
    pub hub: String,
    /// The fleet's Prometheus and Alertmanager (`crate::prometheus`).
    #[serde(default)]
    pub prometheus: String,
    pub port: u16,
    pub supervisor_pid: u32,
    pub nodes: Vec<FleetNode>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FleetNode {
    pub name: String,
    pub address: String,
    pub role: Role,
    /// The user the inventory logs in as.
    pub user: String,
}

impl FleetInfo {
    pub fn load(fleet: &FleetDir) -> Result<FleetInfo> {
        let path = fleet.fleet_json();
        let bytes = fs::read(&path)
            .with_context(|| format!("reading {} (is a fleet running there?)", path.display()))?;
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
    }
}

/// Runs the fleet until a stop signal; returns after a complete teardown.
pub fn up(scenario: &Scenario, dir: &Path) -> Result<()> {
    scenario.validate()?;
    preflight()?;
    let fleet = FleetDir::new(prepare_dir(dir)?);
    crate::sig::block(false)?;
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let started = Instant::now();
    let setup = setup(scenario, &fleet)?;
    eprintln!(
        "fleetsim: {} nodes provisioned in {:.2} s; booting them, {} at a time",
        setup.plans.len(),
        started.elapsed().as_secs_f64(),
        boot_parallelism()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let gate = Arc::new(Gate::new(boot_parallelism()));
    let (tx, rx) = mpsc::channel();
    let firsts = setup
        .plans
        .iter()
        .map(|p| first_boot(scenario, &p.spec))
        .collect::<Result<Vec<_>>>()?;
    let mut threads = Vec::new();
    for (plan, first) in setup.plans.iter().zip(firsts) {
        let node = NodeRunner {
            fleet: fleet.clone(),
            plan: plan.clone(),
            shared: Shared::new(fleet.cluster()),
            boot_delay: scenario.boot_delay,
            pending_reboot: pending_reboot(scenario, plan)?,
            first_image: first_image(scenario, &plan.spec)?,
            kubelet_restart: scenario.kubelet_restart,
            light: scenario.light && plan.spec.role == Role::Worker,
            real_os: scenario.os_layer == Os::Systemd,
            cgroup: Mutex::new(None),
            gate: gate.clone(),
            stop: stop.clone(),
        };
        let tx = tx.clone();
        let handle = thread::Builder::new()
            .name(format!("node-{}", plan.spec.name))
            .spawn(move || node.run(first, tx))
            .context("starting a node thread")?;
        threads.push(handle);
    }
    drop(tx);
    let names: Vec<String> = setup.plans.iter().map(|p| p.spec.name.clone()).collect();
    let outcome = wait_first_boots(&rx, setup.plans.len())
        .and_then(|()| wait_settled(&Shared::new(fleet.cluster()), scenario, &names));
    if let Err(e) = outcome {
        teardown(&fleet, &stop, threads);
        return Err(e);
    }
    fs::write(fleet.ready(), format!("{}\n", now())).context("writing the ready file")?;
    eprintln!(
        "fleetsim: {} nodes up in {:.2} s on {} port {}; hub {}; inventory {}",
        setup.plans.len(),
        started.elapsed().as_secs_f64(),
        setup.subnet.describe(),
        scenario.port,
        setup.hub.url(),
        fleet.inventory().display()
    );
    let why = wait_for_stop(parent);
    eprintln!("fleetsim: {why}; tearing the fleet down");
    teardown(&fleet, &stop, threads);
    drop(setup.subnet);
    Ok(())
}

fn preflight() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("fleetsim up must run as root: it creates namespaces and mounts overlays (try sudo)");
    }
    for (path, package) in [
        ("/usr/sbin/sshd", "openssh-server"),
        ("/usr/bin/ssh-keygen", "openssh-client"),
        ("/usr/bin/unshare", "util-linux"),
        ("/usr/bin/mount", "mount"),
        ("/usr/bin/sudo", "sudo"),
        ("/usr/bin/mksquashfs", "squashfs-tools"),
        ("/usr/bin/unsquashfs", "squashfs-tools"),
        crate::etcd_pod::HOST_BINARIES[0],
        crate::etcd_pod::HOST_BINARIES[1],
    ] {
        if !Path::new(path).exists() {
            bail!("{path} is missing: apt-get install -y {package}");
        }
    }
    // Nodes loop-mount their sysext images; there is no fake to fall back
    // on, so a machine that cannot must say so before anything starts.
    if let Err(e) = File::options()
        .read(true)
        .write(true)
        .open("/dev/loop-control")
    {
        bail!(
            "loop devices are not available here: opening /dev/loop-control: {e} \
             (every node loop-mounts its kubernetes sysext image; a container needs them passed in)"
        );
    }
    if !kernel_has("squashfs") {
        // Built as a module and not loaded yet: mount would load it, but say
        // so now if it cannot be loaded at all.
        let _ = Command::new("modprobe").args(["-q", "squashfs"]).status();
        if !kernel_has("squashfs") {
            bail!(
                "this kernel cannot mount squashfs (not in /proc/filesystems, and modprobe squashfs failed): \
                 the nodes' sysext images are squashfs"
            );
        }
    }
    Ok(())
}

/// A file system type the running kernel supports now.
fn kernel_has(fs_type: &str) -> bool {
    fs::read_to_string("/proc/filesystems")
        .map(|t| {
            t.lines()
                .any(|l| l.split_whitespace().last() == Some(fs_type))
        })
        .unwrap_or(false)
}

/// Creates the state directory and refuses places overlayfs cannot use.
fn prepare_dir(dir: &Path) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))?;
    let text = dir.to_string_lossy();
    if text.contains([',', ':', ' ', '\t', '\n']) {
        bail!(
            "state directory {text}: overlayfs options cannot carry `,`, `:` or spaces; pick another --dir"
        );
    }
    if let Some(top) = OVERLAID.iter().find(|t| dir.starts_with(format!("/{t}"))) {
        bail!(
            "state directory {text} is under /{top}, which every node overlays (its layers would overlap): use a directory under /tmp"
        );
    }
    for held in ["cluster", "nodes"] {
        if dir.join(held).exists() {
            bail!("{text} already holds a fleet ({held}/ exists): use an empty --dir");
        }
    }
    Ok(dir)
}

struct Setup {
    subnet: Subnet,
    hub: Hub,
    plans: Vec<NodePlan>,
    _api: crate::api::ApiServer,
}

fn setup(scenario: &Scenario, fleet: &FleetDir) -> Result<Setup> {
    copy_binary(fleet)?;
    if scenario.kubectl == crate::scenario::KubectlKind::Real {
        crate::clients::gather(&fleet.clients())?;
    }
    crate::etcd_pod::copy_image(fleet)?;
    if scenario.os_layer == Os::Systemd {
        crate::realos::rootfs::ensure(fleet)?;
    }
    let subnet = net::allocate(scenario.nodes.len(), scenario.port)?;
    fs::create_dir_all(fleet.ssh_dir()).context("creating the ssh directory")?;
    let operator_key = generate_key(&fleet.identity(), "fleetsim-operator")?;
    init_cluster(fleet, scenario, &subnet)?;
    let cache = Cache::default_location()?;
    let versions = scenario.hub.versions()?;
    cache.images(&node_versions(scenario)?)?;
    hub::populate(&fleet.hub(), &cache, &versions)?;
    let containerd = scenario.containerd_versions();
    if !containerd.is_empty() {
        hub::populate_containerd(&fleet.hub(), &cache, &containerd)?;
    }
    let hub = hub::serve(fleet.hub(), Shared::new(fleet.cluster()))?;
    let prometheus = crate::prometheus::serve(Shared::new(fleet.cluster()))?;
    let plans: Vec<NodePlan> = scenario
        .nodes
        .iter()
        .enumerate()
        .map(|(i, spec)| NodePlan {
            spec: spec.clone(),
            address: subnet.address(i),
            port: scenario.port,
        })
        .collect();
    let known_hosts = provision_all(fleet, scenario, &plans, &hub.url(), &operator_key, &cache)?;
    fs::write(fleet.known_hosts(), known_hosts.concat()).context("writing known_hosts")?;
    let minor = scenario.cluster_version()?.minor_series();
    let inventory = crate::inventory::render(fleet, &minor, &hub.url(), scenario.port, &plans);
    fs::write(fleet.inventory(), inventory).context("writing inventory.yaml")?;
    write_info(fleet, &hub, &prometheus.url(), scenario.port, &plans)?;
    let api = start_api(fleet, &subnet, &plans)?;
    Ok(Setup {
        subnet,
        hub,
        plans,
        _api: api,
    })
}

/// Issues the cluster's PKI, writes admin.conf (control planes) and
/// kubelet.conf (every node) pointing at the control-plane endpoint, and
/// starts the API server (`crate::api`).
fn start_api(
    fleet: &FleetDir,
    subnet: &Subnet,
    plans: &[NodePlan],
) -> Result<crate::api::ApiServer> {
    use crate::api::pki;
    let endpoint = crate::api::endpoint(subnet.a, subnet.b);
    let members: Vec<(String, std::net::Ipv4Addr)> = plans
        .iter()
        .filter(|p| p.spec.role == Role::ControlPlane)
        .map(|p| (p.spec.name.clone(), p.address))
        .collect();
    let cps: Vec<pki::Member> = members
        .iter()
        .map(|(name, address)| pki::Member {
            name: name.clone(),
            address: *address,
        })
        .collect();
    let names: Vec<String> = plans.iter().map(|p| p.spec.name.clone()).collect();
    let issued = pki::issue(&cps, endpoint, &names)?;
    let server = format!("https://{endpoint}:{}", pki::PORT);
    issued.write(&pki::dir(fleet.root()), &server)?;
    let etcd: Vec<crate::etcd_pod::certs::Member> = members
        .iter()
        .map(|(name, address)| crate::etcd_pod::certs::Member {
            name,
            address: *address,
        })
        .collect();
    crate::etcd_pod::certs::provision(fleet, &etcd)?;
    for (plan, (name, pair)) in plans.iter().zip(&issued.nodes) {
        let disk = Disk { fleet, node: name };
        let user = format!("{}{name}", pki::NODE_PREFIX);
        let kubelet = pki::kubeconfig(&issued.ca, &server, &user, pair);
        disk.file(
            "/etc/kubernetes/kubelet.conf",
            kubelet.as_bytes(),
            0o600,
            (0, 0),
        )?;
        if plan.spec.role == Role::ControlPlane {
            let admin = pki::kubeconfig(&issued.ca, &server, pki::ADMIN_USER, &issued.admin);
            disk.file(
                "/etc/kubernetes/admin.conf",
                admin.as_bytes(),
                0o600,
                (0, 0),
            )?;
        }
    }
    let ssh = crate::api::exec::Ssh {
        identity: fleet.identity(),
        known_hosts: fleet.known_hosts(),
        port: plans.first().map_or(22, |p| p.port),
        addresses: plans
            .iter()
            .map(|p| (p.spec.name.clone(), p.address.to_string()))
            .collect(),
    };
    crate::api::start(
        Shared::new(fleet.cluster()),
        &issued,
        members,
        endpoint,
        ssh,
    )
}

fn copy_binary(fleet: &FleetDir) -> Result<()> {
    let exe = std::env::current_exe().context("finding the fleetsim executable")?;
    let target = fleet.binary();
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(&exe, &target)
        .with_context(|| format!("copying {} to {}", exe.display(), target.display()))?;
    fs::set_permissions(&target, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", target.display()))
}

fn init_cluster(fleet: &FleetDir, scenario: &Scenario, subnet: &Subnet) -> Result<()> {
    fs::create_dir_all(fleet.cluster()).context("creating the cluster directory")?;
    let version = scenario.cluster_version()?.to_string();
    let mut nodes = std::collections::BTreeMap::new();
    for (i, spec) in scenario.nodes.iter().enumerate() {
        let cp = spec.role == Role::ControlPlane;
        nodes.insert(
            spec.name.clone(),
            ClusterNode {
                role: spec.role,
                up: false,
                booted_at: 0.0,
                kubelet_version: scenario.running(spec)?.to_string(),
                unschedulable: false,
                control_plane_version: cp.then(|| version.clone()),
                os: String::new(),
                boot_id: String::new(),
                kubelet: None,
                address: subnet.address(i).to_string(),
            },
        );
    }
    let cluster = Cluster {
        version,
        kubelet_delay: scenario.kubelet_delay,
        api_delay: scenario.api_delay,
        api_latency: scenario.api_latency,
        kubectl_start: scenario.kubectl_start,
        real_kubectl: scenario.kubectl == crate::scenario::KubectlKind::Real,
        kubeadm_duration: scenario.kubeadm_duration,
        nodes,
        kube_proxy: false,
        kured: scenario.kured.spec().map(|k| k.daemonset()),
        configmaps: Default::default(),
        resource_version: 1,
        pods: scenario.pods.clone(),
        pdbs: scenario.pdbs.clone(),
        deprecated_apis: scenario.deprecated_apis.clone(),
        certs_expire: scenario
            .nodes
            .iter()
            .filter(|n| n.role == Role::ControlPlane)
            .map(|n| (n.name.clone(), now() + scenario.cert_expiry_days * 86_400.0))
            .collect(),
        external_etcd: scenario.external_etcd.clone(),
        etcd_images: scenario
            .nodes
            .iter()
            .filter(|n| n.role == Role::ControlPlane)
            .filter_map(|n| Some((n.name.clone(), scenario.etcd.clone()?)))
            .collect(),
    };
    let shared = Shared::new(fleet.cluster());
    shared.update_cluster(|c| {
        *c = cluster;
        Ok(())
    })?;
    let faults = scenario.faults.clone();
    shared.update_faults(|f| *f = faults)?;
    Ok(())
}

/// Provisions every node's disk on a few threads (ssh-keygen dominates) and
/// returns the known_hosts lines in node order.
fn provision_all(
    fleet: &FleetDir,
    scenario: &Scenario,
    plans: &[NodePlan],
    hub_url: &str,
    operator_key: &str,
    cache: &Cache,
) -> Result<Vec<String>> {
    let workers = plans.len().clamp(1, 8);
    let chunk = plans.len().div_ceil(workers);
    thread::scope(|s| {
        let handles: Vec<_> = plans
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|p| provision_one(fleet, scenario, p, hub_url, operator_key, cache))
                        .collect::<Result<Vec<String>>>()
                })
            })
            .collect();
        let mut lines = Vec::new();
        for h in handles {
            let part = h
                .join()
                .map_err(|_| anyhow::anyhow!("a provisioning thread panicked"))??;
            lines.extend(part);
        }
        Ok(lines)
    })
}

fn provision_one(
    fleet: &FleetDir,
    scenario: &Scenario,
    plan: &NodePlan,
    hub_url: &str,
    operator_key: &str,
    cache: &Cache,
) -> Result<String> {
    let name = &plan.spec.name;
    provision(fleet, scenario, plan, hub_url, operator_key, cache)
        .with_context(|| format!("provisioning node {name}"))?;
    if scenario.os_layer == Os::Systemd {
        let rootfs = crate::realos::rootfs::read(fleet)?;
        crate::realos::disk::adapt(
            &Disk { fleet, node: name },
            &rootfs,
            scenario.kubelet_restart,
            plan.spec.sysupdate_timer,
        )
        .with_context(|| format!("provisioning real-OS node {name}"))?;
    }
    let presented = host_key(&Disk { fleet, node: name })?;
    let recorded = if plan.spec.wrong_host_key {
        generate_key(&fleet.node(name).join("decoy_host_key"), "decoy")?
    } else {
        presented
    };
    Ok(known_hosts_line(plan, &recorded))
}

/// The versions nodes start with (running and staged), which the hub may
/// not serve: built once, before the node threads copy them.
fn node_versions(scenario: &Scenario) -> Result<Vec<Version>> {
    let mut out = std::collections::BTreeSet::new();
    for spec in &scenario.nodes {
        out.insert(scenario.running(spec)?);
        out.extend(scenario.staged(spec)?);
    }
    Ok(out.into_iter().collect())
}

fn known_hosts_line(plan: &NodePlan, public_key: &str) -> String {
    let key: Vec<&str> = public_key.split_whitespace().take(2).collect();
    let host = if plan.port == 22 {
        plan.address.to_string()
    } else {
        format!("[{}]:{}", plan.address, plan.port)
    };
    format!("{host} {}\n", key.join(" "))
}

fn write_info(
    fleet: &FleetDir,
    hub: &Hub,
    prometheus: &str,
    port: u16,
    plans: &[NodePlan],
) -> Result<()> {
    let info = FleetInfo {
        hub: hub.url(),
        prometheus: prometheus.to_string(),
        port,
        supervisor_pid: std::process::id(),
        nodes: plans
            .iter()
            .map(|p| FleetNode {
                name: p.spec.name.clone(),
                address: p.address.to_string(),
                role: p.spec.role,
                user: p.spec.user.clone().unwrap_or_else(|| "root".into()),
            })
            .collect(),
    };
    fs::write(fleet.fleet_json(), serde_json::to_vec_pretty(&info)?).context("writing fleet.json")
}

/// A reboot is pending from the start when something is staged.
fn pending_reboot(scenario: &Scenario, plan: &NodePlan) -> Result<bool> {
    let staged = scenario.staged(&plan.spec)?;
    let running = scenario.running(&plan.spec)?;
    Ok(staged.is_some_and(|s| s != running) || plan.spec.os_update.is_some())
}

fn wait_first_boots(rx: &mpsc::Receiver<Result<String>>, count: usize) -> Result<()> {
    let mut up = 0;
    let mut failures = Vec::new();
    while up + failures.len() < count {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok(_)) => up += 1,
            Ok(Err(e)) => failures.push(format!("{e:#}")),
            Err(RecvTimeoutError::Timeout) => {
                if let Some(sig) = crate::sig::wait(false, Duration::ZERO) {
                    bail!("interrupted by signal {sig} while booting the fleet");
                }
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    if !failures.is_empty() {
        bail!(
            "{} of {count} nodes did not boot:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
    Ok(())
}

/// An operator meets a fleet at rest, not one still booting: returns once
/// every node's first kubelet has started or failed (a scenario may start a
/// broken node; what it does then is the test's business). The kubelets
/// that started have been running for a while by then, as on a real
/// cluster: their start is dated back past the readiness delays, so their
/// Nodes are Ready and their API servers answer from the first request.
/// Without this, whoever uses the fleet first races its boot (`kubectl`
/// refused right after `ready`). Later boots pay the delays in full.
fn wait_settled(shared: &Shared, scenario: &Scenario, names: &[String]) -> Result<()> {
    let timeout = Duration::from_secs(30) + Duration::from_millis(50 * names.len() as u64);
    let deadline = Instant::now() + timeout;
    loop {
        let events = shared.events()?;
        let waiting: Vec<&str> = names
            .iter()
            .filter(|n| {
                !events
                    .iter()
                    .any(|e| &e.node == *n && e.argv.first().is_some_and(|a| a == "(kubelet)"))
            })
            .map(String::as_str)
            .collect();
        if waiting.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            let shown: Vec<&str> = waiting.iter().take(5).copied().collect();
            bail!(
                "{} nodes booted but their kubelet neither started nor failed within {} s (first: {})",
                waiting.len(),
                timeout.as_secs(),
                shown.join(", ")
            );
        }
        if let Some(sig) = crate::sig::wait(false, Duration::from_millis(50)) {
            bail!("interrupted by signal {sig} while the fleet settled");
        }
    }
    let long_ago = now() - scenario.kubelet_delay.max(scenario.api_delay);
    shared.update_cluster(|c| {
        for node in c.nodes.values_mut() {
            if let Some(k) = node.kubelet.as_mut() {
                k.started_at = k.started_at.min(long_ago);
            }
        }
        c.resource_version += 1;
        Ok(())
    })
}

/// Blocks until SIGTERM/SIGINT/SIGHUP or until our parent process is gone
/// (a test binary killed outright must not leave a fleet behind).
fn wait_for_stop(parent: libc::pid_t) -> String {
    loop {
        if let Some(sig) = crate::sig::wait(false, Duration::from_millis(200)) {
            return format!("received signal {sig}");
        }
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != parent {
            return "the process that started the fleet is gone".into();
        }
    }
}

fn teardown(fleet: &FleetDir, stop: &AtomicBool, threads: Vec<thread::JoinHandle<()>>) {
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
    let _ = fs::remove_file(fleet.ready());
}

/// One node's lifecycle, on its own thread.
struct NodeRunner {
    fleet: FleetDir,
    plan: NodePlan,
    shared: Shared,
    boot_delay: f64,
    pending_reboot: bool,
    /// What the first boot merges (the scenario's running image).
    first_image: String,
    kubelet_restart: f64,
    /// Workers of a light fleet (`Scenario::light`).
    light: bool,
    /// A real-OS node (`Scenario::os`, `crate::realos`): systemd as PID 1.
    real_os: bool,
    /// A real-OS node's cgroup for the current boot.
    cgroup: Mutex<Option<NodeCgroup>>,
    /// Bounds how many nodes boot at once.
    gate: Arc<Gate>,
    stop: Arc<AtomicBool>,
}

/// A counting semaphore: a fleet of hundreds booting all at once would
/// starve every node of CPU until each missed its sshd deadline, where a
/// few at a time each boot in a fraction of a second.
struct Gate {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Gate {
    fn new(n: usize) -> Gate {
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

struct GateGuard<'a>(&'a Gate);

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// Eight boots per CPU at a time (a boot mostly waits for sshd), at least eight.
fn boot_parallelism() -> usize {
    thread::available_parallelism().map_or(8, |n| (8 * n.get()).max(8))
}

enum Exit {
    Stopped,
    Down(ExitStatus),
    /// `fleetsim ctl power-cycle`: the plug was pulled.
    PowerCycled,
}

impl NodeRunner {
    fn name(&self) -> &str {
        &self.plan.spec.name
    }

    fn run(self, first: NodeBoot, started: Sender<Result<String>>) {
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
                bail!("node-init exited ({status}) before sshd listened");
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

    fn console_tail(&self) -> String {
        let path = self.fleet.console_log(self.name());
        let text = fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        format!("last lines of {}:\n{tail}", path.display())
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
fn ended_by(status: &ExitStatus, signal: i32) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(signal) || status.code() == Some(128 + signal)
}

/// A power loss: SIGKILL to node-init, so nothing in the node gets to run
/// another instruction, then wait for unshare (the namespace is gone then).
fn pull_the_plug(child: &mut Child) {
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
fn sshd_pid_written(child: &Child) -> bool {
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
fn node_inits(child: &Child) -> Vec<i32> {
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
fn kill_node(child: &mut Child) {
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

//! The supervisor (`fleetsim up`): builds a fleet from a scenario, boots
//! every node, and runs in the foreground until SIGTERM/SIGINT (or until the
//! process that started it goes away), then tears everything down.
//!
//! Each node has a thread that owns its lifecycle (`node_runner`): write
//! the boot record, start node-init in fresh namespaces, wait for sshd, and
//! when node-init exits (a reboot) mark the node down, wait the boot delay
//! (and any fault), apply what was staged, and boot again. Node processes
//! are started with PR_SET_PDEATHSIG and `unshare --kill-child`, so even a
//! SIGKILLed supervisor takes its nodes with it.

use std::fs::{self, File};
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
use crate::layout::FleetDir;
use crate::net::{self, Subnet};
use crate::node_init::InitConfig;
use crate::provision::{Disk, NodePlan, SYSUPDATE_DIR, generate_key};
use crate::realos::cgroup::NodeCgroup;
use crate::scenario::{Os, Scenario};
use crate::state::{Cluster, ClusterNode, Event, NodeBoot, Role, Shared, now};
use crate::version::Version;

mod cluster_state;
mod console;
mod host_checks;
mod node_disks;
mod node_runner;
use host_checks::{preflight, prepare_dir};
use node_disks::{copy_binary, provision_all};
use node_runner::*;

/// How long sshd may take to listen after node-init starts.
const SSHD_TIMEOUT: Duration = Duration::from_secs(15);
/// How often node threads look at their node-init and at the stop flag.
/// Every node's thread wakes this often for as long as its node runs: at
/// 20 ms, the suite's 20 to 30 nodes at a time spent a few per cent of
/// the machine's CPU on it (perf, by thread name). A tenth of a second
/// is still far inside anything a node's exit is waited for by.
const POLL: Duration = Duration::from_millis(100);

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
        setup.hub.fleet_url(),
        fleet.inventory().display()
    );
    let why = wait_for_stop(parent);
    eprintln!("fleetsim: {why}; tearing the fleet down");
    teardown(&fleet, &stop, threads);
    drop(setup.subnet);
    Ok(())
}

struct Setup {
    subnet: Subnet,
    hub: Hub,
    plans: Vec<NodePlan>,
    _api: crate::api::ApiServer,
}

fn setup(scenario: &Scenario, fleet: &FleetDir) -> Result<Setup> {
    copy_binary(fleet)?;
    crate::clients::gather(&fleet.clients())?;
    crate::etcd_pod::copy_image(fleet)?;
    if scenario.os_layer == Os::Systemd {
        crate::realos::rootfs::ensure(fleet)?;
        crate::realos::limits::ensure_inotify_instances();
    }
    let subnet = net::allocate(scenario.nodes.len(), scenario.port)?;
    fs::create_dir_all(fleet.ssh_dir()).context("creating the ssh directory")?;
    let operator_key = generate_key(&fleet.identity(), "fleetsim-operator")?;
    cluster_state::init_cluster(fleet, scenario, &subnet)?;
    let cache = Cache::default_location()?;
    let versions = scenario.hub.versions()?;
    cache.images(&node_versions(scenario)?)?;
    hub::populate(&fleet.hub(), &cache, &versions)?;
    let containerd = scenario.containerd_versions();
    if !containerd.is_empty() {
        hub::populate_containerd(&fleet.hub(), &cache, &containerd)?;
    }
    let mut hub = hub::serve(fleet.hub(), Shared::new(fleet.cluster()))?;
    let hub_ca = crate::hub_tls::start(fleet, scenario, &mut hub)?;
    let prometheus = crate::prometheus::serve(Shared::new(fleet.cluster()))?;
    if scenario.kured.spec().is_some_and(|k| k.prometheus) {
        Shared::new(fleet.cluster()).update_cluster(|c| {
            if let Some(ds) = c.kured.as_mut() {
                crate::kured::set_prometheus_url(ds, &prometheus.url());
            }
            Ok(())
        })?;
    }
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
    let known_hosts = provision_all(
        fleet,
        scenario,
        &plans,
        &hub.fleet_url(),
        &operator_key,
        &cache,
    )?;
    if let Some(ca) = &hub_ca {
        crate::hub_tls::trust_all(fleet, scenario, &plans, ca)?;
    }
    fs::write(fleet.known_hosts(), known_hosts.concat()).context("writing known_hosts")?;
    let minor = scenario.cluster_version()?.minor_series();
    let inventory =
        crate::inventory::render(fleet, &minor, &hub.fleet_url(), scenario.port, &plans);
    fs::write(fleet.inventory(), inventory).context("writing inventory.yaml")?;
    write_info(fleet, &hub, &prometheus.url(), scenario.port, &plans)?;
    let api = start_api(fleet, &subnet, &plans, scenario.external_etcd.is_empty())?;
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
    stacked_etcd: bool,
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
    crate::static_pod_files::write_all(fleet, &members, stacked_etcd)?;
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

fn write_info(
    fleet: &FleetDir,
    hub: &Hub,
    prometheus: &str,
    port: u16,
    plans: &[NodePlan],
) -> Result<()> {
    let info = FleetInfo {
        hub: hub.fleet_url(),
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

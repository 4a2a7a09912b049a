//! The kubelet: `kubelet --version`, and the daemon node-init starts as
//! `kubelet.service` at every boot (and again every `kubelet_restart`
//! seconds after it failed, as `Restart=always` would).
//!
//! Its version is the binary's, i.e. the sysext image's it came from:
//! `/usr/bin/kubelet` exists only through the image merged at the last boot,
//! which is how "staged is not running" shows up to fleetctl.
//!
//! Starting, it parses its flags as its version does — a v1.35+ kubelet no
//! longer knows `--pod-infra-container-image` and refuses to start with it
//! (kubernetes/kubernetes#133779) — then loads `--config`. On success it
//! posts its status (cluster.json: this boot's kubelet runs, its version),
//! which makes the Node Ready after `kubelet_delay` and, on a control plane,
//! starts the static pods; then it stays running until the node goes down.
//! Every start is a `(kubelet)` event carrying the version and the kubeadm
//! version that wrote the config it loaded; a control plane's static pods
//! starting are a `(static-pods)` event with their version.

use anyhow::Result;

use super::util::{KubeVersion, glog_prefix};
use super::{Env, complain, say};
use crate::journal::{self, Entry};
use crate::kubelet_files::{POD_INFRA_FLAG, POD_INFRA_REMOVED_MINOR, config_stamp};
use crate::state::{Event, KubeletRun, NodeBoot, Role};
use manifest_watch::StaticPods;

mod manifest_watch;

const NAME: &str = "kubelet";
/// The unit node-init runs the kubelet as (it tells the kubelet so).
pub const UNIT: &str = "kubelet.service";
/// Set by node-init in the service's environment.
pub const UNIT_ENV: &str = "FLEETSIM_UNIT";

/// Flags that take a value, for every version the sim serves.
const VALUE_FLAGS: &[&str] = &[
    "bootstrap-kubeconfig",
    "kubeconfig",
    "config",
    "container-runtime-endpoint",
    "node-ip",
    "hostname-override",
    "node-labels",
    "register-with-taints",
    "root-dir",
    "cert-dir",
    "cloud-provider",
    "provider-id",
    "feature-gates",
    "v",
];

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    match args {
        [a] if a == "--version" || a == "--version=true" => {
            let version = env.binary_version(NAME)?;
            let boot = env.boot()?;
            if env
                .shared()
                .faults()?
                .kubelet_floods(&boot.name, &version.to_string())
            {
                // One write: the junk is the answer, not a slow trickle.
                let junk = "x".repeat(FLOOD);
                say!(env, "Kubernetes {version} {junk}");
                return Ok(0);
            }
            say!(env, "Kubernetes {version}");
            Ok(0)
        }
        _ if env.unit.as_deref() == Some(UNIT) => {
            let (code, pods) = start(env, args)?;
            if code == 0 && env.daemon {
                serve(env, pods);
            }
            Ok(code)
        }
        // A second kubelet by hand would fight the service for its ports.
        _ => Ok(env.unsupported(NAME, args)),
    }
}

/// What a running kubelet does until the node goes down: on a control
/// plane, keep its static pods as its manifests say (`manifest_watch`);
/// else nothing the sim needs: it waits to be killed with the node.
fn serve(env: &mut Env, pods: Option<(NodeBoot, StaticPods)>) -> ! {
    match pods {
        Some((boot, mut pods)) => loop {
            pods.tick(env, &boot);
            std::thread::sleep(manifest_watch::POLL);
        },
        None => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
    }
}

/// Parsed flags: the ones that matter here.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    pub config: Option<String>,
    /// The gates `--feature-gates` names, every occurrence in order.
    pub feature_gates: Vec<(String, Option<bool>)>,
}

/// Flags a minor removed, as fleetctl's table (`src/checks/flags.rs`)
/// records them: name, the first minor that no longer knows it, whether it
/// takes a value (a bool flag does not consume the next word).
const REMOVED: &[(&str, u32, bool)] = &[
    // kubernetes/kubernetes#122082
    ("keep-terminated-pod-volumes", 31, false),
    // kubernetes/kubernetes#122384
    ("register-schedulable", 34, false),
    // kubernetes/kubernetes#133779
    (POD_INFRA_NAME, POD_INFRA_REMOVED_MINOR, true),
];
const POD_INFRA_NAME: &str = "pod-infra-container-image";

/// pflag's parsing, with the flag set of `version`.
pub(crate) fn parse_flags(version: KubeVersion, args: &[String]) -> Result<Flags, String> {
    debug_assert_eq!(&POD_INFRA_FLAG[2..], POD_INFRA_NAME);
    let removed = |name: &str| REMOVED.iter().find(|(n, ..)| *n == name);
    let knows = |name: &str| {
        VALUE_FLAGS.contains(&name)
            || removed(name).is_some_and(|(_, minor, _)| version.minor < u64::from(*minor))
    };
    let mut flags = Flags::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(body) = a.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        if !knows(name) {
            return Err(format!(
                "failed to parse kubelet flag: unknown flag: --{name}"
            ));
        }
        let is_bool = removed(name).is_some_and(|(.., value)| !value);
        let value = match inline {
            Some(v) => v,
            None if is_bool => "true".to_string(),
            None => it.next().cloned().ok_or_else(|| {
                format!("failed to parse kubelet flag: flag needs an argument: --{name}")
            })?,
        };
        if name == "config" {
            flags.config = Some(value);
        } else if name == "feature-gates" {
            flags.feature_gates.extend(
                crate::feature_gates::gate_pairs(&value)
                    .into_iter()
                    .map(|(g, v)| (g.to_string(), v)),
            );
        }
    }
    Ok(flags)
}

/// What a control plane's kubelet runs: its boot and its static pods.
type Pods = Option<(NodeBoot, StaticPods)>;

/// One start of the service's main process; the exit code if it failed,
/// and the static pods it runs.
fn start(env: &mut Env, args: &[String]) -> Result<(i32, Pods)> {
    let version = env.binary_version(NAME)?;
    let boot = env.boot()?;
    let flags = match parse_flags(version, args) {
        Ok(f) => f,
        Err(msg) => return Ok((fail(env, &boot, version, &msg)?, None)),
    };
    let faults = env.shared().faults()?;
    if faults.kubelet_crashes(&boot.name, &version.to_string())
        || faults.containerd_serves_no_cri(&boot.name, &merged_containerd(env, &boot))
    {
        return Ok((fail(env, &boot, version, CRASH)?, None));
    }
    let failing = env
        .shared()
        .faults()?
        .kubelet_failing_starts(&boot.name, &version.to_string());
    if failing > 0 && starts_before(env, &boot.boot_id)? < failing {
        return Ok((fail(env, &boot, version, NO_RUNTIME)?, None));
    }
    if let Some(msg) = refused_gate(version, &flags.feature_gates) {
        return Ok((fail(env, &boot, version, &msg)?, None));
    }
    let config = match &flags.config {
        None => None,
        Some(path) => match std::fs::read_to_string(env.path(path)) {
            Ok(text) => Some(text),
            Err(e) => {
                let msg = format!(
                    "failed to load kubelet config file, path: {path}, error: failed to load Kubelet config file {path}, \
                     error failed to read kubelet config file \\\"{path}\\\", error: open {path}: {}",
                    io_text(&e)
                );
                return Ok((fail(env, &boot, version, &msg)?, None));
            }
        },
    };
    let config_gates = config
        .as_deref()
        .map(crate::feature_gates::config_gates)
        .unwrap_or_default();
    if let Some(msg) = refused_gate(version, &config_gates) {
        return Ok((fail(env, &boot, version, &msg)?, None));
    }
    let stamp = config
        .as_deref()
        .map(|text| config_stamp(text).unwrap_or_else(|| "none".into()));
    if refuses_cgroup_v1(
        version,
        config.as_deref(),
        crate::cgroup::is_v2(&env.path("/")),
    ) {
        return Ok((fail(env, &boot, version, CGROUP_V1_REFUSED)?, None));
    }
    log(
        env,
        &boot,
        'I',
        "server.go:530",
        &format!("\"Kubelet version\" kubeletVersion=\"{version}\""),
    );
    // On the record before the status is posted, so whoever waits for the
    // node (or its API server) finds the events already in the log.
    let static_pods = env
        .shared()
        .cluster()?
        .nodes
        .get(&boot.name)
        .filter(|n| n.role == Role::ControlPlane)
        .and_then(|n| n.control_plane_version.clone());
    log(env, &boot, 'I', "kubelet.go:1650", "\"Started kubelet\"");
    // Its status reaches the API only through a kube-apiserver, which needs
    // etcd: the member first (not in unit tests, which run no daemon).
    let pods = if env.daemon && static_pods.is_some() {
        Some(StaticPods::start(env, &boot)?)
    } else {
        None
    };
    let manifests_out = pods.as_ref().map(StaticPods::out).unwrap_or_default();
    record(env, &boot, "ok", Some(version), stamp);
    if let Some(pods) = static_pods {
        let event = Event {
            t: crate::state::now(),
            node: boot.name.clone(),
            argv: vec!["(static-pods)".into()],
            result: "ok".into(),
            pins: env.pins(),
            version: Some(pods),
            ..Default::default()
        };
        record_event(env, &event);
    }
    let now = crate::state::now();
    env.shared().update_cluster(|c| {
        if let Some(n) = c.nodes.get_mut(&boot.name) {
            n.kubelet = Some(KubeletRun {
                boot_id: boot.boot_id.clone(),
                started_at: now,
                manifests_out: manifests_out.clone(),
            });
            n.kubelet_version = version.to_string();
            c.resource_version += 1;
        }
        Ok(())
    })?;
    Ok((0, pods.map(|p| (boot, p))))
}

/// Why a kubelet of `version` refuses these gates, if it does. The real one
/// sets the gates of its flags, then again those of its `--config` once
/// loaded, and both times fails the same way (cmd/kubelet/app/server.go:
/// `failed to set feature gates from initial flags-based config: %w` around
/// component-base's `unrecognized feature gate: <Gate>`, or `cannot set
/// feature gate <Gate> to <value>, feature is locked to <locked>` for a
/// gate its minor locks), before it runs anything: the node stays NotReady.
pub(crate) fn refused_gate(
    version: KubeVersion,
    gates: &[(String, Option<bool>)],
) -> Option<String> {
    let why =
        crate::feature_gates::refusal(version.minor, gates.iter().map(|(g, v)| (g.as_str(), *v)))?;
    Some(format!(
        "failed to set feature gates from initial flags-based config: {why}"
    ))
}

/// Where the kubelet counts its starts of one boot: `<boot id> <starts>`.
const STARTS_FILE: &str = "/var/lib/fleetsim/kubelet-starts";

/// How often the kubelet started before in this boot (`boot_id`), counting
/// this start in: a file of the node's, since the `(boot)` event of a
/// real-OS node is recorded only once its sshd answers, which may be after
/// the kubelet's first starts.
fn starts_before(env: &mut Env, boot_id: &str) -> Result<u32> {
    let path = env.path(STARTS_FILE);
    let before = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| {
            let (id, n) = t.trim().split_once(' ')?;
            (id == boot_id).then(|| n.parse::<u32>().ok()).flatten()
        })
        .unwrap_or(0);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&path, format!("{boot_id} {}\n", before + 1))?;
    Ok(before)
}

/// The containerd the kubelet's CRI socket leads to: the merged sysext's
/// (`/usr/bin/containerd`'s wrapper: a real-OS node's boot record inside
/// is the boot-time copy, without it), empty for the OS's own.
fn merged_containerd(env: &Env, boot: &NodeBoot) -> String {
    if !boot.containerd.is_empty() {
        return boot.containerd.clone();
    }
    std::fs::read_to_string(env.path("/usr/bin/containerd"))
        .ok()
        .and_then(|t| crate::containerd::wrapper_version(&t))
        .filter(|v| v != crate::containerd::FLATCAR_CONTAINERD)
        .unwrap_or_default()
}

/// What a kubelet under the `kubelet_slow_start` fault says before it
/// exits 1: the CRI endpoint's socket is not there yet (containerd still
/// starting), the same `validateServiceConnection` wrapping as [`CRASH`]
/// around grpc's dial error.
pub(crate) const NO_RUNTIME: &str = "failed to run Kubelet: validate service connection: validate CRI \
     v1 runtime API for endpoint \\\"unix:///run/containerd/containerd.sock\\\": rpc error: code = \
     Unavailable desc = connection error: desc = \\\"transport: Error while dialing: dial unix \
     /run/containerd/containerd.sock: connect: no such file or directory\\\"";

/// How much junk a kubelet under the `kubelet_version_flood` fault adds
/// to its `--version` line: with the words before it, past the 32 MiB of
/// stdout fleetctl keeps of one command.
const FLOOD: usize = 32 << 20;

/// What a kubelet under the `kubelet_crash` fault says before it exits 1:
/// the error a kubelet gives when its container runtime does not serve the
/// CRI v1 API (`validateServiceConnection` in
/// pkg/kubelet/cri/remote/remote_runtime.go, `validate CRI v1 runtime API
/// for endpoint %q: %w`, wrapped by the kubelet's `validate service
/// connection: %w` and cmd/kubelet/app/server.go's `failed to run Kubelet:
/// %w`), a cause that shows only once the new kubelet runs.
pub(crate) const CRASH: &str = "failed to run Kubelet: validate service connection: validate CRI v1 \
     runtime API for endpoint \\\"unix:///run/containerd/containerd.sock\\\": rpc error: code = \
     Unimplemented desc = unknown service runtime.v1.RuntimeService";

/// What a v1.35+ kubelet says on a cgroup v1 host before it exits:
/// `validateKubeletOSConfiguration`'s error
/// (pkg/kubelet/apis/config/validation/validation_linux.go, worded as
/// KEP-5573 made it in v1.35) wrapped by cmd/kubelet/app/server.go's
/// `failed to validate kubelet configuration, error: %w, path: %s`, as
/// kubelets print it.
pub(crate) const CGROUP_V1_REFUSED: &str = "failed to validate kubelet configuration, error: kubelet is \
     configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be \
     removed in a future release, path: &TypeMeta{Kind:,APIVersion:,}";

/// v1.35 turned `failCgroupV1` on by default (KEP-5573,
/// kubernetes/kubernetes#134298): on cgroup v1 the kubelet starts only when
/// its configuration says `failCgroupV1: false`. Earlier kubelets only warn.
pub(crate) fn refuses_cgroup_v1(
    version: KubeVersion,
    config: Option<&str>,
    cgroup_v2: bool,
) -> bool {
    if cgroup_v2 || version.minor < 35 {
        return false;
    }
    let set = config.into_iter().flat_map(str::lines).find_map(|l| {
        l.strip_prefix("failCgroupV1:")
            .map(|v| v.split('#').next().unwrap_or("").trim().to_string())
    });
    set.as_deref() != Some("false")
}

/// The Go error text of an I/O error (`no such file or directory`).
fn io_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// The kubelet's last words (klog's `command failed`), exit 1.
fn fail(env: &mut Env, boot: &NodeBoot, version: KubeVersion, msg: &str) -> Result<i32> {
    log(
        env,
        boot,
        'E',
        "run.go:72",
        &format!("\"command failed\" err=\"{msg}\""),
    );
    record(env, boot, &format!("failed: {msg}"), Some(version), None);
    Ok(1)
}

/// A klog line on stderr and in the journal, as journald would get it.
fn log(env: &mut Env, boot: &NodeBoot, level: char, at: &str, text: &str) {
    let now = crate::state::now();
    let pid = std::process::id();
    let line = format!("{} {pid:>7} {at}] {text}", glog_prefix(level, now));
    complain!(env, "{line}");
    let entry = Entry {
        t: now,
        boot: boot.boot_id.clone(),
        unit: UNIT.into(),
        ident: NAME.into(),
        pid: pid as i32,
        message: line,
    };
    if let Err(e) = journal::append(&env.path(journal::JOURNAL_FILE), &[entry]) {
        complain!(env, "fleetsim: kubelet: writing the journal: {e:#}");
    }
}

fn record(
    env: &mut Env,
    boot: &NodeBoot,
    result: &str,
    version: Option<KubeVersion>,
    config: Option<String>,
) {
    let event = Event {
        t: crate::state::now(),
        node: boot.name.clone(),
        argv: vec!["(kubelet)".into()],
        result: result.to_string(),
        pins: env.pins(),
        version: version.map(|v| v.to_string()),
        config,
    };
    record_event(env, &event);
}

fn record_event(env: &mut Env, event: &Event) {
    if let Err(e) = env.shared().record(event) {
        complain!(env, "fleetsim: kubelet: recording {:?}: {e:#}", event.argv);
    }
}

#[cfg(test)]
mod tests;

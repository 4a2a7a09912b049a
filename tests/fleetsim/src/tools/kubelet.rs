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
use crate::etcd_pod::member::{Member, Plan, node_objects};
use crate::journal::{self, Entry};
use crate::kubelet_files::{POD_INFRA_FLAG, POD_INFRA_REMOVED_MINOR, config_stamp};
use crate::state::{Event, KubeletRun, NodeBoot, Role};

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
    "v",
];

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    match args {
        [a] if a == "--version" || a == "--version=true" => {
            let version = env.binary_version(NAME)?;
            say!(env, "Kubernetes {version}");
            Ok(0)
        }
        _ if env.unit.as_deref() == Some(UNIT) => {
            let (code, etcd) = start(env, args)?;
            if code == 0 && env.daemon {
                serve(etcd);
            }
            Ok(code)
        }
        // A second kubelet by hand would fight the service for its ports.
        _ => Ok(env.unsupported(NAME, args)),
    }
}

/// What a running kubelet does until the node goes down: keep the etcd
/// static pod running on a control plane, else nothing the sim needs; it
/// waits to be killed with the node.
fn serve(mut etcd: Option<Member>) -> ! {
    loop {
        match etcd.as_mut() {
            Some(m) => {
                if let Err(e) = m.tick() {
                    eprintln!("fleetsim: kubelet: restarting etcd: {e:#}");
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
            None => std::thread::sleep(std::time::Duration::from_secs(3600)),
        }
    }
}

/// How long the kubelet waits for its etcd member before it posts its
/// status anyway (a member without quorum never becomes healthy).
const ETCD_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts this control plane's etcd static pod (`etcd_pod::member`): the
/// member, its wait for `/health`, then this node's objects in it.
fn start_etcd(env: &mut Env, boot: &NodeBoot) -> Result<Option<Member>> {
    let Some(plan) = Plan::of(&env.shared().cluster()?, &boot.name) else {
        return Ok(None);
    };
    let mut member = match Member::start(&env.path("/"), plan) {
        Ok(m) => m,
        Err(e) => {
            let msg = format!("\"Failed to start the etcd static pod\" err=\"{e:#}\"");
            log(env, boot, 'E', "kuberuntime_manager.go:1256", &msg);
            return Ok(None);
        }
    };
    if !member.wait_healthy(ETCD_WAIT) {
        let msg = format!(
            "\"etcd is not healthy yet\" pod=\"kube-system/etcd-{}\" waited=\"{}s\"",
            boot.name,
            ETCD_WAIT.as_secs()
        );
        log(env, boot, 'W', "prober.go:107", &msg);
    } else if let Err(e) = member.put(&node_objects(&boot.name, &boot.boot_id)) {
        let msg = format!("\"Writing the node's objects to etcd\" err=\"{e:#}\"");
        log(env, boot, 'E', "kubelet_node_status.go:96", &msg);
    }
    Ok(Some(member))
}

/// Parsed flags: the ones that matter here.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    pub config: Option<String>,
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
        }
    }
    Ok(flags)
}

/// One start of the service's main process; the exit code if it failed,
/// and the etcd member it runs.
fn start(env: &mut Env, args: &[String]) -> Result<(i32, Option<Member>)> {
    let version = env.binary_version(NAME)?;
    let boot = env.boot()?;
    let flags = match parse_flags(version, args) {
        Ok(f) => f,
        Err(msg) => return Ok((fail(env, &boot, version, &msg)?, None)),
    };
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
    let etcd = if env.daemon && static_pods.is_some() {
        start_etcd(env, &boot)?
    } else {
        None
    };
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
            });
            n.kubelet_version = version.to_string();
            c.resource_version += 1;
        }
        Ok(())
    })?;
    Ok((0, etcd))
}

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
mod tests {
    use super::super::testutil::Node;
    use super::*;
    use crate::kubelet_files::{CONFIG_FILE, config_yaml};

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const UNIT_ARGS: &str = "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
                             --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml \
                             --container-runtime-endpoint=unix:///run/containerd/containerd.sock";
    const POD_INFRA: &str = " --pod-infra-container-image=registry.k8s.io/pause:3.10";

    #[test]
    fn reports_the_version_of_its_image() {
        let node = Node::worker("w1", "v1.34.2");
        let r = node.run("kubelet", &["--version"]);
        assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.34.2\n"));
        // A staged image's kubelet, run from where it is mounted.
        let r = node.run_image("v1.35.1", "kubelet", &["--version"]);
        assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.35.1\n"));
        assert_eq!(node.run("kubelet", &["--config=/x"]).code, 1, "not by hand");
    }

    #[test]
    fn only_1_35_and_later_refuse_the_pod_infra_flag() {
        let v = |s| KubeVersion::parse(s).unwrap();
        let with = args(&format!("{UNIT_ARGS}{POD_INFRA}"));
        assert!(parse_flags(v("v1.34.2"), &with).is_ok());
        assert_eq!(
            parse_flags(v("v1.35.0"), &with),
            Err("failed to parse kubelet flag: unknown flag: --pod-infra-container-image".into())
        );
        assert_eq!(
            parse_flags(v("v1.36.1"), &args(UNIT_ARGS))
                .unwrap()
                .config
                .as_deref(),
            Some("/var/lib/kubelet/config.yaml")
        );
        assert!(parse_flags(v("v1.34.2"), &args("--config")).is_err());
    }

    #[test]
    fn removed_flags_are_refused_from_their_minor_on() {
        let v = |s| KubeVersion::parse(s).unwrap();
        let with = args(&format!("{UNIT_ARGS} --register-schedulable=false"));
        assert!(parse_flags(v("v1.33.5"), &with).is_ok());
        assert_eq!(
            parse_flags(v("v1.34.0"), &with),
            Err("failed to parse kubelet flag: unknown flag: --register-schedulable".into())
        );
        // A bool flag does not eat the next word.
        let bare = args("--register-schedulable --config=/var/lib/kubelet/config.yaml");
        let flags = parse_flags(v("v1.33.5"), &bare).unwrap();
        assert_eq!(
            flags.config.as_deref(),
            Some("/var/lib/kubelet/config.yaml")
        );
        let kept = args(&format!("{UNIT_ARGS} --keep-terminated-pod-volumes"));
        assert!(parse_flags(v("v1.30.2"), &kept).is_ok());
        assert!(parse_flags(v("v1.31.0"), &kept).is_err());
    }

    #[test]
    fn a_1_35_kubelet_with_the_old_flags_fails_like_the_real_one() {
        let node = Node::worker("w1", "v1.35.0");
        node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
        node.write(CONFIG_FILE, &config_yaml("v1.34.2"));
        let a = args(&format!("{UNIT_ARGS}{POD_INFRA}"));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = node.run_service("kubelet", &a);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.trim_end().ends_with(
                "run.go:72] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image\""
            ),
            "{}",
            r.stderr
        );
        assert!(r.stderr.starts_with('E'), "{}", r.stderr);
        let events = node.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].argv, ["(kubelet)"]);
        assert_eq!(
            events[0].result,
            "failed: failed to parse kubelet flag: unknown flag: --pod-infra-container-image"
        );
        assert_eq!(events[0].version.as_deref(), Some("v1.35.0"));
        assert!(node.cluster().nodes["w1"].kubelet.is_none(), "not running");
        let journal = journal::read(&node.path(journal::JOURNAL_FILE)).unwrap();
        assert_eq!(journal.len(), 1);
        assert!(
            journal[0]
                .message
                .contains("unknown flag: --pod-infra-container-image")
        );
    }

    #[test]
    fn a_start_posts_status_and_a_control_plane_starts_its_static_pods() {
        let node = Node::control_plane("cp1", "v1.35.1");
        node.update_cluster(|c| {
            let n = c.nodes.get_mut("cp1").unwrap();
            n.kubelet = None;
            n.kubelet_version = "v1.34.2".into();
        });
        node.write(CONFIG_FILE, &config_yaml("v1.35.1"));
        let a = args(UNIT_ARGS);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = node.run_service("kubelet", &a);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let c = node.cluster();
        let n = &c.nodes["cp1"];
        assert_eq!(n.kubelet_version, "v1.35.1");
        assert!(n.kubelet_running().is_some());
        let events = node.events();
        let seen: Vec<(&str, Option<&str>, Option<&str>)> = events
            .iter()
            .map(|e| {
                (
                    e.argv[0].as_str(),
                    e.version.as_deref(),
                    e.config.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("(kubelet)", Some("v1.35.1"), Some("v1.35.1")),
                ("(static-pods)", Some("v1.35.1"), None)
            ]
        );
    }

    #[test]
    fn a_1_35_kubelet_refuses_cgroup_v1_unless_its_config_allows_it() {
        let node = Node::worker("w1", "v1.35.0");
        node.update_cluster(|c| c.nodes.values_mut().for_each(|n| n.kubelet = None));
        std::fs::remove_dir_all(node.path(crate::cgroup::CGROUP_ROOT)).unwrap();
        crate::cgroup::populate(&node.root, true).unwrap();
        node.write(CONFIG_FILE, &config_yaml("v1.35.0"));
        let a = args(UNIT_ARGS);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = node.run_service("kubelet", &a);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.trim_end().ends_with(
                "run.go:72] \"command failed\" err=\"failed to validate kubelet configuration, error: \
                 kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is \
                 unsupported and will be removed in a future release, path: &TypeMeta{Kind:,APIVersion:,}\""
            ),
            "{}",
            r.stderr
        );
        assert_eq!(
            node.events()[0].result,
            format!("failed: {CGROUP_V1_REFUSED}")
        );
        assert!(node.cluster().nodes["w1"].kubelet.is_none(), "not running");
        // `failCgroupV1: false` lets it start.
        node.write(
            CONFIG_FILE,
            &format!("{}failCgroupV1: false\n", config_yaml("v1.35.0")),
        );
        let r = node.run_service("kubelet", &a);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(node.cluster().nodes["w1"].kubelet.is_some());
        let v = |s| KubeVersion::parse(s).unwrap();
        assert!(
            !refuses_cgroup_v1(v("v1.34.9"), None, false),
            "v1.34 only warns"
        );
        assert!(refuses_cgroup_v1(
            v("v1.36.0"),
            Some("failCgroupV1: true\n"),
            false
        ));
        assert!(!refuses_cgroup_v1(v("v1.36.0"), None, true), "cgroup v2");
    }

    #[test]
    fn a_missing_config_fails_the_start() {
        let node = Node::worker("w1", "v1.34.2");
        std::fs::remove_file(node.path(CONFIG_FILE)).unwrap();
        let a = args(UNIT_ARGS);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let r = node.run_service("kubelet", &a);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr
                .contains("open /var/lib/kubelet/config.yaml: no such file or directory"),
            "{}",
            r.stderr
        );
    }
}

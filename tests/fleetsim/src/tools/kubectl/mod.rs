//! `kubectl` against the simulated API server: the shared cluster state,
//! answering only while a control-plane node is up and past its API delay.
//!
//! Covered: nodes (get, cordon, uncordon, drain, wait), pods (the control
//! planes' static mirror pods, DaemonSet and app pods; by name, per
//! namespace or `-A`, field selectors), the kubeadm-config and fleetctl's
//! own ConfigMaps (get, create, merge patch with a resourceVersion, delete,
//! `delete --raw` with preconditions), the kube-proxy, Cilium and Kured
//! DaemonSets (get, annotate with resource-version preconditions),
//! `-o jsonpath=` (`jsonpath.rs`), `version` and `get --raw /readyz`. Output shapes follow the real API
//! objects and kubectl's tables and error lines; anything else is refused
//! as unsupported so a fleetctl bug cannot hide behind a lenient fake.
//!
//! Without `--kubeconfig`, `$KUBECONFIG` or `~/.kube/config`, the sim also
//! tries /etc/kubernetes/admin.conf (what root on a control-plane node
//! usually has copied to ~/.kube/config); unreadable (core without sudo) or
//! absent, kubectl falls back to localhost:8080 and fails like the real one.

use std::fs;
use std::io::ErrorKind;

use std::time::Duration;

use anyhow::Result;

use super::util::{KubeVersion, server_address, version_info};
use super::{Env, complain, say};
use crate::state::Cluster;

mod drain;
mod etcd;
pub(crate) use etcd::{etcd_tag, upgraded_by_kubeadm as etcd_upgraded_by_kubeadm};
mod annotate;
mod configmaps;
mod jsonpath;
pub(crate) mod metrics;
pub(crate) mod nodes;
pub(crate) mod objects;
mod passthrough;
pub(crate) mod pdb;
pub(crate) mod pods;
#[cfg(test)]
mod tests;

const NAME: &str = "kubectl";
const KUSTOMIZE_VERSION: &str = "v5.7.1";

/// Flags that take a value (`--flag value` or `--flag=value`).
const VALUE_FLAGS: &[&str] = &[
    "namespace",
    "output",
    "kubeconfig",
    "timeout",
    "for",
    "from-literal",
    "resource-version",
    "grace-period",
    "request-timeout",
    "raw",
    "type",
    "patch",
    "filename",
    "field-selector",
    "server",
];
/// Flags that are switches (`--flag` or `--flag=true|false`).
const BOOL_FLAGS: &[&str] = &[
    "ignore-daemonsets",
    "delete-emptydir-data",
    "delete-local-data",
    "force",
    "overwrite",
    "client",
    "ignore-not-found",
    "all-namespaces",
];
/// Flags every verb accepts.
const GLOBAL_FLAGS: &[&str] = &["namespace", "kubeconfig", "request-timeout", "server"];

/// A parsed command line: positional words and flags, in any order.
#[derive(Debug, Default)]
pub(super) struct Cli {
    pub words: Vec<String>,
    flags: Vec<(String, String)>,
}

impl Cli {
    fn parse(args: &[String]) -> Option<Cli> {
        let mut cli = Cli::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if a == "--" {
                cli.words.extend(it.by_ref().cloned());
                break;
            }
            let (name, inline) = if let Some(long) = a.strip_prefix("--") {
                match long.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                }
            } else if let Some(short) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
                let (name, rest) = if let Some(r) = short.strip_prefix('n') {
                    ("namespace", r)
                } else if let Some(r) = short.strip_prefix('o') {
                    ("output", r)
                } else if let Some(r) = short.strip_prefix('p') {
                    ("patch", r)
                } else if let Some(r) = short.strip_prefix('f') {
                    ("filename", r)
                } else if short == "A" {
                    ("all-namespaces", "")
                } else {
                    return None;
                };
                let rest = rest.strip_prefix('=').unwrap_or(rest);
                (
                    name.to_string(),
                    (!rest.is_empty()).then(|| rest.to_string()),
                )
            } else {
                cli.words.push(a.clone());
                continue;
            };
            let value = if VALUE_FLAGS.contains(&name.as_str()) {
                match inline {
                    Some(v) => v,
                    None => it.next()?.clone(),
                }
            } else if BOOL_FLAGS.contains(&name.as_str()) {
                inline.unwrap_or_else(|| "true".to_string())
            } else {
                return None;
            };
            cli.flags.push((name, value));
        }
        Some(cli)
    }

    /// The last value of a flag.
    pub fn flag(&self, name: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a repeatable flag, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.flags
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn switch(&self, name: &str) -> bool {
        self.flag(name).is_some_and(|v| v != "false")
    }

    pub fn namespace(&self) -> &str {
        self.flag("namespace").unwrap_or("default")
    }

    pub fn output(&self) -> Option<&str> {
        self.flag("output")
    }

    /// `-A`/`--all-namespaces`.
    pub fn all_namespaces(&self) -> bool {
        self.switch("all-namespaces")
    }

    /// `-o jsonpath=TEMPLATE`: the template, or why the sim cannot print it.
    pub fn jsonpath(&self) -> Option<Result<jsonpath::Template, String>> {
        self.output()?
            .strip_prefix("jsonpath=")
            .map(jsonpath::Template::parse)
    }

    /// True when only flags from `allowed` (and the global ones) were given.
    fn only(&self, allowed: &[&str]) -> bool {
        self.flags
            .iter()
            .all(|(n, _)| allowed.contains(&n.as_str()) || GLOBAL_FLAGS.contains(&n.as_str()))
    }
}

/// What a command did, for the event log: `record` is `ok` or the error
/// line; `None` when the call already recorded itself (unsupported).
pub(super) struct Res {
    pub code: i32,
    pub record: Option<String>,
}

impl Res {
    pub fn ok() -> Res {
        Res {
            code: 0,
            record: Some("ok".to_string()),
        }
    }

    /// Prints `msg` to stderr and fails with it.
    pub fn fail(env: &mut Env, msg: &str) -> Res {
        complain!(env, "{msg}");
        Res {
            code: 1,
            record: Some(msg.lines().next().unwrap_or(msg).to_string()),
        }
    }

    fn unsupported(env: &mut Env, args: &[String]) -> Res {
        Res {
            code: env.unsupported(NAME, args),
            record: None,
        }
    }
}

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    if env.shared().cluster().is_ok_and(|c| c.real_kubectl) {
        return passthrough::run(env, args);
    }
    start_cost(env);
    let Some(cli) = Cli::parse(args) else {
        return Ok(env.unsupported(NAME, args));
    };
    let verb = cli.words.first().cloned().unwrap_or_default();
    let res = match verb.as_str() {
        "get" => get(env, args, &cli)?,
        "version" if cli.only(&["output", "client"]) => version(env, args, &cli)?,
        "cordon" | "uncordon" if cli.only(&[]) => nodes::cordon(env, args, &cli, verb == "cordon")?,
        "drain" => drain::drain(env, args, &cli)?,
        "wait" if cli.only(&["for", "timeout"]) => nodes::wait(env, args, &cli)?,
        "annotate" if cli.only(&["overwrite", "resource-version"]) => {
            objects::annotate(env, args, &cli)?
        }
        "create" if cli.only(&["from-literal"]) => objects::create(env, args, &cli)?,
        "delete" if cli.flag("raw").is_some() && cli.only(&["raw", "filename"]) => {
            objects::delete_raw(env, args, &cli)?
        }
        "delete" if cli.only(&["ignore-not-found"]) => objects::delete(env, args, &cli)?,
        "patch" if cli.only(&["type", "patch"]) => objects::patch(env, args, &cli)?,
        "exec" if cli.only(&[]) => etcd::exec(env, args, &cli)?,
        _ => Res::unsupported(env, args),
    };
    let mutating = matches!(
        verb.as_str(),
        "cordon" | "uncordon" | "drain" | "annotate" | "create" | "delete" | "patch" | "exec"
    );
    if mutating && let Some(result) = &res.record {
        env.record(NAME, args, result);
    }
    Ok(res.code)
}

/// The pods on `node` whose eviction a PodDisruptionBudget refuses now
/// (`namespace/name`), as a drain of it would meet them: for Kured's drain.
pub(crate) fn evictions_refused(
    c: &Cluster,
    faults: &crate::state::Faults,
    node: &str,
) -> Vec<String> {
    let pods = pods::all_pods(c, crate::state::now());
    let budgets = pdb::budgets(c, faults, &pods);
    pods.iter()
        .filter(|p| {
            p.node == node
                && !matches!(p.owner_kind.as_deref(), Some("Node" | "DaemonSet"))
                && budgets.iter().any(|b| b.covers(p) && b.allowed == 0)
        })
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect()
}

/// Where kubectl would connect, or the error it prints first.
enum Target {
    Server(String),
    Nowhere,
}

fn read_kubeconfig(env: &Env, path: &str, explicit: bool) -> Result<Option<String>, String> {
    match fs::read_to_string(env.path(path)) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if explicit {
                Err(format!("error: stat {path}: no such file or directory"))
            } else {
                Ok(None)
            }
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => Err(format!(
            "error: error loading config file \"{path}\": open {path}: permission denied"
        )),
        Err(e) => Err(format!("error: error loading config file \"{path}\": {e}")),
    }
}

/// kubectl's kubeconfig precedence, then the sim's admin.conf default.
fn target(env: &Env, cli: &Cli) -> Result<Target, String> {
    if let Some(url) = cli.flag("server") {
        // --server overrides the kubeconfig's cluster; its CA still verifies.
        return metrics::server_flag(url).map(Target::Server);
    }
    let server = |text: String| {
        Target::Server(server_address(&text).unwrap_or_else(|| "localhost:8080".into()))
    };
    if let Some(path) = cli.flag("kubeconfig") {
        return read_kubeconfig(env, path, true).map(|t| t.map_or(Target::Nowhere, server));
    }
    let mut candidates: Vec<String> = env
        .kubeconfig_env
        .as_deref()
        .map(|k| {
            k.split(':')
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = &env.home {
        candidates.push(format!("{}/.kube/config", home.trim_end_matches('/')));
    }
    for path in &candidates {
        if let Some(text) = read_kubeconfig(env, path, false)? {
            return Ok(server(text));
        }
    }
    Ok(
        match fs::read_to_string(env.path("/etc/kubernetes/admin.conf")) {
            Ok(text) => server(text),
            Err(_) => Target::Nowhere,
        },
    )
}

pub(super) fn refused(addr: &str) -> String {
    format!(
        "The connection to the server {addr} was refused - did you specify the right host or port?"
    )
}

/// What a kubectl process costs before it sends anything: the scenario's
/// `kubectl_start`, 40 % of it on the CPU (as measured on a real kubectl),
/// the rest waiting. Outside a fleet (unit tests) there is no cost.
fn start_cost(env: &Env) {
    let Ok(c) = env.shared().cluster() else {
        return;
    };
    if c.kubectl_start <= 0.0 {
        return;
    }
    let started = std::time::Instant::now();
    let total = Duration::from_secs_f64(c.kubectl_start);
    let busy = total.mul_f64(0.4);
    let mut x = 0u64;
    while started.elapsed() < busy {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    std::thread::sleep(total.saturating_sub(started.elapsed()));
}

/// One more API round trip (a GET before a PATCH, say).
pub(super) fn round_trip(c: &Cluster) {
    if c.api_latency > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(c.api_latency));
    }
}

/// The cluster, if kubectl can reach the API server; else the error it
/// prints. Each call is one request and pays the scenario's `api_latency`.
pub(super) fn connect(env: &Env, cli: &Cli) -> Result<Result<Cluster, String>> {
    let addr = match target(env, cli) {
        Err(msg) => return Ok(Err(msg)),
        Ok(Target::Nowhere) => return Ok(Err(refused("localhost:8080"))),
        Ok(Target::Server(addr)) => addr,
    };
    let cluster = env.shared().cluster()?;
    round_trip(&cluster);
    if cli.flag("server").is_some() {
        let faults = env.shared().faults()?;
        return Ok(metrics::instance_at(&cluster, &faults, &addr, true).map(|_| cluster));
    }
    if cluster.api_up(crate::state::now()) {
        Ok(Ok(cluster))
    } else {
        Ok(Err(refused(&addr)))
    }
}

/// The kubeconfig's (or `--server`'s) `host:port`, for the instance that answers.
pub(super) fn server(env: &Env, cli: &Cli) -> Option<String> {
    match target(env, cli) {
        Ok(Target::Server(addr)) => Some(addr),
        _ => None,
    }
}

/// Resource kinds kubectl is asked about, by any of their names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Node,
    DaemonSet,
    ConfigMap,
    Pdb,
}

pub(super) fn kind_of(word: &str) -> Option<Kind> {
    Some(match word {
        "node" | "nodes" | "no" => Kind::Node,
        "daemonset" | "daemonsets" | "ds" | "daemonset.apps" | "daemonsets.apps" => Kind::DaemonSet,
        "configmap" | "configmaps" | "cm" => Kind::ConfigMap,
        "pdb"
        | "pdbs"
        | "poddisruptionbudget"
        | "poddisruptionbudgets"
        | "poddisruptionbudget.policy"
        | "poddisruptionbudgets.policy" => Kind::Pdb,
        _ => return None,
    })
}

fn is_pod_kind(word: &str) -> bool {
    matches!(word, "pod" | "pods" | "po")
}

/// `pod [NAME…]` or `pod/NAME…` after the verb: the names (none: a list).
fn pod_names(words: &[String]) -> Option<Vec<String>> {
    let (first, rest) = words.split_first()?;
    if is_pod_kind(first) {
        return rest
            .iter()
            .map(|w| (!w.contains('/')).then(|| w.clone()))
            .collect();
    }
    words
        .iter()
        .map(|w| {
            w.split_once('/')
                .filter(|(k, n)| is_pod_kind(k) && !n.is_empty())
                .map(|(_, n)| n.to_string())
        })
        .collect()
}

/// `TYPE NAME`, `TYPE/NAME` or `TYPE` (list) after the verb.
pub(super) fn resource(words: &[String]) -> Option<(Kind, Option<&str>)> {
    match words {
        [one] => match one.split_once('/') {
            Some((k, n)) if !n.is_empty() => Some((kind_of(k)?, Some(n))),
            Some(_) => None,
            None => Some((kind_of(one)?, None)),
        },
        [k, n] => Some((kind_of(k)?, Some(n.as_str()))),
        _ => None,
    }
}

fn get(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    if let Some(path) = cli.flag("raw") {
        if cli.words.len() != 1 || !cli.only(&["raw"]) {
            return Ok(Res::unsupported(env, args));
        }
        if !["/readyz", "/livez", "/healthz", "/metrics"].contains(&path) {
            return Ok(Res::unsupported(env, args));
        }
        if cli
            .flag("server")
            .is_some_and(|s| !s.starts_with("https://"))
        {
            return Ok(Res::unsupported(env, args));
        }
        let addr = server(env, cli);
        return Ok(match connect(env, cli)? {
            Ok(c) if path == "/metrics" => {
                let faults = env.shared().faults()?;
                match metrics::instance_at(&c, &faults, addr.as_deref().unwrap_or_default(), false)
                {
                    Ok(instance) => {
                        let text = metrics::text(&c, &instance);
                        let _ = std::io::Write::write_all(&mut *env.out, text.as_bytes());
                        Res::ok()
                    }
                    Err(msg) => Res::fail(env, &msg),
                }
            }
            Ok(_) => {
                let _ = std::io::Write::write_all(&mut *env.out, b"ok");
                Res::ok()
            }
            Err(msg) => Res::fail(env, &msg),
        });
    }
    if cli.flag("server").is_some() {
        // Only `get --raw` is asked per instance.
        return Ok(Res::unsupported(env, args));
    }
    if !cli.only(&[
        "output",
        "ignore-not-found",
        "all-namespaces",
        "field-selector",
    ]) {
        return Ok(Res::unsupported(env, args));
    }
    if matches!(cli.jsonpath(), Some(Err(_))) {
        return Ok(Res::unsupported(env, args));
    }
    if let Some(names) = pod_names(&cli.words[1..]) {
        if cli.switch("ignore-not-found") || (cli.all_namespaces() && !names.is_empty()) {
            return Ok(Res::unsupported(env, args));
        }
        return pods::get(env, args, cli, &names);
    }
    if cli.flag("field-selector").is_some() {
        return Ok(Res::unsupported(env, args));
    }
    let Some((kind, name)) = resource(&cli.words[1..]) else {
        return Ok(Res::unsupported(env, args));
    };
    let jsonpath = cli.jsonpath().is_some();
    if !jsonpath
        && !matches!(
            cli.output(),
            None | Some("json") | Some("name") | Some("yaml")
        )
    {
        return Ok(Res::unsupported(env, args));
    }
    if (cli.all_namespaces() || jsonpath) && kind == Kind::Node
        || cli.all_namespaces() && name.is_some()
    {
        return Ok(Res::unsupported(env, args));
    }
    match kind {
        Kind::Node => nodes::get(env, args, cli, name),
        Kind::DaemonSet => objects::get_daemonsets(env, args, cli, name),
        Kind::ConfigMap => objects::get_configmaps(env, args, cli, name),
        Kind::Pdb => pdb::get(env, args, cli, name),
    }
}

fn version(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    if cli.words.len() != 1 || !matches!(cli.output(), None | Some("json")) {
        return Ok(Res::unsupported(env, args));
    }
    let client = env.binary_version(NAME)?;
    let server = if cli.switch("client") {
        None
    } else {
        Some(connect(env, cli)?.map(|c| server_version(&c)))
    };
    let json = cli.output() == Some("json");
    let mut doc = serde_json::json!({
        "clientVersion": version_info(client),
        "kustomizeVersion": KUSTOMIZE_VERSION,
    });
    if json {
        if let Some(Ok(Some(s))) = &server {
            doc["serverVersion"] = version_info(*s);
        }
        say!(env, "{}", serde_json::to_string_pretty(&doc)?);
    } else {
        say!(env, "Client Version: {client}");
        say!(env, "Kustomize Version: {KUSTOMIZE_VERSION}");
        if let Some(Ok(Some(s))) = &server {
            say!(env, "Server Version: {s}");
        }
    }
    if let Some(Ok(Some(s))) = &server
        && client.minor.abs_diff(s.minor) > 1
    {
        complain!(
            env,
            "WARNING: version difference between client ({}.{}) and server ({}.{}) exceeds the supported minor version skew of +/-1",
            client.major,
            client.minor,
            s.major,
            s.minor
        );
    }
    Ok(match server {
        Some(Err(msg)) => Res::fail(env, &msg),
        _ => Res::ok(),
    })
}

/// The version of the API server that answers: the first control plane
/// whose static pods run, as they were last upgraded.
fn server_version(c: &Cluster) -> Option<KubeVersion> {
    let now = crate::state::now();
    c.nodes
        .iter()
        .filter(|(name, _)| c.static_pods_running(name, now))
        .find_map(|(_, n)| n.control_plane_version.as_deref())
        .or(Some(c.version.as_str()))
        .and_then(KubeVersion::parse)
}

//! `kubeadm version|upgrade plan|upgrade apply|upgrade node`, with the rules
//! that make a Kubernetes minor upgrade hard to get right: one minor at a
//! time, never past the kubeadm binary (the version of the image it came
//! from: the merged one as /usr/bin/kubeadm, a staged one mounted by hand),
//! control-plane nodes only, an interactive confirmation unless `--yes`, and
//! — the trap fleetctl exists to avoid — kube-proxy redeployed by the addon
//! phase unless `--skip-phases addon/kube-proxy`, because the stored
//! kubeadm-config still has `proxy: {}`. Since kubeadm v1.32 `upgrade node`
//! runs the addon phases too, on the last control-plane node to upgrade.
//!
//! `upgrade apply` refuses while a control-plane Node is NotReady (the
//! ControlPlaneNodesReady health check). Moving a node's static pods needs
//! its kubelet running (the real kubeadm waits for the kubelet to restart
//! them, then rolls back), and each new pod to come up: one whose
//! `--feature-gates` (the ClusterConfiguration's `extraArgs`) names a gate
//! the target removed exits at start, and kubeadm puts every old manifest
//! back and fails. Every successful upgrade writes the kubelet's
//! config (the kubelet-config phase), and kubeadm v1.35's post-upgrade phase
//! removes `--pod-infra-container-image` from the kubelet's flags file,
//! which kubelet v1.35 refuses: so the new kubeadm must run before the node
//! boots the new kubelet (`post_upgrade`, with kubeadm's source per version).
//!
//! The kubelet-config phase writes config.yaml from the cluster's
//! `kube-system/kubelet-config` ConfigMap, with `instance-config.yaml` laid
//! over it from v1.34 (`WriteKubeletConfigFiles`,
//! cmd/kubeadm/app/phases/upgrade/postupgrade.go): a v1.34–v1.36 kubeadm
//! creates that file when the node has none, moving
//! `--container-runtime-endpoint` out of kubeadm-flags.env (and fails when
//! there is no kubeadm-flags.env to read: "error reading kubeadm flags
//! file"); v1.37 requires it (kubernetes/kubernetes#138645, "Error if the
//! instance-config.yaml is not present").
//!
//! From v1.35 both upgrades run the SystemVerification preflight with the
//! kubelet version the upgrade leads to (kubernetes/kubernetes#134744), and
//! system-validators v1.12.1's cgroup validator errors on cgroup v1 for it
//! (kubernetes/system-validators#61): the upgrade stops before it changes
//! anything unless `--ignore-preflight-errors` names SystemVerification
//! (or `all`), as kubeadm's upgrade docs say (kubernetes/website#53082).
//!
//! The version rules and messages follow kubeadm's EnforceVersionPolicies;
//! a patch-level downgrade is allowed, as in real kubeadm.

use anyhow::Result;

use super::util::{KubeVersion, go_duration, server_address};
use super::{Env, complain, say};
use crate::state::{Cluster, Role};
use kubelet_phase::write_kubelet_config;
use preflight::system_verification;

const NAME: &str = "kubeadm";
const STACK_HINT: &str = "To see the stack trace of this error execute with --v=5 or higher";
const ADMIN_CONF: &str = "/etc/kubernetes/admin.conf";
/// Since kubeadm v1.28 kubelets may be three minors behind the control plane.
const KUBELET_SKEW: u64 = 3;
/// kubeadm v1.32 gave `upgrade node` the addon phases.
const NODE_ADDONS_SINCE_MINOR: u64 = 32;

const APPLY_PHASES: &[&str] = &[
    "preflight",
    "control-plane",
    "upload-config",
    "upload-config/kubeadm",
    "upload-config/kubelet",
    "kubelet-config",
    "bootstrap-token",
    "addon",
    "addon/coredns",
    "addon/kube-proxy",
    "post-upgrade",
];

const NODE_PHASES: &[&str] = &[
    "preflight",
    "control-plane",
    "kubelet-config",
    "post-upgrade",
];
const NODE_ADDON_PHASES: &[&str] = &["addon", "addon/coredns", "addon/kube-proxy"];

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["version", rest @ ..] => version(env, args, rest),
        ["upgrade", "plan", rest @ ..] if rest.iter().all(|a| a.starts_with("--v=")) => {
            upgrade_plan::plan(env)
        }
        ["upgrade", "apply", rest @ ..] => match ApplyCli::parse(rest) {
            Some(cli) => upgrade_apply::apply(env, args, &cli),
            None => Ok(env.unsupported(NAME, args)),
        },
        ["certs", "check-expiration"] => check_expiration::check_expiration(env, args),
        ["upgrade", "node", rest @ ..] => match parse_node_flags(rest) {
            Some((skip, ignore)) => upgrade_node::upgrade_node(env, args, &skip, &ignore),
            None => Ok(env.unsupported(NAME, args)),
        },
        _ => Ok(env.unsupported(NAME, args)),
    }
}

fn version(env: &mut Env, args: &[String], rest: &[&str]) -> Result<i32> {
    let output = match rest {
        [] => "",
        ["-o", o] => o,
        [o] if o.starts_with("-o=") || o.starts_with("--output=") => {
            o.split_once('=').map_or("", |(_, v)| v)
        }
        ["--output", o] => o,
        _ => return Ok(env.unsupported(NAME, args)),
    };
    let v = env.binary_version(NAME)?;
    match output {
        "short" => say!(env, "{v}"),
        "json" => {
            let doc = serde_json::json!({ "clientVersion": super::util::version_info(v) });
            say!(env, "{}", serde_json::to_string_pretty(&doc)?);
        }
        "" => {
            let i = super::util::version_info(v);
            say!(
                env,
                "kubeadm version: &version.Info{{Major:\"{}\", Minor:\"{}\", GitVersion:\"{v}\", GitCommit:\"{}\", \
                 GitTreeState:\"clean\", BuildDate:\"{}\", GoVersion:\"{}\", Compiler:\"gc\", Platform:\"linux/amd64\"}}",
                v.major,
                v.minor,
                i["gitCommit"].as_str().unwrap_or_default(),
                i["buildDate"].as_str().unwrap_or_default(),
                i["goVersion"].as_str().unwrap_or_default(),
            );
        }
        _ => return Ok(env.unsupported(NAME, args)),
    }
    Ok(0)
}

/// Flags of `upgrade apply`.
struct ApplyCli {
    version: String,
    yes: bool,
    force: bool,
    skip: Vec<String>,
    ignore: Vec<String>,
}

impl ApplyCli {
    fn parse(rest: &[&str]) -> Option<ApplyCli> {
        let mut cli = ApplyCli {
            version: String::new(),
            yes: false,
            force: false,
            skip: Vec::new(),
            ignore: Vec::new(),
        };
        let mut it = rest.iter();
        while let Some(a) = it.next() {
            match *a {
                "-y" | "--yes" => cli.yes = true,
                "-f" | "--force" => cli.force = true,
                "--skip-phases" => cli.skip.extend(split_phases(it.next()?)),
                s if s.starts_with("--skip-phases=") => {
                    cli.skip.extend(split_phases(&s["--skip-phases=".len()..]));
                }
                "--ignore-preflight-errors" => cli.ignore.extend(split_phases(it.next()?)),
                s if s.starts_with("--ignore-preflight-errors=") => {
                    cli.ignore
                        .extend(split_phases(&s["--ignore-preflight-errors=".len()..]));
                }
                s if s.starts_with("--v=") => {}
                s if s.starts_with('-') => return None,
                s if cli.version.is_empty() => cli.version = s.to_string(),
                _ => return None,
            }
        }
        (!cli.version.is_empty()).then_some(cli)
    }

    fn skips(&self, phase: &str) -> bool {
        skipped(&self.skip, phase)
    }

    fn ignores(&self, check: &str) -> bool {
        ignores(&self.ignore, check)
    }
}

/// kubeadm compares check names case-insensitively; `all` ignores every one.
fn ignores(ignore: &[String], check: &str) -> bool {
    ignore
        .iter()
        .any(|i| i.eq_ignore_ascii_case(check) || i.eq_ignore_ascii_case("all"))
}

fn split_phases(list: &str) -> impl Iterator<Item = String> + '_ {
    list.split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
}

/// `--skip-phases` and `--ignore-preflight-errors` of `upgrade node` (the
/// flags we emulate).
fn parse_node_flags(rest: &[&str]) -> Option<(Vec<String>, Vec<String>)> {
    let mut skip = Vec::new();
    let mut ignore = Vec::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match *a {
            "--skip-phases" => skip.extend(split_phases(it.next()?)),
            s if s.starts_with("--skip-phases=") => {
                skip.extend(split_phases(&s["--skip-phases=".len()..]));
            }
            "--ignore-preflight-errors" => ignore.extend(split_phases(it.next()?)),
            s if s.starts_with("--ignore-preflight-errors=") => {
                ignore.extend(split_phases(&s["--ignore-preflight-errors=".len()..]));
            }
            s if s.starts_with("--v=") => {}
            _ => return None,
        }
    }
    Some((skip, ignore))
}

/// A phase is skipped when it or its parent is in the skip list.
fn skipped(skip: &[String], phase: &str) -> bool {
    skip.iter().any(|s| {
        s == phase
            || phase
                .strip_prefix(s.as_str())
                .is_some_and(|r| r.starts_with('/'))
    })
}

/// The workflow runner refuses unknown phase names before doing anything.
fn invalid_phase(skip: &[String], known: &[&str]) -> Option<String> {
    skip.iter()
        .find(|s| !known.contains(&s.as_str()))
        .map(|s| format!("invalid phase name: {s}"))
}

/// Prints a kubeadm error, records the call, exit 1.
fn fail(env: &mut Env, args: &[String], msg: &str) -> i32 {
    complain!(env, "{msg}");
    complain!(env, "{STACK_HINT}");
    let first = msg.lines().next().unwrap_or(msg);
    env.record(NAME, args, first);
    1
}

/// The API server address the node's kubeconfig names, for connection errors.
fn api_address(env: &Env, kubeconfig: &str) -> String {
    std::fs::read_to_string(env.path(kubeconfig))
        .ok()
        .and_then(|t| server_address(&t))
        .unwrap_or_else(|| "127.0.0.1:6443".to_string())
}

fn admin_conf_error() -> String {
    format!(
        "couldn't create a Kubernetes client from file \"{ADMIN_CONF}\": failed to load admin kubeconfig: \
         open {ADMIN_CONF}: no such file or directory"
    )
}

fn config_unreachable(addr: &str) -> String {
    format!(
        "[upgrade/init config] FATAL: unable to fetch the kubeadm-config ConfigMap: failed to get configmap: \
         Get \"https://{addr}/api/v1/namespaces/kube-system/configmaps/kubeadm-config?timeout=10s\": \
         dial tcp {addr}: connect: connection refused"
    )
}

fn reading_config(env: &mut Env) {
    say!(
        env,
        "[upgrade] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\"..."
    );
    say!(
        env,
        "[upgrade] Use 'kubeadm init phase upload-config --config your-config-file' to re-upload it."
    );
}

/// The cluster as the API server reports it, or the connection error text.
fn cluster_via_api(env: &Env, kubeconfig: &str) -> Result<Result<Cluster, String>> {
    let cluster = env.shared().cluster()?;
    if cluster.api_up(crate::state::now()) {
        Ok(Ok(cluster))
    } else {
        Ok(Err(config_unreachable(&api_address(env, kubeconfig))))
    }
}

/// Version-skew findings: (fatal, bypassable with --force).
fn version_policy(
    cluster: &Cluster,
    target: KubeVersion,
    kubeadm: KubeVersion,
) -> Result<(Vec<String>, Vec<String>), String> {
    let current = KubeVersion::parse(&cluster.version).ok_or_else(|| {
        format!(
            "[upgrade/versions] FATAL: Unable to fetch cluster version: couldn't parse kubernetesVersion {:?}",
            cluster.version
        )
    })?;
    let (mut fatal, mut skippable) = (Vec::new(), Vec::new());
    if target.minor > current.minor + 1 {
        fatal.push(format!(
            "Specified version to upgrade to \"{target}\" is too high; kubeadm can upgrade only 1 minor version at a time"
        ));
    }
    if target.minor + 1 < current.minor {
        fatal.push(format!(
            "Specified version to downgrade to \"{target}\" is too low; kubeadm can downgrade only 1 minor version at a time"
        ));
    }
    if kubeadm < target {
        if target.minor > kubeadm.minor {
            fatal.push(format!(
                "Specified version to upgrade to \"{target}\" is at least one minor release higher than the kubeadm minor release ({} > {}). Such an upgrade is not supported",
                target.minor, kubeadm.minor
            ));
        } else {
            skippable.push(format!(
                "Specified version to upgrade to \"{target}\" is higher than the kubeadm version \"{kubeadm}\". Upgrade kubeadm first using the tool you used to install kubeadm"
            ));
        }
    }
    if kubeadm.major > target.major || kubeadm.minor > target.minor {
        skippable.push(format!(
            "Kubeadm version {kubeadm} can only be used to upgrade to Kubernetes version {}.{}",
            kubeadm.major, kubeadm.minor
        ));
    }
    let too_old: Vec<String> = cluster
        .nodes
        .values()
        .filter_map(|n| KubeVersion::parse(&n.kubelet_version))
        .filter(|k| target.minor > k.minor + KUBELET_SKEW)
        .map(|k| k.to_string())
        .collect();
    if !too_old.is_empty() {
        skippable.push(format!(
            "There are kubelets in this cluster that are too old that have these versions [{}]",
            too_old.join(" ")
        ));
    }
    Ok((fatal, skippable))
}

fn format_errors(errors: &[String]) -> String {
    errors.iter().map(|e| format!("\t- {e}\n")).collect()
}

/// Asks `[upgrade/confirm] … [y/N]:` on stdout; only y/yes goes on (EOF aborts).
fn confirm(env: &mut Env) -> bool {
    let _ = std::io::Write::write_all(
        &mut *env.out,
        b"[upgrade/confirm] Are you sure you want to proceed? [y/N]: ",
    );
    let _ = env.out.flush();
    let mut answer = String::new();
    match env.input.read_line(&mut answer) {
        Ok(_) => matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        Err(_) => false,
    }
}

/// Whether the `fail_upgrade_node` fault holds `node`; consumes it.
fn injected_node_failure(env: &Env, node: &str) -> Result<bool> {
    env.shared().update_faults(|f| {
        let held = f.fail_upgrade_node.iter().any(|n| n == node);
        f.fail_upgrade_node.retain(|n| n != node);
        held
    })
}

/// `upgrade apply|node` on a control plane renews its certificates (the
/// default `--certificate-renewal=true`): a year from now.
fn renew_certs(env: &Env) -> Result<()> {
    let node = env.node_name();
    env.shared().update_cluster(|c| {
        if c.certs_expire.contains_key(&node) {
            c.certs_expire
                .insert(node.clone(), crate::state::now() + 365.0 * 86_400.0);
        }
        Ok(())
    })
}

/// What kubeadm prints while it writes the new manifests and waits for the
/// kubelet to restart each component.
const WORK_LINES: &[&str] = &[
    "[upgrade/staticpods] Writing new Static Pod manifests to \"/etc/kubernetes/tmp/kubeadm-upgraded-manifests\"",
    "[upgrade/staticpods] Preparing for \"etcd\" upgrade",
    "[upgrade/staticpods] Current and new manifests of etcd are equal, skipping upgrade",
    "[upgrade/etcd] Waiting for etcd to become available",
    "[upgrade/staticpods] Preparing for \"kube-apiserver\" upgrade",
    "[upgrade/staticpods] Waiting for the kubelet to restart the component",
    "[upgrade/staticpods] This can take up to 5m0s",
    "[apiclient] Found 1 Pods for label selector component=kube-apiserver",
    "[upgrade/staticpods] Preparing for \"kube-controller-manager\" upgrade",
    "[upgrade/staticpods] Waiting for the kubelet to restart the component",
    "[upgrade/staticpods] Preparing for \"kube-scheduler\" upgrade",
    "[upgrade/staticpods] Waiting for the kubelet to restart the component",
];

/// kubeadm at work for the scenario's `kubeadm_duration`, a progress line
/// every 50 ms, before anything it does takes effect. Like any Go program
/// that does not handle them, it dies of SIGHUP, SIGTERM and SIGINT, and of
/// SIGPIPE when it writes to a stdout or stderr nobody reads any more (its
/// SSH session gone). Killed, it changes nothing (the cluster stays as it
/// was: kubeadm's own rollback) and leaves a `killed: SIG…` event; the
/// process then dies of that signal. `Some(code)` when it did not finish.
fn work(env: &mut Env, args: &[String], node: &str, apply: bool) -> Result<Option<i32>> {
    let duration = env.shared().cluster()?.kubeadm_duration;
    let drop = apply
        && env.shared().update_faults(|f| {
            let hit = f.drop_ssh_during_upgrade_apply.iter().any(|n| n == node);
            f.drop_ssh_during_upgrade_apply.retain(|n| n != node);
            hit
        })?;
    if duration <= 0.0 && !drop {
        return Ok(None);
    }
    let watched = go_signals::Watch::start(env.daemon);
    let started = std::time::Instant::now();
    let tick = std::time::Duration::from_millis(50);
    let mut line = 0;
    loop {
        let text = WORK_LINES[line % WORK_LINES.len()];
        line += 1;
        let written = std::io::Write::write_all(&mut *env.out, format!("{text}\n").as_bytes())
            .and_then(|()| std::io::Write::flush(&mut *env.out));
        if let Err(e) = written
            && e.kind() == std::io::ErrorKind::BrokenPipe
        {
            return Ok(Some(killed(env, args, libc::SIGPIPE)));
        }
        if drop && line == 1 {
            let n = crate::sessions::cut(std::path::Path::new("/proc"), 1, None);
            complain!(
                env,
                "fleetsim: fault drop_ssh_during_upgrade_apply: cut {n} SSH session processes of {node}"
            );
        }
        if started.elapsed().as_secs_f64() >= duration && !(drop && line < 3) {
            return Ok(None);
        }
        if let Some(sig) = watched.wait(tick) {
            return Ok(Some(killed(env, args, sig)));
        }
    }
}

/// Records the death and, in a real process, dies of `sig` as Go would.
fn killed(env: &mut Env, args: &[String], sig: i32) -> i32 {
    let name = super::systemd_run::signal_name(sig);
    env.record(NAME, args, &format!("killed: SIG{name}"));
    if env.daemon {
        go_signals::die_of(sig);
    }
    128 + sig
}

mod check_expiration;
mod feature_gates;
mod go_signals;
mod kubelet_phase;
mod post_upgrade;
mod preflight;
mod static_pods;
#[cfg(test)]
mod tests;
mod upgrade_apply;
mod upgrade_node;
mod upgrade_plan;

use static_pods::{StaticPods, record_static_pods, upgrade_static_pods};

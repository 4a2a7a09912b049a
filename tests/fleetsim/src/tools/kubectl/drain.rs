//! `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data [--timeout=…]`:
//! cordon first (a failed drain leaves the node cordoned, as for real),
//! skip mirror pods, refuse DaemonSet pods, emptyDir pods and pods without
//! a controller unless told, evict the rest. A PodDisruptionBudget that
//! selects a pod and allows no disruption (`pdb.rs`: the scenario's, or the
//! `pdb_block` fault's) blocks its eviction until the timeout, printing
//! kubectl's retry and timeout lines; a budget that allows it again (the
//! fault lifted, a pod Ready again) lets the drain finish. Evicted pods are
//! not removed from the API: the sim does not reschedule, so a budget is
//! judged on the pods as they were.
//!
//! Real kubectl waits forever without `--timeout`; the sim uses a short
//! default and never waits more than a few seconds, so a test cannot hang.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::nodes::{not_found, set_unschedulable};
use super::{Cli, Env, Res, connect};
use crate::state::Cluster;
use crate::tools::util::{go_duration, parse_go_duration};
use crate::tools::{complain, say};

/// The timeout used when `--timeout` is absent or 0 (real kubectl: forever).
const DEFAULT_TIMEOUT: f64 = 2.0;
/// The longest the sim really waits on a blocked eviction, whatever the timeout.
const MAX_REAL_WAIT: f64 = 3.0;
const POLL: Duration = Duration::from_millis(100);

/// A pod the drain has to deal with.
struct Pod {
    namespace: String,
    name: String,
    daemonset: bool,
    emptydir: bool,
    /// No controller: only `--force` deletes it.
    bare: bool,
}

impl Pod {
    fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The pods the API lists on `node`, as drain sorts them: mirror pods are
/// skipped silently (the kubelet owns them), finished ones need nothing.
fn pods_on(c: &Cluster, node: &str) -> Vec<Pod> {
    super::pods::all_pods(c, crate::state::now())
        .into_iter()
        .filter(|p| p.node == node && p.owner_kind.as_deref() != Some("Node"))
        .map(|p| Pod {
            daemonset: p.owner_kind.as_deref() == Some("DaemonSet"),
            bare: p.owner_kind.is_none() && p.phase == "Running",
            emptydir: p.emptydir,
            namespace: p.namespace,
            name: p.name,
        })
        .collect()
}

/// kubectl's aggregate error: one message as is, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// Prints the "unable to drain" block and fails with its headline.
fn unable(env: &mut Env, node: &str, errors: &[String]) -> Res {
    let headline = format!(
        "error: unable to drain node \"{node}\" due to error: {}, continuing command...",
        aggregate(errors)
    );
    complain!(env, "{headline}");
    complain!(env, "There are pending nodes to be drained:");
    complain!(env, " {node}");
    for e in errors {
        complain!(env, "{e}");
    }
    Res {
        code: 1,
        record: Some(headline),
    }
}

pub(super) fn drain(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let allowed = [
        "ignore-daemonsets",
        "delete-emptydir-data",
        "delete-local-data",
        "force",
        "timeout",
        "grace-period",
    ];
    let ([_, node], true) = (cli.words.as_slice(), cli.only(&allowed)) else {
        return Ok(Res::unsupported(env, args));
    };
    let timeout = match cli.flag("timeout").map(|t| (t, parse_go_duration(t))) {
        None | Some((_, Some(0.0))) => DEFAULT_TIMEOUT,
        Some((_, Some(secs))) if secs > 0.0 => secs,
        Some((t, _)) => {
            let msg = format!(
                "error: invalid argument \"{t}\" for \"--timeout\" flag: time: invalid duration \"{t}\""
            );
            return Ok(Res::fail(env, &msg));
        }
    };
    let cluster = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    // The cordon's PATCH, the pod list, the evictions, and the wait for
    // the evicted pods to be gone: at least four more round trips.
    for _ in 0..4 {
        super::round_trip(&cluster);
    }
    if !cluster.nodes.contains_key(node.as_str()) {
        return Ok(Res::fail(env, &not_found("nodes", node)));
    }
    match set_unschedulable(env, node, true)? {
        Some(true) => say!(env, "node/{node} cordoned"),
        _ => say!(env, "node/{node} already cordoned"),
    }
    let pods = pods_on(&cluster, node);
    let (ds, evict): (Vec<&Pod>, Vec<&Pod>) = pods.iter().partition(|p| p.daemonset);
    let ds_ids = ds.iter().map(|p| p.id()).collect::<Vec<_>>().join(", ");
    let local: Vec<String> = evict
        .iter()
        .filter(|p| p.emptydir)
        .map(|p| p.id())
        .collect();
    let mut refusals = Vec::new();
    if !cli.switch("ignore-daemonsets") && !ds.is_empty() {
        refusals.push(format!(
            "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): {ds_ids}"
        ));
    }
    let bare: Vec<String> = evict.iter().filter(|p| p.bare).map(|p| p.id()).collect();
    if !cli.switch("force") && !bare.is_empty() {
        refusals.push(format!(
            "cannot delete Pods that declare no controller (use --force to override): {}",
            bare.join(", ")
        ));
    }
    let delete_local = cli.switch("delete-emptydir-data") || cli.switch("delete-local-data");
    if !delete_local && !local.is_empty() {
        refusals.push(format!(
            "cannot delete Pods with local storage (use --delete-emptydir-data to override): {}",
            local.join(", ")
        ));
    }
    if !refusals.is_empty() {
        return Ok(unable(env, node, &refusals));
    }
    if !ds.is_empty() {
        complain!(env, "Warning: ignoring DaemonSet-managed Pods: {ds_ids}");
    }
    for p in &evict {
        say!(env, "evicting pod {}", p.id());
    }
    if let Some(blocked) = first_blocked(env, &evict)?
        && !wait_for_budget(env, blocked, timeout)?
    {
        let others: Vec<&Pod> = evict
            .iter()
            .copied()
            .filter(|p| p.id() != blocked.id())
            .collect();
        return Ok(timed_out(env, node, blocked, &others, timeout));
    }
    for p in &evict {
        say!(env, "pod/{} evicted", p.name);
    }
    say!(env, "node/{node} drained");
    Ok(Res::ok())
}

/// Whether the API would refuse evicting `pod` now: a budget of its
/// namespace selects it and allows no disruption.
fn refused(env: &Env, pod: &Pod) -> Result<bool> {
    let c = env.shared().cluster()?;
    let faults = env.shared().faults()?;
    let pods = super::pods::all_pods(&c, crate::state::now());
    let Some(api) = pods
        .iter()
        .find(|p| p.namespace == pod.namespace && p.name == pod.name)
    else {
        return Ok(false);
    };
    Ok(super::pdb::budgets(&c, &faults, &pods)
        .iter()
        .any(|b| b.covers(api) && b.allowed == 0))
}

fn first_blocked<'a>(env: &Env, evict: &[&'a Pod]) -> Result<Option<&'a Pod>> {
    for p in evict {
        if refused(env, p)? {
            return Ok(Some(p));
        }
    }
    Ok(None)
}

/// Retries the eviction of `pod` while a budget refuses it; true once evictable.
fn wait_for_budget(env: &mut Env, pod: &Pod, timeout: f64) -> Result<bool> {
    complain!(
        env,
        "error when evicting pods/\"{}\" -n \"{}\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.",
        pod.name,
        pod.namespace
    );
    let deadline = timeout.min(MAX_REAL_WAIT);
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < deadline {
        std::thread::sleep(POLL);
        if !refused(env, pod)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn timed_out(env: &mut Env, node: &str, blocked: &Pod, others: &[&Pod], timeout: f64) -> Res {
    for p in others {
        say!(env, "pod/{} evicted", p.name);
    }
    let error = format!(
        "error when evicting pods/\"{}\" -n \"{}\": global timeout reached: {}",
        blocked.name,
        blocked.namespace,
        go_duration(timeout)
    );
    complain!(
        env,
        "There are pending pods in node \"{node}\" when an error occurred: {error}"
    );
    complain!(env, "pod/{}", blocked.name);
    unable(env, node, &[error])
}

//! After a node's reboot: the new boot, the kubelet active at the staged
//! version, on a control plane its static pods Running at that version,
//! then the Node Ready and uncordoned. Each wait is bounded and says what it
//! last saw.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::node;
use crate::remote::{kubectl, upgrade};
use crate::ssh::{self, Session};
use crate::steps::context::{OnFailure, settled_facts};
use crate::steps::on_failure::{Cause, NotUp, last_kubelet_line};
use crate::steps::runner::{CommandFailed, Remote};
use crate::steps::{NODE_POLL, POLL, Rerun};
use crate::version::{Minor, Version};

use super::crash_loop::{crash_loop, first_sample, kubelet_state, name_crash_loop};
use super::{BOOT_ID_TIMEOUT, BeforeReboot};

/// Everything waiting for one rebooted node needs, owned, so the nodes of a
/// batch are waited for at the same time.
pub(super) struct Wait {
    pub(super) target: ssh::Target,
    pub(super) ssh: ssh::Options,
    pub(super) timeout: Duration,
    pub(super) deadline: Instant,
    pub(super) api: Option<Remote>,
    /// For a control plane: the version its static pods must run (`None`
    /// inside: the cluster's version is unknown, any patch of `minor`).
    pub(super) control_plane: Option<Option<Version>>,
    pub(super) minor: Minor,
    /// For a control plane: whose etcd pod judges its member's catch-up
    /// (`crate::steps::etcd_gate::peer`).
    pub(super) etcd_peer: Option<String>,
    /// Whether etcd is stacked, once known (`Apply::etcd_stacked`).
    pub(super) etcd_stacked: std::sync::Arc<tokio::sync::OnceCell<bool>>,
    pub(super) on_failure: OnFailure,
    /// This roll takes nodes back to an older kubelet.
    pub(super) rollback: bool,
    pub(super) rerun: Rerun,
}

impl Wait {
    /// The node's new boot, its kubelet, its static pods, Ready, uncordoned;
    /// returns its new session and its facts.
    pub(super) async fn run(
        &self,
        node: &str,
        r: &Remote,
        before: &BeforeReboot,
    ) -> anyhow::Result<(Remote, crate::node::NodeFacts)> {
        let session = wait_rebooted(
            node,
            &self.target,
            &self.ssh,
            &before.boot_id,
            self.deadline,
            self.timeout,
            self.rerun,
        )
        .await?;
        let fresh = r.with_session(Arc::new(session));
        // A crash loop is judged on restarts from here on, not on the
        // ones of the boot before fleetctl got back in (`crash_loop`).
        let judge = first_sample(&fresh).await;
        let up = self.until_up(node, &fresh, &before.staged);
        // Give up on a crash-looping kubelet before the deadline only
        // where apply then rolls the node back (never a rollback's own).
        let watch = !self.rollback && self.on_failure == OnFailure::Rollback;
        if !watch {
            return match up.await {
                Err(timed_out) => Err(name_crash_loop(
                    &fresh,
                    &before.staged,
                    judge,
                    timed_out,
                    &self.after_crash_loop(node),
                )
                .await),
                done => done,
            };
        }
        // systemd calls a Type=simple kubelet active from its fork until
        // it exits, so a crash loop can look active between two restarts:
        // watched beside every wait, not only the unit's.
        tokio::select! {
            done = up => done,
            looping = crash_loop(&fresh, &before.staged, judge) => Err(looping),
        }
    }

    /// What the operator does about a node whose kubelet crash-loops after
    /// this roll stopped on it.
    fn after_crash_loop(&self, node: &str) -> String {
        after_crash_loop(node, self.rerun, self.rollback)
    }

    /// The kubelet active at `staged`, the static pods, Ready, uncordoned.
    async fn until_up(
        &self,
        node: &str,
        fresh: &Remote,
        staged: &Version,
    ) -> anyhow::Result<(Remote, crate::node::NodeFacts)> {
        wait_kubelet(fresh, staged, self.deadline, self.rerun).await?;
        let api = self.api.clone().unwrap_or_else(|| fresh.clone());
        if let Some(version) = &self.control_plane {
            // Unreadable: the pods' other signs still count.
            let booted = fresh
                .run("boot time", crate::remote::BOOT_TIME, None)
                .await
                .ok()
                .and_then(|o| node::parse_boot_time(&o.stdout));
            // The control plane runs kubeadm-config's version, which a
            // converge (kubelets a patch ahead, no kubeadm) leaves behind
            // the kubelet's. Whether etcd is stacked is read once the API
            // answers (on a single control plane, once its own is back).
            let wait = |etcd| {
                wait_static_pods(
                    &api,
                    node,
                    version.as_ref(),
                    self.minor,
                    etcd,
                    booted,
                    self.deadline,
                    self.rerun,
                )
            };
            wait(false).await?;
            if crate::steps::etcd_gate::stacked(&api, &self.etcd_stacked).await? {
                wait(true).await?;
                if let Some(via) = &self.etcd_peer {
                    crate::steps::etcd_gate::caught_up(&api, node, via, self.deadline, self.rerun)
                        .await?;
                }
            }
        }
        // Nothing changes on the node any more, so its facts are read while
        // the API server is asked whether it is Ready: one round trip less
        // between two reboots.
        let (back, facts) = tokio::join!(
            ready_then_uncordon(&api, node, self.deadline, self.rerun),
            settled_facts(fresh)
        );
        back?;
        Ok((fresh.clone(), facts?))
    }
}

/// Reconnects until the node answers with a boot id other than `before`.
/// The first attempt is immediate: a node still shutting down refuses it
/// or shows its old boot id, both cheap.
pub(super) async fn wait_rebooted(
    node: &str,
    target: &ssh::Target,
    opts: &ssh::Options,
    before: &str,
    deadline: Instant,
    timeout: Duration,
    rerun: Rerun,
) -> anyhow::Result<Session> {
    let mut last = String::from("no answer yet");
    let mut pause = NODE_POLL;
    loop {
        if Instant::now() >= deadline {
            bail!(
                "{node} did not come back from its reboot within {} ({last}). It is cordoned. \
                 Once it is back (check its console), run `{rerun}` again: it resumes with this node",
                humantime::format_duration(timeout)
            );
        }
        let mut quick = opts.clone();
        quick.connect_timeout = quick.connect_timeout.min(Duration::from_secs(5));
        // Only an attempt that authenticated may have signed with the
        // operator's key: those back off (`reconnect_pause`); a node that
        // refuses TCP or closes before its banner while it boots is tried
        // again at once, so the new boot is seen within a poll of sshd's
        // start rather than up to the back-off's two seconds later.
        let signed = match ssh::connect_or_say(target, &quick).await {
            // Bounded: a node half-way through its shutdown must not hold
            // this attempt until the 10-minute command timeout.
            Ok(s) => match s
                .exec_timeout(upgrade::BOOT_ID, None, BOOT_ID_TIMEOUT)
                .await
            {
                Ok(out)
                    if out.success()
                        && out.stdout.trim() != before
                        && !out.stdout.trim().is_empty() =>
                {
                    return Ok(s);
                }
                Ok(_) => {
                    last = "still the old boot".into();
                    true
                }
                Err(e) => {
                    last = format!("{e:#}");
                    true
                }
            },
            Err(u) => {
                last = format!("{:#}", u.error);
                u.authenticated
            }
        };
        let (wait, backoff) = super::reconnect_pause::after(signed, pause, NODE_POLL);
        tokio::time::sleep(wait).await;
        pause = backoff;
    }
}

/// Polls the kubelet unit until it is active and reports `want`: the new
/// sysext was merged and the kubelet starts with the config its kubeadm
/// step wrote. A kubelet that keeps failing is reported with its journal
/// ([`NotUp`]) at the deadline; with `--on-failure rollback`, [`crash_loop`]
/// watches beside this wait and the ones after it.
pub(super) async fn wait_kubelet(
    r: &Remote,
    want: &Version,
    deadline: Instant,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let expected = format!("Kubernetes {want}");
    loop {
        let out = r
            .run_root("kubelet unit and version", upgrade::KUBELET_STATE, None)
            .await?;
        let state = kubelet_state(&out.stdout);
        if state.unit == "active" && state.version == expected {
            return Ok(());
        }
        if Instant::now() >= deadline {
            if state.version != expected {
                bail!(
                    "{}: after the reboot kubelet reports `{}`, expected {want}: the staged sysext was not \
                     merged. It is cordoned. Check `systemd-sysext status` and /etc/extensions/ on the node",
                    r.node(),
                    state.version
                );
            }
            return Err(anyhow::Error::new(NotUp {
                node: r.node().to_string(),
                cause: Cause::NotActive,
                last_log: last_kubelet_line(&state.journal),
                message: format!(
                    "{}: after the reboot kubelet.service is `{}`, not active. It is cordoned. Its journal:\n  {}\n\
                     Fix the kubelet (`journalctl -u kubelet -b` on the node), then run `{rerun}` again",
                    r.node(),
                    state.unit,
                    state.journal.join("\n  ")
                ),
            }));
        }
        tokio::time::sleep(NODE_POLL).await;
    }
}

/// Polls a control plane's own mirror pods (`crate::node::mirror_pods`)
/// until kube-apiserver, kube-controller-manager and kube-scheduler are
/// Running at `want` (any patch of `minor` when the cluster's version is
/// unknown), with `etcd` also etcd (whose image has etcd's own tag), each
/// with containers started in this boot (`booted`, when it could be read).
#[allow(clippy::too_many_arguments)]
pub(super) async fn wait_static_pods(
    api: &Remote,
    node: &str,
    want: Option<&Version>,
    minor: Minor,
    etcd: bool,
    booted: Option<jiff::Timestamp>,
    deadline: Instant,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let at = |v: &Option<Version>| match want {
        Some(w) => v.as_ref() == Some(w),
        None => v.as_ref().is_some_and(|v| v.minor() == minor),
    };
    let wanted = want.map_or_else(|| minor.to_string(), Version::to_string);
    let cmd = kubectl::get_static_pods(node);
    let label = format!("static pods of {node}");
    loop {
        let out = api.run_root(&label, &cmd, None).await?;
        let pods = node::parse_mirror_pods(&out.stdout).unwrap_or_default();
        let mut lagging: Vec<String> = kubectl::STATIC_POD_COMPONENTS
            .iter()
            .filter_map(|c| node::mirror_pod_lag(&pods, &format!("{c}-{node}"), node, booted, at))
            .collect();
        if etcd {
            lagging.extend(node::mirror_pod_lag(
                &pods,
                &format!("etcd-{node}"),
                node,
                booted,
                |_| true,
            ));
        }
        if lagging.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(anyhow::Error::new(NotUp {
                node: node.to_string(),
                cause: Cause::StaticPods,
                last_log: None,
                message: format!(
                    "{node}: its control plane did not come up at {wanted}: {}. It is cordoned. Check \
                     `crictl ps` and /etc/kubernetes/manifests/ on {node}, then run `{rerun}` again",
                    lagging.join("; ")
                ),
            }));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until the API server reports `node` Ready (`kubectl wait`, in
/// short rounds so a dropped API connection is retried), then uncordons it.
pub async fn ready_then_uncordon(
    api: &Remote,
    node: &str,
    deadline: Instant,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let cmd = kubectl::ready_then_uncordon(node);
    let label = format!("wait for {node} Ready, then uncordon it");
    loop {
        let out = api.run_root(&label, &cmd, None).await?;
        if out.success() {
            return refused_uncordon(node, &out.stderr);
        }
        if out.exit != Some(kubectl::NOT_READY) {
            return Err(anyhow::Error::new(CommandFailed::new(
                api.node(),
                &format!("uncordon {node}"),
                &out,
            )));
        }
        if Instant::now() >= deadline {
            return Err(anyhow::Error::new(NotUp {
                node: node.to_string(),
                cause: Cause::NotReady,
                last_log: None,
                message: format!(
                    "{node} is not Ready ({}); it is still cordoned. Check its kubelet, then run `{rerun}` again",
                    out.stderr.trim().lines().last().unwrap_or("no answer")
                ),
            }));
        }
        tokio::time::sleep(POLL).await;
    }
}

pub(super) async fn uncordon(api: &Remote, node: &str) -> anyhow::Result<()> {
    let out = api
        .check_root(&format!("uncordon {node}"), &kubectl::uncordon(node))
        .await?;
    refused_uncordon(node, &out.stderr)
}

/// kubectl exits 0 when the API refuses an uncordon; its stderr says so.
pub(super) fn refused_uncordon(node: &str, stderr: &str) -> anyhow::Result<()> {
    match kubectl::schedulability_refused(stderr) {
        Some(line) => bail!(
            "{node} is still cordoned: the API server refused the uncordon ({line}). \
             Uncordon it yourself (`kubectl uncordon {node}`) once the cause is fixed"
        ),
        None => Ok(()),
    }
}

/// What the operator does about `node`, whose kubelet crash-loops after a
/// roll stopped on it: fix it and rerun, or (unless the roll was itself a
/// rollback) roll it back.
pub(super) fn after_crash_loop(node: &str, rerun: Rerun, rollback: bool) -> String {
    let fix =
        format!("Fix the kubelet (`journalctl -u kubelet -b` on {node}), then run `{rerun}` again");
    match rollback {
        true => fix,
        false => format!(
            "{fix}; or take {node} back to the kubelet it ran before with `fleetctl rollback {node}`"
        ),
    }
}

//! The control planes the lock is kept through. In HA the API stays up
//! while one control plane reboots, so a heartbeat (or the release) that
//! fails through the node kubectl ran on is tried at once through the next
//! control plane that answers. [`Planes`] is the seam: [`ControlPlanes`]
//! over SSH in a run, a fake in `planes/failover_tests.rs`, so that the
//! rule itself ([`first_answering`], [`heartbeat_round`]) is tested in
//! milliseconds rather than by rebooting cp-1 of a real-OS HA fleet.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clock::ClockOffset;
use super::{Kubectl, Lock, LockLost};
use crate::ssh;
use crate::steps::Stop;
use crate::steps::journal::Journal;
use crate::steps::lock;
use crate::steps::runner::Remote;
use crate::ui::Printer;

#[cfg(test)]
mod failover_tests;

/// Where the lock's heartbeat and release go: the API through the control
/// plane that answered last, and a way to another one.
pub(super) trait Planes: Send {
    type Api: Kubectl + Sync;

    /// The API through the control plane that answered last.
    fn api(&self) -> &Self::Api;

    /// A new way to the API: the current node first, then each other
    /// control plane in turn ([`first_answering`]); the first that answers
    /// is used from now on.
    fn failover(&mut self) -> impl Future<Output = anyhow::Result<()>> + Send;
}

/// Tries `connect` on node `current`, then on each other of the `count`
/// control planes in inventory order (wrapping round): the first that
/// answers, with its index; else every node's error.
pub(super) async fn first_answering<T, F>(
    current: usize,
    count: usize,
    mut connect: impl FnMut(usize) -> F,
) -> anyhow::Result<(usize, T)>
where
    F: Future<Output = anyhow::Result<T>>,
{
    let mut errors = Vec::new();
    for k in 0..count {
        let i = (current + k) % count;
        match connect(i).await {
            Ok(t) => return Ok((i, t)),
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    anyhow::bail!("no control-plane node answers: {}", errors.join("; "))
}

/// The control-plane nodes the lock is kept through over SSH, and the
/// session to the one that answered last.
pub(super) struct ControlPlanes {
    pub(super) remote: Remote,
    /// Every control-plane node, in inventory order, and which one `remote`
    /// is connected to.
    pub(super) targets: Vec<ssh::Target>,
    pub(super) current: usize,
    pub(super) opts: ssh::Options,
    pub(super) journal: Arc<Journal>,
}

impl Planes for ControlPlanes {
    type Api = Remote;

    fn api(&self) -> &Remote {
        &self.remote
    }

    async fn failover(&mut self) -> anyhow::Result<()> {
        let mut quick = self.opts.clone();
        quick.connect_timeout = quick.connect_timeout.min(Duration::from_secs(5));
        let (targets, quick) = (&self.targets, &quick);
        let (i, session) = first_answering(self.current, targets.len(), move |i| {
            ssh::connect(&targets[i], quick)
        })
        .await?;
        self.remote = Remote::new(Arc::new(session), self.journal.clone());
        self.remote.report_warnings();
        self.current = i;
        Ok(())
    }
}

/// One round of the heartbeat: the lock refreshed through the control
/// plane that answered last, else (that node is rebooting) at once through
/// the next one that answers. A lost lock stops the run (`false`: no more
/// rounds); a heartbeat that no control plane took leaves the lease as it
/// was, and the run stops once it reaches its margin. `warned`: whether a
/// failed heartbeat was already said, so that a long reboot says it once.
pub(super) async fn heartbeat_round<P: Planes>(
    lock: &Lock,
    clock: ClockOffset,
    planes: &mut P,
    stop: &Stop,
    warned: &mut bool,
    printer: &Printer,
) -> bool {
    let mut result = beat(lock, clock, planes.api(), stop).await;
    if let Err(e) = &result
        && !e.chain().any(|c| c.is::<LockLost>())
    {
        if !*warned {
            printer.debug(&format!(
                "lock heartbeat through {} failed, trying the control planes in turn: {e:#}",
                planes.api().node()
            ));
            *warned = true;
        }
        if planes.failover().await.is_ok() {
            result = beat(lock, clock, planes.api(), stop).await;
        }
    }
    match result {
        Ok(()) => *warned = false,
        Err(e) if e.chain().any(|c| c.is::<LockLost>()) => {
            stop.abort(format!("{e:#}"));
            return false;
        }
        Err(_) => {}
    }
    // run_within_lease also races the whole run against this (at once); here
    // any run stops at its next safe point, should it not be racing.
    if let Some(lapsing) = stop.lapsed_now() {
        stop.abort(lapsing.to_string());
    }
    true
}

/// One heartbeat, in the cluster's time; the lease is renewed from when it
/// was sent.
async fn beat<K: Kubectl>(
    lock: &Lock,
    clock: ClockOffset,
    api: &K,
    stop: &Stop,
) -> anyhow::Result<()> {
    let sent = Instant::now();
    lock.heartbeat(api, clock.cluster_time(lock::clock::laptop_now()))
        .await?;
    stop.renew_lease(sent);
    Ok(())
}

/// Gives the lock back through the control plane that answered last, else
/// through the next one that answers.
pub(super) async fn release_through<P: Planes>(lock: &Lock, planes: &mut P) -> anyhow::Result<()> {
    let Err(first) = lock.release(planes.api()).await else {
        return Ok(());
    };
    if planes.failover().await.is_err() {
        return Err(first);
    }
    lock.release(planes.api()).await.map(|_| ())
}

//! The seam between the holds and gates (the soak, the maintenance window,
//! the alert gate, Kured's blocking pods, Ceph, etcd before a drain and
//! after a reboot) and the world they wait in: [`HoldWorld`], its clock,
//! its Ctrl-C, its terminal and journal, and the readings each gate asks
//! for. [`wait_out`] is the one loop they all wait in.
//!
//! Two worlds answer it, as `roll::world` has the real roll and the fake
//! fleet: [`SshHolds`], the run's (each reading the command it always ran
//! on the first control plane), and the gates' tests' fake
//! (`super::fake_holds`), a virtual clock and scripted readings, on which
//! the gates' own code runs in milliseconds instead of a real-OS fleet
//! held for minutes.

use std::time::{Duration, Instant};

use super::context::Apply;
use super::runner::Remote;
use crate::checks::ceph::Reading;
use crate::checks::{self, EtcdMembers};
use crate::gather::rook_reading;
use crate::remote::{etcd_status, kured_pods};

/// What a hold waits in: a clock, a stop, the terminal, the journal, and
/// what each gate reads.
pub(super) trait HoldWorld {
    /// Time on the world's clock, from any fixed origin.
    fn now(&self) -> Duration;
    /// The wall clock, for the maintenance window.
    fn wall(&self) -> jiff::Timestamp;
    /// An `Interrupted` error when a stop (Ctrl-C, the lock lost) was asked.
    fn check_stop(&self) -> anyhow::Result<()>;
    /// Waits `d`, ending at once with the stop's error when one is asked.
    async fn pause(&mut self, d: Duration) -> anyhow::Result<()>;
    /// A line on the terminal.
    fn say(&mut self, line: &str);
    /// An event of the journal.
    fn journal(&mut self, kind: &str, node: Option<&str>, text: &str);

    /// The alert gate's answer at `url`: its body, or why it could not be
    /// read (an `Err` of the outer result: the session failed).
    async fn alerts(&mut self, url: &str) -> anyhow::Result<Result<String, String>>;
    /// The pods on `node` matching Kured's `selector`, as
    /// `kured_pods::blocking_pods` prints them, or why they could not be
    /// listed.
    async fn pods(&mut self, selector: &str, node: &str) -> anyhow::Result<Result<String, String>>;
    /// Every CephCluster's reading (`None`: no CephCluster, no Rook);
    /// `stopping`: the nodes whose OSDs `ok-to-stop` is asked about.
    async fn ceph(&mut self, stopping: &[String])
    -> anyhow::Result<Option<Vec<(String, Reading)>>>;
    /// The cluster's clock when Ceph's recovery wait begins (`None`: no
    /// CephCluster, nothing to wait for; `Some(i64::MAX)`: unknown).
    async fn ceph_clock(&mut self) -> Option<i64>;
    /// Every etcd member as `via`'s etcd pod sees it, or why it could not
    /// be read.
    async fn etcd(&mut self, via: &str) -> Result<EtcdMembers, String>;
    /// `kubectl label node NODE LABELS --overwrite` (its journal's words:
    /// `what`): done, or why not.
    async fn label(
        &mut self,
        what: &str,
        node: &str,
        labels: &[String],
    ) -> anyhow::Result<Result<(), String>>;
}

/// What a reading says.
pub(super) enum Look {
    /// Nothing holds.
    Clear,
    /// This holds (in words, for the terminal and the journal).
    Holds(String),
    /// Nothing to wait on at all (no CephCluster).
    Absent,
}

/// How a wait ended.
#[derive(Debug, PartialEq)]
pub(super) enum Waited {
    Absent,
    /// Nothing held at the first reading.
    Clear,
    /// Held, then released after this long.
    Released(Duration),
    /// Still held when the next pause would pass the timeout: why.
    TimedOut(String),
}

/// Reads until nothing holds: each time what holds changes, `held` is told
/// (with how long it has held so far); a pause that would end past
/// `timeout` is not taken, the wait ends `TimedOut` with the last reason;
/// a stop ends it at once, before a reading and during a pause.
pub(super) async fn wait_out<W: HoldWorld>(
    w: &mut W,
    timeout: Duration,
    interval: Duration,
    mut read: impl AsyncFnMut(&mut W) -> anyhow::Result<Look>,
    mut held: impl FnMut(&mut W, &str, Duration),
) -> anyhow::Result<Waited> {
    let mut h = Holding::new(w, timeout, interval);
    loop {
        w.check_stop()?;
        let look = read(w).await?;
        if let Some(end) = h.after(w, look, &mut held) {
            return Ok(end);
        }
        w.pause(interval).await?;
    }
}

/// The judgement of [`wait_out`] after each reading, for a wait written
/// as its own loop: a future that must be `Send` (`etcd_gate::caught_up`,
/// spawned beside the other nodes' waits), which rustc cannot yet prove of
/// one that calls an async closure capturing references ("implementation
/// of `Send` is not general enough", rust-lang/rust#139475, #110338).
pub(super) struct Holding {
    start: Duration,
    timeout: Duration,
    interval: Duration,
    said: Option<String>,
}

impl Holding {
    pub(super) fn new(w: &impl HoldWorld, timeout: Duration, interval: Duration) -> Holding {
        Holding {
            start: w.now(),
            timeout,
            interval,
            said: None,
        }
    }

    /// After a reading: `Some` ends the wait, `None` pauses one interval
    /// and reads again. `held` is told each time what holds changes.
    pub(super) fn after<W: HoldWorld>(
        &mut self,
        w: &mut W,
        look: Look,
        held: &mut impl FnMut(&mut W, &str, Duration),
    ) -> Option<Waited> {
        let so_far = w.now() - self.start;
        let why = match look {
            Look::Absent => return Some(Waited::Absent),
            Look::Clear if self.said.is_some() => return Some(Waited::Released(so_far)),
            Look::Clear => return Some(Waited::Clear),
            Look::Holds(why) => why,
        };
        if self.said.as_ref() != Some(&why) {
            held(w, &why, so_far);
            self.said = Some(why.clone());
        }
        (so_far + self.interval > self.timeout).then_some(Waited::TimedOut(why))
    }
}

/// Whole seconds, as the holds say how long they held.
pub(super) fn secs(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(Duration::from_secs(d.as_secs()))
}

/// The run's world: readings on the first control plane (`api`), the
/// run's stop, terminal and journal; `apply` is `None` after a reboot
/// (`etcd_gate::caught_up`), where no stop ends the wait and nothing is
/// said but in the journal.
pub(super) struct SshHolds<'r, 'a> {
    apply: Option<&'r Apply<'a>>,
    api: Remote,
    origin: Instant,
}

impl<'r, 'a> SshHolds<'r, 'a> {
    pub(super) fn new(apply: &'r Apply<'a>) -> anyhow::Result<SshHolds<'r, 'a>> {
        Ok(SshHolds {
            api: apply.api()?,
            apply: Some(apply),
            origin: Instant::now(),
        })
    }

    /// Reads through `api` alone: no stop, no terminal.
    pub(super) fn on_api(api: &Remote) -> SshHolds<'static, 'static> {
        SshHolds {
            apply: None,
            api: api.clone(),
            origin: Instant::now(),
        }
    }
}

impl HoldWorld for SshHolds<'_, '_> {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn wall(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        self.apply.map_or(Ok(()), |a| a.check_stop(None))
    }

    async fn pause(&mut self, d: Duration) -> anyhow::Result<()> {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.check_stop()?;
            tokio::time::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(super::POLL),
            )
            .await;
        }
        Ok(())
    }

    fn say(&mut self, line: &str) {
        if let Some(a) = self.apply {
            a.progress.line(line);
        }
    }

    fn journal(&mut self, kind: &str, node: Option<&str>, text: &str) {
        self.api.journal().event(kind, node, text);
    }

    async fn alerts(&mut self, url: &str) -> anyhow::Result<Result<String, String>> {
        let out = self
            .api
            .run("alert gate", &crate::remote::alerts::query(url), None)
            .await?;
        Ok(match out.success() {
            true => Ok(out.stdout),
            false => Err(out.stderr.trim().to_string()),
        })
    }

    async fn pods(&mut self, selector: &str, node: &str) -> anyhow::Result<Result<String, String>> {
        let out = self
            .api
            .run_root(
                &format!("Kured's blocking pods on {node} ({selector})"),
                &kured_pods::blocking_pods(selector, node),
                None,
            )
            .await?;
        Ok(match out.success() {
            true => Ok(out.stdout),
            false => Err(last_line(&out.stderr)),
        })
    }

    async fn ceph(
        &mut self,
        stopping: &[String],
    ) -> anyhow::Result<Option<Vec<(String, Reading)>>> {
        rook_reading::read(&self.api, stopping).await
    }

    async fn ceph_clock(&mut self) -> Option<i64> {
        match rook_reading::discover(&self.api).await {
            Ok(d) if d.clusters.as_ref().is_ok_and(Vec::is_empty) => None,
            Ok(d) => Some(d.now.unwrap_or(i64::MAX)),
            Err(_) => Some(i64::MAX),
        }
    }

    async fn etcd(&mut self, via: &str) -> Result<EtcdMembers, String> {
        let api = &self.api;
        let (list_label, status_label) = (
            format!("etcd gate: member list (etcd-{via})"),
            format!("etcd gate: every member's status (etcd-{via})"),
        );
        let (list_cmd, status_cmd) = (
            etcd_status::member_list(via),
            etcd_status::endpoint_status(via),
        );
        let (list, status) = tokio::join!(
            api.run_root(&list_label, &list_cmd, None),
            api.run_root(&status_label, &status_cmd, None),
        );
        let list = list.map_err(|e| format!("{e:#}"))?;
        let status = status.map_err(|e| format!("{e:#}"))?;
        if !list.success() {
            return Err(format!(
                "etcdctl member list in etcd-{via} failed: {}",
                last_line(&list.stderr)
            ));
        }
        checks::parse_etcd_members(&list.stdout, &status.stdout, &status.stderr)
            .map_err(|e| format!("etcd-{via}: {e:#}"))
    }

    async fn label(
        &mut self,
        what: &str,
        node: &str,
        labels: &[String],
    ) -> anyhow::Result<Result<(), String>> {
        let out = self
            .api
            .run_root(
                what,
                &crate::remote::kubectl::label_node(node, labels),
                None,
            )
            .await?;
        Ok(match out.success() {
            true => Ok(()),
            false => Err(last_line(&out.stderr)),
        })
    }
}

/// The last line of a command's stderr, bounded.
fn last_line(s: &str) -> String {
    s.trim()
        .lines()
        .last()
        .unwrap_or("no output")
        .chars()
        .take(300)
        .collect()
}

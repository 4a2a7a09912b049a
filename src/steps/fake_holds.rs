//! A fake [`HoldWorld`] for the gates' tests (`super::hold_tests`): a
//! virtual clock that a pause moves on (a test of a 30-minute hold takes
//! microseconds), a stop asked at a given moment, and the readings scripted
//! over time (each script holds `(from second, answer)` pairs: the answer
//! read is the last one whose second has come). Everything said, journaled
//! and read is recorded, with when.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Interrupted;
use super::hold_world::HoldWorld;
use crate::checks::EtcdMembers;
use crate::checks::ceph::Reading;

/// Answers over time: `(from second, answer)`, in order.
pub(super) type Script<T> = Vec<(u64, T)>;

#[derive(Default)]
pub(super) struct FakeHolds {
    /// The virtual clock.
    pub(super) t: Duration,
    /// A stop (Ctrl-C) is asked at this moment.
    pub(super) stop_at: Option<Duration>,
    pub(super) said: Vec<String>,
    /// `(second, kind, node, text)`.
    pub(super) journaled: Vec<(u64, String, Option<String>, String)>,
    /// `(second, what was read)`.
    pub(super) reads: Vec<(u64, String)>,
    pub(super) alerts: Script<Result<String, String>>,
    /// Per node.
    pub(super) pods: BTreeMap<String, Script<Result<String, String>>>,
    pub(super) ceph: Script<Option<Vec<(String, Reading)>>>,
    /// The cluster's clock as Ceph's recovery wait begins.
    pub(super) ceph_clock: Option<i64>,
    pub(super) etcd: Script<Result<EtcdMembers, String>>,
    /// The nodes whose labels the API refuses, and why.
    pub(super) label_refused: BTreeMap<String, String>,
}

impl FakeHolds {
    fn answer<T: Clone>(&self, script: &Script<T>, what: &str) -> T {
        script
            .iter()
            .rev()
            .find(|(from, _)| Duration::from_secs(*from) <= self.t)
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| panic!("no answer scripted for {what} at {:?}", self.t))
    }

    fn read(&mut self, what: String) {
        self.reads.push((self.t.as_secs(), what));
    }

    /// The kinds journaled, in order.
    pub(super) fn kinds(&self) -> Vec<&str> {
        self.journaled
            .iter()
            .map(|(_, k, _, _)| k.as_str())
            .collect()
    }

    /// The text of the first event of `kind`.
    pub(super) fn event(&self, kind: &str) -> &str {
        self.journaled
            .iter()
            .find(|(_, k, _, _)| k == kind)
            .map(|(_, _, _, text)| text.as_str())
            .unwrap_or_else(|| panic!("no {kind} in {:#?}", self.journaled))
    }
}

impl HoldWorld for FakeHolds {
    fn now(&self) -> Duration {
        self.t
    }

    fn wall(&self) -> jiff::Timestamp {
        // 2026-12-07 10:00:00 UTC, a Monday, moved on by the virtual clock.
        let start: jiff::Timestamp = "2026-12-07T10:00:00Z".parse().expect("a timestamp");
        start + jiff::SignedDuration::try_from(self.t).expect("a short run")
    }

    fn check_stop(&self) -> anyhow::Result<()> {
        match self.stop_at {
            Some(at) if at <= self.t => Err(Interrupted("stopped at a safe point".into()).into()),
            _ => Ok(()),
        }
    }

    async fn pause(&mut self, d: Duration) -> anyhow::Result<()> {
        match self.stop_at {
            Some(at) if at < self.t + d => {
                self.t = self.t.max(at);
                self.check_stop()
            }
            _ => {
                self.t += d;
                Ok(())
            }
        }
    }

    fn say(&mut self, line: &str) {
        self.said.push(line.to_string());
    }

    fn journal(&mut self, kind: &str, node: Option<&str>, text: &str) {
        self.journaled.push((
            self.t.as_secs(),
            kind.to_string(),
            node.map(String::from),
            text.to_string(),
        ));
    }

    async fn alerts(&mut self, url: &str) -> anyhow::Result<Result<String, String>> {
        self.read(format!("alerts {url}"));
        Ok(self.answer(&self.alerts, "the alerts"))
    }

    async fn pods(&mut self, selector: &str, node: &str) -> anyhow::Result<Result<String, String>> {
        self.read(format!("pods {selector} {node}"));
        let script = self.pods.get(node).cloned().unwrap_or_default();
        Ok(self.answer(&script, &format!("the pods on {node}")))
    }

    async fn ceph(
        &mut self,
        stopping: &[String],
    ) -> anyhow::Result<Option<Vec<(String, Reading)>>> {
        self.read(format!("ceph {}", stopping.join(",")));
        Ok(self.answer(&self.ceph, "Ceph"))
    }

    async fn ceph_clock(&mut self) -> Option<i64> {
        self.read("ceph clock".into());
        self.ceph_clock
    }

    async fn etcd(&mut self, via: &str) -> Result<EtcdMembers, String> {
        self.read(format!("etcd {via}"));
        self.answer(&self.etcd, "etcd")
    }

    async fn label(
        &mut self,
        what: &str,
        node: &str,
        labels: &[String],
    ) -> anyhow::Result<Result<(), String>> {
        self.read(format!("label {node} {} ({what})", labels.join(" ")));
        Ok(match self.label_refused.get(node) {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        })
    }
}

//! The cluster's time, as the lock must be written in it.
//!
//! Kured judges a lock entry with its own node's clock: an entry expires
//! once `time.Since(created) >= TTL` (kubereboot/kured
//! `pkg/daemonsetlock/daemonsetlock.go`, `ttlExpired`, called by `Acquire`,
//! `Holding` and, for `--concurrency` > 1, `canAcquireMultiple`). `created`
//! written from a laptop whose clock is 25 minutes slow is 25 minutes old
//! the moment Kured reads it: with a 23-minute TTL Kured takes the lock at
//! once and may reboot a node mid-upgrade. So fleetctl measures how far the
//! laptop's clock is from the cluster's and writes `created` (and judges
//! other holders' heartbeats) in the cluster's time.
//!
//! **How it is measured.** fleetctl reads the clock of the control-plane
//! node it keeps the lock through (`date -u +%s.%N`, [`crate::remote::CLOCK`])
//! over the SSH session it already has, noting the laptop's clock before and
//! after. That node runs the API server, whose clock stamps the objects, and
//! its clock is what kubeadm's nodes keep in step with each other (NTP).
//! It is preferred over an API response's `Date` header: kubectl prints
//! headers only at `-v=8` in a log format that is not an interface, the
//! header has whole seconds, and a proxy or load balancer in front of the
//! API server may write its own. The remote read happened somewhere between
//! the two laptop readings, so the offset is known to within that round
//! trip; fleetctl takes its upper end, so that `created` is never earlier
//! than the cluster's time: Kured may see the lock a round trip fresher
//! than it is, never older.
//!
//! **The bound.** Beyond [`MAX_CLOCK_OFFSET`] (5 minutes, the clock skew
//! Kerberos tolerates by default: `clockskew` in krb5.conf(5)) one of the
//! clocks is wrong,
//! and more than the lock depends on it: the maintenance window and the
//! journal are judged and stamped in the laptop's time. fleetctl refuses to
//! run and says which clock is ahead by how much.
//!
//! **The whole fleet.** Kured on every node judges the lock by that node's
//! clock, not the control plane's, so apply's gather reads every node's
//! clock too (beside its facts) and [`fleet_skew`] compares each to the
//! control plane's: a node more than [`MAX_CLOCK_OFFSET`] off is refused by
//! name, and the node furthest ahead (its Kured sees the lock older than it
//! is) makes the lease's safety margin at least that far
//! (`Stop::widen_margin`), so that apply stops acting before any Kured
//! could take the lock as expired.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};

use super::holder::human;
use crate::steps::runner::Remote;

/// Reads `remote`'s clock and how far it is from the laptop's.
pub async fn measure(remote: &Remote) -> anyhow::Result<ClockOffset> {
    let label = "lock: read the control plane's clock (Kured judges the lock's TTL by it)";
    let sent = laptop_now();
    let out = remote.check(label, crate::remote::CLOCK).await?;
    let received = laptop_now();
    let theirs = parse_remote_clock(&out.stdout)
        .with_context(|| format!("{}: reading its clock", remote.node()))?;
    Ok(ClockOffset::measured(sent, theirs, received))
}

/// Beyond this, the laptop's and the cluster's clocks disagree too much to
/// run: see the module documentation.
pub const MAX_CLOCK_OFFSET: Duration = Duration::from_secs(5 * 60);

/// This machine's wall clock. The rules of clocks that disagree are tested
/// on measured offsets (`clock/tests.rs`) and with a node's clock moved in
/// the simulator (the cli suite's `hostile_nodes`), never by moving this one.
pub fn laptop_now() -> SystemTime {
    SystemTime::now()
}

/// How far the cluster's clock is from the laptop's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockOffset {
    /// The cluster's clock is ahead of the laptop's (or level).
    pub cluster_ahead: bool,
    pub by: Duration,
    /// How precisely it is known: the round trip of the measurement.
    pub within: Duration,
}

impl ClockOffset {
    /// No offset: for tests, and for the laptop's own time.
    pub const NONE: ClockOffset = ClockOffset {
        cluster_ahead: true,
        by: Duration::ZERO,
        within: Duration::ZERO,
    };

    /// From a reading of the cluster's clock (`remote`) taken between the
    /// laptop's `sent` and `received`: the upper end of the possible offset
    /// (`remote - sent`), so that laptop time moved by it is never behind
    /// the cluster's.
    pub fn measured(sent: SystemTime, remote: SystemTime, received: SystemTime) -> ClockOffset {
        let within = received.duration_since(sent).unwrap_or(Duration::ZERO);
        match remote.duration_since(sent) {
            Ok(by) => ClockOffset {
                cluster_ahead: true,
                by,
                within,
            },
            Err(e) => ClockOffset {
                cluster_ahead: false,
                by: e.duration(),
                within,
            },
        }
    }

    /// The cluster's time when the laptop's clock reads `laptop`.
    pub fn cluster_time(&self, laptop: SystemTime) -> SystemTime {
        if self.cluster_ahead {
            laptop.checked_add(self.by).unwrap_or(laptop)
        } else {
            laptop.checked_sub(self.by).unwrap_or(laptop)
        }
    }

    /// `Err` when the clocks are further apart than [`MAX_CLOCK_OFFSET`].
    pub fn within_bound(&self, node: &str) -> Result<(), ClockTooFar> {
        if self.by <= MAX_CLOCK_OFFSET {
            return Ok(());
        }
        Err(ClockTooFar {
            node: node.to_string(),
            offset: *self,
        })
    }
}

/// The laptop's clock and the cluster's disagree by more than
/// [`MAX_CLOCK_OFFSET`]: fleetctl does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockTooFar {
    pub node: String,
    pub offset: ClockOffset,
}

impl fmt::Display for ClockTooFar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = if self.offset.cluster_ahead {
            "behind"
        } else {
            "ahead of"
        };
        write!(
            f,
            "this machine's clock is {} {side} {}'s (measured over SSH, to within {}), more \
             than the {} fleetctl accepts: Kured judges its reboot lock's TTL by the nodes' \
             clocks, and the maintenance window and the journal go by this machine's. Nothing \
             was changed. Set the clock that is wrong (`timedatectl`, NTP) and run again",
            human(self.offset.by),
            self.node,
            millis(self.offset.within),
            human(MAX_CLOCK_OFFSET),
        )
    }
}

impl std::error::Error for ClockTooFar {}

fn millis(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        human(d)
    }
}

/// One node's clock as the gather read it: between this machine's `sent`
/// and `received`, the node's `date` printed `answer` (or could not).
#[derive(Debug, Clone, Copy)]
pub struct NodeClock<'a> {
    pub node: &'a str,
    pub sent: SystemTime,
    pub answer: Result<&'a str, &'a str>,
    pub received: SystemTime,
}

/// The fleet's clocks against the one the lock is written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetSkew {
    /// How far the clock furthest ahead of the reference is ahead of it,
    /// plus the uncertainty of both readings (their round trips): Kured
    /// there sees fleetctl's lock that much older than it is, so the
    /// lease's margin must be at least this.
    pub worst_ahead: Duration,
    /// That node, when one is ahead at all.
    pub node: Option<String>,
}

/// Reads every node's clock against `reference`'s (the control plane the
/// lock is written through, whose clock `created` is in). Refuses, naming
/// the node, when a clock cannot be read or differs from the reference's by
/// more than [`MAX_CLOCK_OFFSET`] either way: Kured on that node would
/// judge the lock's TTL minutes off. A node behind the reference sees the
/// lock younger than it is, which is safe; one ahead sees it older, and
/// sets the margin ([`FleetSkew::worst_ahead`]).
pub fn fleet_skew(clocks: &[NodeClock<'_>], reference: &str) -> anyhow::Result<FleetSkew> {
    let mut offsets = Vec::with_capacity(clocks.len());
    for c in clocks {
        let theirs = match c.answer {
            Ok(text) => parse_remote_clock(text)
                .with_context(|| format!("{}: reading its clock", c.node))?,
            Err(why) => bail!(
                "{}: its clock could not be read ({why}). Kured judges its reboot lock by each \
                 node's own clock, so apply needs them all. Nothing was changed",
                c.node
            ),
        };
        offsets.push((c.node, ClockOffset::measured(c.sent, theirs, c.received)));
    }
    let Some(&(_, base)) = offsets.iter().find(|(n, _)| *n == reference) else {
        bail!("{reference}: its clock was not read, so the fleet's clocks cannot be compared to it")
    };
    let signed = |o: &ClockOffset| -> i128 {
        let nanos = o.by.as_nanos() as i128;
        if o.cluster_ahead { nanos } else { -nanos }
    };
    let mut skew = FleetSkew {
        worst_ahead: Duration::ZERO,
        node: None,
    };
    for (node, o) in &offsets {
        let ahead = signed(o) - signed(&base);
        let apart = Duration::from_nanos(u64::try_from(ahead.unsigned_abs()).unwrap_or(u64::MAX));
        if apart > MAX_CLOCK_OFFSET {
            bail!(
                "{node}'s clock is {} {} {reference}'s (measured over SSH, to within {}), more than \
                 the {} fleetctl accepts: Kured on {node} judges its reboot lock's TTL by its own \
                 clock and would {}. Nothing was changed. Set the clock that is wrong \
                 (`timedatectl`, NTP) and run again",
                human(apart),
                if ahead > 0 { "ahead of" } else { "behind" },
                millis(o.within + base.within),
                human(MAX_CLOCK_OFFSET),
                if ahead > 0 {
                    "see fleetctl's lock as expired while fleetctl still holds it"
                } else {
                    "keep a lock past its TTL"
                },
            );
        }
        if ahead > 0 {
            let worst = apart + o.within + base.within;
            if worst > skew.worst_ahead {
                skew = FleetSkew {
                    worst_ahead: worst,
                    node: Some(node.to_string()),
                };
            }
        }
    }
    Ok(skew)
}

/// Parses `date -u +%s.%N`'s output: seconds since the epoch, a dot, nine
/// digits of nanoseconds (a `date` without `%N` prints `N` or nothing
/// there: whole seconds are used then).
pub fn parse_remote_clock(text: &str) -> anyhow::Result<SystemTime> {
    let line = text.trim();
    if line.len() > 40 || line.lines().count() != 1 {
        bail!("not one `date +%s.%N` reading: {line:?}");
    }
    let (secs, frac) = line.split_once('.').unwrap_or((line, ""));
    let secs: u64 = secs
        .parse()
        .with_context(|| format!("not seconds since the epoch: {line:?}"))?;
    let nanos = if !frac.is_empty() && frac.len() <= 9 && frac.bytes().all(|b| b.is_ascii_digit()) {
        format!("{frac:0<9}").parse::<u32>().unwrap_or(0)
    } else {
        0
    };
    // `UNIX_EPOCH + ` panics past what a SystemTime holds (a hostile or
    // broken node answering `18446744073709551615`).
    UNIX_EPOCH
        .checked_add(Duration::new(secs, nanos))
        .with_context(|| format!("not a time this machine can represent: {line:?}"))
}

#[cfg(test)]
mod tests;

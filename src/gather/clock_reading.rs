//! Each node's clock, read by the gather beside its facts (issue 38): Kured
//! judges its lock by every node's own clock, so apply compares them all
//! (`steps::lock::clock::fleet_skew`).

use std::time::SystemTime;

use crate::remote;
use crate::ssh::Session;

/// A node's answer to `date -u +%s.%N` ([`remote::CLOCK`]) between two
/// readings of this machine's clock: Kured judges its lock by each node's
/// own clock, so apply reads them all (`steps::lock::clock::fleet_skew`).
#[derive(Debug, Clone)]
pub struct ClockReading {
    pub sent: SystemTime,
    /// `date`'s output, or why there was none.
    pub answer: Result<String, String>,
    pub received: SystemTime,
}

pub(super) async fn read_clock(s: &Session) -> ClockReading {
    let sent = SystemTime::now();
    let answer = match s.exec(remote::CLOCK, None).await {
        Ok(out) if out.success() => Ok(out.stdout),
        Ok(out) => Err(format!("`{}` failed: {}", remote::CLOCK, out.stderr.trim())),
        Err(e) => Err(format!("{e:#}")),
    };
    ClockReading {
        sent,
        answer,
        received: SystemTime::now(),
    }
}

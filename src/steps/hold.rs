//! What holds the next node back before its gates and drain
//! ([`crate::pacing`]): the soak after the last node came back, the
//! maintenance window, the alert gate. In that order: the soak is time the
//! operator asked to watch the fleet; the window is judged after it, so a
//! soak that runs past the window's end stops the run rather than starting
//! a node too late; the alerts are read last, right before the gates.
//!
//! Each waits in a [`HoldWorld`] (`super::hold_world`): the run's over SSH,
//! or the fake of the gates' tests (`super::hold_tests`).

use std::time::{Duration, Instant};

use anyhow::Context;

use super::context::{Apply, Rerun};
use super::hold_world::{HoldWorld, Look, SshHolds, Waited, wait_out};
use super::kured_gates::KuredTakeover;
use crate::error::OutsideWindow;
use crate::pacing::{self, AlertGate, Fit, Pace, Window};

/// Before the gates of `batch` (a node, or a batch of workers).
/// `back_at`: when the last node of this run came back, if one did.
/// `needed`: how long the batch may take (drain and node timeouts).
pub async fn before_node(
    apply: &Apply<'_>,
    pace: &Pace,
    back_at: Option<Instant>,
    batch: &[String],
    needed: Duration,
) -> anyhow::Result<()> {
    let mut w = SshHolds::new(apply)?;
    let by = HoldsBefore {
        pace,
        kured: apply.kured.as_ref(),
        since_back: back_at.map(|t| t.elapsed()),
        needed,
        node_timeout: apply.settings.node_timeout,
        rerun: apply.settings.rerun,
    };
    holds(&mut w, &by, batch).await
}

/// What the holds before a batch go by.
pub(super) struct HoldsBefore<'p> {
    pub(super) pace: &'p Pace,
    /// Kured's gates, when its lock is held and they are kept.
    pub(super) kured: Option<&'p KuredTakeover>,
    /// How long ago the last node of this run came back, if one did.
    pub(super) since_back: Option<Duration>,
    /// How long the batch may take (drain and node timeouts).
    pub(super) needed: Duration,
    /// How long Kured's blocking pods may hold (`--node-timeout`).
    pub(super) node_timeout: Duration,
    pub(super) rerun: Rerun,
}

/// The holds before `batch`, in their order, in world `w`.
pub(super) async fn holds<W: HoldWorld>(
    w: &mut W,
    by: &HoldsBefore<'_>,
    batch: &[String],
) -> anyhow::Result<()> {
    let names = batch.join(", ");
    soak_in(w, by.pace.soak, by.since_back, &format!("before {names}")).await?;
    if let Some(window) = &by.pace.window {
        in_window_at(window, &names, by.needed, by.rerun, w.wall()).inspect_err(|e| {
            w.journal("window", None, &e.to_string());
        })?;
    }
    if let Some(gate) = alert_gate(by.pace, by.kured) {
        alerts_clear(w, gate, &names, by.rerun).await?;
    }
    if let Some(k) = by.kured {
        super::kured_gates::hold_for_pods(w, k, batch, by.node_timeout, by.rerun).await?;
    }
    Ok(())
}

/// The operator's own alert gate first; else Kured's, reached the same way.
fn alert_gate<'p>(pace: &'p Pace, kured: Option<&'p KuredTakeover>) -> Option<&'p AlertGate> {
    pace.alert_gate
        .as_ref()
        .or_else(|| kured.and_then(|k| k.alert_gate.as_ref()))
}

/// Whether `what` (a node, a batch, or the whole run) may start now: inside
/// `window`, with time to finish within `needed` before it closes.
pub fn in_window(
    window: &Window,
    what: &str,
    needed: Duration,
    rerun: Rerun,
) -> anyhow::Result<()> {
    in_window_at(window, what, needed, rerun, jiff::Timestamp::now())
}

/// [`in_window`] at `now`.
pub(super) fn in_window_at(
    window: &Window,
    what: &str,
    needed: Duration,
    rerun: Rerun,
    now: jiff::Timestamp,
) -> anyhow::Result<()> {
    let text = match window.fit(now, needed) {
        Fit::Fits { .. } => return Ok(()),
        Fit::TooLate { closes, opens } => format!(
            "not starting {what}: the maintenance window ({window}) closes at {} and {what} \
             may take up to {} (drain and node timeouts). The fleet is consistent; run \
             `{rerun}` again in the next window (it opens {}) to continue",
            hm(&closes),
            humantime::format_duration(needed),
            stamp(&opens),
        ),
        Fit::Closed { opens } => format!(
            "not starting {what}: outside the maintenance window ({window}). The fleet is \
             consistent; run `{rerun}` again in the next window (it opens {}) to \
             continue",
            stamp(&opens),
        ),
    };
    Err(anyhow::Error::new(OutsideWindow(text)))
}

/// Waits out what is left of the soak since the last node came back
/// (`since_back` ago; `None`: none did, nothing to watch), saying so on
/// the terminal and in the journal. Ctrl-C ends the wait at once.
pub(super) async fn soak_in<W: HoldWorld>(
    w: &mut W,
    soak: Duration,
    since_back: Option<Duration>,
    what: &str,
) -> anyhow::Result<()> {
    let Some(since_back) = since_back else {
        return Ok(());
    };
    let left = soak.saturating_sub(since_back);
    if left.is_zero() {
        return Ok(());
    }
    let text = format!(
        "soak ({}): watching the fleet {what}, {} left",
        humantime::format_duration(soak),
        humantime::format_duration(Duration::from_secs(left.as_secs().max(1)))
    );
    w.say(&format!("  {text}"));
    w.journal("soak", None, &text);
    w.pause(left).await?;
    w.journal("soak-done", None, what);
    Ok(())
}

/// After hop `what` (`after hop 1/2`): once a node of this run came back,
/// the soak, then the gates judged on the fleet as it is after it
/// ([`super::gates::fleet_problems`]): a node lost while the fleet was
/// watched stops the run, the lock still held.
pub async fn after_hop(apply: &Apply<'_>, what: &str) -> anyhow::Result<()> {
    let mut w = SshHolds::new(apply)?;
    let since_back = apply.back_at.map(|t| t.elapsed());
    let (soak, rerun) = (apply.settings.pace.soak, apply.settings.rerun);
    let gates = async |_: &mut SshHolds| super::gates::fleet_problems(apply).await;
    soak_then_gates(&mut w, soak, since_back, what, rerun, gates).await
}

/// [`after_hop`] in world `w`, the gates' reading `gates`.
pub(super) async fn soak_then_gates<W: HoldWorld>(
    w: &mut W,
    soak: Duration,
    since_back: Option<Duration>,
    what: &str,
    rerun: Rerun,
    gates: impl AsyncFnOnce(&mut W) -> anyhow::Result<Vec<String>>,
) -> anyhow::Result<()> {
    // Nothing came back from a reboot in this run: nothing to watch.
    if since_back.is_none() {
        return Ok(());
    }
    soak_in(w, soak, since_back, what).await?;
    let problems = gates(w).await?;
    w.journal(
        "gates",
        None,
        &format!("{what}: {} problems", problems.len()),
    );
    if problems.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "{what}, the fleet is not healthy:\n  - {}\nFix these, then run `{rerun}` again",
        problems.join("\n  - "),
    )
}

/// Reads the gate until no alert holds the drain, or fails after its
/// timeout naming the alerts (or why it could not be read: an unreadable
/// gate holds, as in Kured).
async fn alerts_clear<W: HoldWorld>(
    w: &mut W,
    gate: &AlertGate,
    names: &str,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let read = async |w: &mut W| {
        let holding = match w.alerts(&gate.query_url).await? {
            Ok(body) => pacing::alert_gate::parse(&body)
                .map(|alerts| gate.filter.blocking(&alerts))
                .map_err(|e| format!("{e:#}")),
            Err(stderr) => Err(format!("{} could not be read: {stderr}", gate.query_url)),
        };
        Ok(match holding {
            Ok(alerts) if alerts.is_empty() => Look::Clear,
            Ok(alerts) => Look::Holds(format!("alerts firing: {}", alerts.join(", "))),
            Err(e) => Look::Holds(e),
        })
    };
    let held = |w: &mut W, why: &str, _: Duration| {
        w.say(&format!(
            "  alert gate holds {names}: {why} (waiting up to {})",
            humantime::format_duration(gate.timeout)
        ));
        w.journal("alerts", None, why);
    };
    match wait_out(w, gate.timeout, gate.interval, read, held).await? {
        Waited::Absent | Waited::Clear => Ok(()),
        Waited::Released(_) => {
            w.journal("alerts-resolved", None, &gate.query_url);
            w.say("  alert gate: no alert holds the drain now");
            Ok(())
        }
        Waited::TimedOut(why) => Err(anyhow::anyhow!(
            "not taking {names} down: the alert gate still holds after {}: {why}. \
             Nothing was changed on {names}; resolve or silence the alerts (or widen \
             --alert-filter), then run `{rerun}` again",
            humantime::format_duration(gate.timeout),
        ))
        .context(format!("alert gate {}", gate.query_url)),
    }
}

fn hm(t: &jiff::ZonedDateTime) -> String {
    t.strftime("%H:%M %Z").to_string()
}

fn stamp(t: &jiff::ZonedDateTime) -> String {
    t.strftime("%a %Y-%m-%d %H:%M %Z").to_string()
}

//! What holds the next node back before its gates and drain
//! ([`crate::pacing`]): the soak after the last node came back, the
//! maintenance window, the alert gate. In that order: the soak is time the
//! operator asked to watch the fleet; the window is judged after it, so a
//! soak that runs past the window's end stops the run rather than starting
//! a node too late; the alerts are read last, right before the gates.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::context::{Apply, Rerun};
use crate::error::OutsideWindow;
use crate::pacing::{self, AlertGate, Fit, Pace, Window};
use crate::remote;

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
    let names = batch.join(", ");
    soak(apply, pace.soak, back_at, &format!("before {names}")).await?;
    if let Some(window) = &pace.window {
        in_window(window, &names, needed, apply.settings.rerun).inspect_err(|e| {
            apply.journal_event("window", None, &e.to_string());
        })?;
    }
    // The operator's own gate first; else Kured's, reached the same way.
    let kured = apply.kured.as_ref();
    if let Some(gate) = pace
        .alert_gate
        .as_ref()
        .or_else(|| kured.and_then(|k| k.alert_gate.as_ref()))
    {
        alerts_clear(apply, gate, &names).await?;
    }
    if let Some(k) = kured {
        super::kured_gates::hold_for_pods(apply, k, batch).await?;
    }
    Ok(())
}

/// Whether `what` (a node, a batch, or the whole run) may start now: inside
/// `window`, with time to finish within `needed` before it closes.
pub fn in_window(
    window: &Window,
    what: &str,
    needed: Duration,
    rerun: Rerun,
) -> anyhow::Result<()> {
    let text = match window.fit(jiff::Timestamp::now(), needed) {
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

/// Waits out what is left of the soak since `back_at`, saying so on the
/// terminal and in the journal. Ctrl-C ends the wait at once.
pub async fn soak(
    apply: &Apply<'_>,
    soak: Duration,
    back_at: Option<Instant>,
    what: &str,
) -> anyhow::Result<()> {
    let Some(back_at) = back_at else {
        return Ok(());
    };
    let left = soak.saturating_sub(back_at.elapsed());
    if left.is_zero() {
        return Ok(());
    }
    let text = format!(
        "soak ({}): watching the fleet {what}, {} left",
        humantime::format_duration(soak),
        humantime::format_duration(Duration::from_secs(left.as_secs().max(1)))
    );
    apply.progress.line(&format!("  {text}"));
    apply.journal_event("soak", None, &text);
    let until = Instant::now() + left;
    while Instant::now() < until {
        apply.check_stop(None)?;
        tokio::time::sleep(
            until
                .saturating_duration_since(Instant::now())
                .min(super::POLL),
        )
        .await;
    }
    apply.journal_event("soak-done", None, what);
    Ok(())
}

/// Reads the gate until no alert holds the drain, or fails after its
/// timeout naming the alerts (or why it could not be read: an unreadable
/// gate holds, as in Kured).
async fn alerts_clear(apply: &Apply<'_>, gate: &AlertGate, names: &str) -> anyhow::Result<()> {
    let api = apply.api()?;
    let deadline = Instant::now() + gate.timeout;
    let mut said = None;
    loop {
        apply.check_stop(None)?;
        let out = api
            .run("alert gate", &remote::alerts::query(&gate.query_url), None)
            .await?;
        let holding = if out.success() {
            pacing::alert_gate::parse(&out.stdout)
                .map(|alerts| gate.filter.blocking(&alerts))
                .map_err(|e| format!("{e:#}"))
        } else {
            Err(format!(
                "{} could not be read: {}",
                gate.query_url,
                out.stderr.trim()
            ))
        };
        let why = match holding {
            Ok(names) if names.is_empty() => {
                if said.is_some() {
                    apply.journal_event("alerts-resolved", None, &gate.query_url);
                    apply
                        .progress
                        .line("  alert gate: no alert holds the drain now");
                }
                return Ok(());
            }
            Ok(alerts) => format!("alerts firing: {}", alerts.join(", ")),
            Err(e) => e,
        };
        if said.as_ref() != Some(&why) {
            apply.progress.line(&format!(
                "  alert gate holds {names}: {why} (waiting up to {})",
                humantime::format_duration(gate.timeout)
            ));
            apply.journal_event("alerts", None, &why);
            said = Some(why.clone());
        }
        if Instant::now() + gate.interval > deadline {
            return Err(anyhow::anyhow!(
                "not taking {names} down: the alert gate still holds after {}: {why}. \
                 Nothing was changed on {names}; resolve or silence the alerts (or widen \
                 --alert-filter), then run `{}` again",
                humantime::format_duration(gate.timeout),
                apply.settings.rerun
            ))
            .context(format!("alert gate {}", gate.query_url));
        }
        let until = Instant::now() + gate.interval;
        while Instant::now() < until {
            apply.check_stop(None)?;
            tokio::time::sleep(super::POLL).await;
        }
    }
}

fn hm(t: &jiff::ZonedDateTime) -> String {
    t.strftime("%H:%M %Z").to_string()
}

fn stamp(t: &jiff::ZonedDateTime) -> String {
    t.strftime("%a %Y-%m-%d %H:%M %Z").to_string()
}

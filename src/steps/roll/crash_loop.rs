//! kubelet.service as a rebooted node reports it, and whether its new
//! kubelet is crash-looping, judged from what fleetctl itself saw of the
//! unit since the node came back.
//!
//! systemd never lowers `NRestarts` during a boot (src/core/service.c,
//! `service_enter_restart`; only a start by hand or `reset-failed` resets
//! it), and the bakery's kubelet.service (flatcar/sysext-bakery,
//! kubernetes.sysext/…/kubelet.service: `Restart=always`, `RestartSec=10`,
//! ordered after network-online.target only, not after containerd) lets a
//! kubelet fail a few times at boot while containerd comes up and then
//! run. So the count alone says nothing: a crash loop is restarts that grew
//! by [`CRASH_LOOP_RESTARTS`] while fleetctl watched, with the unit failing
//! now. A unit `active` with a main process is not failing; one whose main
//! process fleetctl saw running for longer than `RestartSec` has recovered,
//! and the count starts again from there.

use std::time::{Duration, Instant};

use crate::remote::upgrade;
use crate::steps::POLL;
use crate::steps::on_failure::{self, CRASH_LOOP_RESTARTS, Cause, NotUp, last_kubelet_line};
use crate::steps::runner::Remote;
use crate::version::Version;

/// The kubelet unit as [`upgrade::KUBELET_STATE`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KubeletState {
    /// `systemctl is-active`: `active`, `activating` (waiting for an
    /// automatic restart after a crash), `failed`, …
    pub(super) unit: String,
    /// `kubelet --version`'s line.
    pub(super) version: String,
    /// The unit's journal for this boot, when it is not active.
    pub(super) journal: Vec<String>,
}

/// What of one line of the node's answer is kept: errors quote these, and
/// a node may answer a poll with one line of 32 MiB (issue 38), which the
/// terminal must not get whole.
const LINE_MAX: usize = 512;

/// The journal lines kept: [`upgrade::KUBELET_STATE`] asks for 15, and
/// journalctl may add a `-- Boot …` or `-- No entries --` line.
const JOURNAL_LINES: usize = 20;

pub(super) fn kubelet_state(stdout: &str) -> KubeletState {
    let mut lines = stdout.lines();
    KubeletState {
        unit: bounded(lines.next().unwrap_or("").trim()),
        version: bounded(lines.next().unwrap_or("").trim()),
        journal: lines.take(JOURNAL_LINES).map(bounded).collect(),
    }
}

/// `line` up to [`LINE_MAX`] bytes (at a character boundary), with how
/// much was cut.
fn bounded(line: &str) -> String {
    if line.len() <= LINE_MAX {
        return line.to_string();
    }
    let mut end = LINE_MAX;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}[… {} more bytes]", &line[..end], line.len() - end)
}

/// The bakery's `RestartSec=10`: a main process seen running longer than
/// the pause between two starts of a crash loop has outlived it. A unit
/// that restarts faster (a drop-in) only makes the bar easier to clear.
pub(super) const RESTART_SEC: Duration = Duration::from_secs(10);

/// kubelet.service as [`upgrade::KUBELET_UNIT`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KubeletUnit {
    /// `ActiveState`: `active`, `activating` (waiting to restart),
    /// `failed`, …
    pub(super) active: String,
    /// `MainPID`; 0 when no main process runs.
    pub(super) main_pid: u32,
    /// `NRestarts`: automatic restarts since the unit was loaded.
    pub(super) restarts: u32,
}

/// Parses `systemctl show`'s `Key=value` lines, in any order; `None` when
/// one is missing or not a number (an old systemd, no unit).
pub(super) fn kubelet_unit(stdout: &str) -> Option<KubeletUnit> {
    let value = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
    };
    Some(KubeletUnit {
        active: value("ActiveState")?.to_string(),
        main_pid: value("MainPID")?.parse().ok()?,
        restarts: value("NRestarts")?.parse().ok()?,
    })
}

/// What one sample of the unit says, given the ones before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum CrashLoopVerdict {
    /// Failing now, after `grew` restarts since fleetctl began to count.
    Looping { grew: u32, total: u32 },
    /// Its main process has run longer than [`RESTART_SEC`].
    Running,
    /// Not yet known either way.
    Watching,
}

/// The samples of one node's kubelet.service since fleetctl began to watch.
#[derive(Debug, Default)]
pub(super) struct Judge {
    /// `NRestarts` at the first sample, or when the kubelet was last seen
    /// running steadily.
    from: Option<u32>,
    /// The main process seen `active`, and since when.
    running: Option<(u32, Instant)>,
    /// Restarts since `from` at the last sample.
    grew: u32,
}

impl Judge {
    /// Judges the sample `unit` taken at `at`.
    pub(super) fn see(&mut self, unit: &KubeletUnit, at: Instant) -> CrashLoopVerdict {
        let from = *self.from.get_or_insert(unit.restarts);
        self.grew = unit.restarts.saturating_sub(from);
        if unit.active == "active" && unit.main_pid != 0 {
            match self.running {
                Some((pid, since)) if pid == unit.main_pid => {
                    if at.saturating_duration_since(since) >= RESTART_SEC {
                        // Recovered: a later loop counts from here.
                        self.from = Some(unit.restarts);
                        self.grew = 0;
                        return CrashLoopVerdict::Running;
                    }
                }
                _ => self.running = Some((unit.main_pid, at)),
            }
            return CrashLoopVerdict::Watching;
        }
        self.running = None;
        match self.grew >= CRASH_LOOP_RESTARTS {
            true => CrashLoopVerdict::Looping {
                grew: self.grew,
                total: unit.restarts,
            },
            false => CrashLoopVerdict::Watching,
        }
    }

    /// Samples the node's kubelet.service once into the judgement; `None`
    /// when it cannot be read (the judgement is left as it was).
    async fn sample(&mut self, r: &Remote) -> Option<CrashLoopVerdict> {
        let out = r
            .run_root("kubelet.service state", upgrade::KUBELET_UNIT, None)
            .await
            .ok()?;
        let unit = kubelet_unit(&out.stdout)?;
        Some(self.see(&unit, Instant::now()))
    }
}

/// The judgement's first sample, taken as soon as the node is back.
pub(super) async fn first_sample(r: &Remote) -> Judge {
    let mut judge = Judge::default();
    judge.sample(r).await;
    judge
}

/// With `--on-failure rollback`: resolves once the kubelet at `want` is
/// judged crash-looping, for as long as the waits for the node run beside
/// it; a probe that fails is tried again.
pub(super) async fn crash_loop(r: &Remote, want: &Version, mut judge: Judge) -> anyhow::Error {
    loop {
        tokio::time::sleep(POLL).await;
        if let Some(CrashLoopVerdict::Looping { grew, total }) = judge.sample(r).await
            && let Ok(Some(looping)) = looping(r, want, grew, total).await
        {
            return anyhow::Error::new(looping);
        }
    }
}

/// Without a watch beside the waits (`--on-failure stop`, and a roll that
/// is itself a rollback): a wait that ran out on a node whose kubelet at
/// `want` is judged crash-looping now is named for that, with what the
/// operator does next, instead of for the last thing it waited for ("not
/// Ready"). A kubelet `active` again after restarts enough for a loop is
/// sampled for up to [`RESTART_SEC`] more, until it fails again or has run
/// that long. Any other failure, or a probe that fails, leaves `timed_out`
/// as it is.
pub(super) async fn name_crash_loop(
    r: &Remote,
    want: &Version,
    mut judge: Judge,
    timed_out: anyhow::Error,
    next: &str,
) -> anyhow::Error {
    if on_failure::not_up(&timed_out).is_empty() {
        return timed_out;
    }
    // Bounded: RESTART_SEC and a poll more.
    let until = Instant::now() + RESTART_SEC + POLL;
    loop {
        match judge.sample(r).await {
            Some(CrashLoopVerdict::Looping { grew, total }) => {
                return match looping(r, want, grew, total).await {
                    Ok(Some(mut looping)) => {
                        looping.message = format!("{}\n{next}", looping.message);
                        anyhow::Error::new(looping)
                    }
                    _ => timed_out,
                };
            }
            Some(CrashLoopVerdict::Watching)
                if judge.grew >= CRASH_LOOP_RESTARTS && Instant::now() < until =>
            {
                tokio::time::sleep(POLL).await
            }
            _ => return timed_out,
        }
    }
}

/// The kubelet at `want`, judged crash-looping: a [`NotUp`] with its
/// journal's last kubelet line; `None` when the kubelet that fails is not
/// the new one (the sysext was not merged: the wait says so).
async fn looping(
    r: &Remote,
    want: &Version,
    grew: u32,
    total: u32,
) -> anyhow::Result<Option<NotUp>> {
    let out = r
        .run_root("kubelet unit and version", upgrade::KUBELET_STATE, None)
        .await?;
    let state = kubelet_state(&out.stdout);
    if state.version != format!("Kubernetes {want}") {
        return Ok(None);
    }
    let journal = match state.journal.is_empty() {
        false => state.journal.clone(),
        // Read while it was active for a moment: its journal now.
        true => r
            .run_root("kubelet journal", upgrade::KUBELET_JOURNAL, None)
            .await
            .map(|o| o.stdout.lines().map(str::to_string).collect())
            .unwrap_or_default(),
    };
    Ok(Some(looping_not_up(
        r.node(),
        &state.unit,
        grew,
        total,
        journal,
    )))
}

/// The [`NotUp`] of `node`, whose kubelet.service is `unit` after systemd
/// restarted it `grew` times under fleetctl's eyes (`total` in the boot):
/// named for the crash loop, with the journal's lines.
pub(super) fn looping_not_up(
    node: &str,
    unit: &str,
    grew: u32,
    total: u32,
    journal: Vec<String>,
) -> NotUp {
    NotUp {
        node: node.to_string(),
        cause: Cause::CrashLoop { restarts: grew },
        last_log: last_kubelet_line(&journal),
        message: format!(
            "{node}: after the reboot kubelet.service keeps failing: systemd restarted it {grew} \
             times while fleetctl watched ({total} in this boot) and it is `{unit}` now. It is \
             cordoned. Its journal:\n  {}",
            journal.join("\n  ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(active: &str, main_pid: u32, restarts: u32) -> KubeletUnit {
        KubeletUnit {
            active: active.into(),
            main_pid,
            restarts,
        }
    }

    #[test]
    fn the_kubelet_state_carries_the_unit_the_version_and_why_it_fails() {
        let s = kubelet_state(
            "activating\nKubernetes v1.35.3\nDec 01 15:04:05 w-1 kubelet[812]: E1201 … \"command failed\" \
             err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image\"\n",
        );
        assert_eq!(s.unit, "activating");
        assert_eq!(s.version, "Kubernetes v1.35.3");
        assert_eq!(s.journal.len(), 1);
        assert!(s.journal[0].contains("unknown flag"));
        let ok = kubelet_state("active\nKubernetes v1.35.3\n");
        assert_eq!((ok.unit.as_str(), ok.journal.len()), ("active", 0));
        assert_eq!(kubelet_state("").unit, "");
    }

    #[test]
    fn a_flood_in_the_answer_is_kept_to_a_line_each_and_a_few_lines() {
        let huge = format!("Kubernetes v1.35.3 {}", "é".repeat(1 << 20));
        let text = format!("failed\n{huge}\n{}", format!("{huge}\n").repeat(40));
        let s = kubelet_state(&text);
        assert!(s.version.len() < 600, "{}", s.version.len());
        assert!(
            s.version.starts_with("Kubernetes v1.35.3 é"),
            "{}",
            &s.version[..40]
        );
        assert!(s.version.ends_with(" more bytes]"), "{}", s.version);
        assert_eq!(s.journal.len(), JOURNAL_LINES);
        assert!(s.journal.iter().all(|l| l.len() < 600));
    }

    #[test]
    fn systemctl_show_is_read_in_any_order_and_refused_when_incomplete() {
        let u = kubelet_unit("MainPID=0\nNRestarts=4\nActiveState=activating\n");
        assert_eq!(u, Some(unit("activating", 0, 4)));
        assert_eq!(kubelet_unit("MainPID=0\nActiveState=active\n"), None);
        assert_eq!(
            kubelet_unit("MainPID=0\nNRestarts=\nActiveState=active\n"),
            None
        );
        assert_eq!(kubelet_unit(""), None);
    }

    #[test]
    fn restarts_before_the_first_sample_do_not_count() {
        // Three restarts at boot, before fleetctl connected, then failing:
        // nothing grew while it watched.
        let t = Instant::now();
        let mut j = Judge::default();
        assert_eq!(
            j.see(&unit("activating", 0, 3), t),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("activating", 0, 5), t),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("activating", 0, 6), t),
            CrashLoopVerdict::Looping { grew: 3, total: 6 }
        );
    }

    #[test]
    fn a_kubelet_that_fails_three_times_and_then_runs_is_never_looping() {
        let t = Instant::now();
        let mut j = Judge::default();
        assert_eq!(
            j.see(&unit("activating", 0, 0), t),
            CrashLoopVerdict::Watching
        );
        // Restarted three times, now active: not failing now.
        let s = Duration::from_secs(1);
        assert_eq!(
            j.see(&unit("active", 812, 3), t + s),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("active", 812, 3), t + s + RESTART_SEC),
            CrashLoopVerdict::Running
        );
        // A single crash much later counts from where it recovered.
        let later = t + 10 * RESTART_SEC;
        assert_eq!(
            j.see(&unit("activating", 0, 4), later),
            CrashLoopVerdict::Watching
        );
    }

    #[test]
    fn a_kubelet_active_between_crashes_is_looping_once_seen_failing_again() {
        // Type=simple: active from its fork until it exits, a new main PID
        // each start, never long enough to count as running.
        let t = Instant::now();
        let s = Duration::from_secs(1);
        let mut j = Judge::default();
        assert_eq!(
            j.see(&unit("active", 100, 0), t),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("activating", 0, 1), t + s),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("active", 200, 2), t + 2 * s),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("active", 300, 3), t + 3 * s),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("failed", 0, 3), t + 4 * s),
            CrashLoopVerdict::Looping { grew: 3, total: 3 }
        );
    }

    #[test]
    fn an_active_main_process_younger_than_restart_sec_is_still_watched() {
        let t = Instant::now();
        let mut j = Judge::default();
        j.see(&unit("activating", 0, 0), t);
        let almost = RESTART_SEC - Duration::from_millis(1);
        assert_eq!(j.see(&unit("active", 7, 3), t), CrashLoopVerdict::Watching);
        assert_eq!(
            j.see(&unit("active", 7, 3), t + almost),
            CrashLoopVerdict::Watching
        );
        assert_eq!(
            j.see(&unit("active", 7, 3), t + RESTART_SEC),
            CrashLoopVerdict::Running
        );
    }
}

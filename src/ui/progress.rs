//! apply's progress: on a terminal an indicatif bar showing the hop, the
//! node and step being worked on and the elapsed time, with finished steps
//! printed above it; otherwise plain timestamped lines on stderr, which read
//! well in CI logs and `tee`.
//!
//! Fact gathering (`status`, `plan`, `apply`, `reboot`) counts nodes
//! instead ([`Progress::nodes`]): a bar on a terminal, nothing otherwise.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// apply's (or reboot's) bar while it is drawn, so that a warning raised
/// deep in a step ([`super::alert`]) is printed above it instead of being
/// erased by its next redraw.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Prints `text` above the active bar; `false` when there is none.
pub(super) fn println_above_bar(text: &str) -> bool {
    let active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
    match active.as_ref() {
        Some(bar) if !bar.is_finished() => {
            bar.println(text);
            true
        }
        _ => false,
    }
}

/// Clones share the bar: each task of a fan-out may advance it.
#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    /// Without a bar, `line` and `step` print timestamped lines (apply's
    /// log); a node counter without a terminal prints nothing.
    lines: bool,
}

impl Progress {
    pub fn new(interactive: bool, total_steps: u64) -> Progress {
        if !interactive {
            return Progress {
                bar: None,
                lines: true,
            };
        }
        let bar = ProgressBar::with_draw_target(Some(total_steps), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:24} {pos}/{len} steps  {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
        Progress {
            bar: Some(bar),
            lines: true,
        }
    }

    /// `⠋ gathering facts ██████░░░░ 412/1000 nodes  00:00:07` on a
    /// terminal, advanced as each node finishes; when stderr is not a
    /// terminal, nothing at all, so pipes, logs and tests see no change.
    pub fn nodes(interactive: bool, what: &str, total: u64) -> Progress {
        if !interactive {
            return Progress::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} {msg} {bar:24} {pos}/{len} nodes  {elapsed_precise}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(what.to_string());
        // The ticker draws (spinner and elapsed time move while a slow node
        // is awaited) and lets `advance` only bump a counter.
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress {
            bar: Some(bar),
            lines: false,
        }
    }

    /// Shows nothing, whatever is called on it.
    pub fn hidden() -> Progress {
        Progress {
            bar: None,
            lines: false,
        }
    }

    /// The bar being drawn, if any (a passphrase prompt suspends it).
    pub fn bar(&self) -> Option<&ProgressBar> {
        self.bar.as_ref()
    }

    /// A line that stays: a hop starting, a node finished, a warning.
    /// [`super::clean`]ed (secrets masked, controls escaped); a terminal
    /// that hung up loses it without a panic (indicatif ignores its own
    /// write errors).
    pub fn line(&self, text: &str) {
        let text = super::clean(text);
        match &self.bar {
            Some(bar) => bar.println(text),
            None if self.lines => super::err_line(&format!(
                "[{}] {text}",
                humantime::format_rfc3339_seconds(SystemTime::now())
            )),
            None => {}
        }
    }

    /// What is happening now; replaced by the next call.
    pub fn step(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(super::clean(text)),
            None => self.line(text),
        }
    }

    pub fn advance(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
            let mut active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
            if active.as_ref().is_some_and(|a| a.is_finished()) {
                *active = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_counter_draws_nothing_without_a_terminal() {
        assert!(
            Progress::nodes(false, "gathering facts", 10)
                .bar()
                .is_none()
        );
        assert!(Progress::hidden().bar().is_none());
        // apply's progress keeps its timestamped lines without a terminal.
        assert!(Progress::new(false, 3).lines);
        assert!(!Progress::hidden().lines);
    }

    #[test]
    fn clones_advance_one_shared_count() {
        let progress = Progress::nodes(true, "gathering facts", 10);
        let (a, b) = (progress.clone(), progress.clone());
        a.advance();
        b.advance();
        let bar = progress.bar().unwrap();
        assert_eq!((bar.position(), bar.length()), (2, Some(10)));
        progress.finish();
        assert!(bar.is_finished());
    }
}

//! apply's progress: on a terminal an indicatif bar showing the hop, the
//! node and step being worked on and the elapsed time, with finished steps
//! printed above it; otherwise plain timestamped lines on stderr, which read
//! well in CI logs and `tee`.

use std::time::{Duration, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(interactive: bool, total_steps: u64) -> Progress {
        if !interactive {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total_steps), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:24} {pos}/{len} steps  {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress { bar: Some(bar) }
    }

    /// A line that stays: a hop starting, a node finished, a warning.
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!(
                "[{}] {text}",
                humantime::format_rfc3339_seconds(SystemTime::now())
            ),
        }
    }

    /// What is happening now; replaced by the next call.
    pub fn step(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(text.to_string()),
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
        }
    }
}

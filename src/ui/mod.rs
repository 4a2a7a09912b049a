//! Everything the operator sees goes through here: a [`Printer`] decides
//! where output goes and whether it is coloured; no other module prints.
//!
//! What goes to stderr (notes, warnings, progress, errors) passes through
//! [`crate::redact::mask_secrets`] first, and everything, stdout too,
//! through [`escape`]: remote text never reaches the terminal with a
//! control sequence in it. No write here can panic: a
//! terminal that hung up (SIGHUP; EIO or EPIPE on write) loses the text,
//! and fleetctl goes on to a safe stop and gives the lock back.

pub mod escape;
mod progress;
mod table;

use std::io::{IsTerminal, Write};

use console::Style;

use crate::redact::mask_secrets;

pub use progress::Progress;
pub use table::Table;

#[derive(Debug, Clone)]
pub struct Printer {
    verbose: u8,
    /// stderr is a terminal: progress bars may be drawn there.
    pub interactive: bool,
}

impl Printer {
    /// `console` already honours NO_COLOR, CLICOLOR and TERM=dumb and turns
    /// colour off for a non-terminal; `--no-color` forces it off as well.
    pub fn new(no_color: bool, verbose: u8) -> Printer {
        if no_color {
            console::set_colors_enabled(false);
            console::set_colors_enabled_stderr(false);
        }
        Printer {
            verbose,
            interactive: std::io::stderr().is_terminal(),
        }
    }

    pub fn verbose(&self) -> u8 {
        self.verbose
    }

    /// The command's result, on stdout, control characters escaped (our
    /// own colours kept when colour is on). A closed pipe (`| head`) is not
    /// an error.
    pub fn out(&self, text: &str) {
        let text = if console::colors_enabled() {
            escape::escape_controls_keeping_colours(text)
        } else {
            escape::escape_controls(text)
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        if !text.ends_with('\n') {
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    }

    /// A result as JSON on stdout (`--output json`), pretty-printed, the
    /// characters a terminal acts on written as `\uXXXX` so that it stays
    /// the same JSON.
    pub fn out_json<T: serde::Serialize>(&self, value: &T) -> anyhow::Result<()> {
        let json = serde_json::to_string_pretty(value)?;
        self.out(&escape::escape_json(&json));
        Ok(())
    }

    /// Progress and notes, on stderr, so stdout stays clean for `--output json`.
    pub fn note(&self, text: &str) {
        raw_err_line(&clean(text));
    }

    pub fn warn(&self, text: &str) {
        raw_err_line(&warning_line(text));
    }

    /// Only with `-v`.
    pub fn debug(&self, text: &str) {
        if self.verbose > 0 {
            raw_err_line(
                &Style::new()
                    .dim()
                    .for_stderr()
                    .apply_to(clean(text))
                    .to_string(),
            );
        }
    }
}

/// A warning from deep inside a step (a host key accepted on a reconnect
/// after a reboot), where no [`Printer`] is at hand: masked, printed above
/// apply's bar when one is drawn, else on stderr.
pub fn alert(text: &str) {
    let line = warning_line(text);
    if !progress::println_above_bar(&line) {
        raw_err_line(&line);
    }
}

/// `warning: <text>` for stderr, `text` cleaned ([`clean`]): the one form of
/// a warning, from a [`Printer`] or from deep inside a step ([`alert`]).
fn warning_line(text: &str) -> String {
    format!(
        "{} {}",
        Style::new()
            .yellow()
            .bold()
            .for_stderr()
            .apply_to("warning:"),
        clean(text)
    )
}

/// `text` with its secrets masked and its control characters escaped: what
/// may reach stderr or the journal of anything a remote party wrote.
pub fn clean(text: &str) -> String {
    escape::escape_controls(&mask_secrets(text)).into_owned()
}

/// fleetctl's last word when a command fails: `fleetctl: error:` and the
/// whole error chain, [`clean`]ed (every error path ends here: a peer's
/// pre-banner bytes or a node's stderr may be in the chain).
pub fn error(chain: &str) {
    raw_err_line(&format!(
        "{} {}",
        Style::new()
            .red()
            .bold()
            .for_stderr()
            .apply_to("fleetctl: error:"),
        clean(chain)
    ));
}

/// `text` and a newline on stderr, [`clean`]ed, in one write; a failed
/// write (the terminal hung up, stderr closed) is ignored, never a panic.
pub fn err_line(text: &str) {
    raw_err_line(&clean(text));
}

/// As [`err_line`], for text this module already cleaned and styled.
fn raw_err_line(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `text` on stderr without an added newline (a prompt, a record already
/// ending in one), [`clean`]ed, flushed; errors ignored.
pub fn err_text(text: &str) {
    let text = clean(text);
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// Styles shared by tables and reports (stdout). Each escapes its text
/// first, then colours it: what it styles is often remote (a node's
/// version, a message), and an `ESC [ 32 m` inside it must not pass for
/// fleetctl's own green (issue 38).
pub fn good(s: &str) -> String {
    paint(Style::new().green(), s)
}

pub fn bad(s: &str) -> String {
    paint(Style::new().red().bold(), s)
}

pub fn attention(s: &str) -> String {
    paint(Style::new().yellow(), s)
}

pub fn dim(s: &str) -> String {
    paint(Style::new().dim(), s)
}

pub fn bold(s: &str) -> String {
    paint(Style::new().bold(), s)
}

/// `text` escaped ([`escape::escape_controls`]), then styled.
pub fn paint(style: Style, text: &str) -> String {
    style.apply_to(escape::escape_controls(text)).to_string()
}

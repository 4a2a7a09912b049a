//! Everything the operator sees goes through here: a [`Printer`] decides
//! where output goes and whether it is coloured; no other module prints.

mod progress;
mod table;

use std::io::{IsTerminal, Write};

use console::Style;

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

    /// The command's result, on stdout. A closed pipe (`| head`) is not an error.
    pub fn out(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(text.as_bytes());
        if !text.ends_with('\n') {
            let _ = out.write_all(b"\n");
        }
        let _ = out.flush();
    }

    /// Progress and notes, on stderr, so stdout stays clean for `--output json`.
    pub fn note(&self, text: &str) {
        eprintln!("{text}");
    }

    pub fn warn(&self, text: &str) {
        eprintln!(
            "{} {text}",
            Style::new()
                .yellow()
                .bold()
                .for_stderr()
                .apply_to("warning:")
        );
    }

    /// Only with `-v`.
    pub fn debug(&self, text: &str) {
        if self.verbose > 0 {
            eprintln!("{}", Style::new().dim().for_stderr().apply_to(text));
        }
    }
}

/// Styles shared by tables and reports (stdout).
pub fn good(s: &str) -> String {
    Style::new().green().apply_to(s).to_string()
}

pub fn bad(s: &str) -> String {
    Style::new().red().bold().apply_to(s).to_string()
}

pub fn attention(s: &str) -> String {
    Style::new().yellow().apply_to(s).to_string()
}

pub fn dim(s: &str) -> String {
    Style::new().dim().apply_to(s).to_string()
}

pub fn bold(s: &str) -> String {
    Style::new().bold().apply_to(s).to_string()
}

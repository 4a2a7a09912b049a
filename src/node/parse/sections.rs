//! The sections `prelude.sh` delimits (`crate::remote::markers`): one per
//! probe, with its stdout, stderr and exit status, read however the output
//! was cut or mangled (CRLF, noise before the first marker, truncation).

use anyhow::{Result, bail};

use crate::remote::markers;

/// One probe's output, as the script delimited it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Section<'a> {
    pub(super) name: &'a str,
    /// What the probe was about, e.g. a config file's path.
    pub(super) arg: Option<&'a str>,
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// `None` when the output stopped before the section's end marker.
    pub(super) status: Option<i32>,
}

impl<'a> Section<'a> {
    pub(super) fn new(name: &'a str, arg: Option<&'a str>) -> Self {
        Section {
            name,
            arg,
            stdout: String::new(),
            stderr: String::new(),
            status: None,
        }
    }

    pub(super) fn failure(&self, what: &str) -> String {
        let status = match self.status {
            Some(127) => "command not found (exit status 127)".to_string(),
            Some(code) => format!("exit status {code}"),
            None => "output cut off".to_string(),
        };
        let stderr = self.stderr.trim();
        if stderr.is_empty() {
            format!("`{what}` failed: {status}")
        } else {
            format!("`{what}` failed: {status}: {stderr}")
        }
    }
}

pub(super) enum SectionMarker<'a> {
    Begin(&'a str, Option<&'a str>),
    Stderr,
    End(Option<i32>),
    /// A marker line that opens nothing (`@@fleetctl:facts 1@@`, `…done@@`).
    Other,
}

/// A line that is a marker, and whether it ended in CRLF.
pub(super) fn marker(line: &str) -> Option<(SectionMarker<'_>, bool)> {
    let body = line.strip_suffix('\n').unwrap_or(line);
    let (body, crlf) = match body.strip_suffix('\r') {
        Some(b) => (b, true),
        None => (body, false),
    };
    if !body.starts_with("@@fleetctl:") || !body.ends_with(markers::CLOSE) {
        return None;
    }
    if body == markers::STDERR {
        return Some((SectionMarker::Stderr, crlf));
    }
    let inner = |prefix: &str| {
        body.strip_prefix(prefix)
            .and_then(|b| b.strip_suffix(markers::CLOSE))
    };
    let found = if let Some(rest) = inner(markers::BEGIN) {
        match rest.split_once(' ') {
            Some((name, arg)) => SectionMarker::Begin(name, Some(arg)),
            None => SectionMarker::Begin(rest, None),
        }
    } else if let Some(status) = inner(markers::END) {
        SectionMarker::End(status.trim().parse().ok())
    } else {
        SectionMarker::Other
    };
    Some((found, crlf))
}

/// Removes the newline the script prints between a probe's stdout and the
/// next marker, leaving the stdout byte for byte.
pub(super) fn strip_separator(stdout: &mut String, crlf: bool) {
    if crlf && stdout.ends_with("\r\n") {
        stdout.truncate(stdout.len() - 2);
    } else if stdout.ends_with('\n') {
        stdout.truncate(stdout.len() - 1);
    }
}

pub(super) struct Sections<'a> {
    pub(super) list: Vec<Section<'a>>,
}

impl<'a> Sections<'a> {
    /// A script's sections; an error naming the script when it printed
    /// none (it did not run as expected: a shell or sudo problem, say).
    pub(super) fn of_script(script: &str, output: &'a str) -> Result<Self> {
        let sections = Sections::parse(output);
        if sections.is_empty() {
            bail!(
                "the {script} script printed no sections, so it did not run as expected; \
                 its output began with: {}",
                excerpt(output)
            );
        }
        Ok(sections)
    }

    pub(super) fn parse(output: &'a str) -> Self {
        let mut list = Vec::new();
        let mut current: Option<Section<'a>> = None;
        let mut in_stderr = false;
        for line in output.split_inclusive('\n') {
            match (marker(line), current.as_mut()) {
                (Some((SectionMarker::Begin(name, arg), _)), _) => {
                    list.extend(current.take());
                    current = Some(Section::new(name, arg));
                    in_stderr = false;
                }
                (Some((SectionMarker::Stderr, crlf)), Some(section)) if !in_stderr => {
                    strip_separator(&mut section.stdout, crlf);
                    in_stderr = true;
                }
                (Some((SectionMarker::End(status), crlf)), Some(section)) => {
                    if !in_stderr {
                        strip_separator(&mut section.stdout, crlf);
                    }
                    section.status = status;
                    list.extend(current.take());
                }
                (_, Some(section)) if in_stderr => section.stderr.push_str(line),
                (_, Some(section)) => section.stdout.push_str(line),
                (_, None) => {} // noise outside any section
            }
        }
        list.extend(current);
        Sections { list }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub(super) fn get(&self, name: &str) -> Option<&Section<'a>> {
        self.list.iter().find(|s| s.name == name)
    }

    pub(super) fn all<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Section<'a>> + 's {
        self.list.iter().filter(move |s| s.name == name)
    }

    pub(super) fn status(&self, name: &str) -> Option<i32> {
        self.get(name).and_then(|s| s.status)
    }

    /// The section, when its probe exited 0.
    pub(super) fn ok(&self, name: &str) -> Option<&Section<'a>> {
        self.get(name).filter(|s| s.status == Some(0))
    }

    /// A successful probe's stdout, trimmed; `None` when absent, failed or empty.
    pub(super) fn trimmed(&self, name: &str) -> Option<String> {
        let text = self.ok(name)?.stdout.trim();
        (!text.is_empty()).then(|| text.to_string())
    }

    /// The section of a probe that must have succeeded.
    pub(super) fn succeeded(&self, name: &str, what: &str) -> Result<&Section<'a>> {
        match self.get(name) {
            Some(s) if s.status == Some(0) => Ok(s),
            Some(s) => bail!("{}", s.failure(what)),
            None => bail!("the output has no `{name}` section, so `{what}` never ran"),
        }
    }
}

/// The start of some unexpected output, quoted on one line for an error.
pub(super) fn excerpt(output: &str) -> String {
    let trimmed = output.trim();
    if trimmed.is_empty() {
        return "(nothing)".to_string();
    }
    let short: String = trimmed.chars().take(200).collect();
    let ellipsis = if short.len() < trimmed.len() {
        "…"
    } else {
        ""
    };
    format!("`{}{ellipsis}`", short.escape_debug())
}

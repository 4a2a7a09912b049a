//! A node's journal, as far as the sim keeps one: the lines of
//! `kubelet.service` (the kubelet's own log and systemd's lines about the
//! unit), each with its time, boot, unit, identifier and pid, so
//! `journalctl -u kubelet [-b]` can print them in journald's short format.
//! Persistent across boots like Flatcar's `/var/log/journal`; one JSON
//! line per entry, appended with `O_APPEND` (lines never interleave).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The journal inside a node.
pub const JOURNAL_FILE: &str = "/var/log/fleetsim/journal.jsonl";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub t: f64,
    /// The boot id, as `/proc/sys/kernel/random/boot_id` prints it.
    pub boot: String,
    pub unit: String,
    /// `kubelet`, `systemd`, …: the `SYSLOG_IDENTIFIER`.
    pub ident: String,
    pub pid: i32,
    pub message: String,
}

/// Appends entries to the journal at `path` (a node path already mapped to
/// where the caller runs).
pub fn append(path: &Path, entries: &[Entry]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut text = Vec::new();
    for e in entries {
        serde_json::to_writer(&mut text, e)?;
        text.push(b'\n');
    }
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    f.write_all(&text)
        .with_context(|| format!("appending to {}", path.display()))
}

/// Every entry, oldest first (by time: writers may append a little out of
/// order); a missing journal is an empty one.
pub fn read(path: &Path) -> Result<Vec<Entry>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut entries: Vec<Entry> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    entries.sort_by(|a, b| a.t.total_cmp(&b.t));
    Ok(entries)
}

/// `Dec 01 15:04:05`, the journal's short timestamp.
pub fn short_time(ts: f64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let c = crate::tools::civil(ts);
    format!(
        "{} {:02} {:02}:{:02}:{:02}",
        MONTHS[(c.month as usize + 11) % 12],
        c.day,
        c.hour,
        c.minute,
        c.second
    )
}

/// One entry in journald's `short` output: `Dec 01 15:04:05 cp-1 kubelet[1234]: …`.
pub fn short_line(e: &Entry, host: &str) -> String {
    format!(
        "{} {host} {}[{}]: {}",
        short_time(e.t),
        e.ident,
        e.pid,
        e.message
    )
}

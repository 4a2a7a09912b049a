//! What keeps a run's journal bounded (issue 38): a node may print up to
//! 32 MiB per command, and the wait after a reboot asks every 100 ms, so
//! recording everything whole could fill the operator's disk in minutes.
//!
//! - Each output keeps its first and last [`KEEP`] bytes, with the number
//!   of bytes left out between them: the head says what the command
//!   started doing, the tail how it ended.
//! - A command whose answer is the same as the last one recorded for that
//!   node and label (the same command, exit and output) is counted, not
//!   copied; the count is written before the next different answer, the
//!   next event (a task starting), and when the journal closes.
//! - The files together stop growing at [`MAX_TOTAL`]: the journal then
//!   counts as failed, and a failed journal stops the run at its next safe
//!   point (see `Journal::when_broken`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Bytes kept of each end of an output.
pub const KEEP: usize = 64 << 10;

/// The most the `.log` and `.jsonl` of one run may hold together.
pub const MAX_TOTAL: u64 = 256 << 20;

/// `text` whole when it is at most 2 × `keep` bytes, else its head and
/// tail (cut at character boundaries) around a line saying how many bytes
/// were left out.
pub fn head_and_tail(text: &str, keep: usize) -> Cow<'_, str> {
    if text.len() <= 2 * keep {
        return Cow::Borrowed(text);
    }
    let mut head = keep;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - keep;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let left_out = tail - head;
    Cow::Owned(format!(
        "{}\n[fleetctl: {left_out} bytes left out of the journal]\n{}",
        &text[..head],
        &text[tail..]
    ))
}

/// The last answer recorded per (node, label), and how many identical
/// ones came since.
#[derive(Debug, Default)]
pub struct Repeats {
    last: HashMap<(String, String), (u64, u64)>,
}

/// What to do with an answer.
#[derive(Debug, PartialEq, Eq)]
pub enum Seen {
    /// The same as the last one for its node and label: counted, not written.
    Again,
    /// Different: write it, after saying how often the previous came again
    /// (`Some(n)`, n > 0).
    New(Option<u64>),
}

impl Repeats {
    pub fn see(&mut self, node: &str, label: &str, fingerprint: u64) -> Seen {
        let key = (node.to_string(), label.to_string());
        match self.last.get_mut(&key) {
            Some((last, count)) if *last == fingerprint => {
                *count += 1;
                Seen::Again
            }
            Some(entry) => {
                let again = entry.1;
                *entry = (fingerprint, 0);
                Seen::New((again > 0).then_some(again))
            }
            None => {
                self.last.insert(key, (fingerprint, 0));
                Seen::New(None)
            }
        }
    }

    /// The counts not written yet, (node, label, count), and every answer
    /// forgotten: the next one is new.
    pub fn drain(&mut self) -> Vec<(String, String, u64)> {
        let mut out: Vec<(String, String, u64)> = self
            .last
            .drain()
            .filter(|(_, (_, count))| *count > 0)
            .map(|((node, label), (_, count))| (node, label, count))
            .collect();
        out.sort();
        out
    }
}

/// A fingerprint of what a command ran and answered (not when, nor how long).
pub fn fingerprint(parts: &[&str], exit: Option<u32>) -> u64 {
    let mut h = DefaultHasher::new();
    parts.hash(&mut h);
    exit.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_output_keeps_its_head_and_tail_and_counts_what_was_left_out() {
        let text = format!("{}{}{}", "a".repeat(10), "b".repeat(100), "c".repeat(10));
        let kept = head_and_tail(&text, 10);
        assert_eq!(
            kept,
            format!(
                "{}\n[fleetctl: 100 bytes left out of the journal]\n{}",
                "a".repeat(10),
                "c".repeat(10)
            )
        );
        assert!(matches!(head_and_tail("short", 10), Cow::Borrowed(_)));
        // Never a cut inside a character.
        let wide = "é".repeat(100);
        let kept = head_and_tail(&wide, 15);
        assert!(kept.contains("left out"));
    }

    #[test]
    fn the_same_answer_again_is_counted_and_the_count_comes_before_the_next() {
        let mut r = Repeats::default();
        assert_eq!(r.see("w-1", "poll", 1), Seen::New(None));
        assert_eq!(r.see("w-1", "poll", 1), Seen::Again);
        assert_eq!(r.see("w-1", "poll", 1), Seen::Again);
        assert_eq!(r.see("w-2", "poll", 1), Seen::New(None));
        assert_eq!(r.see("w-1", "poll", 2), Seen::New(Some(2)));
        assert_eq!(r.see("w-1", "poll", 2), Seen::Again);
        assert_eq!(r.drain(), [("w-1".into(), "poll".into(), 1)]);
        assert!(r.drain().is_empty());
        assert_eq!(r.see("w-1", "poll", 2), Seen::New(None));
    }
}

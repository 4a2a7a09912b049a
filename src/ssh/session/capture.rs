//! A command's stdout or stderr, kept within a bound: a node is not trusted
//! to print a sensible amount, and one that streams forever (`yes`, a
//! runaway log) must not take the laptop's memory with it.
//!
//! Up to the limit everything is kept. Past it, the first three quarters
//! (what a parser or a person reads first) and the last quarter (where
//! errors usually are) are kept, and a marker line between them says how
//! many bytes were cut, so nobody mistakes the result for the whole output.

use std::collections::VecDeque;

/// Default bound on one command's stdout: `kubectl get nodes -o json` of a
/// 5,000-node cluster (Kubernetes' documented maximum) is about 17 MB.
pub const DEFAULT_MAX_OUTPUT: usize = 32 << 20;

/// stderr is for messages: it gets at most this much of the limit.
pub const MAX_STDERR: usize = 1 << 20;

pub(super) struct Capture {
    head: Vec<u8>,
    head_max: usize,
    tail: VecDeque<u8>,
    tail_max: usize,
    /// Bytes dropped between head and tail.
    cut: u64,
}

impl Capture {
    /// Keeps at most `limit` bytes (plus the marker line).
    pub(super) fn new(limit: usize) -> Capture {
        let head_max = limit - limit / 4;
        Capture {
            head: Vec::new(),
            head_max,
            tail: VecDeque::new(),
            tail_max: limit - head_max,
            cut: 0,
        }
    }

    pub(super) fn push(&mut self, mut data: &[u8]) {
        let room = self.head_max - self.head.len();
        if room > 0 {
            let n = room.min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        if data.is_empty() {
            return;
        }
        if data.len() >= self.tail_max {
            self.cut += (self.tail.len() + data.len() - self.tail_max) as u64;
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_max..]);
            return;
        }
        let excess = (self.tail.len() + data.len()).saturating_sub(self.tail_max);
        self.tail.drain(..excess);
        self.cut += excess as u64;
        self.tail.extend(data);
    }

    /// The text kept, decoded lossily, with the marker line where bytes were cut.
    pub(super) fn finish(self, stream: &str) -> String {
        let mut bytes = self.head;
        if self.cut > 0 {
            if bytes.last().is_some_and(|b| *b != b'\n') {
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(
                format!(
                    "[fleetctl: {} bytes of {stream} cut here: the node printed more than fleetctl keeps]\n",
                    self.cut
                )
                .as_bytes(),
            );
        }
        bytes.extend(self.tail);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut c = Capture::new(16);
        c.push(b"hello ");
        c.push(b"world\n");
        assert_eq!(c.finish("stdout"), "hello world\n");
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_says_what_was_cut() {
        let mut c = Capture::new(16);
        for chunk in [&b"0123456789"[..], b"abcdefghij", b"ABCDEFGHIJ"] {
            c.push(chunk);
        }
        assert_eq!(
            c.finish("stderr"),
            "0123456789ab\n[fleetctl: 14 bytes of stderr cut here: the node printed more than \
             fleetctl keeps]\nGHIJ"
        );
    }

    proptest! {
        #[test]
        fn bounded_and_exact_whatever_the_chunks(
            chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..50), 0..40),
            limit in 4usize..64,
        ) {
            let all: Vec<u8> = chunks.concat();
            let mut c = Capture::new(limit);
            for chunk in &chunks {
                c.push(chunk);
                prop_assert!(c.head.len() + c.tail.len() <= limit);
            }
            let head_max = c.head_max;
            let tail_max = c.tail_max;
            let (head, tail, cut) = (c.head.clone(), Vec::from(c.tail.clone()), c.cut);
            if all.len() <= limit {
                prop_assert_eq!([head, tail].concat(), all);
                prop_assert_eq!(cut, 0);
            } else {
                prop_assert_eq!(&head[..], &all[..head_max]);
                prop_assert_eq!(&tail[..], &all[all.len() - tail_max..]);
                prop_assert_eq!(cut as usize, all.len() - limit);
            }
        }
    }
}

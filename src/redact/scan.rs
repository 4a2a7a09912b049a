//! The look-aheads of [`super::secret_spans`], each bounded: it stops at
//! the next byte of its own kind (a quote, a blank) or consults a memo that
//! only moves forward with the scan, so masking stays linear in the text.

/// Where a bare value starting at `from` ends: at a blank, a quote, or the
/// end; a backslash keeps the next byte in (a JSON `\"`).
pub(super) fn bare_value_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' | b'\'' => break,
            c if c.is_ascii_whitespace() => break,
            _ => i += 1,
        }
    }
    i.min(b.len())
}

pub(super) fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// One pass over a text, remembering what its look-aheads already found
/// missing, so that no byte is read again and again: a text of N copies of
/// `"name":"token",` (no `"value"`, no `}`) or of `--password='` (no closing
/// quote) would otherwise rescan to its end at every copy, O(N²) — 44 s for
/// 1 MiB, hours for the 32 MiB a command may print. Every look-ahead either
/// stops at the next byte of its own kind (a quote, a blank) or consults
/// these memos, which only move forward as the scan does.
pub(super) struct Scan<'a> {
    b: &'a [u8],
    /// For `'` and `"`: an opening position from which no closing quote
    /// follows, so none follows any later opening either.
    unclosed: [usize; 2],
    /// The last search for the end of a JSON object's keys: from where it
    /// started, and where it found `}` or `"value"` (or the end).
    object_stop: Option<(usize, usize)>,
}

impl<'a> Scan<'a> {
    pub(super) fn new(b: &'a [u8]) -> Scan<'a> {
        Scan {
            b,
            unclosed: [usize::MAX; 2],
            object_stop: None,
        }
    }

    /// The inside of a string quoted by `b[open]`, to its unescaped closing quote.
    pub(super) fn quoted(&mut self, open: usize) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        let quote = *b.get(open)?;
        let memo = match quote {
            b'\'' => 0,
            b'"' => 1,
            _ => return None,
        };
        if open >= self.unclosed[memo] {
            return None;
        }
        let mut i = open + 1;
        while i < b.len() {
            match b[i] {
                b'\\' if quote == b'"' => i += 2,
                c if c == quote => return Some(open + 1..i),
                _ => i += 1,
            }
        }
        self.unclosed[memo] = open;
        None
    }

    /// The value after a `=` at `from - 1`: the inside of a shell quote
    /// (`--password='x'`, `TOKEN="x"`), else a bare word. Inside a JSON string
    /// (`"--notify-url=x"`) the `"` that follows is the string's end, so a
    /// double quote opens a value only when its closing quote comes before the
    /// next blank or comma of that string.
    pub(super) fn assigned_value(&mut self, from: usize) -> std::ops::Range<usize> {
        let b = self.b;
        match b.get(from) {
            Some(b'\'') => self
                .quoted(from)
                .unwrap_or(from..bare_value_end(b, from + 1)),
            Some(b'"') => match self.quoted(from) {
                Some(inside) if !b[inside.clone()].contains(&b',') => inside,
                _ => from..from,
            },
            _ => from..bare_value_end(b, from),
        }
    }

    /// The value that follows a flag given without `=`, its name ending at
    /// `end`: the next JSON list element, or the next word of a command line.
    pub(super) fn separate_value(&mut self, end: usize) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        match b.get(end)? {
            b'"' => {
                let i = skip_blanks(b, end + 1);
                if b.get(i) != Some(&b',') {
                    return None;
                }
                let i = skip_blanks(b, i + 1);
                if b.get(i) != Some(&b'"') {
                    return None;
                }
                self.quoted(i)
            }
            b' ' | b'\t' => {
                let mut i = end;
                while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                    i += 1;
                }
                match b.get(i)? {
                    b'-' => None,
                    b'\'' | b'"' => self.quoted(i),
                    _ => Some(i..bare_value_end(b, i)),
                }
            }
            _ => None,
        }
    }

    /// `"name": "X"` at `at`: X's range and where it ends.
    pub(super) fn json_name(&mut self, at: usize) -> Option<(std::ops::Range<usize>, usize)> {
        let b = self.b;
        let key = b"\"name\"";
        if !b[at..].starts_with(key) {
            return None;
        }
        let i = skip_blanks(b, at + key.len());
        if b.get(i) != Some(&b':') {
            return None;
        }
        let i = skip_blanks(b, i + 1);
        let name = self.quoted(i)?;
        let after = name.end + 1;
        Some((name, after))
    }

    /// The string value of `"value"` in the same JSON object, after `from`.
    pub(super) fn json_value_in_object(&mut self, from: usize) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        let key = b"\"value\"";
        let stop = match self.object_stop {
            // Nothing between the last search's start and its stop, so
            // nothing between `from` and that stop either.
            Some((started, stop)) if started <= from && from <= stop => stop,
            _ => {
                let mut i = from;
                while i < b.len() && b[i] != b'}' && !b[i..].starts_with(key) {
                    i += 1;
                }
                self.object_stop = Some((from, i));
                i
            }
        };
        if !b.get(stop..)?.starts_with(key) {
            return None;
        }
        let j = skip_blanks(b, stop + key.len());
        if b.get(j) != Some(&b':') {
            return None;
        }
        let j = skip_blanks(b, j + 1);
        self.quoted(j)
    }
}

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
    /// (`--password='x'`, `TOKEN="a,b"`), else a bare word. Inside a JSON
    /// string (`"--notify-url="`, `in_json`) the `"` that follows is the
    /// string's end, not a quote.
    pub(super) fn assigned_value(&mut self, from: usize, in_json: bool) -> std::ops::Range<usize> {
        let b = self.b;
        match b.get(from) {
            Some(b'"') if in_json => from..from,
            Some(q @ (b'\'' | b'"')) => {
                let q = *q;
                self.quoted(from).unwrap_or_else(|| {
                    let mut end = from + 1;
                    while end < b.len() && b[end] != q && !b[end].is_ascii_whitespace() {
                        end += 1;
                    }
                    from + 1..end
                })
            }
            _ => from..bare_value_end(b, from),
        }
    }

    /// The value that follows a flag given without `=`, its name ending at
    /// `end`: the next JSON list element, or the next word of a command line.
    pub(super) fn separate_value(&mut self, end: usize) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        match b.get(end)? {
            b'"' => self.quoted_after(end + 1, b','),
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

    /// `"KEY": "VALUE"` at `at` with a secret KEY (a short one: names are,
    /// and a long run of escaped quotes must not be read again at each).
    pub(super) fn json_key_value(&mut self, at: usize) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        let mut end = at + 1;
        while end < b.len() && end - at <= 64 && super::is_flag_byte(b[end]) {
            end += 1;
        }
        if b.get(end) != Some(&b'"') || end == at + 1 {
            return None;
        }
        let key = std::str::from_utf8(&b[at + 1..end]).ok()?;
        if !super::is_secret_key(key) {
            return None;
        }
        self.quoted_after(end + 1, b':')
    }

    /// From `from`, past blanks, `sep` (a JSON `,` or `:`), blanks again,
    /// then a quoted string: its contents; `None` when anything else stands
    /// there.
    fn quoted_after(&mut self, from: usize, sep: u8) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        let i = skip_blanks(b, from);
        if b.get(i) != Some(&sep) {
            return None;
        }
        let i = skip_blanks(b, i + 1);
        if b.get(i) != Some(&b'"') {
            return None;
        }
        self.quoted(i)
    }

    /// The value of `KEY: VALUE`, its name at `start..colon`: a YAML
    /// mapping's or an HTTP header's. A quoted scalar's inside; a plain one
    /// to the end of its line (or of the quote or JSON string around the
    /// header, or an escaped `\n` of one); for a block scalar (`|`, `>`) the
    /// lines indented under the key.
    pub(super) fn colon_value(
        &mut self,
        start: usize,
        colon: usize,
    ) -> Option<std::ops::Range<usize>> {
        let b = self.b;
        if !matches!(b.get(colon + 1), Some(b' ' | b'\t')) {
            return None;
        }
        let mut from = colon + 1;
        while from < b.len() && (b[from] == b' ' || b[from] == b'\t') {
            from += 1;
        }
        match b.get(from)? {
            b'\'' | b'"' => return self.quoted(from).or(Some(from..line_end(b, from + 1))),
            b'|' | b'>' => {
                let header = line_end(b, from);
                if b[from + 1..header]
                    .iter()
                    .all(|c| matches!(c, b'-' | b'+' | b'0'..=b'9' | b' ' | b'\t'))
                {
                    return Some(block_under(b, start, header));
                }
            }
            _ => {}
        }
        let mut end = line_end(b, from);
        while end > from && b[end - 1].is_ascii_whitespace() {
            end -= 1;
        }
        Some(from..end)
    }
}

/// Where a plain value starting at `from` ends: a line's end, a quote, or
/// an escaped `\n`/`\r` inside a JSON string.
fn line_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b'\n' | b'\r' | b'"' | b'\'' => break,
            b'\\' if matches!(b.get(i + 1), Some(b'n' | b'r')) => break,
            _ => i += 1,
        }
    }
    i
}

/// The lines of a YAML block scalar whose header line ends at `header`:
/// those indented deeper than its key at `key` (blank lines included),
/// from the line after the header to the last such line's end.
fn block_under(b: &[u8], key: usize, header: usize) -> std::ops::Range<usize> {
    let line_start = b[..key]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |n| n + 1);
    let key_indent = b[line_start..key]
        .iter()
        .take_while(|&&c| c == b' ')
        .count();
    let first = (header + 1).min(b.len());
    let mut end = first;
    let mut at = first;
    while at < b.len() {
        let next = b[at..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |n| at + n);
        let line = &b[at..next];
        let indent = line.iter().take_while(|&&c| c == b' ').count();
        if indent == line.len() {
            at = next + 1;
            continue;
        }
        if indent <= key_indent {
            break;
        }
        end = next;
        at = next + 1;
    }
    first..end.max(first)
}

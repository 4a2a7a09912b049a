//! Remote text made harmless for a terminal. Nodes, the cluster and anyone
//! answering at a node's address before its host key is checked (the bytes
//! a peer sends ahead of its `SSH-` banner) decide much of what fleetctl
//! prints: a failed command's tail, health-check output, alert names, the
//! `-v` echo. Raw, a control sequence in it could set the operator's
//! clipboard (OSC 52), clear or rewrite the screen, or hide a warning; a
//! bidi override could make a line read other than it is.
//!
//! So every character a terminal would act on instead of showing is
//! written as the octal escape of each of its UTF-8 bytes (`ESC` → `\033`),
//! as OpenSSH does for what a server sends: `vasnmprintf` in openssh's
//! `utf8.c` (behind `fmprintf`/`mprintf`) escapes every character
//! `wcwidth` calls unprintable with `vis(…, VIS_OCTAL | VIS_ALL)`, byte by
//! byte. Kept: `\n`, `\t`, and `\r` when a `\n` follows (a CRLF line
//! end); a lone `\r` would let a line overwrite itself. Escaped: the other
//! C0 controls, DEL, the C1 controls U+0080–U+009F (a terminal may read
//! U+009B as CSI), and the bidi embeddings, overrides and isolates
//! (U+202A–U+202E, U+2066–U+2069: "Trojan Source", CVE-2021-42574).
//!
//! This runs once, where text leaves fleetctl ([`super`]'s printer, the
//! error chain, the journal's human file), so no call site can forget it.

use std::borrow::Cow;

/// `text` with every character a terminal would act on escaped (see the
/// module doc); text without any comes back as it was, without a copy.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// As [`escape_controls`], but keeping the colour sequences fleetctl's own
/// styles write (SGR `ESC [ n m` with n among reset, bold, dim, red,
/// green, yellow): the results on stdout are coloured tables. A remote
/// value can at most colour text with them; it cannot conceal it (SGR 8),
/// paint it black, or do anything but set those attributes.
pub fn escape_controls_keeping_colours(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// JSON text (`--output json`) with the characters a terminal acts on
/// written as JSON's own `\uXXXX` escapes, so that it stays the same JSON
/// to a parser: serde_json already escapes the C0 controls inside strings,
/// but writes DEL, the C1 controls and the bidi overrides as they are.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if !json
        .chars()
        .any(|c| c != '\n' && must_escape(c, Some('\n')))
    {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c != '\n' && must_escape(c, Some('\n')) {
            let n = u32::from(c);
            out.push_str("\\u");
            for shift in [12, 8, 4, 0] {
                out.push(char::from_digit((n >> shift) & 0xf, 16).unwrap_or('0'));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// fleetctl's own SGR parameters (console's `Style`: reset 0, bold 1, dim
/// 2, red 31, green 32, yellow 33).
const OWN_SGR: [&str; 6] = ["0", "1", "2", "31", "32", "33"];

/// The length of an own colour sequence at the start of `rest`, if it is one.
fn own_sgr(rest: &str) -> Option<usize> {
    let body = rest.strip_prefix("\u{1b}[")?;
    // Only the few bytes an own parameter can take are looked at: a search
    // for the `m` to the end of the text at every ESC was O(n²) on a text
    // of ESC-[ without one.
    let end = body.bytes().take(3).position(|b| b == b'm')?;
    OWN_SGR.contains(&&body[..end]).then_some(2 + end + 1)
}

/// The octal digit of `b`'s low three bits.
fn octal(b: u8) -> char {
    char::from(b'0' + (b & 7))
}

fn must_escape(c: char, next: Option<char>) -> bool {
    match c {
        '\n' | '\t' => false,
        '\r' => next != Some('\n'),
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(text: &str, keep_colours: bool) -> Cow<'_, str> {
    let mut chars = text.char_indices().peekable();
    let mut out: Option<String> = None;
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if keep_colours
            && c == '\u{1b}'
            && let Some(len) = own_sgr(&text[at..])
        {
            if let Some(out) = out.as_mut() {
                out.push_str(&text[at..at + len]);
            }
            while chars.peek().is_some_and(|&(i, _)| i < at + len) {
                chars.next();
            }
            continue;
        }
        if must_escape(c, next) {
            let out = out.get_or_insert_with(|| {
                let mut s = String::with_capacity(text.len() + 16);
                s.push_str(&text[..at]);
                s
            });
            let mut bytes = [0; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                out.extend(['\\', octal(b >> 6), octal(b >> 3), octal(b)]);
            }
        } else if let Some(out) = out.as_mut() {
            out.push(c);
        }
    }
    match out {
        Some(out) => Cow::Owned(out),
        None => Cow::Borrowed(text),
    }
}

/// Remote text at its most hostile, for the tests of each place that
/// prints remote text: fleetctl's own green (ANSI), a C1 CSI (U+009B, read
/// as `ESC [` by some terminals) and a bidi override (U+202E).
#[cfg(test)]
pub const HOSTILE: &str = "\u{1b}[32mfine\u{1b}[0m \u{9b}2J \u{202e}txt.exe";

/// `text`, as `Printer::out` shows it with colour on, carries none of
/// [`HOSTILE`]'s sequences as such: each is written as its octal escape.
#[cfg(test)]
pub fn assert_inert(text: &str) {
    let shown = escape_controls_keeping_colours(text);
    for raw in ["\u{1b}[32mfine", "\u{9b}", "\u{202e}"] {
        assert!(!shown.contains(raw), "{raw:?} survives in {shown:?}");
    }
    for escaped in [
        "\\033[32mfine\\033[0m",
        "\\302\\2332J",
        "\\342\\200\\256txt",
    ] {
        assert!(shown.contains(escaped), "no {escaped} in {shown:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn terminal_sequences_are_written_as_octal_escapes() {
        let cases = [
            (
                "\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}banner",
                "\\033]52;c;ZWNobyBwd25lZA==\\007banner",
            ),
            ("\u{1b}[2Jgone", "\\033[2Jgone"),
            ("ok\rFAKE", "ok\\015FAKE"),
            ("del\u{7f}", "del\\177"),
            ("csi\u{9b}2J", "csi\\302\\2332J"),
            ("user\u{202e}gnp.exe", "user\\342\\200\\256gnp.exe"),
            (
                "isolate\u{2066}x\u{2069}",
                "isolate\\342\\201\\246x\\342\\201\\251",
            ),
            ("nul\0", "nul\\000"),
        ];
        for (text, want) in cases {
            assert_eq!(escape_controls(text), want, "{text:?}");
        }
    }

    #[test]
    fn line_ends_tabs_and_printable_unicode_are_left_alone() {
        for text in [
            "line one\nline two\tcol",
            "crlf\r\nline",
            "naïve ✓ 日本語 — done",
            "C:\\path\\033 stays as text",
        ] {
            assert!(
                matches!(escape_controls(text), Cow::Borrowed(_)),
                "{text:?} became {:?}",
                escape_controls(text)
            );
        }
    }

    #[test]
    fn own_colours_pass_on_stdout_and_nothing_else_does() {
        let ours = "\u{1b}[32mok\u{1b}[0m \u{1b}[31m\u{1b}[1mdown\u{1b}[0m \u{1b}[2mdim\u{1b}[0m";
        assert!(matches!(
            escape_controls_keeping_colours(ours),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls_keeping_colours("\u{1b}[8mhidden\u{1b}[30mblack\u{1b}[2J"),
            "\\033[8mhidden\\033[30mblack\\033[2J"
        );
        assert_eq!(
            escape_controls_keeping_colours("a\u{1b}[32mb\u{1b}]52;c;x\u{7}"),
            "a\u{1b}[32mb\\033]52;c;x\\007"
        );
        assert_eq!(escape_controls(ours).matches('\u{1b}').count(), 0);
    }

    #[test]
    fn json_output_stays_the_same_json() {
        let value = serde_json::json!({"alert": "a\u{9b}2J\u{202e}b\u{7f}\u{1b}]52;c;x\u{7}"});
        let json = serde_json::to_string_pretty(&value).unwrap();
        let safe = escape_json(&json);
        assert!(
            !safe.contains(['\u{9b}', '\u{202e}', '\u{7f}', '\u{1b}', '\u{7}']),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
        assert!(matches!(escape_controls(&safe), Cow::Borrowed(_)));
    }

    /// Issue 38: a MiB of `ESC [` without an `m` was searched to its end
    /// at every ESC.
    #[test]
    fn escaping_is_linear_on_a_mebibyte_of_open_sequences() {
        for unit in ["\u{1b}[", "\u{1b}[3", "\u{1b}[31", "\u{9b}\u{202e}x"] {
            let text = unit.repeat((1 << 20) / unit.len());
            // This thread's CPU time, not the wall clock the suite shares.
            let ((kept, plain, json), took) = crate::fuzzkit::cpu_time(|| {
                (
                    escape_controls_keeping_colours(&text),
                    escape_controls(&text),
                    escape_json(&text),
                )
            });
            assert!(!kept.contains('\u{1b}') && !plain.contains('\u{1b}'));
            assert!(!json.contains('\u{202e}'));
            assert!(
                took < std::time::Duration::from_secs(3),
                "{unit:?}: {took:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn no_control_survives_and_escaping_is_idempotent(text in "\\PC{0,40}|[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}a\\n]{0,40}") {
            let once = escape_controls(&text).into_owned();
            prop_assert!(
                once.chars().all(|c| c == '\n' || c == '\t' || c == '\r' || !must_escape(c, None)),
                "{text:?} → {once:?}"
            );
            prop_assert!(!once.contains('\x1b'), "{once:?}");
            prop_assert_eq!(escape_controls(&once).into_owned(), once);
        }
    }
}

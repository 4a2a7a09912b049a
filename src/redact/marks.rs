//! Secrets marked by what precedes them rather than by a name: a URL's
//! userinfo and query, an `Authorization:` header, a `Bearer` token.

use super::is_secret_name;
use super::scan::{bare_value_end, skip_blanks};

/// Bytes a token or credential is made of, in a header or a URL.
fn is_token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~+/=%:!$*,;".contains(&c)
}

/// At `://`: the password of `user:password@`, if the authority has one;
/// a userinfo without a password (`https://TOKEN@host`, how a forge's
/// access token is often given) whole, except after an SSH scheme, where
/// it is only the login name (`ssh://core@10.0.0.1`).
pub(super) fn url_password(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    if !b[i..].starts_with(b"://") {
        return None;
    }
    let start = i + 3;
    let mut j = start;
    while j < b.len() && !b"/?#@\"'<> \t\r\n".contains(&b[j]) {
        j += 1;
    }
    if b.get(j) != Some(&b'@') {
        return Some((start..start, start));
    }
    match b[start..j].iter().position(|&c| c == b':') {
        Some(colon) => Some((start + colon + 1..j, j + 1)),
        None if is_ssh_scheme(b, i) => Some((start..start, j + 1)),
        None => Some((start..j, j + 1)),
    }
}

/// The scheme ending at `b[i]` (before `://`) is SSH's: `ssh`, `sftp`,
/// `scp` or a `git+ssh`-like compound.
fn is_ssh_scheme(b: &[u8], i: usize) -> bool {
    let mut from = i;
    while from > 0 && (b[from - 1].is_ascii_alphanumeric() || b"+-.".contains(&b[from - 1])) {
        from -= 1;
    }
    let scheme = String::from_utf8_lossy(&b[from..i]).to_ascii_lowercase();
    scheme
        .split('+')
        .any(|part| matches!(part, "ssh" | "sftp" | "scp"))
}

/// At `?` or `&`: `name=VALUE` of a URL query whose name looks secret.
pub(super) fn query_secret(text: &str, i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let b = text.as_bytes();
    if b[i] != b'?' && b[i] != b'&' {
        return None;
    }
    let start = i + 1;
    let mut end = start;
    while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b'-') {
        end += 1;
    }
    if end == start || b.get(end) != Some(&b'=') || !is_secret_name(&text[start..end]) {
        return None;
    }
    let mut v = end + 1;
    while v < b.len() && !b"&#\"' \t\r\n".contains(&b[v]) {
        v += 1;
    }
    Some((end + 1..v, v))
}

/// Whether `name` (lower case) stands at `i` in any case, as a word of its
/// own: not the tail of a longer word.
fn word_at(b: &[u8], i: usize, name: &[u8]) -> bool {
    b.len() >= i + name.len()
        && b[i..i + name.len()].eq_ignore_ascii_case(name)
        && !(i > 0 && b[i - 1].is_ascii_alphanumeric())
}

/// At `Authorization:` (any case): the credentials, after the scheme when
/// there is one (`Bearer`, `Basic`, …), to the end of the line or quote.
pub(super) fn authorization(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    const NAME: &[u8] = b"authorization:";
    if !word_at(b, i, NAME) {
        return None;
    }
    let mut start = skip_blanks(b, i + NAME.len());
    let word_end = bare_value_end(b, start);
    let scheme = &b[start..word_end];
    if !scheme.is_empty()
        && scheme.iter().all(u8::is_ascii_alphabetic)
        && matches!(b.get(word_end), Some(b' ' | b'\t'))
    {
        start = skip_blanks(b, word_end);
    }
    let mut end = start;
    while end < b.len() && !b"\"'\r\n".contains(&b[end]) {
        end += 1;
    }
    Some((start..end, end.max(i + 1)))
}

/// `Bearer TOKEN` (any case) outside a header, as a token of at least 8
/// bytes: `bearer token expired` is prose, not a credential.
pub(super) fn bearer(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    const NAME: &[u8] = b"bearer ";
    if !word_at(b, i, NAME) {
        return None;
    }
    let start = i + NAME.len();
    let mut end = start;
    while end < b.len() && is_token_byte(b[end]) {
        end += 1;
    }
    (end - start >= 8).then_some((start..end, end))
}

/// At `-----BEGIN ... PRIVATE KEY-----` (PKCS#1 `RSA`, SEC1 `EC`, PKCS#8,
/// `ENCRYPTED`, `OPENSSH`): the body, to the matching `-----END` or, cut
/// off, to the end; the armour lines stay, so the reader sees what it was.
pub(super) fn pem_private_key(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const TAIL: &[u8] = b"PRIVATE KEY-----";
    if !b[i..].starts_with(BEGIN) {
        return None;
    }
    let label = i + BEGIN.len();
    let mut j = label;
    while j < b.len() && j - label <= 32 && (b[j].is_ascii_uppercase() || b[j] == b' ') {
        j += 1;
    }
    let tail = j.checked_sub(TAIL.len() - b"-----".len())?;
    if tail < label || !b[tail..].starts_with(TAIL) {
        return None;
    }
    let body = tail + TAIL.len();
    let end = (body..b.len())
        .find(|&k| b[k..].starts_with(b"-----END "))
        .unwrap_or(b.len());
    let (mut from, mut to) = (body, end);
    while from < to && (b[from].is_ascii_whitespace() || escaped_newline(b, from)) {
        from += if b[from] == b'\\' { 2 } else { 1 };
    }
    while to > from && b[to - 1].is_ascii_whitespace() {
        to -= 1;
    }
    if to >= from + 2 && b[to - 2] == b'\\' && matches!(b[to - 1], b'n' | b'r') {
        to -= 2;
    }
    Some((from..to, end.max(i + 1)))
}

/// A JSON string's `\n` or `\r` at `i`.
fn escaped_newline(b: &[u8], i: usize) -> bool {
    b[i] == b'\\' && matches!(b.get(i + 1), Some(b'n' | b'r'))
}

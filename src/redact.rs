//! Secrets out of everything fleetctl writes or prints: the journal, the
//! `-v` echo, warnings, progress lines and every error message (main.rs and
//! the ui print through [`mask_secrets`]). The cluster, the nodes and the
//! operator's own files are full of values that must not land in a
//! terminal's scrollback, a CI log or a journal sent with a bug report:
//! Kured's `--notify-url` carries a webhook token, a health check may print
//! a password, a failed command's stderr may echo an `Authorization` header.
//!
//! Masking is by shape, not by knowing the secret: it errs towards masking
//! a value whose name merely looks secret, and leaves alone names that say
//! where a secret is (`--tls-private-key-file`).

use std::borrow::Cow;

mod marks;
mod scan;

use marks::{authorization, bearer, query_secret, url_password};
use scan::Scan;

/// Words that make a flag or variable name look like it carries a secret:
/// Kured's `--notify-url`/`--slack-hook-url` hold webhook tokens, others a
/// password, an API key, a credential.
const SECRET_WORDS: [&str; 14] = [
    "url",
    "passphrase",
    "uri",
    "token",
    "password",
    "passwd",
    "secret",
    "key",
    "apikey",
    "credential",
    "credentials",
    "auth",
    "webhook",
    "dsn",
];

/// Replaces with `***` every value whose name looks like it carries a
/// secret (a word of [`SECRET_WORDS`]; not a name ending in `file`, `path`
/// or `dir`, which says where a secret is, not what), in the forms commands
/// and kubectl's output take:
///
/// - `--notify-url=VALUE` and `--notify-url VALUE` (in a command line);
/// - `"--notify-url=VALUE"` and `"--notify-url", "VALUE"` (a JSON list of
///   arguments, compact or indented);
/// - `{"name":"KURED_NOTIFY_URL","value":"VALUE"}` (a container's env);
/// - `KURED_NOTIFY_URL=VALUE` (an environment as text);
/// - the password of `scheme://user:password@host` (any URL);
/// - `?token=VALUE` / `&api_key=VALUE` (a URL's query);
/// - what follows `Authorization:` (its scheme, `Bearer`, `Basic`, is kept),
///   and a token after `Bearer ` anywhere.
///
/// Text with nothing to mask comes back as it was, without a copy.
pub fn mask_secrets(text: &str) -> Cow<'_, str> {
    let spans = secret_spans(text);
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in spans {
        if span.start < at {
            continue;
        }
        out.push_str(&text[at..span.start]);
        out.push_str("***");
        at = span.end;
    }
    out.push_str(&text[at..]);
    Cow::Owned(out)
}

fn is_secret_name(name: &str) -> bool {
    let words: Vec<String> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    match words.last() {
        None => false,
        Some(last) if matches!(last.as_str(), "file" | "files" | "path" | "dir") => false,
        // `*_PASS` (`SMTP_PASS`), `*PASSWORD` run together (`PGPASSWORD`, `dbpasswd`).
        Some(last) if last == "pass" || last.ends_with("password") || last.ends_with("passwd") => {
            true
        }
        Some(_) => words.iter().any(|w| SECRET_WORDS.contains(&w.as_str())),
    }
}

fn is_flag_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.'
}

fn secret_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let b = text.as_bytes();
    let mut scan = Scan::new(b);
    let mut spans = Vec::new();
    let starts_word = |i: usize| i == 0 || !is_flag_byte(b[i - 1]);
    let mut i = 0;
    while i < b.len() {
        if let Some((value, next)) = url_password(b, i)
            .or_else(|| query_secret(text, i))
            .or_else(|| authorization(b, i))
            .or_else(|| bearer(b, i))
        {
            if !value.is_empty() {
                spans.push(value);
            }
            i = next;
            continue;
        }
        if b[i] == b'-' && b.get(i + 1) == Some(&b'-') && starts_word(i) {
            let start = i + 2;
            let mut end = start;
            while end < b.len() && is_flag_byte(b[end]) {
                end += 1;
            }
            if end > start && is_secret_name(&text[start..end]) {
                let value = if b.get(end) == Some(&b'=') {
                    Some(scan.assigned_value(end + 1))
                } else {
                    scan.separate_value(end)
                };
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    i = value.end;
                    spans.push(value);
                    continue;
                }
            }
            i = end.max(i + 1);
        } else if b[i] == b'"' {
            if let Some((name, after)) = scan.json_name(i)
                && is_secret_name(&text[name.clone()])
                && let Some(value) = scan.json_value_in_object(after).filter(|v| !v.is_empty())
            {
                i = value.end;
                spans.push(value);
                continue;
            }
            i += 1;
        } else if b[i].is_ascii_uppercase() && starts_word(i) {
            let mut end = i;
            while end < b.len()
                && (b[end].is_ascii_uppercase() || b[end].is_ascii_digit() || b[end] == b'_')
            {
                end += 1;
            }
            if b.get(end) == Some(&b'=') && is_secret_name(&text[i..end]) {
                let value = scan.assigned_value(end + 1);
                if !value.is_empty() {
                    i = value.end;
                    spans.push(value);
                    continue;
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    spans
}

#[cfg(test)]
mod tests;

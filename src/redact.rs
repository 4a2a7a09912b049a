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

use marks::{authorization, bearer, pem_private_key, query_secret, url_password};
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
///   and a token after `Bearer ` anywhere;
/// - `password: VALUE` and `"password": "VALUE"` (a YAML or JSON key,
///   `client-key-data:` of a kubeconfig, a `|` block under such a key), and
///   `X-Auth-Token: VALUE` (an HTTP header);
/// - lower-case `aws_secret_access_key=VALUE` (a credentials file);
/// - the password of `--user user:password` and curl's `-u user:password`;
/// - the body of a PEM private key (`-----BEGIN ... PRIVATE KEY-----`).
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
    // Called at every name in the text: no allocation.
    let mut words = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty());
    let Some(last) = words.clone().next_back() else {
        return false;
    };
    let ends_with = |w: &str, tail: &str| {
        w.len() >= tail.len() && w[w.len() - tail.len()..].eq_ignore_ascii_case(tail)
    };
    if ["file", "files", "path", "dir"]
        .iter()
        .any(|w| last.eq_ignore_ascii_case(w))
    {
        return false;
    }
    // `*_PASS` (`SMTP_PASS`), `*PASSWORD` run together (`PGPASSWORD`, `dbpasswd`).
    if last.eq_ignore_ascii_case("pass") || ends_with(last, "password") || ends_with(last, "passwd")
    {
        return true;
    }
    words.any(|w| SECRET_WORDS.iter().any(|s| w.eq_ignore_ascii_case(s)))
}

fn is_flag_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.'
}

fn secret_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let b = text.as_bytes();
    let mut scan = Scan::new(b);
    let mut spans = Vec::new();
    let starts_word = |i: usize| i == 0 || !is_flag_byte(b[i - 1]);
    // A name right after a `"` is inside a JSON string: a `"` after its
    // `=` is that string's end, not a quote around the value.
    let in_json = |i: usize| i > 0 && b[i - 1] == b'"';
    let mut i = 0;
    while i < b.len() {
        // Dispatched on the first byte: these run at every byte of the text.
        let marked = match b[i] {
            b':' => url_password(b, i),
            b'?' | b'&' => query_secret(text, i),
            b'a' | b'A' => authorization(b, i),
            b'b' | b'B' => bearer(b, i),
            b'-' => pem_private_key(b, i),
            _ => None,
        };
        if let Some((value, next)) = marked {
            if !value.is_empty() {
                spans.push(value);
            }
            i = next;
            continue;
        }
        let found = if b[i] == b'-' && b.get(i + 1) == Some(&b'-') && starts_word(i) {
            let start = i + 2;
            let mut end = start;
            while end < b.len() && is_flag_byte(b[end]) {
                end += 1;
            }
            let name = &text[start..end];
            let (secret, user) = (is_secret_name(name), is_user_flag(name));
            let value = if end == start || !(secret || user) {
                None
            } else if b.get(end) == Some(&b'=') {
                Some(scan.assigned_value(end + 1, in_json(i)))
            } else {
                scan.separate_value(end)
            };
            if user {
                value.and_then(|v| after_colon(b, v))
            } else {
                value
            }
            .ok_or(end)
        } else if b[i] == b'-' && matches!(b.get(i + 1), Some(b'u' | b'U')) && starts_word(i) {
            // curl's `-u user:password` and `-U` (its proxy's).
            scan.separate_value(i + 2)
                .and_then(|v| after_colon(b, v))
                .ok_or(i + 1)
        } else if b[i] == b'"' {
            match scan.json_name(i) {
                Some((name, after)) if is_secret_name(&text[name.clone()]) => {
                    scan.json_value_in_object(after).ok_or(i + 1)
                }
                _ => scan.json_key_value(i).ok_or(i + 1),
            }
        } else if b[i].is_ascii_alphabetic() && starts_word(i) {
            let mut end = i;
            while end < b.len() && is_flag_byte(b[end]) {
                end += 1;
            }
            let name = &text[i..end];
            match b.get(end) {
                Some(b'=') if is_env_name(name) => Some(scan.assigned_value(end + 1, in_json(i))),
                Some(b':') if is_secret_key(name) => scan.colon_value(i, end),
                _ => None,
            }
            .ok_or(i + 1)
        } else {
            Err(i + 1)
        };
        match found {
            Ok(value) if !value.is_empty() => {
                i = value.end.max(i + 1);
                spans.push(value);
            }
            Ok(_) => i += 1,
            Err(next) => i = next.max(i + 1),
        }
    }
    spans
}

/// A variable's name in `NAME=value`: letters, digits and `_`, secret by
/// [`is_secret_name`] when upper-case (`KURED_NOTIFY_URL`), by the stricter
/// [`is_secret_key`] when not (`aws_secret_access_key`, but not a `key=`
/// of a label selector).
fn is_env_name(name: &str) -> bool {
    if !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return false;
    }
    if name.bytes().any(|c| c.is_ascii_lowercase()) {
        is_secret_key(name)
    } else {
        is_secret_name(name)
    }
}

/// A key of YAML or JSON, or an HTTP header's name, that holds a secret:
/// as [`is_secret_name`], except the lone words `key`, `url` and `uri`,
/// which kubectl prints for a toleration, a webhook's address and the like
/// (`key: node-role.kubernetes.io/control-plane`), and with any
/// `...Authorization` header's name.
fn is_secret_key(name: &str) -> bool {
    if ["key", "url", "uri"]
        .iter()
        .any(|w| name.eq_ignore_ascii_case(w))
    {
        return false;
    }
    let tail = name.len().saturating_sub("authorization".len());
    is_secret_name(name)
        || name
            .get(tail..)
            .is_some_and(|t| t.eq_ignore_ascii_case("authorization"))
}

/// `--user` and `--proxy-user` (curl, wget, many tools): `name:password`.
fn is_user_flag(name: &str) -> bool {
    ["user", "proxy-user", "http-user", "ftp-user"]
        .iter()
        .any(|w| name.eq_ignore_ascii_case(w))
}

/// The part of `value` after its first `:`, the password of `user:password`.
fn after_colon(b: &[u8], value: std::ops::Range<usize>) -> Option<std::ops::Range<usize>> {
    let colon = b[value.clone()].iter().position(|&c| c == b':')?;
    Some(value.start + colon + 1..value.end)
}

#[cfg(test)]
mod tests;

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

/// Where a bare value starting at `from` ends: at a blank, a quote, or the
/// end; a backslash keeps the next byte in (a JSON `\"`).
fn bare_value_end(b: &[u8], from: usize) -> usize {
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

/// The value after a `=` at `from - 1`: the inside of a shell quote
/// (`--password='x'`, `TOKEN="x"`), else a bare word. Inside a JSON string
/// (`"--notify-url=x"`) the `"` that follows is the string's end, so a
/// double quote opens a value only when its closing quote comes before the
/// next blank or comma of that string.
fn assigned_value(b: &[u8], from: usize) -> std::ops::Range<usize> {
    match b.get(from) {
        Some(b'\'') => quoted(b, from).unwrap_or(from..bare_value_end(b, from + 1)),
        Some(b'"') => match quoted(b, from) {
            Some(inside) if !b[inside.clone()].contains(&b',') => inside,
            _ => from..from,
        },
        _ => from..bare_value_end(b, from),
    }
}

/// The inside of a string quoted by `b[open]`, to its unescaped closing quote.
fn quoted(b: &[u8], open: usize) -> Option<std::ops::Range<usize>> {
    let quote = *b.get(open)?;
    let mut i = open + 1;
    while i < b.len() {
        match b[i] {
            b'\\' if quote == b'"' => i += 2,
            c if c == quote => return Some(open + 1..i),
            _ => i += 1,
        }
    }
    None
}

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The value that follows a flag given without `=`, its name ending at
/// `end`: the next JSON list element, or the next word of a command line.
fn separate_value(b: &[u8], end: usize) -> Option<std::ops::Range<usize>> {
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
            quoted(b, i)
        }
        b' ' | b'\t' => {
            let mut i = end;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
            match b.get(i)? {
                b'-' => None,
                b'\'' | b'"' => quoted(b, i),
                _ => Some(i..bare_value_end(b, i)),
            }
        }
        _ => None,
    }
}

/// `"name": "X"` at `at`: X's range and where it ends.
fn json_name(b: &[u8], at: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let key = b"\"name\"";
    if !b[at..].starts_with(key) {
        return None;
    }
    let i = skip_blanks(b, at + key.len());
    if b.get(i) != Some(&b':') {
        return None;
    }
    let i = skip_blanks(b, i + 1);
    let name = quoted(b, i)?;
    let after = name.end + 1;
    Some((name, after))
}

/// The string value of `"value"` in the same JSON object, after `from`.
fn json_value_in_object(b: &[u8], from: usize) -> Option<std::ops::Range<usize>> {
    let key = b"\"value\"";
    let mut i = from;
    while i < b.len() && b[i] != b'}' {
        if b[i..].starts_with(key) {
            let j = skip_blanks(b, i + key.len());
            if b.get(j) != Some(&b':') {
                return None;
            }
            let j = skip_blanks(b, j + 1);
            return quoted(b, j);
        }
        i += 1;
    }
    None
}

fn secret_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let b = text.as_bytes();
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
                    Some(assigned_value(b, end + 1))
                } else {
                    separate_value(b, end)
                };
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    i = value.end;
                    spans.push(value);
                    continue;
                }
            }
            i = end.max(i + 1);
        } else if b[i] == b'"' {
            if let Some((name, after)) = json_name(b, i)
                && is_secret_name(&text[name.clone()])
                && let Some(value) = json_value_in_object(b, after).filter(|v| !v.is_empty())
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
                let value = assigned_value(b, end + 1);
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

/// Bytes a token or credential is made of, in a header or a URL.
fn is_token_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"-._~+/=%:!$*,;".contains(&c)
}

/// At `://`: the password of `user:password@`, if the authority has one;
/// a userinfo without a password (`https://TOKEN@host`, how a forge's
/// access token is often given) whole, except after an SSH scheme, where
/// it is only the login name (`ssh://core@10.0.0.1`).
fn url_password(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
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
fn query_secret(text: &str, i: usize) -> Option<(std::ops::Range<usize>, usize)> {
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

/// At `Authorization:` (any case): the credentials, after the scheme when
/// there is one (`Bearer`, `Basic`, …), to the end of the line or quote.
fn authorization(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    const NAME: &[u8] = b"authorization:";
    if b.len() < i + NAME.len()
        || !b[i..i + NAME.len()].eq_ignore_ascii_case(NAME)
        || (i > 0 && b[i - 1].is_ascii_alphanumeric())
    {
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
fn bearer(b: &[u8], i: usize) -> Option<(std::ops::Range<usize>, usize)> {
    const NAME: &[u8] = b"bearer ";
    if b.len() < i + NAME.len()
        || !b[i..i + NAME.len()].eq_ignore_ascii_case(NAME)
        || (i > 0 && b[i - 1].is_ascii_alphanumeric())
    {
        return None;
    }
    let start = i + NAME.len();
    let mut end = start;
    while end < b.len() && is_token_byte(b[end]) {
        end += 1;
    }
    (end - start >= 8).then_some((start..end, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_flag_values_are_masked_in_command_lines() {
        let cases = [
            (
                "kured --ds-name=kured --notify-url=slack://T0/B0/xoxb-1 --period=1h",
                "kured --ds-name=kured --notify-url=*** --period=1h",
            ),
            (
                "kured --slack-hook-url https://hooks.slack.com/services/T/B/x --concurrency 2",
                "kured --slack-hook-url *** --concurrency 2",
            ),
            (
                "tool --password 'a b c' --user=me",
                "tool --password '***' --user=me",
            ),
            (
                "tool --api-key=abc\nnext line",
                "tool --api-key=***\nnext line",
            ),
            ("tool --auth_token \"t\" -v", "tool --auth_token \"***\" -v"),
            (
                "env KURED_NOTIFY_URL=https://x/y PATH=/bin",
                "env KURED_NOTIFY_URL=*** PATH=/bin",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(mask_secrets(text), want, "{text}");
        }
    }

    #[test]
    fn secret_values_are_masked_in_json_lists_and_env() {
        let compact = r#"["/usr/bin/kured","--ds-name=kured","--notify-url=https://hooks.slack.com/x?token=1\"2","--prometheus-url","http://u:p@prom:9090","--period=1h"]"#;
        assert_eq!(
            mask_secrets(compact),
            r#"["/usr/bin/kured","--ds-name=kured","--notify-url=***","--prometheus-url","***","--period=1h"]"#
        );
        let indented = "\"args\": [\n    \"--slack-hook-url\",\n    \"https://hooks/x\",\n    \"--ds-namespace\",\n    \"kured\"\n]";
        assert_eq!(
            mask_secrets(indented),
            "\"args\": [\n    \"--slack-hook-url\",\n    \"***\",\n    \"--ds-namespace\",\n    \"kured\"\n]"
        );
        let env = r#"[{"name":"KURED_NOTIFY_URL","value":"slack://T/B/x"},{"name":"KURED_NODE_ID","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}},{"name": "KURED_PERIOD", "value": "1h"},{"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"t","key":"k"}}}]"#;
        assert_eq!(
            mask_secrets(env),
            r#"[{"name":"KURED_NOTIFY_URL","value":"***"},{"name":"KURED_NODE_ID","valueFrom":{"fieldRef":{"fieldPath":"spec.nodeName"}}},{"name": "KURED_PERIOD", "value": "1h"},{"name":"API_TOKEN","valueFrom":{"secretKeyRef":{"name":"t","key":"k"}}}]"#
        );
    }

    #[test]
    fn names_that_only_say_where_a_secret_is_or_look_alike_are_left_alone() {
        for text in [
            "--kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s",
            "--service-account-key-file=/etc/kubernetes/pki/sa.pub --tls-private-key-file=/x.key",
            "--authorization-mode=Node,RBAC --lock-annotation=weave.works/kured-node-lock",
            "annotate daemonset kured weave.works/kured-node-lock={\"nodeID\":\"fleetctl/a@b\"} --resource-version=12",
            "--from-literal=holder=fleetctl/alice@laptop --keyboard=us --monkey=1",
            "--notify-url= --token",
            "plain text with no flags, MONKEY=1 and a--token=glued",
        ] {
            assert!(
                matches!(mask_secrets(text), Cow::Borrowed(_)),
                "{text} became {}",
                mask_secrets(text)
            );
        }
    }

    #[test]
    fn passwords_passphrases_headers_and_url_credentials_are_masked() {
        let cases = [
            ("PGPASSWORD=hunter2 psql", "PGPASSWORD=*** psql"),
            ("DB_PASSWORD=hunter2", "DB_PASSWORD=***"),
            ("SMTP_PASS=hunter2 x", "SMTP_PASS=*** x"),
            ("gpg --passphrase hunter2 -d", "gpg --passphrase *** -d"),
            ("tool --dbpassword=hunter2", "tool --dbpassword=***"),
            (
                "curl -H 'Authorization: Bearer eyJhbGciOi.x.y' https://api",
                "curl -H 'Authorization: Bearer ***' https://api",
            ),
            (
                "authorization: Basic dXNlcjpwYXNz\nnext",
                "authorization: Basic ***\nnext",
            ),
            ("got bearer abcdefgh12345 back", "got bearer *** back"),
            (
                "fetching https://alice:s3cret@hub.example/ext failed",
                "fetching https://alice:***@hub.example/ext failed",
            ),
            (
                "GET https://hooks.example/x?channel=ops&token=abc123&x=1",
                "GET https://hooks.example/x?channel=ops&token=***&x=1",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(mask_secrets(text), want, "{text}");
        }
    }

    #[test]
    fn quoted_assignments_and_url_userinfo_tokens_are_masked() {
        let cases = [
            ("tool --password='hunter2' -v", "tool --password='***' -v"),
            (
                "tool --api-token=\"abc def\" x",
                "tool --api-token=\"***\" x",
            ),
            ("export TOKEN=\"ghp_abc123\"", "export TOKEN=\"***\""),
            ("DB_PASSWORD='hunter2' psql", "DB_PASSWORD='***' psql"),
            (
                "cloning https://ghp_abc123@github.example/o/r failed",
                "cloning https://***@github.example/o/r failed",
            ),
            (
                "hub http://glpat-xyz@hub.example:8080/ext",
                "hub http://***@hub.example:8080/ext",
            ),
            (
                r#"["--notify-url=","--password='p'"]"#,
                r#"["--notify-url=","--password='***'"]"#,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(mask_secrets(text), want, "{text}");
        }
        for text in [
            "https://extensions.flatcar.org/extensions",
            "ssh://core@10.0.0.1:22",
            "git+ssh://git@forge.example/o/r",
            "the bearer token expired",
            "--pass-through=yes --password-file=/etc/pw --compass=north",
        ] {
            assert!(
                matches!(mask_secrets(text), Cow::Borrowed(_)),
                "{text} became {}",
                mask_secrets(text)
            );
        }
    }

    mod redact_properties {
        use super::*;
        use proptest::prelude::*;

        /// The shapes a secret takes in commands, output and messages.
        const FORMS: [&str; 17] = [
            "kured --notify-url=SECRET --period=1h",
            "kured --slack-hook-url SECRET --x",
            "[\"--notify-url\", \"SECRET\"]",
            "{\"name\":\"KURED_NOTIFY_URL\",\"value\":\"SECRET\"}",
            "env API_TOKEN=SECRET PATH=/bin",
            "MYSQL_PASSWORD=SECRET",
            "SMTP_PASS=SECRET",
            "gpg --passphrase SECRET",
            "curl -H \"Authorization: Bearer SECRET\"",
            "Authorization: SECRET",
            "https://user:SECRET@hub.example/x",
            "http://hooks/x?a=1&api_key=SECRET#f",
            "error: Bearer SECRET rejected",
            "--password 'SECRET'",
            "--password='SECRET'",
            "TOKEN=\"SECRET\"",
            "https://SECRET@hub.example/x",
        ];

        proptest! {
            #[test]
            fn a_secret_never_survives_masking(
                secret in "[A-Za-z0-9][A-Za-z0-9_.~+/-]{7,39}",
                form in 0..FORMS.len(),
                before in "[a-z ]{0,10}",
                after in "[a-z \n]{0,10}",
            ) {
                // A URL's userinfo cannot hold a raw '/' (RFC 3986): it is percent-encoded there.
                let secret = if FORMS[form].contains("://") { secret.replace('/', "%2F") } else { secret };
                let text = format!("{before} {} {after}", FORMS[form].replace("SECRET", &secret));
                let masked = mask_secrets(&text);
                prop_assert!(!masked.contains(&secret), "{text:?} → {masked:?}");
                prop_assert!(masked.contains("***"));
            }

            #[test]
            fn masking_is_idempotent_and_never_panics(text in "\\PC{0,80}") {
                let once = mask_secrets(&text).into_owned();
                prop_assert_eq!(mask_secrets(&once).into_owned(), once);
            }

            #[test]
            fn text_without_secret_names_is_left_as_it_is(
                words in prop::collection::vec("[a-z0-9]{1,8}", 0..12),
            ) {
                let text = words.join(" ");
                prop_assert!(matches!(mask_secrets(&text), Cow::Borrowed(_)));
            }
        }
    }
}

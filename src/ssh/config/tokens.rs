//! ssh_config(5) TOKENS (`%h`, `%p`, `%r`, `%n`, `%%`…), expanded into paths
//! and into the `ProxyCommand` that `sh -c` runs on the operator's laptop.
//!
//! A ProxyCommand is shell text, and the values that go into it (the node's
//! address, its user, the `HostName`) come from the inventory, which is not
//! the laptop's to trust blindly: an address such as `$(touch /tmp/x)`
//! expanded bare would run a command on the laptop. OpenSSH ≥ 9.6 refuses
//! such names on its command line (CVE-2023-51385; `ssh_valid_hostname` and
//! `ssh_valid_ruser` in openssh-portable's readconf.c, used from ssh.c), but
//! still expands a name from `HostName` or `User` unquoted. fleetctl does two
//! things: the inventory refuses those characters (inventory::validate), and
//! here every expanded value reaches sh as exactly one word:
//! - outside quotes, a value with anything but `[A-Za-z0-9._/:@,+%=-]` is
//!   single-quoted;
//! - inside the command's own quotes (`-o 'Foo=%n'`), quoting again would
//!   close the operator's quote, so such a value is refused instead.

/// Characters that mean nothing to sh, inside or outside quotes.
fn plain(value: &str) -> bool {
    !value.is_empty()
        && !value.starts_with('-')
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@,+%=-".contains(c))
}

/// Expands `%%` and the given `%x` in a path; any other token, or an
/// environment variable, is an error rather than a path that silently means
/// something else.
pub(super) fn expand_tokens(value: &str, tokens: &[(char, &str)]) -> Result<String, String> {
    expand(value, tokens, |value, _| Ok(value.to_string()))
}

/// The same for shell text: each value becomes exactly one sh word (see the
/// module's comment).
pub(super) fn expand_command(value: &str, tokens: &[(char, &str)]) -> Result<String, String> {
    expand(value, tokens, |value, quoted| {
        if plain(value) {
            Ok(value.to_string())
        } else if quoted {
            Err(format!(
                "it would put `{value}` inside its own quotes, where sh would read its special \
                 characters: fleetctl passes only plain values there (letters, digits, `._/:@,+%=-`)"
            ))
        } else {
            Ok(crate::shell::quote(value))
        }
    })
}

/// Where the scan of the command's text is, as sh reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

fn expand(
    value: &str,
    tokens: &[(char, &str)],
    word: impl Fn(&str, bool) -> Result<String, String>,
) -> Result<String, String> {
    if value.contains("${") {
        return Err(
            "it uses an environment variable (${…}), which fleetctl does not expand".into(),
        );
    }
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    let mut quote = Quote::None;
    let mut escaped = false;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            if escaped {
                escaped = false;
                continue;
            }
            quote = match (quote, c) {
                (Quote::None, '\'') => Quote::Single,
                (Quote::None, '"') => Quote::Double,
                (Quote::Single, '\'') | (Quote::Double, '"') => Quote::None,
                (Quote::None | Quote::Double, '\\') => {
                    escaped = true;
                    quote
                }
                (q, _) => q,
            };
            continue;
        }
        escaped = false;
        match chars.next() {
            Some('%') => out.push('%'),
            Some(t) => match tokens.iter().find(|(k, _)| *k == t) {
                Some((_, v)) => out.push_str(&word(v, quote != Quote::None)?),
                None => {
                    let known: Vec<String> = tokens.iter().map(|(k, _)| format!("%{k}")).collect();
                    return Err(format!(
                        "it uses %{t}, which fleetctl does not expand here (it expands %% {})",
                        known.join(" ")
                    ));
                }
            },
            None => return Err("it ends with a lone %".into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paths() {
        let t = [('h', "host"), ('p', "22")];
        assert_eq!(expand_tokens("nc %h %p %%h", &t).unwrap(), "nc host 22 %h");
        assert!(expand_tokens("nc %x", &t).unwrap_err().contains("%x"));
        assert!(expand_tokens("nc %", &t).unwrap_err().contains("lone %"));
        assert_eq!(expand_tokens("plain", &[]).unwrap(), "plain");
    }

    #[test]
    fn plain_values_stay_bare_in_a_command_even_inside_its_quotes() {
        let t = [
            ('h', "10.0.0.1"),
            ('p', "22"),
            ('n', "cp-1.lan"),
            ('r', "core"),
        ];
        assert_eq!(
            expand_command("ssh -W '%h:%p' %r@gw -o \"X=%n\" %%", &t).unwrap(),
            "ssh -W '10.0.0.1:22' core@gw -o \"X=cp-1.lan\" %"
        );
    }

    #[test]
    fn a_value_sh_would_interpret_is_quoted_or_refused() {
        let t = [('h', "$(touch /tmp/pwned)"), ('p', "22")];
        assert_eq!(
            expand_command("nc %h %p", &t).unwrap(),
            "nc '$(touch /tmp/pwned)' 22"
        );
        for inside in ["nc '%h' %p", "nc \"%h\" %p", "nc 'a'\"%h\" %p"] {
            let err = expand_command(inside, &t).unwrap_err();
            assert!(err.contains("inside its own quotes"), "{inside}: {err}");
        }
        // After a closed quote, or an escaped quote, the token is outside quotes again.
        assert_eq!(
            expand_command("nc 'x' %h \\' %p", &t).unwrap(),
            "nc 'x' '$(touch /tmp/pwned)' \\' 22"
        );
        // A leading '-' is an option to the proxy: quoted (an argument), never bare.
        assert_eq!(
            expand_command("nc %h", &[('h', "-oProxyCommand=x")]).unwrap(),
            "nc '-oProxyCommand=x'"
        );
    }

    /// What `sh` makes of the expanded command: the words it passes to printf.
    fn sh_words(command: &str) -> Vec<String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "for w in {command}; do printf '%s\\0' \"$w\"; done"
            ))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the value, sh sees it as one word, unchanged, and runs nothing of it.
        #[test]
        fn any_value_outside_quotes_is_one_word_for_sh(value in "[ -~]{1,24}") {
            let cmd = expand_command("a %h b", &[('h', value.as_str())]).unwrap();
            prop_assert_eq!(sh_words(&cmd), vec!["a".to_string(), value, "b".to_string()]);
        }

        #[test]
        fn inside_quotes_a_value_is_kept_only_when_plain(value in "[ -~]{1,24}") {
            match expand_command("a '%h' b", &[('h', value.as_str())]) {
                Ok(cmd) => prop_assert_eq!(sh_words(&cmd), vec!["a".to_string(), value, "b".to_string()]),
                Err(_) => prop_assert!(!plain(&value)),
            }
        }
    }
}

//! Turning a command into a string a remote POSIX shell reads back exactly,
//! and into a short label for error messages.
//!
//! Pure, and at the bottom of the layers: `remote` writes the command text
//! with it and `ssh` wraps and labels what it sends with it, so neither of
//! the two needs the other for it.
//!
//! SSH sends one command string, which the login shell parses; `sudo sh -c`
//! adds a second parse. Quoting is therefore the one place where a stray
//! quote in a path could run something else as root, so it is small and
//! tested on its own.

/// Quotes `s` as one word for a POSIX shell: wrapped in single quotes, each
/// embedded `'` written as `'\''` (close, escaped quote, reopen).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// `sudo -n sh -c '<cmd>'`: runs `cmd` as root without ever prompting.
pub fn sudo_wrap(cmd: &str) -> String {
    format!("sudo -n sh -c {}", quote(cmd))
}

/// The first line of `cmd`, at most 60 characters, for error messages.
pub fn label(cmd: &str) -> String {
    const MAX: usize = 60;
    let first = cmd.trim().lines().next().unwrap_or("").trim_end();
    let multiline = cmd.trim().lines().nth(1).is_some();
    if first.chars().count() > MAX {
        let cut: String = first.chars().take(MAX - 1).collect();
        format!("{cut}…")
    } else if multiline {
        format!("{first} …")
    } else {
        first.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sh -c "printf %s <quoted>"` locally: the shell must hand back
    /// exactly the original bytes.
    fn round_trip(s: &str) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(s)))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn quote_examples() {
        assert_eq!(quote("abc"), "'abc'");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("''"), "''\\'''\\'''");
    }

    #[test]
    fn quoted_words_survive_a_real_shell() {
        for s in [
            "plain",
            "",
            "it's",
            "$(touch /tmp/fleetctl-pwned) `id` $HOME ${x}",
            "a\nb\tc",
            "\"double\" and 'single' and \\backslash",
            "; rm -rf / #",
            "ünïcødé ✓",
        ] {
            assert_eq!(round_trip(s), s);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn any_string_survives_quoting(s in "[^\\x00]{0,40}") {
            proptest::prop_assert_eq!(round_trip(&s), s);
        }
    }

    #[test]
    fn sudo_wrap_is_parsed_twice_correctly() {
        // The outer shell runs `sudo -n sh -c '<cmd>'`; emulate with sh -c instead of sudo.
        let cmd = "printf '%s' \"it's $((1+1))\"";
        let wrapped = sudo_wrap(cmd);
        assert_eq!(wrapped, format!("sudo -n sh -c {}", quote(cmd)));
        let no_sudo = wrapped.replacen("sudo -n ", "", 1);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(no_sudo)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "it's 2");
    }

    #[test]
    fn labels_are_short_and_single_line() {
        assert_eq!(label("  systemctl reboot \n"), "systemctl reboot");
        assert_eq!(label("set -e\nkubeadm upgrade apply"), "set -e …");
        let long = "x".repeat(100);
        let l = label(&long);
        assert_eq!(l.chars().count(), 60);
        assert!(l.ends_with('…'));
    }
}

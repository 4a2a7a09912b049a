//! sysupdate's MatchPattern language, the part sysext images use: literal
//! text, `@v` for the version, `%a` for the architecture (expanded when the
//! config is read). The version is what `@v` matched, so a pinned pattern
//! `kubernetes-v1.37.@v-%a.raw` yields versions like `2`, while the floating
//! `kubernetes-@v-%a.raw` yields `v1.37.2` — exactly as on a real node.

/// The architecture `%a` expands to on the simulated x86-64 nodes.
pub const ARCH: &str = "x86-64";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(String),
    Version,
}

/// Expands the `%` specifiers of a config value. Only `%a` and `%%` are
/// emulated; any other specifier is returned as the error.
pub fn expand_specifiers(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('a') => out.push_str(ARCH),
            Some('%') => out.push('%'),
            Some(other) => return Err(format!("%{other}")),
            None => return Err("%".to_string()),
        }
    }
    Ok(out)
}

fn tokens(pattern: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut literal = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '@' {
            literal.push(c);
            continue;
        }
        match chars.next() {
            Some('@') => literal.push('@'),
            Some('v') => {
                if !literal.is_empty() {
                    tokens.push(Token::Literal(std::mem::take(&mut literal)));
                }
                tokens.push(Token::Version);
            }
            Some(other) => return Err(format!("@{other}")),
            None => return Err("@".to_string()),
        }
    }
    if !literal.is_empty() {
        tokens.push(Token::Literal(literal));
    }
    Ok(tokens)
}

/// Checks a pattern as sysupdate does when reading the config. `Err(Some(f))`
/// names a field (`@u`, …) that is valid upstream but not emulated here;
/// `Err(None)` means the pattern is invalid outright.
pub fn validate(pattern: &str) -> Result<(), Option<String>> {
    let toks = tokens(pattern).map_err(|f| if f == "@" { None } else { Some(f) })?;
    let versions = toks.iter().filter(|t| **t == Token::Version).count();
    let adjacent = toks
        .windows(2)
        .any(|w| w[0] == Token::Version && w[1] == Token::Version);
    if versions == 0 || adjacent || pattern.contains('/') {
        return Err(None);
    }
    Ok(())
}

fn is_version_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || ".,_-+~^".contains(c)
}

/// The version `name` carries under `pattern`, if it matches the whole name.
pub fn match_version(pattern: &str, name: &str) -> Option<String> {
    let toks = tokens(pattern).ok()?;
    let mut version = None;
    match_from(&toks, name, &mut version)
        .then_some(version)
        .flatten()
}

fn match_from(toks: &[Token], rest: &str, version: &mut Option<String>) -> bool {
    let Some((first, more)) = toks.split_first() else {
        return rest.is_empty();
    };
    match first {
        Token::Literal(l) => rest
            .strip_prefix(l.as_str())
            .is_some_and(|r| match_from(more, r, version)),
        Token::Version => {
            // Shortest first: the literal after @v (e.g. `-x86-64.raw`)
            // decides where the version ends.
            for (i, c) in rest.char_indices() {
                if !is_version_char(c) {
                    break;
                }
                let end = i + c.len_utf8();
                if match_from(more, &rest[end..], version) {
                    if version.is_none() {
                        *version = Some(rest[..end].to_string());
                    }
                    return true;
                }
            }
            false
        }
    }
}

/// The file name for `version` under `pattern` (every `@v` replaced).
pub fn format(pattern: &str, version: &str) -> String {
    match tokens(pattern) {
        Ok(toks) => toks
            .iter()
            .map(|t| match t {
                Token::Literal(l) => l.as_str(),
                Token::Version => version,
            })
            .collect(),
        Err(_) => pattern.replace("@v", version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_patterns_capture_the_patch_only() {
        let p = expand_specifiers("kubernetes-v1.37.@v-%a.raw").unwrap();
        assert_eq!(p, "kubernetes-v1.37.@v-x86-64.raw");
        assert_eq!(
            match_version(&p, "kubernetes-v1.37.2-x86-64.raw"),
            Some("2".to_string())
        );
        assert_eq!(match_version(&p, "kubernetes-v1.38.0-x86-64.raw"), None);
        assert_eq!(match_version(&p, "kubernetes-v1.37.2-x86-64.raw.sig"), None);
        assert_eq!(format(&p, "3"), "kubernetes-v1.37.3-x86-64.raw");
    }

    #[test]
    fn floating_patterns_capture_the_full_version() {
        let p = expand_specifiers("kubernetes-@v-%a.raw").unwrap();
        assert_eq!(
            match_version(&p, "kubernetes-v1.38.1-x86-64.raw"),
            Some("v1.38.1".to_string())
        );
        assert_eq!(match_version(&p, "containerd-v1.7.0-x86-64.raw"), None);
    }

    #[test]
    fn validation_and_specifiers() {
        assert_eq!(validate("kubernetes-@v.raw"), Ok(()));
        assert_eq!(validate("kubernetes.raw"), Err(None));
        assert_eq!(validate("dir/kubernetes-@v.raw"), Err(None));
        assert_eq!(validate("k-@v-@u.raw"), Err(Some("@u".to_string())));
        assert_eq!(expand_specifiers("x-%w"), Err("%w".to_string()));
        assert_eq!(expand_specifiers("100%%"), Ok("100%".to_string()));
    }
}

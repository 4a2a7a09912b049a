//! One line of known_hosts as OpenSSH reads it: its marker (`@revoked`,
//! `@cert-authority`), its host patterns (plain, `[host]:port`, `*`/`?`
//! wildcards, `!` negation, hashed `|1|salt|hash`) and its key, and whether
//! a name matches it. Its own file because the line's grammar is one concept,
//! apart from the files, the decision and the recording.

use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use russh::keys::PublicKey;
use russh::keys::ssh_encoding::base64::{Base64, Encoding};
use sha1::Sha1;

use super::{HostsFile, Place};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HostMarker {
    None,
    CertAuthority,
    Revoked,
}

/// A readable line, parsed once with its host patterns prepared.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    /// 1-based.
    pub(super) line: usize,
    pub(super) marker: HostMarker,
    pub(super) patterns: Vec<HostPattern>,
    pub(super) key: PublicKey,
}

/// One comma-separated host pattern of a line, ready to match: plain and
/// negated patterns lower-cased, hashed ones decoded.
#[derive(Debug, Clone)]
pub(super) enum HostPattern {
    Plain(String),
    Negated(String),
    /// salt, HMAC-SHA1 of the name; `None` when it cannot be decoded (such a
    /// line is refused by `parse_line`, so this never matches anything).
    Hashed(Option<(Vec<u8>, Vec<u8>)>),
}

impl HostPattern {
    pub(super) fn new(pattern: &str) -> HostPattern {
        if let Some(negated) = pattern.strip_prefix('!') {
            HostPattern::Negated(negated.to_ascii_lowercase())
        } else if let Some(hashed) = pattern.strip_prefix("|1|") {
            HostPattern::Hashed(decode_hashed(hashed))
        } else {
            HostPattern::Plain(pattern.to_ascii_lowercase())
        }
    }
}

pub(super) struct Entry<'a> {
    pub(super) file: &'a Path,
    pub(super) line: usize,
    pub(super) marker: HostMarker,
    pub(super) patterns: &'a [HostPattern],
    pub(super) key: &'a PublicKey,
}

impl Entry<'_> {
    pub(super) fn place(&self) -> Place {
        Place {
            file: self.file.to_path_buf(),
            line: self.line,
        }
    }

    /// OpenSSH's rule: a line matches when some pattern matches the name and
    /// no negated (`!`) pattern does.
    pub(super) fn matches(&self, name: &str) -> bool {
        let mut matched = false;
        for pattern in self.patterns {
            match pattern {
                HostPattern::Negated(negated) => {
                    if glob(negated, name) {
                        return false;
                    }
                }
                HostPattern::Hashed(Some((salt, hash))) => {
                    matched |= hashed_matches(salt, hash, name);
                }
                HostPattern::Hashed(None) => {}
                HostPattern::Plain(plain) => matched |= glob(plain, name),
            }
        }
        matched
    }
}

/// The readable entries of the files, in order; see [`parse_line`] for what is skipped.
pub(super) fn entries<F: AsRef<HostsFile>>(files: &[F]) -> impl Iterator<Item = Entry<'_>> {
    files.iter().flat_map(|file| {
        let file = file.as_ref();
        file.entries.iter().map(move |e| Entry {
            file: &file.path,
            line: e.line,
            marker: e.marker,
            patterns: &e.patterns,
            key: &e.key,
        })
    })
}

/// `Ok(None)` for blanks and comments, `Err(why)` for a line that cannot be
/// read (it is skipped, as ssh skips it, and reported).
pub(super) fn parse_line(text: &str) -> Result<Option<(HostMarker, &str, PublicKey)>, String> {
    let text = text.trim_start();
    if text.is_empty() || text.starts_with('#') {
        return Ok(None);
    }
    let mut fields = text.split_whitespace();
    let mut hosts = fields.next().ok_or("empty line")?;
    let marker = match hosts {
        "@cert-authority" => HostMarker::CertAuthority,
        "@revoked" => HostMarker::Revoked,
        other if other.starts_with('@') => return Err(format!("unknown marker {other}")),
        _ => HostMarker::None,
    };
    if marker != HostMarker::None {
        hosts = fields.next().ok_or("a marker and nothing else")?;
    }
    if let Some(bad) = hosts
        .split(',')
        .find(|p| p.starts_with("|1|") && decode_hashed(&p[3..]).is_none())
    {
        return Err(format!("malformed hashed host name {bad}"));
    }
    let key_type = fields.next().ok_or("host names but no key")?;
    let blob = fields
        .next()
        .ok_or_else(|| format!("key type {key_type} but no key"))?;
    let key = PublicKey::from_openssh(&format!("{key_type} {blob}"))
        .map_err(|e| format!("the {key_type} key cannot be decoded: {e}"))?;
    Ok(Some((marker, hosts, key)))
}

fn decode_hashed(hashed: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let (salt, hash) = hashed.split_once('|')?;
    Some((
        Base64::decode_vec(salt).ok()?,
        Base64::decode_vec(hash).ok()?,
    ))
}

/// A `|1|salt|hash` entry's test: HMAC-SHA1 of the name keyed by salt.
fn hashed_matches(salt: &[u8], hash: &[u8], name: &str) -> bool {
    let Ok(mac) = Hmac::<Sha1>::new_from_slice(salt) else {
        return false;
    };
    mac.chain_update(name.as_bytes()).verify_slice(hash).is_ok()
}

/// Shell-style wildcard match (`*` any run, `?` one character), as OpenSSH's
/// `match_pattern`; both sides are already lower-case.
pub(in crate::ssh) fn glob(pattern: &str, name: &str) -> bool {
    // Most entries are a literal name: every connection compares its name
    // with every line of the file, so skip the general matcher for them.
    if !pattern.contains(['*', '?']) {
        return pattern == name;
    }
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    let (mut p, mut n) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some('*') => {
                backtrack = Some((p, n));
                p += 1;
            }
            Some(&c) if c == '?' || name.get(n) == Some(&c) => {
                p += 1;
                n += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    p = star + 1;
                    n = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    pattern.get(p..).unwrap_or(&[]).iter().all(|&c| c == '*')
}

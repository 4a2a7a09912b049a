//! known_hosts, as OpenSSH reads and writes it.
//!
//! The decision ("is this key the one we recorded for this host?") is a pure
//! function of the file's text, so every rule OpenSSH applies is unit-tested
//! here without a network: `[host]:port` names for non-22 ports,
//! comma-separated host lists, `*`/`?` wildcards and `!` negation, hashed
//! `|1|salt|hash` entries, `@revoked` keys, and the line number of a changed
//! key so the operator can remove it. russh's own helper stops at the first
//! same-type line that differs (even when a later line matches) and ignores
//! markers, which is why this is ours.
//!
//! Recording a key (accept-new) is the one side effect and lives at the end.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use anyhow::Context;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::ssh_encoding::base64::{Base64, Encoding};
use russh::keys::{Algorithm, HashAlg, PublicKey};
use sha1::Sha1;

/// What known_hosts says about the key a host presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyStatus {
    /// The key is recorded for this host on `line` (1-based).
    Known { line: usize },
    /// No key of this type is recorded for the host.
    Unknown {
        /// Lines that hold keys of *other* types for this host: the host is
        /// not new, it just did not offer (or we did not pick) those types.
        other_types: Vec<(usize, Algorithm)>,
        /// `@cert-authority` lines naming this host; fleetctl does not verify
        /// host certificates, so they cannot vouch for a plain key.
        cert_authorities: Vec<usize>,
    },
    /// A different key of the same type is recorded on `line`: the host key
    /// changed (reinstall) or someone is in the middle.
    Changed { line: usize },
    /// The key is marked `@revoked` on `line` and must never be accepted.
    Revoked { line: usize },
}

/// The name known_hosts files this host under: `host` on port 22, else
/// `[host]:port`, lower-cased as OpenSSH does before matching.
pub fn host_key_name(host: &str, port: u16) -> String {
    let host = host.to_ascii_lowercase();
    if port == 22 {
        host
    } else {
        format!("[{host}]:{port}")
    }
}

/// Checks `key`, presented by `host:port`, against the text of a known_hosts file.
pub fn check(text: &str, host: &str, port: u16, key: &PublicKey) -> HostKeyStatus {
    let name = host_key_name(host, port);
    let mut changed = None;
    let mut other_types = Vec::new();
    let mut cert_authorities = Vec::new();
    let mut known = None;
    for entry in entries(text).filter(|e| e.matches(&name)) {
        match entry.marker {
            Marker::Revoked if same_key(&entry.key, key) => {
                return HostKeyStatus::Revoked { line: entry.line };
            }
            Marker::Revoked => {}
            Marker::CertAuthority => cert_authorities.push(entry.line),
            Marker::None if same_key(&entry.key, key) => {
                known.get_or_insert(entry.line);
            }
            Marker::None if same_type(&entry.key, key) => {
                changed.get_or_insert(entry.line);
            }
            Marker::None => other_types.push((entry.line, entry.key.algorithm())),
        }
    }
    match (known, changed) {
        (Some(line), _) => HostKeyStatus::Known { line },
        (None, Some(line)) => HostKeyStatus::Changed { line },
        (None, None) => HostKeyStatus::Unknown {
            other_types,
            cert_authorities,
        },
    }
}

/// The key algorithms recorded for `host:port`, in file order, without
/// duplicates: offered first during key exchange so a host known by its
/// ECDSA key is not reported unknown because Ed25519 was negotiated.
pub fn recorded_algorithms(text: &str, host: &str, port: u16) -> Vec<Algorithm> {
    let name = host_key_name(host, port);
    let mut algorithms: Vec<Algorithm> = Vec::new();
    for entry in entries(text).filter(|e| e.marker == Marker::None && e.matches(&name)) {
        let algorithm = entry.key.algorithm();
        if !algorithms.contains(&algorithm) {
            algorithms.push(algorithm);
        }
    }
    algorithms
}

/// One OpenSSH-compatible known_hosts line (with its newline) for `host:port`.
pub fn entry_line(host: &str, port: u16, key: &PublicKey) -> anyhow::Result<String> {
    // Drop the comment: the server's key comment is not ours to record.
    let key = PublicKey::new(key.key_data().clone(), "");
    let encoded = key
        .to_openssh()
        .context("encoding the host key in OpenSSH format")?;
    Ok(format!(
        "{} {}\n",
        host_key_name(host, port),
        encoded.trim_end()
    ))
}

/// Appends `host:port`'s key to the known_hosts file at `path`, creating the
/// file (0600) and its directory (0700) when missing, as ssh does.
pub fn record(path: &Path, host: &str, port: u16, key: &PublicKey) -> anyhow::Result<()> {
    let line = entry_line(host, port, key)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("opening {} to record a host key", path.display()))?;
    let text = if ends_without_newline(&mut file)? {
        format!("\n{line}")
    } else {
        line
    };
    // One write of the whole line: appends from parallel connections do not interleave.
    file.write_all(text.as_bytes())
        .with_context(|| format!("appending a host key to {}", path.display()))
}

fn ends_without_newline(file: &mut std::fs::File) -> anyhow::Result<bool> {
    if file.seek(SeekFrom::End(-1)).is_err() {
        return Ok(false); // empty file
    }
    let mut last = [0u8; 1];
    file.read_exact(&mut last)
        .context("reading the end of known_hosts")?;
    Ok(last[0] != b'\n')
}

/// The user-facing name of a key type, as OpenSSH prints it ("ED25519").
pub fn type_label(algorithm: &Algorithm) -> String {
    match algorithm {
        Algorithm::Ed25519 => "ED25519".to_string(),
        Algorithm::Ecdsa { .. } => "ECDSA".to_string(),
        Algorithm::Rsa { .. } => "RSA".to_string(),
        other => other.as_str().to_ascii_uppercase(),
    }
}

/// The `-t` argument of ssh-keyscan for a key type.
pub fn keyscan_type(algorithm: &Algorithm) -> String {
    match algorithm {
        Algorithm::Ed25519 => "ed25519".to_string(),
        Algorithm::Ecdsa { .. } => "ecdsa".to_string(),
        Algorithm::Rsa { .. } => "rsa".to_string(),
        other => other.as_str().to_string(),
    }
}

/// `SHA256:…`, the fingerprint ssh prints and `ssh-keygen -lf` shows.
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

fn same_key(a: &PublicKey, b: &PublicKey) -> bool {
    a.key_data() == b.key_data()
}

fn same_type(a: &PublicKey, b: &PublicKey) -> bool {
    // Every RSA signature hash uses the same RSA key.
    match (a.algorithm(), b.algorithm()) {
        (Algorithm::Rsa { .. }, Algorithm::Rsa { .. }) => true,
        (x, y) => x == y,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    None,
    CertAuthority,
    Revoked,
}

struct Entry<'a> {
    line: usize,
    marker: Marker,
    hosts: &'a str,
    key: PublicKey,
}

impl Entry<'_> {
    /// OpenSSH's rule: a line matches when some pattern matches the name and
    /// no negated (`!`) pattern does.
    fn matches(&self, name: &str) -> bool {
        let mut matched = false;
        for pattern in self.hosts.split(',') {
            if let Some(negated) = pattern.strip_prefix('!') {
                if glob(&negated.to_ascii_lowercase(), name) {
                    return false;
                }
            } else if let Some(hashed) = pattern.strip_prefix("|1|") {
                matched |= hashed_matches(hashed, name);
            } else {
                matched |= glob(&pattern.to_ascii_lowercase(), name);
            }
        }
        matched
    }
}

/// The parseable lines of a known_hosts file. Lines OpenSSH would also skip
/// (comments, blanks, unknown markers, undecodable keys) are skipped.
fn entries(text: &str) -> impl Iterator<Item = Entry<'_>> {
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| parse_line(index + 1, line))
}

fn parse_line(line: usize, text: &str) -> Option<Entry<'_>> {
    let text = text.trim_start();
    if text.is_empty() || text.starts_with('#') {
        return None;
    }
    let mut fields = text.split_whitespace();
    let mut first = fields.next()?;
    let marker = match first {
        "@cert-authority" => Marker::CertAuthority,
        "@revoked" => Marker::Revoked,
        other if other.starts_with('@') => return None,
        _ => Marker::None,
    };
    if marker != Marker::None {
        first = fields.next()?;
    }
    let key_type = fields.next()?;
    let blob = fields.next()?;
    let key = PublicKey::from_openssh(&format!("{key_type} {blob}")).ok()?;
    Some(Entry {
        line,
        marker,
        hosts: first,
        key,
    })
}

/// `salt|hash` of a `|1|salt|hash` entry: HMAC-SHA1 of the name keyed by salt.
fn hashed_matches(hashed: &str, name: &str) -> bool {
    let Some((salt, hash)) = hashed.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (Base64::decode_vec(salt), Base64::decode_vec(hash)) else {
        return false;
    };
    let Ok(mac) = Hmac::<Sha1>::new_from_slice(&salt) else {
        return false;
    };
    mac.chain_update(name.as_bytes())
        .verify_slice(&hash)
        .is_ok()
}

/// Shell-style wildcard match (`*` any run, `?` one character), as OpenSSH's
/// `match_pattern`; both sides are already lower-case.
fn glob(pattern: &str, name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH17g4gplXVYCJTLdFmqD7FeGWQWH+bMbI2RvzP5AaMf";
    const K2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHTPXsMHSDYh0ZlIFM539UfUrpWKvi1lXo87ynluRZUY";
    const K3: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIWn/RSrDBta5RVQf8dlu0f319uwcbveFGUXnzkK49bY";
    const K4_ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBNXM/nAheHcI+jCbQ0MZrd8sStCBIpCAlbbYL1x4CMTJLlh0S3RhFgIBcayMrk90LkAWF97B9kYXu+4KyY9Iecw=";
    /// `ssh-keygen -H` of "node1.example.com K1" and "[10.0.0.7]:2222 K2".
    const HASHED: &str = "\
|1|XZIQRgOlwHbXZgCSgG82D9kVQag=|MrqF0jYz5K2cpNwzLsTw9yR3jwY= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH17g4gplXVYCJTLdFmqD7FeGWQWH+bMbI2RvzP5AaMf
|1|FoUGnemcQgvHL9CfqNPArfgWe4I=|CxO0CjsZwrWkt5E/EVmVtBeXViY= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHTPXsMHSDYh0ZlIFM539UfUrpWKvi1lXo87ynluRZUY
";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).unwrap()
    }

    fn unknown() -> HostKeyStatus {
        HostKeyStatus::Unknown {
            other_types: vec![],
            cert_authorities: vec![],
        }
    }

    #[test]
    fn plain_host_on_port_22() {
        let text = format!("other.example {K2}\nnode1 {K1}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K1)),
            HostKeyStatus::Known { line: 2 }
        );
        assert_eq!(check(&text, "node2", 22, &key(K1)), unknown());
    }

    #[test]
    fn non_default_port_needs_the_bracketed_name() {
        let text = format!("node1 {K1}\n[node1]:2222 {K2}\n");
        assert_eq!(
            check(&text, "node1", 2222, &key(K2)),
            HostKeyStatus::Known { line: 2 }
        );
        // The port-22 entry does not vouch for port 2222, and vice versa.
        assert_eq!(
            check(&text, "node1", 2222, &key(K1)),
            HostKeyStatus::Changed { line: 2 }
        );
        assert_eq!(
            check(&text, "node1", 22, &key(K2)),
            HostKeyStatus::Changed { line: 1 }
        );
        assert_eq!(check(&text, "node1", 2200, &key(K1)), unknown());
    }

    #[test]
    fn several_hosts_per_line() {
        let text = format!("node1,10.0.0.5,[10.0.0.5]:2222 {K1}\n");
        for (host, port) in [("node1", 22), ("10.0.0.5", 22), ("10.0.0.5", 2222)] {
            assert_eq!(
                check(&text, host, port, &key(K1)),
                HostKeyStatus::Known { line: 1 },
                "{host}:{port}"
            );
        }
        assert_eq!(check(&text, "10.0.0.50", 22, &key(K1)), unknown());
    }

    #[test]
    fn hashed_entries_match_their_host_only() {
        assert_eq!(
            check(HASHED, "node1.example.com", 22, &key(K1)),
            HostKeyStatus::Known { line: 1 }
        );
        assert_eq!(
            check(HASHED, "10.0.0.7", 2222, &key(K2)),
            HostKeyStatus::Known { line: 2 }
        );
        assert_eq!(
            check(HASHED, "node1.example.com", 22, &key(K3)),
            HostKeyStatus::Changed { line: 1 }
        );
        assert_eq!(check(HASHED, "10.0.0.7", 22, &key(K2)), unknown());
        assert_eq!(check(HASHED, "node2.example.com", 22, &key(K1)), unknown());
    }

    #[test]
    fn changed_key_names_the_first_offending_line() {
        let text = format!("# fleet\n\nnode0 {K3}\nnode1 {K2}\nnode1 {K3}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K1)),
            HostKeyStatus::Changed { line: 4 }
        );
    }

    #[test]
    fn any_matching_line_wins_over_a_stale_one() {
        // russh's helper reports "changed" here; OpenSSH (and we) accept.
        let text = format!("node1 {K2}\nnode1 {K1}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K1)),
            HostKeyStatus::Known { line: 2 }
        );
    }

    #[test]
    fn a_key_of_another_type_is_not_a_change() {
        let text = format!("node1 {K4_ECDSA}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K1)),
            HostKeyStatus::Unknown {
                other_types: vec![(1, key(K4_ECDSA).algorithm())],
                cert_authorities: vec![],
            }
        );
        assert_eq!(
            recorded_algorithms(&text, "node1", 22),
            vec![key(K4_ECDSA).algorithm()]
        );
    }

    #[test]
    fn wildcards_and_negation() {
        let text = format!("*.example.com,!bad.example.com {K1}\nnode? {K2}\n");
        assert_eq!(
            check(&text, "n1.example.com", 22, &key(K1)),
            HostKeyStatus::Known { line: 1 }
        );
        assert_eq!(check(&text, "bad.example.com", 22, &key(K1)), unknown());
        assert_eq!(
            check(&text, "node7", 22, &key(K2)),
            HostKeyStatus::Known { line: 2 }
        );
        assert_eq!(check(&text, "node17", 22, &key(K2)), unknown());
    }

    #[test]
    fn host_names_are_case_insensitive() {
        let text = format!("Node1.Example.COM {K1}\n");
        assert_eq!(
            check(&text, "NODE1.example.com", 22, &key(K1)),
            HostKeyStatus::Known { line: 1 }
        );
    }

    #[test]
    fn revoked_key_is_refused_even_if_also_listed() {
        let text = format!("node1 {K1}\n@revoked * {K1}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K1)),
            HostKeyStatus::Revoked { line: 2 }
        );
        // A revoked key does not affect other keys.
        let text = format!("node1 {K2}\n@revoked * {K1}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K2)),
            HostKeyStatus::Known { line: 1 }
        );
    }

    #[test]
    fn cert_authority_lines_are_reported_not_trusted() {
        let text = format!("@cert-authority *.example.com {K1}\n");
        assert_eq!(
            check(&text, "n1.example.com", 22, &key(K1)),
            HostKeyStatus::Unknown {
                other_types: vec![],
                cert_authorities: vec![1],
            }
        );
    }

    #[test]
    fn garbage_and_unknown_markers_are_skipped_with_line_numbers_intact() {
        let text =
            format!("node1\nnode1 ssh-ed25519 !!!notbase64\n@future node1 {K2}\nnode1 {K1}\n");
        assert_eq!(
            check(&text, "node1", 22, &key(K1)),
            HostKeyStatus::Known { line: 4 }
        );
    }

    #[test]
    fn recorded_line_is_found_again() {
        let line = entry_line("10.0.0.9", 2222, &key(K3)).unwrap();
        assert_eq!(line, format!("[10.0.0.9]:2222 {K3}\n"));
        assert_eq!(
            check(&line, "10.0.0.9", 2222, &key(K3)),
            HostKeyStatus::Known { line: 1 }
        );
    }

    #[test]
    fn record_creates_private_dir_and_file_and_appends() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("ssh").join("known_hosts");
        record(&path, "node1", 22, &key(K1)).unwrap();
        // A file without a final newline gets one before the new entry.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("# no newline");
        std::fs::write(&path, &text).unwrap();
        record(&path, "node2", 2200, &key(K2)).unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            format!("node1 {K1}\n# no newline\n[node2]:2200 {K2}\n")
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }

    proptest::proptest! {
        #[test]
        fn a_recorded_entry_vouches_for_exactly_its_host_and_port(
            host in "[a-z0-9][a-z0-9.-]{0,20}",
            port in 1u16..,
            other_port in 1u16..,
        ) {
            let line = entry_line(&host, port, &key(K1)).unwrap();
            proptest::prop_assert_eq!(check(&line, &host, port, &key(K1)), HostKeyStatus::Known { line: 1 });
            proptest::prop_assert_eq!(check(&line, &host, port, &key(K2)), HostKeyStatus::Changed { line: 1 });
            if other_port != port {
                proptest::prop_assert_eq!(check(&line, &host, other_port, &key(K1)), unknown());
            }
            let other_host = format!("x{host}");
            proptest::prop_assert_eq!(check(&line, &other_host, port, &key(K1)), unknown());
        }

        #[test]
        fn glob_without_wildcards_is_equality(a in "[a-z.:\\[\\]]{0,8}", b in "[a-z.:\\[\\]]{0,8}") {
            proptest::prop_assert_eq!(glob(&a, &b), a == b);
            proptest::prop_assert!(glob("*", &b));
            let prefix: String = b.chars().take(3).collect();
            let pattern = format!("{prefix}*");
            proptest::prop_assert!(glob(&pattern, &b));
        }
    }

    #[test]
    fn glob_rules() {
        assert!(glob("*", "anything"));
        assert!(glob("a*c", "abbbc"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(glob("[10.0.0.?]:22", "[10.0.0.1]:22"));
        assert!(!glob("node", "node1"));
    }

    #[test]
    fn labels_and_fingerprints() {
        let k = key(K1);
        assert_eq!(type_label(&k.algorithm()), "ED25519");
        assert_eq!(keyscan_type(&key(K4_ECDSA).algorithm()), "ecdsa");
        // As printed by `ssh-keygen -lf`.
        assert_eq!(
            fingerprint(&k),
            "SHA256:7cPFwqkjErlEFBfu9gLfrgWOkmqveMcvc5QvUGABmNM"
        );
    }
}

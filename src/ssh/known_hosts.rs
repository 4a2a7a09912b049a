//! known_hosts, as OpenSSH reads and writes it.
//!
//! The decision ("is this key the one we recorded for this host?") is a pure
//! function of the files' text, so every rule OpenSSH applies is unit-tested
//! here without a network: `[host]:port` names for non-22 ports,
//! comma-separated host lists, `*`/`?` wildcards and `!` negation, hashed
//! `|1|salt|hash` entries, `@revoked` keys, the user files and the global
//! ones (`/etc/ssh/ssh_known_hosts`) read as one list, and the file and line
//! of a changed key so the operator can remove it. russh's own helper stops
//! at the first same-type line that differs (even when a later line matches)
//! and ignores markers, which is why this is ours.
//!
//! A line that cannot be read is skipped and reported ([`HostsFile::unreadable`]),
//! never fatal: ssh(1) skips such lines too, and one bad line must not stop
//! every connection of a run.
//!
//! Recording a key (accept-new) is the one side effect and lives at the end.

use std::collections::HashMap;
use std::fmt;
use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::ssh_encoding::base64::{Base64, Encoding};
use russh::keys::{Algorithm, HashAlg, PublicKey};
use sha1::Sha1;

/// Where a known_hosts line is: what the operator opens to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Place {
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// One known_hosts file, parsed once: the entries fleetctl can read and the
/// lines it skipped. Parsing (base64 and key decoding) is the costly part of a
/// host key check, so a run parses each file once ([`HostsFiles`]) rather
/// than once per connection: with a thousand nodes in one file that is a
/// million key decodings saved, and one copy in memory instead of one per
/// open session.
#[derive(Debug, Clone)]
pub struct HostsFile {
    pub path: PathBuf,
    entries: Vec<Parsed>,
    unreadable: Vec<Unreadable>,
}

/// A line of a known_hosts file that was skipped because it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub place: Place,
    pub reason: String,
}

impl HostsFile {
    pub fn new(path: impl Into<PathBuf>, text: impl AsRef<str>) -> Self {
        let path = path.into();
        let mut entries = Vec::new();
        let mut unreadable = Vec::new();
        for (index, line) in text.as_ref().lines().enumerate() {
            match parse_line(line) {
                Ok(None) => {}
                Ok(Some((marker, hosts, key))) => entries.push(Parsed {
                    line: index + 1,
                    marker,
                    patterns: hosts.split(',').map(HostPattern::new).collect(),
                    key,
                }),
                Err(reason) => unreadable.push(Unreadable {
                    place: Place {
                        file: path.clone(),
                        line: index + 1,
                    },
                    reason,
                }),
            }
        }
        HostsFile {
            path,
            entries,
            unreadable,
        }
    }

    /// Reads `path`. A missing file is an empty one, as for ssh; bytes that
    /// are not UTF-8 only spoil their own line.
    pub fn read(path: &Path) -> anyhow::Result<HostsFile> {
        match std::fs::read(path) {
            Ok(bytes) => Ok(HostsFile::new(path, String::from_utf8_lossy(&bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(HostsFile::new(path, "")),
            Err(e) => Err(e).with_context(|| {
                format!(
                    "reading known hosts file {}: fix its permissions, or name another file",
                    path.display()
                )
            }),
        }
    }

    /// The lines skipped because they are neither blank, a comment nor an
    /// entry fleetctl can read, with the reason.
    pub fn unreadable(&self) -> Vec<Unreadable> {
        self.unreadable.clone()
    }
}

impl AsRef<HostsFile> for HostsFile {
    fn as_ref(&self) -> &HostsFile {
        self
    }
}

/// The known_hosts files of one run, each parsed once and shared by every
/// connection (clones share the cache). A file is read again when its size,
/// modification time or inode changed since it was parsed — accept-new
/// appending a line, another run, an editor — so a check never sees a stale
/// file.
#[derive(Clone, Default)]
pub struct HostsFiles(Arc<Mutex<HashMap<PathBuf, Cached>>>);

/// A parsed file and the stamp of the file it was parsed from.
type Cached = (Option<Stamp>, Arc<HostsFile>);

impl fmt::Debug for HostsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HostsFiles")
    }
}

/// What tells a changed file from the one parsed: `None` for a missing file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

impl HostsFiles {
    /// `path` parsed, from the cache when the file has not changed since.
    pub fn get(&self, path: &Path) -> anyhow::Result<Arc<HostsFile>> {
        // Held while reading: connections racing for the same file wait for
        // one parse instead of each doing its own.
        let mut cache = self.0.lock().unwrap_or_else(|p| p.into_inner());
        // Taken before reading: a change while we read makes the next stamp
        // differ, so the file is read again then rather than trusted stale.
        let stamp = Stamp::of(path);
        if let Some((seen, file)) = cache.get(path)
            && *seen == stamp
        {
            return Ok(file.clone());
        }
        let file = Arc::new(HostsFile::read(path)?);
        cache.insert(path.to_path_buf(), (stamp, file.clone()));
        Ok(file)
    }
}

/// What known_hosts says about the key a host presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyStatus {
    /// The key is recorded for this host at `at`.
    Known { at: Place },
    /// No key of this type is recorded for the host.
    Unknown {
        /// Lines that hold keys of *other* types for this host: the host is
        /// not new, it just did not offer (or we did not pick) those types.
        other_types: Vec<(Place, Algorithm)>,
        /// `@cert-authority` lines naming this host: they vouch for host
        /// certificates only, never for a plain key (`host_cert`).
        cert_authorities: Vec<Place>,
    },
    /// A different key of the same type is recorded at `at`: the host key
    /// changed (reinstall) or someone is in the middle.
    Changed { at: Place },
    /// The key is marked `@revoked` at `at` and must never be accepted.
    Revoked { at: Place },
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

/// The name to look up and record: `HostKeyAlias` when set — used as it is,
/// without a port, as ssh does (ssh_config(5): "an alias that should be used
/// instead of the real host name when looking up or saving the host key") —
/// else [`host_key_name`].
pub fn lookup_name(host: &str, port: u16, alias: Option<&str>) -> String {
    match alias {
        Some(alias) => alias.to_ascii_lowercase(),
        None => host_key_name(host, port),
    }
}

/// Checks `key`, presented by the host known as `name` (see [`lookup_name`]),
/// against known_hosts files read as one list, in order: user files first,
/// then global ones, as ssh does.
pub fn check<F: AsRef<HostsFile>>(files: &[F], name: &str, key: &PublicKey) -> HostKeyStatus {
    let mut changed = None;
    let mut other_types = Vec::new();
    let mut cert_authorities = Vec::new();
    let mut known = None;
    for entry in entries(files).filter(|e| e.matches(name)) {
        match entry.marker {
            HostMarker::Revoked if same_key(entry.key, key) => {
                return HostKeyStatus::Revoked { at: entry.place() };
            }
            HostMarker::Revoked => {}
            HostMarker::CertAuthority => cert_authorities.push(entry.place()),
            HostMarker::None if same_key(entry.key, key) => {
                known.get_or_insert_with(|| entry.place());
            }
            HostMarker::None if same_type(entry.key, key) => {
                changed.get_or_insert_with(|| entry.place());
            }
            HostMarker::None => other_types.push((entry.place(), entry.key.algorithm())),
        }
    }
    match (known, changed) {
        (Some(at), _) => HostKeyStatus::Known { at },
        (None, Some(at)) => HostKeyStatus::Changed { at },
        (None, None) => HostKeyStatus::Unknown {
            other_types,
            cert_authorities,
        },
    }
}

/// The key algorithms recorded for `name`, in file order, without
/// duplicates: offered first during key exchange so a host known by its
/// ECDSA key is not reported unknown because Ed25519 was negotiated.
pub fn recorded_algorithms<F: AsRef<HostsFile>>(files: &[F], name: &str) -> Vec<Algorithm> {
    let mut algorithms: Vec<Algorithm> = Vec::new();
    for entry in entries(files).filter(|e| e.marker == HostMarker::None && e.matches(name)) {
        let algorithm = entry.key.algorithm();
        if !algorithms.contains(&algorithm) {
            algorithms.push(algorithm);
        }
    }
    algorithms
}

/// One OpenSSH-compatible known_hosts line (with its newline) for `name`;
/// with a `salt`, the name is hashed (`|1|salt|hash`) as `HashKnownHosts yes`
/// makes ssh write it.
pub fn entry_line(name: &str, key: &PublicKey, salt: Option<&[u8]>) -> anyhow::Result<String> {
    // Drop the comment: the server's key comment is not ours to record.
    let key = PublicKey::new(key.key_data().clone(), "");
    let encoded = key
        .to_openssh()
        .context("encoding the host key in OpenSSH format")?;
    let name = match salt {
        Some(salt) => hashed_name(name, salt)?,
        None => name.to_string(),
    };
    Ok(format!("{name} {}\n", encoded.trim_end()))
}

/// `|1|base64(salt)|base64(HMAC-SHA1(key = salt, name))`, the format of
/// ssh-keygen(1) `-H` and `HashKnownHosts`.
pub fn hashed_name(name: &str, salt: &[u8]) -> anyhow::Result<String> {
    let mac = Hmac::<Sha1>::new_from_slice(salt)
        .map_err(|e| anyhow::anyhow!("hashing a known_hosts name: {e}"))?
        .chain_update(name.as_bytes())
        .finalize()
        .into_bytes();
    Ok(format!(
        "|1|{}|{}",
        Base64::encode_string(salt),
        Base64::encode_string(&mac)
    ))
}

/// The salt of a hashed name: as long as a SHA-1 digest, as ssh uses.
const SALT_LEN: usize = 20;

fn random_salt() -> anyhow::Result<[u8; SALT_LEN]> {
    // The kernel's CSPRNG, read directly: fleetctl is Unix-only already and
    // this avoids another crate for twenty bytes.
    let mut salt = [0u8; SALT_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut salt))
        .context("reading /dev/urandom for a known_hosts salt")?;
    Ok(salt)
}

/// Records `key` for `name` in the known_hosts file at `path` (hashed when
/// `hash`), creating the file (0600) and its directory (0700) when missing,
/// as ssh does.
///
/// The file is locked (flock) while it is read again and appended to, so
/// connections racing to the same host — parallel connects in one run, or
/// two runs — record it once. Nothing is written unless the file still
/// knows no key at all for `name`: then `Ok(None)`. Otherwise the fresh
/// verdict is returned and the caller decides (`Known`: another connection
/// just recorded this very key; `Unknown` with other types: the host is
/// known by another key type, which accept-new must not add to).
pub fn record(
    path: &Path,
    name: &str,
    key: &PublicKey,
    hash: bool,
) -> anyhow::Result<Option<HostKeyStatus>> {
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
    // Released when `file` is closed, on every path out of here.
    file.lock()
        .with_context(|| format!("locking {} to record a host key", path.display()))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .with_context(|| format!("reading {} to record a host key", path.display()))?;
    let now = HostsFile::new(path, String::from_utf8_lossy(&bytes));
    match check(std::slice::from_ref(&now), name, key) {
        HostKeyStatus::Unknown { other_types, .. } if other_types.is_empty() => {}
        status => return Ok(Some(status)),
    }
    let salt = if hash { Some(random_salt()?) } else { None };
    let line = entry_line(name, key, salt.as_ref().map(|s| &s[..]))?;
    let text = if bytes.is_empty() || bytes.ends_with(b"\n") {
        line
    } else {
        format!("\n{line}")
    };
    // One write of the whole line, under the lock.
    file.write_all(text.as_bytes())
        .with_context(|| format!("appending a host key to {}", path.display()))?;
    Ok(None)
}

/// The user-facing name of a key type, as OpenSSH prints it ("ED25519").
pub fn type_label(algorithm: &Algorithm) -> String {
    keyscan_type(algorithm).to_ascii_uppercase()
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

mod hosts_entry;
pub(super) use hosts_entry::glob;
use hosts_entry::{HostMarker, HostPattern, Parsed, entries, parse_line};

mod host_cert;
pub use host_cert::{
    HostCert, check as check_host_cert, has_authority as has_cert_authority,
    validity as cert_validity,
};

#[cfg(test)]
mod tests;

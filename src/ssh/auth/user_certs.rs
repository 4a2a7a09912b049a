//! OpenSSH user certificates, offered as `ssh` offers them: the
//! certificate beside an identity file (`<identity>-cert.pub`), those named
//! by `CertificateFile` whose key is that identity's, and the agent's
//! certificates (ssh_config(5), `CertificateFile` and `IdentityFile`;
//! openssh-portable `sshconnect2.c`, `pubkey_prepare`). Each is offered
//! before the plain key it certifies: a server that trusts the CA accepts
//! it without the key being in any authorized_keys.
//!
//! The server never says why it refused a certificate, so fleetctl reads
//! the certificate itself when it is refused and names what sshd would have
//! objected to: expired, not yet valid, not a user certificate, or no
//! principal for the user (sshd `auth2-pubkey.c`, `user_cert_trusted_ca`,
//! through `sshkey_cert_check_authority`).

use std::path::{Path, PathBuf};

use russh::keys::ssh_key::certificate::CertType;
use russh::keys::{Certificate, PublicKey};

/// The largest certificate file read (a certificate is a few KiB).
const MAX_CERT: u64 = 64 << 10;

/// The certificates to offer with the identity `path`, whose public key is
/// `key`: `<path>-cert.pub`, then each `CertificateFile` certifying `key`.
pub(super) fn for_identity(path: &Path, key: &PublicKey, files: &[PathBuf]) -> Vec<Certificate> {
    let mut beside = path.as_os_str().to_owned();
    beside.push("-cert.pub");
    let mut out: Vec<Certificate> = Vec::new();
    for file in std::iter::once(PathBuf::from(beside)).chain(files.iter().cloned()) {
        let Some(cert) = read(&file) else { continue };
        if cert.public_key() == key.key_data() && !out.iter().any(|c| c == &cert) {
            out.push(cert);
        }
    }
    out
}

fn read(path: &Path) -> Option<Certificate> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_CERT {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    Certificate::from_openssh(text.trim()).ok()
}

/// How the certificate is named in messages.
pub(super) fn describe(cert: &Certificate) -> String {
    format!(
        "certificate {:?} (serial {}, {})",
        cert.key_id(),
        cert.serial(),
        super::describe(&PublicKey::from(cert.public_key().clone()), "")
    )
}

/// What sshd would object to in `cert` for `user` at `now`, if anything
/// this side can see (the CA's trust is the server's to say).
pub(super) fn problem(cert: &Certificate, user: &str, now: u64) -> Option<String> {
    if cert.cert_type() != CertType::User {
        return Some("it is a host certificate, not a user certificate".into());
    }
    if let Some(why) = super::known_hosts::cert_validity(cert, now) {
        return Some(format!("it {why}"));
    }
    let principals = cert.valid_principals();
    if !principals.is_empty() && !principals.iter().any(|p| p == user) {
        let shown: Vec<&str> = principals.iter().map(String::as_str).take(8).collect();
        return Some(format!(
            "its principals ({}) do not include the user {user:?}",
            shown.join(", ")
        ));
    }
    None
}

pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

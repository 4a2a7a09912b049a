//! Host certificates vouched for by a `@cert-authority` line, judged as
//! OpenSSH's client judges them (openssh-portable `sshconnect.c`
//! `check_host_cert` and `check_host_key`, `sshkey.c`
//! `sshkey_cert_check_authority`):
//! - the certificate is a host certificate, signed by a CA that a
//!   `@cert-authority` line names for this host, and that CA is not
//!   `@revoked`;
//! - it is valid now (`valid after` ≤ now < `valid before`) and its
//!   signature verifies;
//! - its principals, when it has any, include the host name looked up
//!   (`HostKeyAlias` when set), compared exactly (`wildcard_pattern` 0);
//! - it carries no critical option (none is defined for host certificates);
//! - when no CA line vouches for it, OpenSSH retries with the certificate's
//!   plain key ("No matching CA found. Retry with plain key"): so does
//!   fleetctl, against the plain-key lines.

use russh::keys::ssh_key::certificate::CertType;
use russh::keys::{Certificate, HashAlg, PublicKey};

use super::{HostMarker, HostsFile, Place, entries};

/// What a host certificate is worth here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostCert {
    /// Vouched for by the CA at `at`.
    Valid { at: Place },
    /// No `@cert-authority` line for this host names its signer: judge the
    /// plain key instead.
    NoAuthority,
    /// A CA vouches for this host, but this certificate fails: why.
    Invalid { reason: String },
}

/// Whether any `@cert-authority` line names `name`: then fleetctl asks
/// for host certificates in the key exchange, as OpenSSH orders its host
/// key algorithms (`sshconnect2.c` `order_hostkeyalgs`).
pub fn has_authority<F: AsRef<HostsFile>>(files: &[F], name: &str) -> bool {
    entries(files).any(|e| e.marker == HostMarker::CertAuthority && e.matches(name))
}

/// Judges `cert`, presented by the host known as `name`, whose principal
/// must be `principal` (the host name without a port), at `now` (Unix
/// seconds).
pub fn check<F: AsRef<HostsFile>>(
    files: &[F],
    name: &str,
    principal: &str,
    cert: &Certificate,
    now: u64,
) -> HostCert {
    let signer = cert.signature_key();
    let ca = entries(files).find(|e| {
        e.marker == HostMarker::CertAuthority && e.matches(name) && e.key.key_data() == signer
    });
    let Some(ca) = ca else {
        return HostCert::NoAuthority;
    };
    let invalid = |reason: String| HostCert::Invalid { reason };
    if let Some(revoked) = entries(files)
        .find(|e| e.marker == HostMarker::Revoked && e.matches(name) && e.key.key_data() == signer)
    {
        return invalid(format!(
            "its certificate authority is marked @revoked in {}",
            revoked.place()
        ));
    }
    if cert.cert_type() != CertType::Host {
        return invalid("it is a user certificate, not a host certificate".into());
    }
    if let Some(why) = validity(cert, now) {
        return invalid(format!("the certificate {why}"));
    }
    let fingerprint = PublicKey::from(signer.clone()).fingerprint(HashAlg::Sha256);
    if let Err(e) = cert.validate_at(now, [&fingerprint]) {
        return invalid(format!("the certificate does not verify: {e}"));
    }
    let principals = cert.valid_principals();
    if !principals.is_empty() && !principals.iter().any(|p| p.eq_ignore_ascii_case(principal)) {
        let shown: Vec<&str> = principals.iter().map(String::as_str).take(8).collect();
        return invalid(format!(
            "the certificate is for {}, not for {principal}",
            shown.join(", ")
        ));
    }
    if !cert.critical_options().is_empty() {
        return invalid(
            "the certificate carries critical options, which a host certificate may not".into(),
        );
    }
    HostCert::Valid { at: ca.place() }
}

/// Why `cert` is not valid at `now` (Unix seconds), as a phrase after
/// "the certificate" or "it": user and host certificates alike.
pub fn validity(cert: &Certificate, now: u64) -> Option<String> {
    if now < cert.valid_after() {
        return Some(format!(
            "is not valid yet (valid after {})",
            stamp(cert.valid_after())
        ));
    }
    if now >= cert.valid_before() {
        return Some(format!("expired ({})", stamp(cert.valid_before())));
    }
    None
}

/// A certificate's time, in UTC, as `ssh-keygen -L` shows it.
fn stamp(unix: u64) -> String {
    if unix == u64::MAX {
        return "forever".into();
    }
    i64::try_from(unix)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(
            || unix.to_string(),
            |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

//! The host key check of one connection: the target's known_hosts files
//! and russh's callback that checks the key the server shows against them
//! (StrictHostKeyChecking, accept-new, `@revoked`, `@cert-authority`). Its
//! own file because it is one concept the dial consults, apart from how
//! the connection is reached.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use russh::client;
use russh::keys::{HashAlg, PublicKey, PublicKeyOrCertificate};

use crate::inventory::HostKeyChecking;
use crate::ssh::failure::{HostKeyRejected, Rejection};
use crate::ssh::known_hosts::{self, HostKeyStatus, HostsFile, Unreadable};
use crate::ssh::{Options, Target};

/// The known_hosts files of one target, user files first, then global ones,
/// as ssh reads them; parsed once per run (`Options::hosts_files`).
pub(super) struct Lookup {
    /// `[host]:port`, `host`, or the HostKeyAlias.
    pub(super) name: String,
    pub(super) files: Vec<Arc<HostsFile>>,
    /// The first user file: the one accept-new writes to (ssh writes there too).
    pub(super) record_to: Option<PathBuf>,
    pub(super) hash: bool,
    pub(super) unreadable: Vec<Unreadable>,
}

impl Lookup {
    pub(super) fn read(target: &Target, opts: &Options) -> anyhow::Result<Lookup> {
        let keys = &target.host_keys;
        let user = keys
            .user_files
            .clone()
            .unwrap_or_else(|| vec![opts.known_hosts.clone()]);
        let global = keys
            .global_files
            .as_ref()
            .unwrap_or(&opts.global_known_hosts);
        let files = user
            .iter()
            .chain(global)
            .map(|path| opts.hosts_files.get(path))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let unreadable = files.iter().flat_map(|f| f.unreadable()).collect();
        Ok(Lookup {
            name: known_hosts::lookup_name(&target.host, target.port, keys.alias.as_deref()),
            files,
            record_to: user.first().cloned(),
            hash: keys.hash,
            unreadable,
        })
    }
}

/// What the host key check decided, read back after the handshake.
#[derive(Debug, Default)]
pub(super) struct HostKeyVerdict {
    pub(super) rejected: Option<HostKeyRejected>,
    pub(super) warnings: Vec<String>,
}

pub(super) fn take(verdict: &Mutex<HostKeyVerdict>) -> HostKeyVerdict {
    std::mem::take(
        &mut *verdict
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

/// russh's callbacks for one connection: only the host key check matters.
pub(crate) struct Client {
    pub(super) node: String,
    /// The name a host certificate must be issued for: `HostKeyAlias`, or
    /// the host without its port (OpenSSH's `check_host_cert`).
    pub(super) principal: String,
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) lookup: Arc<Lookup>,
    pub(super) checking: HostKeyChecking,
    pub(super) verdict: Arc<Mutex<HostKeyVerdict>>,
}

impl Client {
    fn reject(&self, key: &PublicKey, reason: Rejection) -> bool {
        let lookup = &self.lookup;
        let rejected = HostKeyRejected {
            name: lookup.name.clone(),
            add_to: lookup.record_to.clone(),
            searched: lookup.files.iter().map(|f| f.path.clone()).collect(),
            skipped: lookup.unreadable.iter().map(|u| u.place.clone()).collect(),
            ..HostKeyRejected::new(
                &self.node,
                &self.host,
                self.port,
                PathBuf::new(),
                key,
                reason,
            )
        };
        self.verdict
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .rejected = Some(rejected);
        false
    }

    fn warn(&self, warning: String) {
        self.verdict
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .warnings
            .push(warning);
    }

    fn id(key: &PublicKey) -> String {
        format!(
            "{} {}",
            known_hosts::type_label(&key.algorithm()),
            key.fingerprint(HashAlg::Sha256)
        )
    }

    fn check(&self, key: &PublicKey) -> anyhow::Result<bool> {
        let status = known_hosts::check(&self.lookup.files, &self.lookup.name, key);
        let name = &self.lookup.name;
        let id = Self::id(key);
        Ok(match (status, self.checking) {
            (HostKeyStatus::Known { .. }, _) => true,
            // Revoked is refused even with checking off, as ssh does.
            (HostKeyStatus::Revoked { at }, _) => self.reject(key, Rejection::Revoked { at }),
            (HostKeyStatus::Changed { at }, HostKeyChecking::Off) => {
                self.warn(format!(
                    "{}: WARNING: host key checking is OFF and the host key of {name} CHANGED ({id} differs from {at}); \
                     connecting anyway. Anyone on the network path could be impersonating this node.",
                    self.node
                ));
                true
            }
            (HostKeyStatus::Changed { at }, _) => self.reject(key, Rejection::Changed { at }),
            (HostKeyStatus::Unknown { .. }, HostKeyChecking::Off) => {
                self.warn(format!(
                    "{}: WARNING: host key checking is OFF: accepted the unverified host key {id} of {name}. \
                     Anyone on the network path could be impersonating this node.",
                    self.node
                ));
                true
            }
            // Known by another key type only: not new, so not accept-new's to record.
            (HostKeyStatus::Unknown { other_types, .. }, HostKeyChecking::AcceptNew)
                if !other_types.is_empty() =>
            {
                self.reject(
                    key,
                    Rejection::OtherType {
                        recorded: other_types,
                    },
                )
            }
            (HostKeyStatus::Unknown { .. }, HostKeyChecking::AcceptNew) => self.record(key)?,
            (
                HostKeyStatus::Unknown {
                    other_types,
                    cert_authorities,
                },
                HostKeyChecking::Strict,
            ) => self.reject(
                key,
                Rejection::Unknown {
                    other_types,
                    cert_authorities,
                },
            ),
        })
    }

    /// accept-new: records the key in the first user file, unless the file
    /// changed under us (see [`known_hosts::record`]).
    fn record(&self, key: &PublicKey) -> anyhow::Result<bool> {
        let name = &self.lookup.name;
        let id = Self::id(key);
        let Some(path) = &self.lookup.record_to else {
            // As ssh: with no user file the key cannot be added; the connection goes on.
            self.warn(format!(
                "{}: accepted the new host key {id} of {name} without recording it: \
                 UserKnownHostsFile is none for this host in ~/.ssh/config, so it is new again on every connection",
                self.node
            ));
            return Ok(true);
        };
        let again = known_hosts::record(path, name, key, self.lookup.hash)
            .with_context(|| format!("{}: recording the new host key of {name}", self.node))?;
        Ok(match again {
            None => {
                self.warn(format!(
                    "{}: permanently added '{name}' ({id}) to {}",
                    self.node,
                    path.display()
                ));
                true
            }
            // Another connection recorded this very key meanwhile.
            Some(HostKeyStatus::Known { .. }) => true,
            Some(HostKeyStatus::Changed { at }) => self.reject(key, Rejection::Changed { at }),
            Some(HostKeyStatus::Revoked { at }) => self.reject(key, Rejection::Revoked { at }),
            Some(HostKeyStatus::Unknown { other_types, .. }) => self.reject(
                key,
                Rejection::OtherType {
                    recorded: other_types,
                },
            ),
        })
    }
}

impl client::Handler for Client {
    type Error = anyhow::Error;

    async fn check_server_key(
        &mut self,
        server_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        match server_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => self.check(key),
            PublicKeyOrCertificate::Certificate(cert) => {
                let key = PublicKey::new(cert.public_key().clone(), "");
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let lookup = &self.lookup;
                match known_hosts::check_host_cert(
                    &lookup.files,
                    &lookup.name,
                    &self.principal,
                    cert,
                    now,
                ) {
                    known_hosts::HostCert::Valid { .. } => Ok(true),
                    // As OpenSSH: no CA vouches for it, so its plain key
                    // is judged against the plain-key lines.
                    known_hosts::HostCert::NoAuthority => self.check(&key),
                    known_hosts::HostCert::Invalid { reason } => {
                        Ok(self.reject(&key, Rejection::Certificate { reason }))
                    }
                }
            }
        }
    }
}

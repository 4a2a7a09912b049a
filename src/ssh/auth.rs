//! Public-key authentication the way ssh does it: the agent's identities
//! first (when `SSH_AUTH_SOCK` is set), then the identity files, with RSA
//! signed as rsa-sha2-512/256 when the server allows it.
//!
//! A passphrase-protected key is decrypted once per run (the [`KeyCache`] is
//! shared by every connection) and the passphrase is only asked on a
//! terminal; without one the operator is told to use ssh-agent. When nothing
//! works the error says which user, which keys were tried and what to check.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use russh::MethodKind;
use russh::client::{AuthResult, Handle, Handler};
use russh::keys::agent::AgentIdentity;
use russh::keys::agent::client::AgentClient;
use russh::keys::{HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};
use tokio::sync::Mutex;

use super::{Options, Target, known_hosts};

mod user_certs;

/// How many times a wrong passphrase may be typed, as ssh.
const PASSPHRASE_ATTEMPTS: usize = 3;

/// Decrypted identity files, shared by all connections of a run so each
/// passphrase is asked once, and prompts never interleave.
#[derive(Clone, Default)]
pub struct KeyCache {
    keys: Arc<Mutex<HashMap<PathBuf, Arc<PrivateKey>>>>,
    /// A progress bar drawing on the terminal meanwhile, hidden while a
    /// passphrase is asked so it does not draw over the prompt.
    bar: Arc<std::sync::Mutex<Option<indicatif::ProgressBar>>>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyCache")
    }
}

impl KeyCache {
    /// While `bar` is drawn (gathering facts), passphrase prompts suspend it.
    pub fn quiet_while_prompting(&self, bar: Option<indicatif::ProgressBar>) {
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = bar;
    }

    /// The key in `path`, decrypting it (asking for its passphrase when
    /// `prompt`) the first time.
    async fn load(&self, path: &Path, prompt: bool) -> anyhow::Result<Arc<PrivateKey>> {
        let mut keys = self.keys.lock().await;
        if let Some(key) = keys.get(path) {
            return Ok(key.clone());
        }
        let text = tokio::fs::read_to_string(path)
            .await
            .with_context(|| format!("cannot read identity file {}", path.display()))?;
        let key = match super::keyfile::decode(&text, None) {
            Ok(key) => key,
            Err(russh::keys::Error::KeyIsEncrypted) => {
                let bar = self.bar.lock().unwrap_or_else(|p| p.into_inner()).clone();
                decrypt_interactively(path, &text, prompt, bar).await?
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "{} is not a private key fleetctl can read (ed25519, ECDSA or RSA)",
                        path.display()
                    )
                });
            }
        };
        let key = Arc::new(key);
        keys.insert(path.to_path_buf(), key.clone());
        Ok(key)
    }
}

async fn decrypt_interactively(
    path: &Path,
    text: &str,
    prompt: bool,
    bar: Option<indicatif::ProgressBar>,
) -> anyhow::Result<PrivateKey> {
    if !prompt {
        return Err(anyhow!(
            "{} is passphrase-protected and there is no terminal to ask for the passphrase: \
             load it into ssh-agent (`ssh-add {}`) and run again",
            path.display(),
            path.display()
        ));
    }
    for _ in 0..PASSPHRASE_ATTEMPTS {
        let question = format!("Enter passphrase for key '{}': ", path.display());
        let bar = bar.clone();
        let passphrase = tokio::task::spawn_blocking(move || {
            let ask = || {
                let term = console::Term::stderr();
                term.write_str(&question)?;
                term.read_secure_line()
            };
            // The bar's own ticker does the drawing, so suspending it here
            // never blocks the tasks that advance it.
            match &bar {
                Some(bar) => bar.suspend(ask),
                None => ask(),
            }
        })
        .await
        .context("passphrase prompt task failed")?
        .context("reading the passphrase from the terminal")?;
        if let Ok(key) = super::keyfile::decode(text, Some(&passphrase)) {
            return Ok(key);
        }
    }
    Err(anyhow!(
        "wrong passphrase for {} ({PASSPHRASE_ATTEMPTS} attempts)",
        path.display()
    ))
}

/// What was offered, for the failure message.
#[derive(Debug, Default)]
struct Attempts {
    tried: Vec<String>,
    problems: Vec<String>,
    partial: bool,
}

/// Authenticates `handle` as `target.user`, or says precisely why not.
pub(crate) async fn authenticate<H: Handler>(
    handle: &mut Handle<H>,
    target: &Target,
    opts: &Options,
) -> anyhow::Result<()> {
    let mut attempts = Attempts::default();
    let file_keys = identity_public_keys(&target.identity_files);
    let mut rsa_hash = None;
    let mut offered_by_agent = Vec::new();

    if let Some(socket) = &opts.agent_socket {
        match agent_identities(socket, &file_keys, opts.connect_timeout).await {
            Ok((mut agent, mut identities, agent_certs)) => {
                // The agent's certificates first, each before its plain key.
                for (cert, comment) in agent_certs {
                    if target.identities_only {
                        break;
                    }
                    let key = PublicKey::from(cert.public_key().clone());
                    let hash = rsa_hash_for(handle, &key, &mut rsa_hash).await;
                    let label = format!("ssh-agent {} \"{comment}\"", user_certs::describe(&cert));
                    let result = within(
                        opts.connect_timeout,
                        handle.authenticate_certificate_with(
                            &target.user,
                            cert.clone(),
                            hash,
                            &mut agent,
                        ),
                        target,
                    )
                    .await?;
                    match result {
                        Ok(outcome) => {
                            if attempts.record(label.clone(), &outcome) {
                                return Ok(());
                            }
                            attempts.refused_certificate(&label, &cert, &target.user);
                        }
                        Err(e) => attempts
                            .problems
                            .push(format!("{label}: the agent could not sign ({e})")),
                    }
                    ensure_open(handle, target, &attempts)?;
                }
                if target.identities_only {
                    // ssh_config(5) IdentitiesOnly: the agent may still sign
                    // with a configured identity's key, it just may not offer
                    // any other (which also spares MaxAuthTries).
                    identities.retain(|(key, _)| is_identity_file_key(key, &file_keys));
                }
                for (key, comment) in identities {
                    let hash = rsa_hash_for(handle, &key, &mut rsa_hash).await;
                    let label = format!("ssh-agent key {}", describe(&key, &comment));
                    let result = within(
                        opts.connect_timeout,
                        handle.authenticate_publickey_with(
                            &target.user,
                            key.clone(),
                            hash,
                            &mut agent,
                        ),
                        target,
                    )
                    .await?;
                    offered_by_agent.push(key);
                    match result {
                        Ok(outcome) => {
                            if attempts.record(label, &outcome) {
                                return Ok(());
                            }
                        }
                        Err(e) => attempts
                            .problems
                            .push(format!("{label}: the agent could not sign ({e})")),
                    }
                    ensure_open(handle, target, &attempts)?;
                }
            }
            Err(e) => attempts.problems.push(format!("{e:#}")),
        }
    }

    for (path, public) in target.identity_files.iter().zip(&file_keys) {
        if public.as_ref().is_some_and(|p| {
            offered_by_agent
                .iter()
                .any(|a| a.key_data() == p.key_data())
        }) {
            continue; // The agent already offered this very key: no passphrase needed.
        }
        let key = match opts.keys.load(path, opts.prompt_passphrase).await {
            Ok(key) => key,
            Err(e) => {
                attempts.problems.push(format!("{e:#}"));
                continue;
            }
        };
        let hash = rsa_hash_for(handle, key.public_key(), &mut rsa_hash).await;
        for cert in user_certs::for_identity(path, key.public_key(), &target.certificate_files) {
            let label = format!("{} with {}", path.display(), user_certs::describe(&cert));
            let outcome = within(
                opts.connect_timeout,
                handle.authenticate_openssh_cert(&target.user, key.clone(), cert.clone()),
                target,
            )
            .await?
            .with_context(|| {
                format!("{}: connection failed while offering {label}", target.node)
            })?;
            if attempts.record(label.clone(), &outcome) {
                return Ok(());
            }
            attempts.refused_certificate(&label, &cert, &target.user);
            ensure_open(handle, target, &attempts)?;
        }
        let label = format!("{} ({})", path.display(), describe(key.public_key(), ""));
        let outcome = within(
            opts.connect_timeout,
            handle.authenticate_publickey(&target.user, PrivateKeyWithHashAlg::new(key, hash)),
            target,
        )
        .await?
        .with_context(|| format!("{}: connection failed while offering {label}", target.node))?;
        if attempts.record(label, &outcome) {
            return Ok(());
        }
        ensure_open(handle, target, &attempts)?;
    }
    if target.identities_only && opts.agent_socket.is_some() {
        attempts.problems.push(
            "IdentitiesOnly is set for this host in ~/.ssh/config: the agent's other keys were not offered".into(),
        );
    }
    Err(attempts.failure(target, opts.agent_socket.is_some()))
}

impl Attempts {
    /// A certificate the server refused: what sshd would object to in it,
    /// when this side can tell (else the CA is not one the server trusts).
    fn refused_certificate(&mut self, label: &str, cert: &russh::keys::Certificate, user: &str) {
        let why = user_certs::problem(cert, user, user_certs::now()).unwrap_or_else(|| {
            "it looks valid here: check that the node's sshd trusts its CA (TrustedUserCAKeys)"
                .into()
        });
        self.problems.push(format!("{label} was refused: {why}"));
    }

    /// Notes an attempt; true when it authenticated.
    fn record(&mut self, label: String, outcome: &AuthResult) -> bool {
        match outcome {
            AuthResult::Success => true,
            AuthResult::Failure {
                partial_success,
                remaining_methods,
            } => {
                self.partial |=
                    *partial_success && !remaining_methods.contains(&MethodKind::PublicKey);
                self.tried.push(label);
                false
            }
        }
    }

    fn failure(&self, target: &Target, agent: bool) -> anyhow::Error {
        let mut msg = format!(
            "{}: authentication as {:?} on {}:{} failed.",
            target.node, target.user, target.host, target.port
        );
        if self.tried.is_empty() {
            msg.push_str(" No key could be offered.");
        } else {
            msg.push_str(&format!(" Keys tried: {}.", self.tried.join("; ")));
        }
        for problem in &self.problems {
            msg.push_str(&format!(" {problem}."));
        }
        if self.partial {
            msg.push_str(" The server accepted a key but wants another method as well; fleetctl only does public keys.");
        }
        if self.tried.is_empty() && target.identity_files.is_empty() {
            msg.push_str(&format!(
                " {} and none of ~/.ssh/id_ed25519, id_ecdsa, id_rsa exists: set `identity_file:` in the inventory or load a key into ssh-agent.",
                if agent { "ssh-agent offered no usable key" } else { "SSH_AUTH_SOCK is not set" }
            ));
        } else {
            msg.push_str(&format!(
                " Check that one of these public keys is in ~{user}/.ssh/authorized_keys on the node, that {user:?} is the right user \
                 (`user:` in the inventory, or User in ~/.ssh/config), or point `identity_file:` at the right key.",
                user = target.user
            ));
        }
        anyhow!(msg)
    }
}

/// The server hangs up after too many failed keys (sshd MaxAuthTries).
fn ensure_open<H: Handler>(
    handle: &Handle<H>,
    target: &Target,
    attempts: &Attempts,
) -> anyhow::Result<()> {
    if handle.is_closed() {
        return Err(anyhow!(
            "{}: the server closed the connection after {} rejected keys (sshd's MaxAuthTries?): \
             set `identity_file:` in the inventory so the right key is offered first. Keys tried: {}",
            target.node,
            attempts.tried.len(),
            attempts.tried.join("; ")
        ));
    }
    Ok(())
}

/// The identities the agent holds, those matching an identity file first
/// (the operator named that key; offering others first wastes MaxAuthTries).
async fn agent_identities(
    socket: &Path,
    preferred: &[Option<PublicKey>],
    timeout: Duration,
) -> anyhow::Result<(
    AgentClient<tokio::net::UnixStream>,
    Vec<(PublicKey, String)>,
    Vec<(russh::keys::Certificate, String)>,
)> {
    let what = || format!("ssh-agent at {} (SSH_AUTH_SOCK)", socket.display());
    let mut agent = tokio::time::timeout(timeout, AgentClient::connect_uds(socket))
        .await
        .map_err(|_| anyhow!("{} did not answer", what()))?
        .with_context(|| format!("cannot connect to {}", what()))?;
    let identities = tokio::time::timeout(timeout, agent.request_identities())
        .await
        .map_err(|_| anyhow!("{} did not answer", what()))?
        .with_context(|| format!("cannot list the keys of {}", what()))?;
    let mut keys: Vec<(PublicKey, String)> = Vec::new();
    let mut certificates = Vec::new();
    for id in identities {
        match id {
            AgentIdentity::PublicKey { key, comment } => keys.push((key, comment)),
            AgentIdentity::Certificate {
                certificate,
                comment,
            } => certificates.push((certificate, comment)),
        }
    }
    keys.sort_by_key(|(key, _)| !is_identity_file_key(key, preferred));
    Ok((agent, keys, certificates))
}

fn is_identity_file_key(key: &PublicKey, file_keys: &[Option<PublicKey>]) -> bool {
    file_keys
        .iter()
        .flatten()
        .any(|p| p.key_data() == key.key_data())
}

/// The public halves of the identity files, from `<file>.pub` when present
/// (read without decrypting anything).
fn identity_public_keys(files: &[PathBuf]) -> Vec<Option<PublicKey>> {
    files
        .iter()
        .map(|path| {
            let mut public = path.clone().into_os_string();
            public.push(".pub");
            russh::keys::load_public_key(PathBuf::from(public)).ok()
        })
        .collect()
}

/// rsa-sha2-512/256 when the server supports them (asked once per connection).
async fn rsa_hash_for<H: Handler>(
    handle: &Handle<H>,
    key: &PublicKey,
    cached: &mut Option<Option<HashAlg>>,
) -> Option<HashAlg> {
    if !key.algorithm().is_rsa() {
        return None;
    }
    if let Some(hash) = cached {
        return *hash;
    }
    let hash = match handle.best_supported_rsa_hash().await {
        Ok(Some(hash)) => hash,
        // No server-sig-algs: modern servers still take SHA-256; SHA-1 is disabled nearly everywhere.
        Ok(None) | Err(_) => Some(HashAlg::Sha256),
    };
    *cached = Some(hash);
    hash
}

fn describe(key: &PublicKey, comment: &str) -> String {
    let base = format!(
        "{} {}",
        known_hosts::type_label(&key.algorithm()),
        known_hosts::fingerprint(key)
    );
    if comment.is_empty() {
        base
    } else {
        format!("{base} \"{comment}\"")
    }
}

async fn within<T>(
    timeout: Duration,
    fut: impl std::future::Future<Output = T>,
    target: &Target,
) -> anyhow::Result<T> {
    tokio::time::timeout(timeout, fut).await.map_err(|_| {
        anyhow!(
            "{}: the server did not answer an authentication request within {}",
            target.node,
            humantime::format_duration(timeout)
        )
    })
}

#[cfg(test)]
mod tests;

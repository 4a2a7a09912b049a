//! The extension hub over TLS (scenario `hub.https`, issue 38): the same
//! files as the plain hub (`crate::hub`), on another loopback port, with a
//! serving certificate for `127.0.0.1` from the fleet's own hub CA. The
//! nodes trust that CA the way an operator makes Flatcar trust a private
//! one, in the system trust store ([`trust`]), so their real curl, wget
//! and libcurl (systemd-pull) accept the hub with no flag of fleetctl's.
//!
//! Thread-based std I/O as the plain hub: rustls's blocking
//! [`rustls::StreamOwned`] wraps each accepted socket. Under the
//! `redirect_to_http` fault every request is answered `302 Found` with a
//! `Location:` on the plain hub (`crate::hub::serve_one`).

use std::fs;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::hub::Hub;
use crate::layout::FleetDir;
use crate::provision::{Disk, NodePlan};
use crate::scenario::{Os, Scenario};
use crate::state::Shared;

/// Debian's and Flatcar's system bundle: what curl (built with
/// `--with-ca-bundle`), wget and libcurl read when told nothing else.
pub const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// Where `update-ca-certificates` takes a local CA from on Debian: a later
/// run on the node keeps the hub's CA in the bundle.
pub const LOCAL_CA: &str = "/usr/local/share/ca-certificates/fleetsim-hub-ca.crt";

/// The hub's CA and serving certificate, PEM.
pub struct HubPki {
    pub ca: String,
    cert: String,
    key: String,
}

/// Where the hub's CA is kept on the host, for a test or an operator's
/// `curl --cacert`.
pub fn ca_path(root: &Path) -> PathBuf {
    root.join("hub-ca.crt")
}

/// Starts the https hub beside the plain one `hub` when the scenario asks
/// (`hub.https`), and keeps its CA in [`ca_path`]; returns that CA.
pub fn start(fleet: &FleetDir, scenario: &Scenario, hub: &mut Hub) -> Result<Option<String>> {
    if !scenario.hub.https {
        return Ok(None);
    }
    let pki = issue()?;
    let path = ca_path(fleet.root());
    fs::write(&path, &pki.ca).with_context(|| format!("writing {}", path.display()))?;
    let shared = Shared::new(fleet.cluster());
    hub.tls = Some(serve(fleet.hub(), shared, &pki, hub.addr)?);
    Ok(Some(pki.ca))
}

/// Issues a CA (`fleetsim hub CA`) and the hub's serving certificate for
/// `127.0.0.1` and `localhost`. ECDSA P-256, rcgen's default, as the
/// cluster's PKI (`crate::api::pki`).
pub fn issue() -> Result<HubPki> {
    let ca_key = KeyPair::generate().context("generating the hub CA's key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name
        .push(DnType::CommonName, "fleetsim hub CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyCertSign,
    ];
    let ca_cert = ca.self_signed(&ca_key).context("self-signing the hub CA")?;
    let issuer = Issuer::from_params(&ca, &ca_key);
    let key = KeyPair::generate().context("generating the hub's key")?;
    let mut sp = CertificateParams::new(vec!["localhost".to_string()])?;
    sp.distinguished_name
        .push(DnType::CommonName, "fleetsim extension hub");
    sp.subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    sp.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = sp
        .signed_by(&key, &issuer)
        .context("signing the hub's serving certificate")?;
    Ok(HubPki {
        ca: ca_cert.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

fn config(pki: &HubPki) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cert = CertificateDer::from_pem_slice(pki.cert.as_bytes())
        .context("parsing the hub's certificate")?;
    let ca = CertificateDer::from_pem_slice(pki.ca.as_bytes()).context("parsing the hub CA")?;
    let key = PrivateKeyDer::from_pem_slice(pki.key.as_bytes()).context("parsing the hub's key")?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?
        .with_no_client_auth()
        .with_single_cert(vec![cert, ca], key)
        .context("loading the hub's certificate")?;
    Ok(Arc::new(config))
}

/// Binds 127.0.0.1 on a free port and serves `root` over TLS from a
/// background thread; `plain` is the plain hub, the `redirect_to_http`
/// fault's target.
pub fn serve(root: PathBuf, shared: Shared, pki: &HubPki, plain: SocketAddr) -> Result<SocketAddr> {
    let config = config(pki)?;
    let listener =
        TcpListener::bind("127.0.0.1:0").context("binding the https hub on 127.0.0.1")?;
    let addr = listener
        .local_addr()
        .context("reading the https hub's address")?;
    thread::Builder::new()
        .name("hub-tls".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(stream) = conn else { continue };
                let (root, shared, config) = (root.clone(), shared.clone(), config.clone());
                let spawned = thread::Builder::new()
                    .name("hub-tls-conn".into())
                    .spawn(move || {
                        if let Err(e) = handle(stream, config, &root, &shared, plain) {
                            eprintln!("fleetsim https hub: {e:#}");
                        }
                    });
                if let Err(e) = spawned {
                    eprintln!("fleetsim https hub: cannot start a connection thread: {e}");
                }
            }
        })
        .context("starting the https hub thread")?;
    Ok(addr)
}

fn handle(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    root: &Path,
    shared: &Shared,
    plain: SocketAddr,
) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    stream.set_write_timeout(Some(Duration::from_secs(5))).ok();
    let conn = rustls::ServerConnection::new(config).context("starting a TLS session")?;
    let mut tls = rustls::StreamOwned::new(conn, stream);
    // The handshake happens on the first read; a client that gives up on
    // the certificate ends here, as it would with a real server.
    crate::hub::serve_one(&mut tls, root, shared, Some(plain))?;
    tls.conn.send_close_notify();
    tls.flush().context("closing the TLS session")
}

/// Makes a node trust the hub's CA as an operator would on Flatcar (a PEM
/// in the trust store, then `update-ca-certificates`): the node's bundle
/// becomes the one it had (`lower`: the host's or the real-OS root's, what
/// the overlay shows below the node's own `/etc`) plus the hub's CA, and
/// the CA is kept where `update-ca-certificates` finds local ones.
pub fn trust(disk: &Disk, lower: &Path, ca: &str) -> Result<()> {
    let mut bundle = match fs::read(lower) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", lower.display())),
    };
    if !bundle.is_empty() && !bundle.ends_with(b"\n") {
        bundle.push(b'\n');
    }
    bundle.extend_from_slice(ca.as_bytes());
    disk.file(SYSTEM_BUNDLE, &bundle, 0o644, (0, 0))?;
    disk.file(LOCAL_CA, ca.as_bytes(), 0o644, (0, 0))
}

/// Every node trusts the hub's CA ([`trust`]), on top of the bundle below
/// its own `/etc`: the host's, or the real-OS root's.
pub fn trust_all(
    fleet: &FleetDir,
    scenario: &Scenario,
    plans: &[NodePlan],
    ca: &str,
) -> Result<()> {
    let bundle = SYSTEM_BUNDLE.trim_start_matches('/');
    let lower = if scenario.os_layer == Os::Systemd {
        crate::realos::rootfs::read(fleet)?.join(bundle)
    } else {
        Path::new("/").join(bundle)
    };
    for plan in plans {
        let name = &plan.spec.name;
        trust(&Disk { fleet, node: name }, &lower, ca)
            .with_context(|| format!("making {name} trust the hub's CA"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The host's real curl, trusting only the hub's CA: the files over
    /// TLS, then under `redirect_to_http` a 302 to the plain hub's path.
    #[test]
    fn serves_over_tls_and_redirects_to_http_under_the_fault() {
        if Command::new("curl").arg("--version").output().is_err() {
            eprintln!("no curl here: skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("hub");
        fs::create_dir_all(root.join("kubernetes")).unwrap();
        fs::write(root.join("kubernetes/SHA256SUMS"), "abc  x.raw\n").unwrap();
        let cluster = dir.path().join("cluster");
        fs::create_dir_all(&cluster).unwrap();
        let shared = Shared::new(&cluster);
        let pki = issue().unwrap();
        let ca = dir.path().join("ca.crt");
        fs::write(&ca, &pki.ca).unwrap();
        let plain: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let addr = serve(root, shared.clone(), &pki, plain).unwrap();
        let url = format!("https://{addr}/kubernetes/SHA256SUMS");
        let curl = |extra: &[&str]| {
            let out = Command::new("curl")
                .args(["-sS", "--max-time", "10", "--cacert"])
                .arg(&ca)
                .args(extra)
                .arg(&url)
                .output()
                .unwrap();
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        assert_eq!(curl(&["-f"]).0, "abc  x.raw\n");

        shared.update_faults(|f| f.redirect_to_http = true).unwrap();
        let (head, _) = curl(&["-I"]);
        assert!(head.starts_with("HTTP/1.1 302 Found\r\n"), "{head}");
        assert!(
            head.contains("Location: http://127.0.0.1:9/kubernetes/SHA256SUMS\r\n"),
            "{head}"
        );
        let (_, err) = curl(&["-fL", "--proto-redir", "=https"]);
        assert!(err.contains("Protocol \"http\""), "{err}");
    }
}

//! The cluster's PKI, issued once at `fleetsim up` the way `kubeadm init`
//! lays it out: one CA (`kubernetes`); the kube-apiserver's serving
//! certificate, whose SANs cover every control plane's address and the
//! control-plane endpoint (kubeadm `certs/certlist.go`, `apiserver`:
//! `kubernetes`, `kubernetes.default…`, the node names and addresses, the
//! endpoint); a client certificate for the admin (`CN=kubernetes-admin`,
//! `O=kubeadm:cluster-admins`, as kubeadm ≥ 1.29 writes admin.conf; the
//! group is bound to `cluster-admin`) and one per node
//! (`CN=system:node:<name>`, `O=system:nodes`, what the kubelet's
//! bootstrap gets signed). Kubeconfigs carry them inline, as kubeadm's do.
//!
//! The keys are ECDSA P-256 (rcgen's default); kubeadm defaults to
//! RSA-2048 (`encryptionAlgorithm`), which changes nothing a client sees
//! but costs far more to generate for every node of a big fleet.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The group kubeadm ≥ 1.29 puts admin.conf's user in (bound to the
/// `cluster-admin` ClusterRole); `system:masters` is super-admin.conf's.
pub const ADMIN_GROUP: &str = "kubeadm:cluster-admins";
pub const ADMIN_USER: &str = "kubernetes-admin";
pub const NODES_GROUP: &str = "system:nodes";
pub const NODE_PREFIX: &str = "system:node:";
/// The API server's port, kubeadm's default `bindPort`.
pub const PORT: u16 = 6443;

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

/// Everything issued for one fleet.
pub struct Pki {
    pub ca: Pair,
    pub serving: Pair,
    pub admin: Pair,
    /// Per node name.
    pub nodes: Vec<(String, Pair)>,
}

/// A control plane's name and address, for the serving certificate.
pub struct Member {
    pub name: String,
    pub address: Ipv4Addr,
}

fn key() -> Result<KeyPair> {
    KeyPair::generate().context("generating a key pair")
}

fn client(cn: &str, org: &str, issuer: &Issuer<'_, &KeyPair>) -> Result<Pair> {
    let k = key()?;
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name.push(DnType::OrganizationName, org);
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = p
        .signed_by(&k, issuer)
        .with_context(|| format!("signing the client certificate of {cn}"))?;
    Ok(Pair {
        cert: cert.pem(),
        key: k.serialize_pem(),
    })
}

/// Issues the CA, the serving certificate (every control plane and the
/// endpoint) and the client certificates (admin, each of `nodes`).
pub fn issue(control_planes: &[Member], endpoint: Ipv4Addr, nodes: &[String]) -> Result<Pki> {
    let ca_key = key()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "kubernetes");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    let ca_cert = ca.self_signed(&ca_key).context("self-signing the CA")?;
    let issuer = Issuer::from_params(&ca, &ca_key);

    let serving_key = key()?;
    let mut names: Vec<String> = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .map(String::from)
    .to_vec();
    names.extend(control_planes.iter().map(|m| m.name.clone()));
    let mut sp = CertificateParams::new(names)?;
    sp.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let mut ips = vec![
        IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)),
        IpAddr::V4(endpoint),
    ];
    ips.extend(control_planes.iter().map(|m| IpAddr::V4(m.address)));
    sp.subject_alt_names
        .extend(ips.into_iter().map(SanType::IpAddress));
    sp.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving = sp
        .signed_by(&serving_key, &issuer)
        .context("signing the apiserver's serving certificate")?;

    let admin = client(ADMIN_USER, ADMIN_GROUP, &issuer)?;
    let nodes = nodes
        .iter()
        .map(|n| {
            Ok((
                n.clone(),
                client(&format!("{NODE_PREFIX}{n}"), NODES_GROUP, &issuer)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Pki {
        ca: Pair {
            cert: ca_cert.pem(),
            key: ca_key.serialize_pem(),
        },
        serving: Pair {
            cert: serving.pem(),
            key: serving_key.serialize_pem(),
        },
        admin,
        nodes,
    })
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A kubeconfig as kubeadm writes admin.conf and kubelet.conf: one
/// cluster `kubernetes` at `server`, one user with its certificate inline.
pub fn kubeconfig(ca: &Pair, server: &str, user: &str, pair: &Pair) -> String {
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: {server}\n  name: kubernetes\n\
         contexts:\n- context:\n    cluster: kubernetes\n    user: {user}\n  name: {user}@kubernetes\n\
         current-context: {user}@kubernetes\nkind: Config\npreferences: {{}}\nusers:\n- name: {user}\n  user:\n\
         \x20   client-certificate-data: {}\n    client-key-data: {}\n",
        b64(&ca.cert),
        b64(&pair.cert),
        b64(&pair.key),
    )
}

/// Where the fleet's PKI lives on the host: `DIR/pki`.
pub fn dir(root: &Path) -> PathBuf {
    root.join("pki")
}

impl Pki {
    /// Writes the PKI under `dir` (`ca.crt`, `apiserver.{crt,key}`,
    /// `admin.conf` for the operator, `nodes/<name>.conf`), keys 0600.
    pub fn write(&self, dir: &Path, server: &str) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        fs::create_dir_all(dir.join("nodes"))
            .with_context(|| format!("creating {}", dir.display()))?;
        let write = |name: &str, text: &str, mode: u32| -> Result<()> {
            let path = dir.join(name);
            fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            fs::set_permissions(&path, fs::Permissions::from_mode(mode))
                .with_context(|| format!("chmod {}", path.display()))
        };
        write("ca.crt", &self.ca.cert, 0o644)?;
        write("ca.key", &self.ca.key, 0o600)?;
        write("apiserver.crt", &self.serving.cert, 0o644)?;
        write("apiserver.key", &self.serving.key, 0o600)?;
        write(
            "admin.conf",
            &kubeconfig(&self.ca, server, ADMIN_USER, &self.admin),
            0o600,
        )?;
        for (name, pair) in &self.nodes {
            let user = format!("{NODE_PREFIX}{name}");
            write(
                &format!("nodes/{name}.conf"),
                &kubeconfig(&self.ca, server, &user, pair),
                0o600,
            )?;
        }
        Ok(())
    }
}

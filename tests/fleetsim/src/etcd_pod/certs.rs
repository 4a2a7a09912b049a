//! The etcd PKI `kubeadm init phase certs` lays out in
//! `/etc/kubernetes/pki/etcd` (`cmd/kubeadm/app/phases/certs/certlist.go`):
//!
//! - `ca.crt`/`ca.key`: its own CA, `CN=etcd-ca`, shared by every control
//!   plane (kubeadm copies it to joining control planes);
//! - `server.crt`: `CN=<node name>`, server and client auth, SANs from
//!   `pkiutil.GetEtcdAltNames`: `localhost`, the node's name, its advertise
//!   address, `127.0.0.1` and `::1`;
//! - `peer.crt`: the same subject and SANs (`GetEtcdPeerAltNames`), server
//!   and client auth, for the members' raft traffic;
//! - `healthcheck-client.crt`: `CN=kube-etcd-healthcheck-client`, client
//!   auth (the liveness probe's identity in older kubeadm);
//! - `../apiserver-etcd-client.crt`: `CN=kube-apiserver-etcd-client`,
//!   client auth, for the kube-apiserver.
//!
//! Keys are ECDSA P-256 as in `api::pki` (kubeadm's default RSA-2048 costs
//! far more to generate and changes nothing a client sees).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::PKI_DIR;
use crate::provision::Disk;

/// A control plane's name and advertise address.
pub struct Member<'a> {
    pub name: &'a str,
    pub address: Ipv4Addr,
}

/// One file of the PKI: a path inside the node, its PEM text, its mode.
pub struct File {
    pub path: String,
    pub text: String,
    pub mode: u32,
}

fn key() -> Result<KeyPair> {
    KeyPair::generate().context("generating a key pair")
}

fn leaf(
    cn: &str,
    sans: Option<&Member<'_>>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    issuer: &Issuer<'_, &KeyPair>,
) -> Result<(String, String)> {
    let k = key()?;
    let mut p = match sans {
        Some(m) => CertificateParams::new(vec!["localhost".to_string(), m.name.to_string()])?,
        None => CertificateParams::new(Vec::<String>::new())?,
    };
    if let Some(m) = sans {
        p.subject_alt_names.extend(
            [
                IpAddr::V4(m.address),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ]
            .map(SanType::IpAddress),
        );
    }
    p.distinguished_name.push(DnType::CommonName, cn);
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = usages;
    let cert = p
        .signed_by(&k, issuer)
        .with_context(|| format!("signing the etcd certificate of {cn}"))?;
    Ok((cert.pem(), k.serialize_pem()))
}

/// Issues the etcd CA and, for each control plane, the files its
/// `/etc/kubernetes/pki` holds.
pub fn issue(members: &[Member<'_>]) -> Result<Vec<(String, Vec<File>)>> {
    let ca_key = key()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.distinguished_name.push(DnType::CommonName, "etcd-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
        KeyUsagePurpose::KeyCertSign,
    ];
    let ca_cert = ca
        .self_signed(&ca_key)
        .context("self-signing the etcd CA")?;
    let ca_pem = ca_cert.pem();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::from_params(&ca, &ca_key);
    use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let mut out = Vec::new();
    for m in members {
        let mut files = Vec::new();
        let mut pair = |path: String, (cert, key): (String, String)| {
            files.push(File {
                path: format!("{path}.crt"),
                text: cert,
                mode: 0o644,
            });
            files.push(File {
                path: format!("{path}.key"),
                text: key,
                mode: 0o600,
            });
        };
        pair(
            format!("{PKI_DIR}/ca"),
            (ca_pem.clone(), ca_key_pem.clone()),
        );
        for name in ["server", "peer"] {
            pair(
                format!("{PKI_DIR}/{name}"),
                leaf(m.name, Some(m), vec![ServerAuth, ClientAuth], &issuer)?,
            );
        }
        pair(
            format!("{PKI_DIR}/healthcheck-client"),
            leaf(
                "kube-etcd-healthcheck-client",
                None,
                vec![ClientAuth],
                &issuer,
            )?,
        );
        pair(
            "/etc/kubernetes/pki/apiserver-etcd-client".to_string(),
            leaf(
                "kube-apiserver-etcd-client",
                None,
                vec![ClientAuth],
                &issuer,
            )?,
        );
        out.push((m.name.to_string(), files));
    }
    Ok(out)
}

/// Issues the PKI and writes each control plane's files on its disk.
pub fn provision(fleet: &crate::layout::FleetDir, members: &[Member<'_>]) -> Result<()> {
    for (node, files) in issue(members)? {
        let disk = Disk { fleet, node: &node };
        disk.dir(PKI_DIR)?;
        for f in files {
            disk.file(&f.path, f.text.as_bytes(), f.mode, (0, 0))
                .with_context(|| format!("{node}: writing {}", f.path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_plane_gets_kubeadms_files_under_one_ca() {
        let members = [
            Member {
                name: "cp-1",
                address: Ipv4Addr::new(127, 9, 8, 10),
            },
            Member {
                name: "cp-2",
                address: Ipv4Addr::new(127, 9, 8, 11),
            },
        ];
        let issued = issue(&members).unwrap();
        assert_eq!(issued.len(), 2);
        let paths: Vec<&str> = issued[0].1.iter().map(|f| f.path.as_str()).collect();
        for p in [
            "/etc/kubernetes/pki/etcd/ca.crt",
            "/etc/kubernetes/pki/etcd/server.key",
            "/etc/kubernetes/pki/etcd/peer.crt",
            "/etc/kubernetes/pki/etcd/healthcheck-client.crt",
            "/etc/kubernetes/pki/apiserver-etcd-client.key",
        ] {
            assert!(paths.contains(&p), "{p}: {paths:?}");
        }
        let ca = |i: usize| issued[i].1[0].text.clone();
        assert_eq!(ca(0), ca(1), "one etcd CA");
        assert!(
            issued[0]
                .1
                .iter()
                .filter(|f| f.path.ends_with(".key"))
                .all(|f| f.mode == 0o600)
        );
    }
}

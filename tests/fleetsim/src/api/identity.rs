//! Who a request comes from: the subject of its verified client
//! certificate, as the apiserver's x509 authenticator reads it
//! (`staging/src/k8s.io/apiserver/pkg/authentication/request/x509`,
//! `CommonNameUserConversion`: the user is the CN, the groups are the O
//! values). The certificate was already verified against the fleet's CA
//! by rustls; this reads its subject with a small DER walk (the certificates
//! are ours, so a full X.509 parser would buy nothing).

use super::pki::{ADMIN_GROUP, NODE_PREFIX, NODES_GROUP};

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    /// `system:masters` or kubeadm's `kubeadm:cluster-admins` (bound to
    /// `cluster-admin`): may do anything.
    pub fn is_admin(&self) -> bool {
        self.groups
            .iter()
            .any(|g| g == "system:masters" || g == ADMIN_GROUP)
    }

    /// The node a node identity is (`system:node:<name>` in `system:nodes`).
    pub fn node(&self) -> Option<&str> {
        self.groups
            .iter()
            .any(|g| g == NODES_GROUP)
            .then(|| self.name.strip_prefix(NODE_PREFIX))
            .flatten()
    }
}

/// One DER element: (tag, content, rest).
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];

/// The user named by a certificate's subject; `None` if it has no CN or
/// does not parse.
pub fn from_certificate(der: &[u8]) -> Option<User> {
    let (SEQUENCE, cert, _) = element(der)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(cert)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] EXPLICIT version, optional.
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2;
    }
    // serialNumber, signature, issuer, validity, then subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (SEQUENCE, mut rdns, _) = element(rest)? else {
        return None;
    };
    let mut name = None;
    let mut groups = Vec::new();
    while !rdns.is_empty() {
        let (SET, mut set, next) = element(rdns)? else {
            return None;
        };
        rdns = next;
        while !set.is_empty() {
            let (SEQUENCE, atv, next) = element(set)? else {
                return None;
            };
            set = next;
            let (0x06, oid, value) = element(atv)? else {
                return None;
            };
            let (_, text, _) = element(value)?;
            let text = String::from_utf8(text.to_vec()).ok()?;
            if oid == OID_CN {
                name = Some(text);
            } else if oid == OID_O {
                groups.push(text);
            }
        }
    }
    Some(User {
        name: name?,
        groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_der(cn: &str, orgs: &[&str]) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        for o in orgs {
            p.distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        p.distinguished_name.push(rcgen::DnType::CommonName, cn);
        p.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn reads_the_common_name_and_organizations() {
        let user = from_certificate(&cert_der("system:node:w-1", &["system:nodes"])).unwrap();
        assert_eq!(user.name, "system:node:w-1");
        assert_eq!(user.groups, vec!["system:nodes"]);
        assert_eq!(user.node(), Some("w-1"));
        assert!(!user.is_admin());
        let admin = from_certificate(&cert_der("kubernetes-admin", &[ADMIN_GROUP])).unwrap();
        assert!(admin.is_admin());
        assert_eq!(admin.node(), None);
    }

    #[test]
    fn a_node_name_outside_system_nodes_is_no_node() {
        let user = from_certificate(&cert_der("system:node:w-1", &["other"])).unwrap();
        assert_eq!(user.node(), None);
    }

    #[test]
    fn garbage_and_truncation_are_refused_without_panicking() {
        let der = cert_der("x", &[]);
        for cut in 0..der.len() {
            let _ = from_certificate(&der[..cut]);
        }
        assert_eq!(from_certificate(b""), None);
        assert_eq!(
            from_certificate(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]),
            None
        );
    }
}

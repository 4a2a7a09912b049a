//! The labels Kured sets on a node around its reboot
//! (`--pre-reboot-node-labels`, `--post-reboot-node-labels`), read from its
//! DaemonSet (untrusted: the cluster's) and checked with the Kubernetes
//! label syntax before they become arguments of `kubectl label`.
//!
//! Kured reads each entry as `strings.Split(label, "=")[0]` for the key and
//! `[1]` for the value (kubereboot/kured `cmd/kured/main.go`,
//! `updateNodeLabels`): an entry without `=` makes it index out of range
//! (it crashes at the reboot), and what follows a second `=` is dropped.
//! fleetctl refuses the first at once and keeps Kured's reading of the
//! second (`a=b=c` sets `a=b`), said in the takeover's description.
//!
//! The syntax is the API server's (`k8s.io/apimachinery/pkg/util/validation`
//! `IsQualifiedName` for a key, `IsValidLabelValue` for a value): a key is
//! an optional DNS-1123 subdomain prefix (at most 253 characters) and `/`,
//! then a name of at most 63 characters, alphanumeric at both ends with
//! `-`, `_`, `.` inside; a value is empty or such a name.

use anyhow::{Result, bail};

/// One label Kured sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLabel {
    pub key: String,
    pub value: String,
}

impl std::fmt::Display for NodeLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// The most labels one of Kured's label flags may set.
const MAX_LABELS: usize = 32;

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn name_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

/// A DNS-1123 subdomain: lower-case labels of `[a-z0-9-]`, alphanumeric at
/// both ends, joined by dots, at most 253 characters.
fn subdomain_ok(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// `IsQualifiedName`: `[prefix/]name`.
pub fn label_key_ok(key: &str) -> bool {
    match key.split_once('/') {
        None => name_ok(key),
        Some((prefix, name)) => subdomain_ok(prefix) && name_ok(name) && !name.contains('/'),
    }
}

/// `IsValidLabelValue`: empty, or a name.
pub fn label_value_ok(value: &str) -> bool {
    value.is_empty() || name_ok(value)
}

/// Kured's `key=value` entries of `--{flag}`, read as Kured reads them and
/// checked as the API server would.
pub fn parse_node_labels(flag: &str, entries: &[String]) -> Result<Vec<NodeLabel>> {
    if entries.len() > MAX_LABELS {
        bail!(
            "Kured's --{flag} sets {} labels; fleetctl reads at most {MAX_LABELS}",
            entries.len()
        );
    }
    let mut labels = Vec::new();
    for entry in entries {
        let mut parts = entry.split('=');
        let key = parts.next().unwrap_or_default();
        let Some(value) = parts.next() else {
            bail!(
                "Kured's --{flag} entry {entry:?} has no `=`: Kured itself fails on it \
                 (it reads key=value); fix Kured's flag, or run with --no-kured-gates"
            );
        };
        if !label_key_ok(key) {
            bail!(
                "Kured's --{flag} entry {entry:?}: {key:?} is not a label key (an optional \
                 DNS subdomain and `/`, then at most 63 letters, digits, `-_.`, alphanumeric at \
                 both ends); fix Kured's flag, or run with --no-kured-gates"
            );
        }
        if !label_value_ok(value) {
            bail!(
                "Kured's --{flag} entry {entry:?}: {value:?} is not a label value (empty, or at \
                 most 63 letters, digits, `-_.`, alphanumeric at both ends); fix Kured's flag, \
                 or run with --no-kured-gates"
            );
        }
        // A key given twice: Kured's map keeps the last.
        labels.retain(|l: &NodeLabel| l.key != key);
        labels.push(NodeLabel {
            key: key.to_string(),
            value: value.to_string(),
        });
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entries: &[&str]) -> Result<Vec<String>> {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        parse_node_labels("pre-reboot-node-labels", &entries)
            .map(|l| l.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn reads_key_value_as_kured_does() {
        assert_eq!(
            parse(&[
                "kured=rebooting",
                "example.com/maint=",
                "a=b=c",
                "kured=again"
            ])
            .unwrap(),
            ["example.com/maint=", "a=b", "kured=again"]
        );
    }

    #[test]
    fn refuses_what_the_api_server_or_kured_would() {
        for bad in [
            "no-equals",
            "=value",
            "bad key=x",
            "-lead=x",
            "Example.com/x=y",
            "a/b/c=y",
            "/x=y",
            "k=$(reboot)",
            "k=-x",
            "k=a b",
            "k=x;y",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
        let long = format!("k={}", "a".repeat(64));
        assert!(parse(&[&long]).is_err());
        let ok = format!("k={}", "a".repeat(63));
        assert!(parse(&[&ok]).is_ok());
        let many: Vec<String> = (0..=MAX_LABELS).map(|i| format!("k{i}=v")).collect();
        assert!(parse_node_labels("post-reboot-node-labels", &many).is_err());
    }
}

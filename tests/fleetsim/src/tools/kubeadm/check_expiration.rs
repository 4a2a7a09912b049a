//! `kubeadm certs check-expiration` on a control plane: the two tables
//! kubeadm's tabwriter prints (`minwidth 10`, padding 3, the last
//! column `%-8v`, so `no` is followed by six spaces), certificates
//! sorted by name, the etcd ones only with a stacked etcd,
//! `super-admin.conf` (v1.29+) on the first control plane, where `kubeadm
//! init` wrote it. Expiry dates are `Jan 02, 2006 15:04 MST` in UTC,
//! residual times apimachinery's `ShortHumanDuration`.

use anyhow::Result;

use super::super::{Env, say};
use super::{NAME, fail};
use crate::state::Role;

const CERTS: &[(&str, &str, bool)] = &[
    ("admin.conf", "ca", false),
    ("apiserver", "ca", false),
    ("apiserver-etcd-client", "etcd-ca", true),
    ("apiserver-kubelet-client", "ca", false),
    ("controller-manager.conf", "ca", false),
    ("etcd-healthcheck-client", "etcd-ca", true),
    ("etcd-peer", "etcd-ca", true),
    ("etcd-server", "etcd-ca", true),
    ("front-proxy-client", "front-proxy-ca", false),
    ("scheduler.conf", "ca", false),
    ("super-admin.conf", "ca", false),
];
const CAS: &[(&str, bool)] = &[("ca", false), ("etcd-ca", true), ("front-proxy-ca", false)];

pub fn check_expiration(env: &mut Env, args: &[String]) -> Result<i32> {
    let boot = env.boot()?;
    if boot.role != Role::ControlPlane {
        return Ok(env.unsupported(NAME, args));
    }
    let kubeadm = env.binary_version(NAME)?;
    let c = env.shared().cluster()?;
    say!(
        env,
        "[check-expiration] Reading configuration from the cluster..."
    );
    if c.api_up(crate::state::now()) {
        say!(
            env,
            "[check-expiration] FYI: You can look at this config file with 'kubectl -n kube-system get cm kubeadm-config -o yaml'"
        );
    } else {
        say!(
            env,
            "[check-expiration] Error reading configuration from the Cluster. Falling back to default configuration"
        );
    }
    say!(env, "");
    let Some(expires) = c.certs_expire.get(&boot.name).copied() else {
        return Ok(fail(
            env,
            args,
            "fleetsim: no certificates recorded for this control plane",
        ));
    };
    let stacked = c.external_etcd.is_empty();
    let first = c
        .nodes
        .iter()
        .find(|(_, n)| n.role == Role::ControlPlane)
        .is_some_and(|(name, _)| *name == boot.name);
    let now = crate::state::now();
    let mut rows = vec![
        [
            "CERTIFICATE",
            "EXPIRES",
            "RESIDUAL TIME",
            "CERTIFICATE AUTHORITY",
            "EXTERNALLY MANAGED",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for (name, ca, etcd) in CERTS {
        if (*etcd && !stacked) || (*name == "super-admin.conf" && !(first && kubeadm.minor >= 29)) {
            continue;
        }
        rows.push(vec![
            name.to_string(),
            date(expires),
            short_duration(expires - now),
            ca.to_string(),
            "no      ".into(),
        ]);
    }
    print(env, &rows);
    say!(env, "");
    // The CAs are issued for ten years at the same time as the first leaves.
    let ca_expires = expires + 9.0 * 365.0 * 86_400.0;
    let mut rows = vec![
        [
            "CERTIFICATE AUTHORITY",
            "EXPIRES",
            "RESIDUAL TIME",
            "EXTERNALLY MANAGED",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for (name, etcd) in CAS {
        if *etcd && !stacked {
            continue;
        }
        rows.push(vec![
            name.to_string(),
            date(ca_expires),
            short_duration(ca_expires - now),
            "no      ".into(),
        ]);
    }
    print(env, &rows);
    Ok(0)
}

/// Go's text/tabwriter with minwidth 10 and padding 3; the last cell as is.
fn print(env: &mut Env, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols.saturating_sub(1))
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count() + 3)
                .max()
                .unwrap_or(0)
                .max(10)
        })
        .collect();
    for r in rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            match widths.get(i) {
                Some(w) if i + 1 < r.len() => line.push_str(&format!("{cell:<w$}")),
                _ => line.push_str(cell),
            }
        }
        say!(env, "{line}");
    }
}

fn date(ts: f64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let c = crate::tools::civil(ts);
    format!(
        "{} {:02}, {} {:02}:{:02} UTC",
        MONTHS[(c.month - 1) as usize],
        c.day,
        c.year,
        c.hour,
        c.minute
    )
}

/// apimachinery's `duration.ShortHumanDuration`.
pub fn short_duration(secs: f64) -> String {
    let s = secs as i64;
    if s < -1 {
        "<invalid>".into()
    } else if s < 0 {
        "0s".into()
    } else if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 86_400 {
        format!("{}h", s / 3600)
    } else if s < 365 * 86_400 {
        format!("{}d", s / 86_400)
    } else {
        format!("{}y", s / (365 * 86_400))
    }
}

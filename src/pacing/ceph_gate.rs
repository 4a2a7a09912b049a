//! The Ceph gate's settings (`--no-ceph-gate`, `--ceph-hold-on`,
//! `--ceph-timeout`, `--ceph-recovery-timeout`); `steps::ceph` acts on
//! them, `checks::ceph` judges.

use std::time::Duration;

/// On by default: every cluster with a CephCluster gets the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct CephGate {
    /// `false` only with `--no-ceph-gate`, which warns loudly.
    pub enabled: bool,
    /// Health codes that hold besides the built-in ones.
    pub hold_on: Vec<String>,
    /// How long a drain may be held before the run stops, naming Ceph.
    pub timeout: Duration,
    /// How long Ceph may take to be active+clean after a node returns.
    pub recovery_timeout: Duration,
    /// Between two readings while held.
    pub interval: Duration,
}

impl Default for CephGate {
    fn default() -> Self {
        CephGate {
            enabled: true,
            hold_on: Vec::new(),
            timeout: Duration::from_secs(30 * 60),
            recovery_timeout: Duration::from_secs(30 * 60),
            interval: Duration::from_secs(5),
        }
    }
}

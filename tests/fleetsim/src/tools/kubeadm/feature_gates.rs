//! kubeadm's own feature gates (ClusterConfiguration `featureGates` in
//! kubeadm-config), as each simulated kubeadm knows them. Before it changes
//! anything, `kubeadm upgrade apply` and `upgrade plan` check the cluster's
//! gates against their own set (cmd/kubeadm/app/cmd/upgrade/common.go and
//! the apply preflight phase: `features.CheckDeprecatedFlags(
//! &features.InitFeatureGates, cfg.FeatureGates)`): a gate this kubeadm
//! does not know answers `Unknown feature gate flag: <Gate>`, a deprecated
//! one its deprecation message, each printed as `[upgrade/config] <msg>`,
//! and the command fails with `[upgrade/config] FATAL. Unable to upgrade a
//! cluster using deprecated feature-gate flags. Please see the release
//! notes` (cmd/kubeadm/app/features/features.go, `CheckDeprecatedFlags`).
//! The same facts as fleetctl's table (src/checks/kubeadm_gates.rs).

/// Gate, the first minor (of v1.x) whose kubeadm knows it, the first that
/// no longer does (`None`: not removed yet).
const GATES: &[(&str, u64, Option<u64>)] = &[
    ("PublicKeysECDSA", 19, None),
    ("RootlessControlPlane", 22, None),
    // kubernetes/kubernetes#129589: GA in 1.32, removed in 1.33.
    ("EtcdLearnerMode", 27, Some(33)),
    // kubernetes/website#49410's table: alpha 1.28, removed 1.31.
    ("UpgradeAddonsBeforeControlPlane", 28, Some(31)),
    // kubernetes/kubernetes#134781: GA and locked in 1.34, removed in 1.35.
    ("WaitForAllControlPlaneComponents", 30, Some(35)),
    // kubernetes/kubernetes#135773: GA and locked in 1.35, removed in 1.36.
    ("ControlPlaneKubeletLocalMode", 31, Some(36)),
    // kubernetes/kubernetes#138645: GA and locked in 1.36, removed in 1.37.
    ("NodeLocalCRISocket", 32, Some(37)),
];

/// Whether a v1.`minor` kubeadm knows `gate`.
fn knows(minor: u64, gate: &str) -> bool {
    GATES
        .iter()
        .any(|(g, from, until)| *g == gate && minor >= *from && until.is_none_or(|u| minor < u))
}

/// What `CheckDeprecatedFlags` of a v1.`minor` kubeadm says about `gates`,
/// a line each (sorted, as none of Go's map order is promised), or `None`
/// when it has nothing against them.
pub(super) fn refused<'a>(
    minor: u64,
    gates: impl IntoIterator<Item = &'a String>,
) -> Option<Vec<String>> {
    let lines: Vec<String> = gates
        .into_iter()
        .filter(|g| !knows(minor, g))
        .map(|g| format!("[upgrade/config] Unknown feature gate flag: {g}"))
        .collect();
    (!lines.is_empty()).then_some(lines)
}

/// The error the upgrade then fails with.
pub(super) const FATAL: &str = "[upgrade/config] FATAL. Unable to upgrade a cluster using deprecated \
     feature-gate flags. Please see the release notes";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_local_cri_socket_is_unknown_to_kubeadm_1_37_only() {
        let gates = ["NodeLocalCRISocket".to_string()];
        assert_eq!(refused(36, &gates), None);
        assert_eq!(
            refused(37, &gates),
            Some(vec![
                "[upgrade/config] Unknown feature gate flag: NodeLocalCRISocket".to_string()
            ])
        );
        assert!(refused(34, &["NoSuchGate".to_string()]).is_some());
        assert_eq!(refused(38, &["RootlessControlPlane".to_string()]), None);
    }
}

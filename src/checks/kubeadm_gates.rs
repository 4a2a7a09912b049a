//! kubeadm's own feature gates: ClusterConfiguration's `featureGates` in
//! the kube-system/kubeadm-config ConfigMap. Before its upgrade changes
//! anything, kubeadm checks them against the gates it knows
//! (cmd/kubeadm/app/cmd/upgrade/common.go and the apply preflight phase:
//! `features.CheckDeprecatedFlags(&features.InitFeatureGates,
//! cfg.FeatureGates)`, cmd/kubeadm/app/features/features.go): a gate it
//! does not know (`Unknown feature gate flag: <Gate>`) or one it marks
//! `Deprecated` fails the upgrade with `[upgrade/config] FATAL. Unable to
//! upgrade a cluster using deprecated feature-gate flags`. fleetctl takes
//! the etcd snapshot before `upgrade apply`, so without this check the hop
//! stops after it, with nothing gained.
//!
//! kubeadm locks a gate once it is GA (unlike the core components it then
//! ignores what the configuration says: the disabled code paths are gone)
//! and removes it one or two minors later. Each entry is read from the pull
//! request that removed it, or kubeadm's table of removed gates on
//! kubernetes.io (kubernetes/website's kubeadm-init.md).

use crate::version::Minor;

/// One of kubeadm's own gates: when its kubeadm knew it, locked it, dropped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeadmGate {
    pub gate: &'static str,
    /// The first kubeadm that knows it.
    pub added_in: Minor,
    /// The first kubeadm that locks it to its (GA) default, and that value.
    pub locked_in: Option<(Minor, bool)>,
    /// The first kubeadm that no longer knows it.
    pub removed_in: Option<Minor>,
    pub source: &'static str,
}

const fn m(minor: u64) -> Minor {
    Minor::new(1, minor)
}

/// Every kubeadm gate fleetctl knows of, v1.30 to v1.38.
pub const KUBEADM_GATES: &[KubeadmGate] = &[
    KubeadmGate {
        gate: "PublicKeysECDSA",
        added_in: m(19),
        locked_in: None,
        removed_in: None,
        source: "kubeadm-init.md: alpha 1.19",
    },
    KubeadmGate {
        gate: "RootlessControlPlane",
        added_in: m(22),
        locked_in: None,
        removed_in: None,
        source: "kubeadm-init.md: alpha 1.22",
    },
    KubeadmGate {
        gate: "EtcdLearnerMode",
        added_in: m(27),
        locked_in: Some((m(32), true)),
        removed_in: Some(m(33)),
        source: "kubernetes/kubernetes#126374 (GA, locked, 1.32), #129589 (removed in 1.33)",
    },
    KubeadmGate {
        gate: "UpgradeAddonsBeforeControlPlane",
        added_in: m(28),
        locked_in: None,
        removed_in: Some(m(31)),
        source: "kubeadm-init.md's removed gates (kubernetes/website#49410): 1.28, removed 1.31",
    },
    KubeadmGate {
        gate: "WaitForAllControlPlaneComponents",
        added_in: m(30),
        locked_in: Some((m(34), true)),
        removed_in: Some(m(35)),
        source: "kubernetes/kubernetes#134781: GA and locked in 1.34, removed in 1.35",
    },
    KubeadmGate {
        gate: "ControlPlaneKubeletLocalMode",
        added_in: m(31),
        locked_in: Some((m(35), true)),
        removed_in: Some(m(36)),
        source: "kubernetes/kubernetes#134106 (GA, locked, 1.35), #135773 (removed in 1.36)",
    },
    KubeadmGate {
        gate: NODE_LOCAL_CRI_SOCKET,
        added_in: m(32),
        locked_in: Some((m(36), true)),
        removed_in: Some(m(37)),
        source: "kubernetes/kubernetes#131981 (beta, on, 1.34), #135742 (GA, locked, 1.36), \
                 #138645 (removed in 1.37)",
    },
];

/// kubeadm's gate for the node-local CRI socket (instance-config.yaml).
pub const NODE_LOCAL_CRI_SOCKET: &str = "NodeLocalCRISocket";

/// Why the kubeadm of `minor` refuses `gate` in the cluster's
/// configuration, if it does; a gate fleetctl has no record of is left to
/// kubeadm (`None`).
pub fn kubeadm_refuses(gate: &str, minor: Minor) -> Option<String> {
    let known = KUBEADM_GATES.iter().find(|g| g.gate == gate)?;
    match known.removed_in {
        Some(removed) if removed <= minor => Some(format!(
            "kubeadm feature gate {gate}, removed from kubeadm in {removed} ({}): kubeadm {minor}'s \
             upgrade stops on it (\"Unknown feature gate flag: {gate}\")",
            known.source
        )),
        _ if known.added_in > minor => Some(format!(
            "kubeadm feature gate {gate}, added to kubeadm only in {}: kubeadm {minor}'s upgrade \
             stops on it (\"Unknown feature gate flag: {gate}\")",
            known.added_in
        )),
        _ => None,
    }
}

/// What the kubeadm of `minor` makes of `gate` set to `value`: the value
/// itself, or the locked default once kubeadm dropped the other path
/// (`None`: the gate is not set, or not known here).
pub fn effective(gate: &str, value: Option<bool>, minor: Minor) -> Option<bool> {
    let value = value?;
    match KUBEADM_GATES.iter().find(|g| g.gate == gate)?.locked_in {
        Some((from, locked)) if from <= minor => Some(locked),
        _ => Some(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_local_cri_socket_stops_kubeadm_1_37_not_1_36() {
        assert_eq!(kubeadm_refuses(NODE_LOCAL_CRI_SOCKET, m(36)), None);
        let why = kubeadm_refuses(NODE_LOCAL_CRI_SOCKET, m(37)).unwrap();
        assert!(why.contains("removed from kubeadm in v1.37"), "{why}");
        assert!(
            why.contains("Unknown feature gate flag: NodeLocalCRISocket"),
            "{why}"
        );
        assert!(kubeadm_refuses("ControlPlaneKubeletLocalMode", m(38)).is_some());
        assert_eq!(kubeadm_refuses("RootlessControlPlane", m(38)), None);
        assert_eq!(kubeadm_refuses("NoSuchGate", m(38)), None);
    }

    #[test]
    fn an_explicit_value_counts_until_kubeadm_locks_the_gate() {
        assert_eq!(
            effective(NODE_LOCAL_CRI_SOCKET, Some(false), m(35)),
            Some(false)
        );
        assert_eq!(
            effective(NODE_LOCAL_CRI_SOCKET, Some(false), m(36)),
            Some(true)
        );
        assert_eq!(effective(NODE_LOCAL_CRI_SOCKET, None, m(35)), None);
    }

    #[test]
    fn every_gate_once_and_cited_and_in_order() {
        let mut seen = std::collections::BTreeSet::new();
        for g in KUBEADM_GATES {
            assert!(seen.insert(g.gate), "{} twice", g.gate);
            assert!(!g.source.is_empty());
            if let (Some((locked, _)), Some(removed)) = (g.locked_in, g.removed_in) {
                assert!(g.added_in <= locked && locked < removed, "{g:?}");
            }
        }
    }
}

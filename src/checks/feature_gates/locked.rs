//! Feature gates a minor locks to a value: component-base's
//! `featureGate.unsafeSetFromMap`
//! (staging/src/k8s.io/component-base/featuregate/feature_gate.go) refuses
//! to set a gate whose spec says `LockToDefault: true` to anything but its
//! default (`cannot set feature gate %v to %v, feature is locked to %v`),
//! and the component exits as for an unknown gate. In
//! `pkg/features/kube_features.go` (`versioned_kube_features.go` before
//! v1.34) a lock is a versioned spec such as `{Version:
//! version.MustParse("1.33"), Default: true, PreRelease: featuregate.GA,
//! LockToDefault: true}`: locked from that minor until the gate is removed
//! (`super::gate_table`), where "unknown" takes over.
//!
//! `tests/tools/feature_gates_from_source.py` derives both tables from a
//! kubernetes/kubernetes checkout, tag by tag, so the next minor is added
//! the same way; each entry here names what it was checked against.

use crate::version::Minor;

/// A gate locked to `value` from `locked_in` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockedGate {
    pub gate: &'static str,
    pub locked_in: Minor,
    pub value: bool,
    pub source: &'static str,
}

const fn locked(gate: &'static str, minor: u64, value: bool, source: &'static str) -> LockedGate {
    LockedGate {
        gate,
        locked_in: Minor::new(1, minor),
        value,
        source,
    }
}

/// Every lock fleetctl knows of, by the minor that locked it.
pub const LOCKED_FEATURE_GATES: &[LockedGate] = &[
    locked(
        "ComponentSLIs",
        32,
        true,
        "website feature-gates/ComponentSLIs.md: stable (locked) 1.32–1.34",
    ),
    locked(
        "SizeMemoryBackedVolumes",
        32,
        true,
        "website feature-gates/SizeMemoryBackedVolumes.md: stable (locked) 1.32–1.34",
    ),
    locked(
        "AnyVolumeDataSource",
        33,
        true,
        "kubernetes/kubernetes#135336 (merged): \"locked and enabled since 1.33\", removed in 1.37",
    ),
    locked(
        "ServiceTrafficDistribution",
        33,
        true,
        "website feature-gates/ServiceTrafficDistribution.md: stable (locked) 1.33–1.35",
    ),
    locked(
        "VolumeAttributesClass",
        36,
        true,
        "kubernetes/website#53811, after kubernetes/kubernetes#134556: GA in 1.34, locked from 1.36",
    ),
];

/// The lock a `minor` binary holds `gate` to, if any.
pub fn locked_at(gate: &str, minor: Minor) -> Option<&'static LockedGate> {
    LOCKED_FEATURE_GATES
        .iter()
        .find(|l| l.gate == gate && l.locked_in <= minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_is_locked_from_its_minor_on() {
        let v = |m| Minor::new(1, m);
        assert_eq!(locked_at("VolumeAttributesClass", v(35)), None);
        assert_eq!(
            locked_at("VolumeAttributesClass", v(36)).map(|l| l.value),
            Some(true)
        );
        assert_eq!(locked_at("NoSuchGate", v(38)), None);
        let mut seen = std::collections::BTreeSet::new();
        for l in LOCKED_FEATURE_GATES {
            assert!(seen.insert(l.gate), "{} twice", l.gate);
            assert!(!l.source.is_empty());
        }
    }
}

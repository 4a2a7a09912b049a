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
    // From the source: the versioned specs at v1.32.10
    // (tests/tools/feature_gates_from_source.py --fixtures).
    locked(
        "WatchBookmark",
        17,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.17 (tests/tools/feature_gates)",
    ),
    locked(
        "EfficientWatchResumption",
        24,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.24 (tests/tools/feature_gates)",
    ),
    locked(
        "CPUManager",
        26,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.26 (tests/tools/feature_gates)",
    ),
    locked(
        "APIListChunking",
        29,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.29 (tests/tools/feature_gates)",
    ),
    locked(
        "RemainingItemCount",
        29,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.29 (tests/tools/feature_gates)",
    ),
    locked(
        "AdmissionWebhookMatchConditions",
        30,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.30 (tests/tools/feature_gates)",
    ),
    locked(
        "AggregatedDiscoveryEndpoint",
        30,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.30 (tests/tools/feature_gates)",
    ),
    locked(
        "PodSchedulingReadiness",
        30,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.30 (tests/tools/feature_gates)",
    ),
    locked(
        "AppArmor",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "AppArmorFields",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "DevicePluginCDIDevices",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "DisableCloudProviders",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "DisableKubeletCloudCredentialProviders",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "ElasticIndexedJob",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "JobPodFailurePolicy",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "KubeProxyDrainingTerminatingNodes",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "LogarithmicScaleDown",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "PDBUnhealthyPodEvictionPolicy",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "PersistentVolumeLastPhaseTransitionTime",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "PodDisruptionConditions",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "StatefulSetStartOrdinal",
        31,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.31 (tests/tools/feature_gates)",
    ),
    locked(
        "AllowServiceLBStatusOnNonLB",
        32,
        false,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "CronJobsScheduledAnnotation",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "CustomResourceFieldSelectors",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "LoadBalancerIPMode",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "MemoryManager",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "PodIndexLabel",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "RetryGenerateName",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "ServiceAccountTokenJTI",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "ServiceAccountTokenNodeBindingValidation",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "ServiceAccountTokenPodNodeInfo",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "StatefulSetAutoDeletePVC",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "StrictCostEnforcementForVAP",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "StrictCostEnforcementForWebhooks",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
    ),
    locked(
        "StructuredAuthorizationConfiguration",
        32,
        true,
        "versioned spec at v1.32.10: LockToDefault from 1.32 (tests/tools/feature_gates)",
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

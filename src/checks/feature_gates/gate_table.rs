//! The feature gates each minor v1.30–v1.38 removed: the first minor whose
//! binaries no longer know the gate and refuse to start with it.
//!
//! Every entry comes from the gate's own page in kubernetes/website
//! (`content/en/docs/reference/command-line-tools-reference/feature-gates/<Gate>.md`,
//! the source of kubernetes.io's "Feature Gates (removed)" page): its front
//! matter says `removed: true`, and the `toVersion` of its last stage is the
//! last release that still knows it, so `removed_in` is the minor after.
//! Each entry's `source` names that page and its last stage as read.
//!
//! One table serves every component. kube-apiserver, kube-controller-manager,
//! kube-scheduler and the kubelet all register the whole of
//! `pkg/features/kube_features.go` (and the generic apiserver's gates) into
//! one `utilfeature.DefaultMutableFeatureGate`, so a gate gone from that file
//! is unknown to all four, whichever of them used it: component-base's
//! `featureGate.unsafeSetFromMap` (staging/src/k8s.io/component-base/featuregate/feature_gate.go)
//! answers `unrecognized feature gate: <Gate>` and the component exits.
//!
//! The rows marked `(tests/tools/feature_gates)` come from the source
//! itself: kubernetes/kubernetes's feature files at v1.29.1, v1.30.0,
//! v1.31.0 and v1.32.10, run through `tests/tools/feature_gates_from_source.py`
//! (docs/checks.md, "Deriving the tables from the source"); for v1.30–v1.32
//! the table is complete, and `source_agreement` fails if it drifts.
//!
//! Beyond v1.32 not exhaustive: only removals found recorded that way are listed (a sweep
//! by `toVersion` of the website's gate pages; no page yet says `toVersion:
//! "1.37"`, so nothing is listed as removed in v1.38). A gate missing here is
//! not checked; add it with the page it was read from.

use crate::version::Minor;

/// A feature gate that a minor removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedGate {
    pub gate: &'static str,
    /// The first minor that no longer knows it.
    pub removed_in: Minor,
    /// Where this is established.
    pub source: &'static str,
}

const fn gate(gate: &'static str, minor: u64, source: &'static str) -> RemovedGate {
    RemovedGate {
        gate,
        removed_in: Minor::new(1, minor),
        source,
    }
}

/// Every removal, by the minor that removed it.
pub const REMOVED_FEATURE_GATES: &[RemovedGate] = &[
    // v1.30: the last release to know these is v1.29.
    gate(
        "RemoveSelfLink",
        30,
        "website feature-gates/RemoveSelfLink.md: stable 1.24–1.29, removed",
    ),
    // v1.30, from the source (tests/tools/feature_gates_from_source.py):
    gate(
        "APISelfSubjectReview",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "CSIMigrationAzureFile",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "ExpandedDNSConfig",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "ExperimentalHostUserNamespaceDefaulting",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "IPTablesOwnershipCleanup",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "KubeletPodResources",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "KubeletPodResourcesGetAllocatable",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "LegacyServiceAccountTokenTracking",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "MinimizeIPTablesRestore",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "ProxyTerminatingEndpoints",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    gate(
        "SecurityContextDeny",
        30,
        "kube_features.go: declared at v1.29.1, gone at v1.30.0 (tests/tools/feature_gates)",
    ),
    // v1.31
    gate(
        "CSINodeExpandSecret",
        31,
        "website feature-gates/CSINodeExpandSecret.md: stable 1.29–1.30, removed",
    ),
    gate(
        "CSIMigrationRBD",
        31,
        "website feature-gates/CSIMigrationRBD.md: deprecated 1.28–1.30, removed",
    ),
    gate(
        "DefaultHostNetworkHostPortsInPodTemplates",
        31,
        "website feature-gates/DefaultHostNetworkHostPortsInPodTemplates.md: deprecated 1.28–1.30, removed",
    ),
    gate(
        "InTreePluginAWSUnregister",
        31,
        "website feature-gates/InTreePluginAWSUnregister.md: alpha 1.21–1.30, removed",
    ),
    gate(
        "InTreePluginGCEUnregister",
        31,
        "website feature-gates/InTreePluginGCEUnregister.md: alpha 1.21–1.30, removed",
    ),
    gate(
        "JobReadyPods",
        31,
        "website feature-gates/JobReadyPods.md: stable 1.29–1.30, removed",
    ),
    gate(
        "SkipReadOnlyValidationGCE",
        31,
        "website feature-gates/SkipReadOnlyValidationGCE.md: deprecated 1.29–1.30, removed",
    ),
    // v1.31, from the source (tests/tools/feature_gates_from_source.py):
    gate(
        "APIPriorityAndFairness",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "ConsistentHTTPGetHandlers",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "CustomResourceValidationExpressions",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "InTreePluginAzureDiskUnregister",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "InTreePluginAzureFileUnregister",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "InTreePluginOpenStackUnregister",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "InTreePluginRBDUnregister",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "InTreePluginvSphereUnregister",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "ReadWriteOncePod",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    gate(
        "ServiceNodePortStaticSubrange",
        31,
        "kube_features.go: declared at v1.30.0, gone at v1.31.0 (tests/tools/feature_gates)",
    ),
    // v1.32
    gate(
        "CloudDualStackNodeIPs",
        32,
        "website feature-gates/CloudDualStackNodeIPs.md: stable 1.30–1.31, removed",
    ),
    gate(
        "DRAControlPlaneController",
        32,
        "website feature-gates/DRAControlPlaneController.md: alpha 1.26–1.31, removed",
    ),
    gate(
        "KMSv2KDF",
        32,
        "website feature-gates/KMSv2KDF.md: stable 1.29–1.31, removed",
    ),
    gate(
        "LegacyServiceAccountTokenCleanUp",
        32,
        "website feature-gates/LegacyServiceAccountTokenCleanUp.md: stable 1.30–1.31, removed",
    ),
    gate(
        "NewVolumeManagerReconstruction",
        32,
        "website feature-gates/NewVolumeManagerReconstruction.md: stable 1.30–1.31, removed",
    ),
    gate(
        "ServerSideFieldValidation",
        32,
        "website feature-gates/ServerSideFieldValidation.md: stable 1.27–1.31, removed",
    ),
    gate(
        "StableLoadBalancerNodeSet",
        32,
        "website feature-gates/StableLoadBalancerNodeSet.md: stable 1.30–1.31, removed",
    ),
    gate(
        "ValidatingAdmissionPolicy",
        32,
        "website feature-gates/ValidatingAdmissionPolicy.md: stable 1.30–1.31, removed",
    ),
    // v1.32, from the source (tests/tools/feature_gates_from_source.py):
    gate(
        "HPAContainerMetrics",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    gate(
        "KMSv2",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    gate(
        "MinDomainsInPodTopologySpread",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    gate(
        "NodeOutOfServiceVolumeDetach",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    gate(
        "PodHostIPs",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    gate(
        "ServerSideApply",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    gate(
        "ZeroLimitedNominalConcurrencyShares",
        32,
        "kube_features.go: declared at v1.31.0, gone at v1.32.10 (tests/tools/feature_gates)",
    ),
    // v1.33
    gate(
        "AdmissionWebhookMatchConditions",
        33,
        "website feature-gates/AdmissionWebhookMatchConditions.md: stable 1.30–1.32, removed",
    ),
    gate(
        "AggregatedDiscoveryEndpoint",
        33,
        "kubernetes.io Feature Gates (removed): AggregatedDiscoveryEndpoint GA 1.30–1.32",
    ),
    gate(
        "APIListChunking",
        33,
        "website feature-gates/APIListChunking.md: stable 1.29–1.32, removed",
    ),
    gate(
        "DisableCloudProviders",
        33,
        "website feature-gates/DisableCloudProviders.md: stable 1.31–1.32, removed",
    ),
    gate(
        "JobPodFailurePolicy",
        33,
        "website feature-gates/JobPodFailurePolicy.md: stable 1.31–1.32, removed",
    ),
    gate(
        "PDBUnhealthyPodEvictionPolicy",
        33,
        "website feature-gates/PDBUnhealthyPodEvictionPolicy.md: stable 1.31–1.32, removed",
    ),
    gate(
        "PersistentVolumeLastPhaseTransitionTime",
        33,
        "website feature-gates/PersistentVolumeLastPhaseTransitionTime.md: stable 1.31–1.32, removed",
    ),
    // v1.34
    gate(
        "PodDisruptionConditions",
        34,
        "website feature-gates/PodDisruptionConditions.md: stable 1.31–1.33, removed",
    ),
    // v1.35
    gate(
        "AllowServiceLBStatusOnNonLB",
        35,
        "website feature-gates/AllowServiceLBStatusOnNonLB.md: deprecated 1.29–1.34, removed",
    ),
    gate(
        "ComponentSLIs",
        35,
        "website feature-gates/ComponentSLIs.md: stable (locked) 1.32–1.34, removed",
    ),
    gate(
        "LoadBalancerIPMode",
        35,
        "website feature-gates/LoadBalancerIPMode.md: stable 1.32–1.34, removed",
    ),
    gate(
        "SizeMemoryBackedVolumes",
        35,
        "website feature-gates/SizeMemoryBackedVolumes.md: stable (locked) 1.32–1.34, removed \
         (an earlier revision of the page said 1.33; the later one, with the lock, is taken)",
    ),
    gate(
        "UserNamespacesPodSecurityStandards",
        35,
        "website feature-gates/UserNamespacesPodSecurityStandards.md: alpha 1.29–1.34, removed",
    ),
    // v1.36
    gate(
        "InTreePluginPortworxUnregister",
        36,
        "website feature-gates/InTreePluginPortworxUnregister.md: alpha 1.23–1.35, removed",
    ),
    gate(
        "MemoryManager",
        36,
        "website feature-gates/MemoryManager.md: stable 1.32–1.35, removed",
    ),
    gate(
        "ServiceTrafficDistribution",
        36,
        "website feature-gates/ServiceTrafficDistribution.md: stable (locked) 1.33–1.35, removed",
    ),
    // v1.37
    gate(
        "AnyVolumeDataSource",
        37,
        "kubernetes/kubernetes#135336 (merged, \"[1.37] Remove feature gate AnyVolumeDataSource\"): \
         GA and locked since 1.33; its website page still shows it stable with no end",
    ),
    gate(
        "GangScheduling",
        37,
        "website feature-gates/GangScheduling.md: alpha 1.35–1.36, removed (merged into GenericWorkload)",
    ),
    gate(
        "PreventStaticPodAPIReferences",
        37,
        "website feature-gates/PreventStaticPodAPIReferences.md: beta 1.34–1.36, removed",
    ),
    gate(
        "WorkloadAwarePreemption",
        37,
        "website feature-gates/WorkloadAwarePreemption.md: alpha 1.36, removed (merged into GenericWorkload)",
    ),
];

/// The removal of `gate` that a `minor` binary already has, if any.
pub fn removed_by(gate: &str, minor: Minor) -> Option<&'static RemovedGate> {
    REMOVED_FEATURE_GATES
        .iter()
        .find(|r| r.gate == gate && r.removed_in <= minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_removal_is_in_v1_30_to_v1_38_once_and_cited() {
        let mut seen = std::collections::BTreeSet::new();
        for r in REMOVED_FEATURE_GATES {
            assert!(
                (Minor::new(1, 30)..=Minor::new(1, 38)).contains(&r.removed_in),
                "{r:?}"
            );
            assert!(seen.insert(r.gate), "{} listed twice", r.gate);
            assert!(!r.source.is_empty(), "{r:?}");
        }
    }

    #[test]
    fn a_gate_is_unknown_from_its_minor_on() {
        let v = |m| Minor::new(1, m);
        assert_eq!(removed_by("SizeMemoryBackedVolumes", v(34)), None);
        assert_eq!(
            removed_by("SizeMemoryBackedVolumes", v(35)).map(|r| r.removed_in),
            Some(v(35))
        );
        assert!(removed_by("SizeMemoryBackedVolumes", v(37)).is_some());
        assert_eq!(removed_by("NoSuchGate", v(38)), None);
    }
}

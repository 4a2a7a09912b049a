//! Feature gates a minor removed, as the simulated kubelet and control-plane
//! components know them: a binary of that minor or later refuses to start
//! when told to set one. fleetsim does not depend on fleetctl, so this is a
//! small table of its own, with the same facts as fleetctl's
//! (`src/checks/feature_gates/table.rs`), each read from the gate's page in
//! kubernetes/website
//! (`content/en/docs/reference/command-line-tools-reference/feature-gates/<Gate>.md`:
//! `removed: true`, last stage's `toVersion` the minor before).
//!
//! Every Kubernetes component registers all of `pkg/features/kube_features.go`
//! into one default feature gate, so one table serves the kubelet and the
//! control plane alike; component-base's `featureGate.unsafeSetFromMap`
//! (staging/src/k8s.io/component-base/featuregate/feature_gate.go) answers
//! `unrecognized feature gate: <Gate>` for a gate it does not know.

use std::collections::BTreeMap;

/// Gate, the first minor (of v1.x) that no longer knows it.
const REMOVED: &[(&str, u64)] = &[
    // feature-gates/PodDisruptionConditions.md: stable 1.31–1.33
    ("PodDisruptionConditions", 34),
    // feature-gates/ComponentSLIs.md: stable (locked) 1.32–1.34
    ("ComponentSLIs", 35),
    // feature-gates/LoadBalancerIPMode.md: stable 1.32–1.34
    ("LoadBalancerIPMode", 35),
    // feature-gates/SizeMemoryBackedVolumes.md: stable (locked) 1.32–1.34
    ("SizeMemoryBackedVolumes", 35),
    // feature-gates/MemoryManager.md: stable 1.32–1.35
    ("MemoryManager", 36),
    // feature-gates/ServiceTrafficDistribution.md: stable (locked) 1.33–1.35
    ("ServiceTrafficDistribution", 36),
    // feature-gates/PreventStaticPodAPIReferences.md: beta 1.34–1.36
    ("PreventStaticPodAPIReferences", 37),
    // kubernetes/kubernetes#135336: GA and locked since 1.33
    ("AnyVolumeDataSource", 37),
];

/// Gate, the first minor (of v1.x) that locks it, the value it is locked
/// to (`LockToDefault: true` in pkg/features/kube_features.go's versioned
/// specs; fleetctl's `src/checks/feature_gates/locked.rs` cites each).
const LOCKED: &[(&str, u64, bool)] = &[
    ("ComponentSLIs", 32, true),
    ("SizeMemoryBackedVolumes", 32, true),
    ("AnyVolumeDataSource", 33, true),
    ("ServiceTrafficDistribution", 33, true),
    ("VolumeAttributesClass", 36, true),
];

/// What a v1.`minor` component says about the first of `pairs` (gate,
/// value) it refuses, in the order given, as component-base's
/// `featureGate.unsafeSetFromMap` does: `unrecognized feature gate: <Gate>`
/// for a gate it does not know, `cannot set feature gate <Gate> to
/// <value>, feature is locked to <locked>` for a locked one set to the
/// other value.
pub fn refusal<'a>(
    minor: u64,
    pairs: impl IntoIterator<Item = (&'a str, Option<bool>)>,
) -> Option<String> {
    pairs.into_iter().find_map(|(gate, value)| {
        if first_unknown(minor, [gate]).is_some() {
            return Some(unrecognized(gate));
        }
        let (_, _, locked) = LOCKED
            .iter()
            .find(|(g, from, _)| *g == gate && minor >= *from)?;
        let value = value.filter(|v| v != locked)?;
        Some(format!(
            "cannot set feature gate {gate} to {value}, feature is locked to {locked}"
        ))
    })
}

/// The gates of a `--feature-gates` value with their boolean values.
pub fn gate_pairs(value: &str) -> Vec<(&str, Option<bool>)> {
    value
        .split(',')
        .filter_map(|pair| {
            let mut it = pair.splitn(2, '=');
            let name = it.next().unwrap_or("").trim();
            let set = it.next().and_then(|v| v.trim().parse::<bool>().ok());
            (!name.is_empty()).then_some((name, set))
        })
        .collect()
}

/// Gate, the minor (of v1.x) that added it: an older binary does not know
/// it yet (fleetctl's `src/checks/feature_gates/added.rs` cites each).
const ADDED: &[(&str, u64)] = &[("GangScheduling", 35), ("WorkloadAwarePreemption", 36)];

/// The first gate of `gates` a v1.`minor` binary does not know, in the
/// order given (component-base stops at the first unknown one): removed
/// by then, or not added yet.
pub fn first_unknown<'a>(minor: u64, gates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    gates.into_iter().find(|g| {
        REMOVED
            .iter()
            .any(|(name, from)| name == g && minor >= *from)
            || ADDED.iter().any(|(name, from)| name == g && minor < *from)
    })
}

/// The gate names of a `--feature-gates` value (`A=true,B=false`).
pub fn gate_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(|pair| pair.split('=').next().unwrap_or("").trim())
        .filter(|g| !g.is_empty())
        .collect()
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct KubeletConfiguration {
    #[serde(default)]
    feature_gates: BTreeMap<String, GateValue>,
}

#[derive(serde::Deserialize)]
#[serde(untagged)]
enum GateValue {
    Set(bool),
    Other(serde::de::IgnoredAny),
}

/// The `featureGates` of a KubeletConfiguration with their values; none
/// when it has none or is not YAML (the kubelet's own config loading
/// reports that).
pub fn config_gates(config: &str) -> Vec<(String, Option<bool>)> {
    serde_saphyr::from_str::<Option<KubeletConfiguration>>(config)
        .ok()
        .flatten()
        .map(|c| {
            c.feature_gates
                .into_iter()
                .map(|(g, v)| match v {
                    GateValue::Set(b) => (g, Some(b)),
                    GateValue::Other(_) => (g, None),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What a component says when it refuses a gate.
pub fn unrecognized(gate: &str) -> String {
    format!("unrecognized feature gate: {gate}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_is_unknown_before_the_minor_that_added_it() {
        assert_eq!(
            first_unknown(35, ["WorkloadAwarePreemption"]),
            Some("WorkloadAwarePreemption")
        );
        assert_eq!(first_unknown(36, ["WorkloadAwarePreemption"]), None);
    }

    #[test]
    fn a_locked_gate_set_to_the_other_value_is_refused_as_component_base_does() {
        let off = gate_pairs("VolumeAttributesClass=false");
        assert_eq!(refusal(35, off.clone()), None);
        assert_eq!(
            refusal(36, off).as_deref(),
            Some(
                "cannot set feature gate VolumeAttributesClass to false, feature is locked to true"
            )
        );
        assert_eq!(refusal(36, gate_pairs("VolumeAttributesClass=true")), None);
        assert_eq!(
            refusal(37, gate_pairs("AnyVolumeDataSource=true")).as_deref(),
            Some("unrecognized feature gate: AnyVolumeDataSource")
        );
    }

    #[test]
    fn a_gate_is_unknown_from_the_minor_that_removed_it() {
        assert_eq!(first_unknown(34, ["SizeMemoryBackedVolumes"]), None);
        assert_eq!(
            first_unknown(35, ["NodeSwap", "SizeMemoryBackedVolumes"]),
            Some("SizeMemoryBackedVolumes")
        );
        assert_eq!(gate_list("A=true, B=false,"), ["A", "B"]);
        assert_eq!(
            config_gates(
                "kind: KubeletConfiguration\nfeatureGates:\n  MemoryManager: true\n  Odd: maybe\n"
            ),
            [
                ("MemoryManager".to_string(), Some(true)),
                ("Odd".to_string(), None)
            ]
        );
        assert!(config_gates("kind: KubeletConfiguration\n").is_empty());
    }
}

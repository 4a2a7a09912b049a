//! A rollback keeps the node's kubelet configuration: the older kubelet
//! starts with the config.yaml and flag files the newer one ran. A feature
//! gate set there that the older minor does not know yet makes it exit at
//! once (component-base's `unrecognized feature gate: <Gate>`), so the node
//! would come back from the rollback's reboot NotReady. Refused before
//! anything is touched, naming the gate, the file and the minor that added
//! it (`crate::checks::ADDED_FEATURE_GATES`).

use crate::checks::{
    KUBELET_CONFIG, KubeletConfigDoc, added_after, kubelet_flags, parse_gate_list,
};
use crate::version::Version;

use super::state::FleetNode;

/// Every gate `node`'s kubelet files set that a `to` kubelet does not know.
pub(super) fn unknown_to(node: &FleetNode, to: &Version) -> Vec<String> {
    let minor = to.minor();
    let mut why = Vec::new();
    let mut judge = |gate: &str, at: &str| {
        if let Some(a) = added_after(gate, minor) {
            why.push(format!(
                "{}: {at} sets feature gate {gate}, added in {} ({}): the {to} kubelet would refuse \
                 to start (\"unrecognized feature gate: {gate}\"); take it out there (and from the \
                 kube-system/kubelet-config ConfigMap), then roll back",
                node.name, a.added_in, a.source
            ));
        }
    };
    if let Some(text) = &node.facts.cgroup.kubelet_config
        && let Ok(doc) = KubeletConfigDoc::parse(text)
    {
        for gate in doc.feature_gates().keys() {
            judge(gate, &format!("{KUBELET_CONFIG} (featureGates)"));
        }
    }
    for (path, content) in &node.facts.kubelet_files {
        for flag in kubelet_flags(path, content)
            .iter()
            .filter(|f| f.flag == "--feature-gates")
        {
            for gate in parse_gate_list(flag.value.as_deref().unwrap_or("")) {
                judge(
                    &gate,
                    &format!("{path} ({} --feature-gates)", flag.origin.variable),
                );
            }
        }
    }
    why
}

//! Feature gates the hop's minor removed. A kubelet given a gate it no
//! longer knows exits before it does anything (cmd/kubelet/app/server.go:
//! `failed to set feature gates from initial flags-based config:
//! unrecognized feature gate: <Gate>`), so the node comes back from its
//! reboot NotReady. kube-apiserver, kube-controller-manager and
//! kube-scheduler refuse the same way (component-base's featuregate), and
//! kubeadm renders their `--feature-gates` into the new static pods from
//! ClusterConfiguration's `extraArgs`: the new pod never comes up, and
//! `kubeadm upgrade apply` puts the old manifests back and fails
//! (cmd/kubeadm/app/phases/upgrade/staticpods.go, `rollbackOldManifests`),
//! after fleetctl has already started the hop.
//!
//! Where gates are set, and so read here:
//! - the kubelet: the `featureGates` of the configuration each restarted
//!   node's kubelet starts with after the hop ([`KubeletView::config`]: what
//!   the hop's kubeadm writes from the `kube-system/kubelet-config`
//!   ConfigMap where it runs, else the node's own
//!   `/var/lib/kubelet/config.yaml`), and `--feature-gates` in any file the
//!   kubelet unit reads its flags from (kubeadm-flags.env, the drop-ins,
//!   `KUBELET_EXTRA_ARGS`; [`KubeletView::flags`], read by
//!   [`super::flags::kubelet_flags`]);
//! - the control plane: ClusterConfiguration's `apiServer`,
//!   `controllerManager` and `scheduler` `extraArgs` (parsed by
//!   [`super::configmaps`], v1beta3 map or v1beta4 list).
//!
//! Setting a gate that is locked to its default (a GA gate kept for a few
//! releases) to the other value fails too (`cannot set feature gate X to
//! false, feature is locked to true`): [`LOCKED_FEATURE_GATES`].

mod added;
mod gate_table;
mod locked;

use super::configmaps::{ClusterConfiguration, ControlPlaneComponent};
use super::kubelet_config::KubeletView;
use super::verdicts::{Check, CheckName, Verdict};
use crate::version::Minor;

use super::kubeadm_gates::kubeadm_refuses;
pub use added::{ADDED_FEATURE_GATES, AddedGate, added_after};
pub use gate_table::{REMOVED_FEATURE_GATES, RemovedGate, removed_by};
pub use locked::{LOCKED_FEATURE_GATES, LockedGate, locked_at};

/// The control-plane components that take `--feature-gates`, in the order
/// kubeadm upgrades them.
const GATED: [ControlPlaneComponent; 3] = [
    ControlPlaneComponent::ApiServer,
    ControlPlaneComponent::ControllerManager,
    ControlPlaneComponent::Scheduler,
];

/// The gates of a `--feature-gates` value (`A=true,B=false`), as
/// component-base splits it: by commas, each `name=value` trimmed; a pair
/// without `=` still names a gate (the component refuses it too, for its
/// missing value).
pub fn parse_gate_list(value: &str) -> Vec<String> {
    parse_gate_pairs(value)
        .into_iter()
        .map(|(g, _)| g)
        .collect()
}

/// The gates of a `--feature-gates` value with the values they are set to
/// (`None`: no value, or not a boolean Go's `strconv.ParseBool` reads).
pub fn parse_gate_pairs(value: &str) -> Vec<(String, Option<bool>)> {
    value
        .split(',')
        .filter_map(|pair| {
            let mut it = pair.splitn(2, '=');
            let name = it.next().unwrap_or("").trim();
            let set = match it.next().map(str::trim) {
                Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Some(true),
                Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Some(false),
                _ => None,
            };
            (!name.is_empty()).then(|| (name.to_string(), set))
        })
        .collect()
}

/// Everything the check reads, each source as far as it could be read.
#[derive(Debug, Clone, Copy)]
pub struct GateSources<'a> {
    /// Every node's kubelet as the hop leaves it.
    pub kubelets: &'a [KubeletView],
    /// kubeadm-config's ClusterConfiguration; `Ok(None)`: no such ConfigMap.
    pub cluster: &'a Result<Option<ClusterConfiguration>, String>,
}

/// The `feature-gates` check of a hop to `hop`: the kubelets of the
/// `restarted` nodes and, when the hop runs kubeadm's upgrade on a control
/// plane (`control_plane`), the components it writes new static pods for
/// must all know every gate they are given. Gates removed before `hop`
/// count too: a kubelet that lags the cluster still starts with them today.
pub fn check_feature_gates(
    sources: GateSources<'_>,
    hop: Minor,
    restarted: &[String],
    control_plane: bool,
) -> Check {
    let mut blocking = Vec::new();
    let mut unread = Vec::new();
    let mut judge = |gate: &str, value: Option<bool>, component: &str, at: &str| {
        if let Some(removed) = removed_by(gate, hop) {
            blocking.push(format!(
                "{at}: feature gate {gate} ({component}), removed in {}",
                removed.removed_in
            ));
        } else if let Some(lock) = locked_at(gate, hop)
            && let Some(value) = value.filter(|v| *v != lock.value)
        {
            blocking.push(format!(
                "{at}: feature gate {gate}={value} ({component}), locked to {} from {} (\"cannot \
                 set feature gate {gate} to {value}, feature is locked to {}\")",
                lock.value, lock.locked_in, lock.value
            ));
        }
    };
    for view in sources.kubelets {
        if !restarted.contains(&view.node) {
            continue;
        }
        match view.config() {
            Ok((Some(doc), place)) => {
                let at = format!("{}: {place} (featureGates)", view.node);
                for (gate, value) in doc.feature_gates() {
                    judge(&gate, Some(value), "kubelet", &at);
                }
            }
            Ok((None, _)) => {}
            Err(e) => unread.push(format!("{}: {e}", view.node)),
        }
        for flag in view.flags.iter().filter(|f| f.flag == "--feature-gates") {
            let at = format!(
                "{}: {} ({} --feature-gates)",
                view.node, flag.origin.path, flag.origin.variable
            );
            for (gate, value) in parse_gate_pairs(flag.value.as_deref().unwrap_or("")) {
                judge(&gate, value, "kubelet", &at);
            }
        }
    }
    // kubeadm's own gates, before it changes anything (`kubeadm_gates`).
    let mut kubeadm = Vec::new();
    if control_plane && let Ok(Some(config)) = sources.cluster {
        for gate in config.feature_gates.keys() {
            if let Some(why) = kubeadm_refuses(gate, hop) {
                kubeadm.push(format!(
                    "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration featureGates): \
                     {why}; take it out of featureGates with `kubectl -n kube-system edit cm \
                     kubeadm-config`"
                ));
            }
        }
    }
    if control_plane {
        match sources.cluster {
            Ok(Some(config)) => {
                for component in GATED {
                    let at = format!(
                        "the kube-system/kubeadm-config ConfigMap (ClusterConfiguration {} feature-gates)",
                        component.section()
                    );
                    for value in config.args(component, "feature-gates") {
                        for (gate, set) in parse_gate_pairs(value) {
                            judge(&gate, set, component.binary(), &at);
                        }
                    }
                }
            }
            Ok(None) => {}
            Err(e) => unread.push(format!("the kubeadm-config ConfigMap: {e}")),
        }
    }
    blocking.dedup();
    if !blocking.is_empty() || !kubeadm.is_empty() {
        let summary = match blocking.is_empty() {
            true => format!(
                "kubeadm {hop} would refuse to upgrade: a kubeadm feature gate it no longer knows \
                 is set in kubeadm-config"
            ),
            false => format!(
                "a {hop} component would refuse to start: a feature gate it no longer knows is set \
                 (\"unrecognized feature gate\"), or one it locks is set to the other value"
            ),
        };
        let mut details = kubeadm;
        details.extend(blocking);
        details.extend(unread.into_iter().map(|e| format!("not read: {e}")));
        return Check {
            name: CheckName::FeatureGates,
            verdict: Verdict::Block,
            summary,
            details,
            remedy: Some(
                "remove the gate where it is set: the kubelet-config ConfigMap (`kubectl -n kube-system \
                 edit configmap kubelet-config`) or that node's file for the kubelet; the \
                 ClusterConfiguration's extraArgs (`kubectl -n kube-system edit configmap \
                 kubeadm-config`) for the control plane, which kubeadm renders into the new static \
                 pods; then plan again"
                    .to_string(),
            ),
        };
    }
    if !unread.is_empty() {
        return Check {
            name: CheckName::FeatureGates,
            verdict: Verdict::Warn,
            summary: "could not read every place feature gates are set, so those are unchecked"
                .into(),
            details: unread,
            remedy: Some(format!(
                "fix what the error says and plan again, or go on knowing `{}` was not fully checked",
                CheckName::FeatureGates
            )),
        };
    }
    Check::pass(
        CheckName::FeatureGates,
        format!("no feature gate set for the kubelet or the control plane is one {hop} removed"),
    )
}

#[cfg(test)]
mod source_agreement;
#[cfg(test)]
mod tests;

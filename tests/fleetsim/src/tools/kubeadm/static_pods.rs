//! The control-plane phase's move of a node's static pods to a new
//! version: it needs the node's kubelet running (kubeadm writes the new
//! manifests and waits for the kubelet to restart each component), and
//! each new pod to come up; otherwise kubeadm's `rollbackOldManifests`
//! (cmd/kubeadm/app/phases/upgrade/staticpods.go) moves every backed-up
//! manifest back and the upgrade fails, leaving the old pods running.

use anyhow::Result;

use super::*;

/// Why the static pods of `node` could not be moved to a new version.
pub(super) enum StaticPods {
    Upgraded,
    Skipped,
    ApiGone,
    /// The kubelet that would restart them does not run.
    NoKubelet,
    /// The new pod of this component never comes up: its `--feature-gates`
    /// (from ClusterConfiguration `extraArgs`) names a gate the target
    /// removed.
    GateRefused(&'static str),
}

impl StaticPods {
    /// The error kubeadm fails its control-plane phase with, when the pods
    /// did not move; `None` when they did or the phase was skipped.
    pub(super) fn failure(&self, node: &str) -> Option<String> {
        match self {
            StaticPods::Upgraded | StaticPods::Skipped => None,
            StaticPods::ApiGone => Some(
                "error execution phase control-plane: couldn't upgrade control plane: the API server went away"
                    .to_string(),
            ),
            StaticPods::NoKubelet => Some(no_kubelet_error(node)),
            StaticPods::GateRefused(component) => Some(rolled_back_error(node, component)),
        }
    }
}

/// The control-plane phase's change to `node`'s static pods. Real kubeadm
/// writes the new manifests and waits (5 minutes) for the kubelet to restart
/// each component; with no kubelet running it times out and rolls back. The
/// sim fails at once with the same words.
pub(super) fn upgrade_static_pods(
    env: &Env,
    node: &str,
    to: &str,
    phase_runs: bool,
) -> Result<StaticPods> {
    if !phase_runs {
        return Ok(StaticPods::Skipped);
    }
    env.shared().update_cluster(|c| {
        let now = crate::state::now();
        if !c.api_up(now) {
            return Ok(StaticPods::ApiGone);
        }
        let Some(n) = c.nodes.get_mut(node) else {
            return Ok(StaticPods::ApiGone);
        };
        if n.kubelet_running().is_none() {
            return Ok(StaticPods::NoKubelet);
        }
        if let Some(component) = refused_component(&c.control_plane_args, to) {
            // Every manifest goes back, the ones already moved too: the
            // node keeps its old static pods.
            return Ok(StaticPods::GateRefused(component));
        }
        let Some(n) = c.nodes.get_mut(node) else {
            return Ok(StaticPods::ApiGone);
        };
        n.control_plane_version = Some(to.to_string());
        crate::etcd_pod::tag::upgraded_by_kubeadm(c, node, to);
        c.resource_version += 1;
        Ok(StaticPods::Upgraded)
    })
}

fn no_kubelet_error(node: &str) -> String {
    rolled_back_error(node, "kube-apiserver")
}

/// kubeadm's words when a component's new static pod did not come up in
/// time and `rollbackOldManifests` (cmd/kubeadm/app/phases/upgrade/staticpods.go)
/// moved every backed-up manifest back.
fn rolled_back_error(node: &str, component: &str) -> String {
    format!(
        "error execution phase control-plane: couldn't complete the upgrade for the control plane components on this \
         node: [upgrade/apply] FATAL: couldn't upgrade control plane. kubeadm has tried to recover everything into the \
         earlier state. Errors faced: static Pod hash for component {component} on Node {node} did not change after \
         {}: timed out waiting for the condition",
        go_duration(300.0)
    )
}

/// The first component, in kubeadm's order (`ControlPlaneComponents`:
/// kube-apiserver, kube-controller-manager, kube-scheduler), whose
/// `--feature-gates` in the ClusterConfiguration names a gate the `to`
/// binaries no longer know, or sets one they lock to the other value
/// (`crate::feature_gates::refusal`): that component exits at start
/// (`unrecognized feature gate`), so its new pod never comes up.
pub(super) fn refused_component(
    args: &std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
    to: &str,
) -> Option<&'static str> {
    let minor = KubeVersion::parse(to)?.minor;
    [
        ("apiServer", "kube-apiserver"),
        ("controllerManager", "kube-controller-manager"),
        ("scheduler", "kube-scheduler"),
    ]
    .into_iter()
    .find(|(key, _)| {
        args.get(*key)
            .and_then(|a| a.get("feature-gates"))
            .is_some_and(|gates| {
                crate::feature_gates::refusal(minor, crate::feature_gates::gate_pairs(gates))
                    .is_some()
            })
    })
    .map(|(_, component)| component)
}

/// The static pods of `node` now run `version`: on the record.
pub(super) fn record_static_pods(env: &mut Env, node: &str, version: &str) {
    let event = crate::state::Event {
        t: crate::state::now(),
        node: node.to_string(),
        argv: vec!["(static-pods)".into()],
        result: "ok".into(),
        pins: env.pins(),
        version: Some(version.to_string()),
        ..Default::default()
    };
    if let Err(e) = env.shared().record(&event) {
        complain!(
            env,
            "fleetsim: warning: could not record (static-pods): {e:#}"
        );
    }
}

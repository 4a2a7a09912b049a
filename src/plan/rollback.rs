//! `fleetctl rollback NODE…`: which image each named node goes back to, or
//! why it may not. Pure: decided from the gathered facts, before anything
//! is touched.
//!
//! A node goes back to the newest kubernetes image it keeps in
//! `/opt/extensions/kubernetes/` that is older than the one it runs: the
//! previous minor after a hop (the clean-up phase keeps it for this), or an
//! older patch of its minor. The result must stay inside the skew policy
//! (kubernetes.io/releases/version-skew-policy, "kubelet": never newer than
//! a kube-apiserver, at most three minors older since v1.28; kubeadm's own
//! page says the same since kubernetes/website#44815): the newest
//! kube-apiserver is the one kubeadm-config names (`upgrade apply` moved it
//! there), the oldest is the oldest control plane's.

use crate::inventory::Role;
use crate::node::rollback_image;
use crate::version::{Minor, Version};

use super::model::{Action, Component, Hop, HopKind, Phase, PhaseKind, Step};
use super::rollback_containerd::{ContainerdBack, bare, containerd_back, pin_back};
use super::state::{FleetNode, FleetState};

/// How many minors a kubelet may lag the newest kube-apiserver.
pub const KUBELET_SKEW: u64 = 3;

/// One node's way back.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    pub node: String,
    pub role: Role,
    /// The kubelet it runs.
    pub from: Version,
    /// The kept image it boots next.
    pub to: Version,
    /// The sysupdate config pinned to `to`'s minor, so sysupdate brings
    /// patches of that minor only (an [`Action::Pin`]).
    pub pin: Action,
    /// containerd back too, when the same reboot changed it.
    pub containerd: Option<ContainerdBack>,
}

impl Rollback {
    /// Where the node goes back to: `v1.34.2`, `v1.34.2 and containerd 2.1.4`.
    pub fn to_text(&self) -> String {
        match &self.containerd {
            None => self.to.to_string(),
            Some(c) => format!("{} and containerd {}", self.to, bare(&c.to)),
        }
    }

    /// From where to where, for the journal.
    pub fn from_to(&self) -> String {
        let mut text = format!("from {} back to {}", self.from, self.to);
        if let Some(c) = &self.containerd {
            text.push_str(&format!("; {}", c.from_to()));
        }
        text
    }
}

/// The rollbacks of `names`, in inventory order, or every reason one of
/// them may not go back (then nothing is done at all).
pub fn rollbacks(state: &FleetState, names: &[String]) -> Result<Vec<Rollback>, Vec<String>> {
    let mut problems = Vec::new();
    for name in names {
        if !state.nodes.iter().any(|n| &n.name == name) {
            problems.push(format!("{name} is not a node of the inventory"));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let (newest, oldest) =
        super::rollback_skew::apiserver_bounds(&state.cluster, oldest_apiserver(state));
    let mut out = Vec::new();
    for node in state.nodes.iter().filter(|n| names.contains(&n.name)) {
        match one(state, node, newest, oldest) {
            Ok(r) => out.push(r),
            Err(why) => problems.push(why),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn one(
    state: &FleetState,
    node: &FleetNode,
    newest: Option<Minor>,
    oldest: Option<Minor>,
) -> Result<Rollback, String> {
    let name = &node.name;
    let k8s = &node.facts.kubernetes;
    let Some(from) = k8s.running.clone() else {
        return Err(format!(
            "{name}: its kubelet's version is unknown (no kubelet runs), so there is nothing to go \
             back from; fix its kubelet first"
        ));
    };
    let Some(to) = rollback_image(k8s).cloned() else {
        let kept: Vec<String> = k8s.images.iter().map(Version::to_string).collect();
        return Err(format!(
            "{name}: no kubernetes image older than {from} is kept in /opt/extensions/kubernetes/ \
             (it holds {}): there is nothing to go back to",
            if kept.is_empty() {
                "none".to_string()
            } else {
                kept.join(", ")
            }
        ));
    };
    let Some(newest) = newest else {
        return Err(format!(
            "{name}: the cluster's version (kubeadm-config) is unknown, so whether a {to} kubelet \
             would be within the skew policy cannot be told"
        ));
    };
    let behind = newest.minor.saturating_sub(to.minor().minor);
    if to.minor().major != newest.major || behind > KUBELET_SKEW {
        let own = node.role == Role::ControlPlane
            && node
                .facts
                .kubeadm_step
                .as_ref()
                .is_some_and(|v| v.minor() == newest);
        let whose = if own {
            format!(
                "its own static pods were upgraded by kubeadm to {newest}, and a {to} kubelet would \
                 run them {behind} minors behind"
            )
        } else {
            format!("a {to} kubelet would be {behind} minors behind the {newest} kube-apiserver")
        };
        return Err(format!(
            "{name}: {whose}; the skew policy allows at most {KUBELET_SKEW}"
        ));
    }
    if let Some(oldest) = oldest
        && to.minor() > oldest
    {
        return Err(format!(
            "{name}: a {to} kubelet would be newer than the {oldest} kube-apiserver of a control \
             plane; the skew policy never allows that"
        ));
    }
    let too_new = super::rollback_gates::unknown_to(node, &to);
    if !too_new.is_empty() {
        return Err(too_new.join("; "));
    }
    let pin = pin_back(Component::Kubernetes, k8s, to.minor(), &state.hub)
        .map_err(|e| format!("{name}: {e:#}"))?;
    let containerd = containerd_back(state, name, &node.facts)?;
    Ok(Rollback {
        node: name.clone(),
        role: node.role,
        from,
        to,
        pin,
        containerd,
    })
}

/// One node's rollback as the steps the script runs: its pin, its stage and
/// its roll, in a hop of its own (`fleetctl rollback`, and `apply
/// --on-failure rollback`). Nothing of it is saved: a rollback has no plan
/// file.
pub fn rollback_hop(r: &Rollback) -> Hop {
    let kind = match r.role {
        Role::ControlPlane => PhaseKind::ControlPlaneReboots,
        Role::Worker => PhaseKind::WorkerReboots,
    };
    let mut steps = vec![
        Step::new(&r.node, r.pin.clone()),
        Step::new(
            &r.node,
            Action::Stage {
                component: Component::Kubernetes,
                minor: r.to.minor(),
                expect: Some(r.to.clone()),
            },
        ),
    ];
    // In the same reboot: kubernetes alone under the containerd that broke
    // it would fail the same way.
    if let Some(c) = &r.containerd {
        steps.push(Step::new(&r.node, c.pin.clone()));
        steps.push(Step::new(
            &r.node,
            Action::Stage {
                component: Component::Containerd,
                minor: c.to.minor(),
                expect: Some(c.to.clone()),
            },
        ));
    }
    steps.push(Step::new(&r.node, Action::Roll));
    Hop {
        kind: HopKind::Converge,
        minor: r.to.minor(),
        version: Some(r.to.clone()),
        kubeadm: false,
        sha256: None,
        phases: vec![Phase { kind, steps }],
        checks: Vec::new(),
        skip_system_verification: Vec::new(),
    }
}

/// The oldest kube-apiserver of the control planes: each runs the version
/// of its last kubeadm step, or (never stepped by fleetctl) its kubelet's,
/// as kubeadm init left it.
fn oldest_apiserver(state: &FleetState) -> Option<Minor> {
    state
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane)
        .filter_map(|n| {
            let step = n.facts.kubeadm_step.as_ref().map(Version::minor);
            let kubelet = n.facts.kubernetes.running.as_ref().map(Version::minor);
            step.max(kubelet)
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testkit::*;

    fn state(cluster: &str) -> FleetState {
        fleet(cluster)
            .cp("cp-1", cluster)
            .worker("w-1", cluster)
            .worker("w-2", cluster)
            .build()
    }

    fn with_images(mut s: FleetState, node: &str, images: &[&str]) -> FleetState {
        let n = s.nodes.iter_mut().find(|n| n.name == node).unwrap();
        n.facts.kubernetes.images = images.iter().map(|i| v(i)).collect();
        s
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_node_goes_back_to_the_newest_older_image_it_keeps_pinned_to_its_minor() {
        let s = with_images(state("v1.35.3"), "w-1", &["v1.34.1", "v1.34.2", "v1.35.3"]);
        let r = rollbacks(&s, &names(&["w-1"])).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].from.clone(), r[0].to.clone()),
            (v("v1.35.3"), v("v1.34.2"))
        );
        match &r[0].pin {
            Action::Pin { minor, config, .. } => {
                assert_eq!(*minor, m("v1.34"));
                assert!(
                    config.contains("MatchPattern=kubernetes-v1.34.@v-%a.raw"),
                    "{config}"
                );
            }
            other => panic!("{other:?}"),
        }
        // An older patch of the running minor is the previous image too.
        let s = with_images(state("v1.35.3"), "w-1", &["v1.34.2", "v1.35.1", "v1.35.3"]);
        assert_eq!(rollbacks(&s, &names(&["w-1"])).unwrap()[0].to, v("v1.35.1"));
    }

    #[test]
    fn no_kept_image_an_unknown_node_or_a_broken_skew_is_refused() {
        let s = with_images(state("v1.35.3"), "w-1", &["v1.35.3"]);
        let err = rollbacks(&s, &names(&["w-1", "w-2"])).unwrap_err();
        assert_eq!(err.len(), 2, "{err:?}");
        assert!(
            err[0].starts_with("w-1: no kubernetes image older than v1.35.3"),
            "{err:?}"
        );
        let err = rollbacks(&s, &names(&["w-9"])).unwrap_err();
        assert_eq!(err, vec!["w-9 is not a node of the inventory"]);
        let s = with_images(state("v1.37.1"), "w-1", &["v1.33.9", "v1.37.1"]);
        let err = rollbacks(&s, &names(&["w-1"])).unwrap_err();
        assert_eq!(
            err,
            vec![
                "w-1: a v1.33.9 kubelet would be 4 minors behind the v1.37 kube-apiserver; the \
                 skew policy allows at most 3"
            ]
        );
        // Three behind is allowed.
        let s = with_images(state("v1.37.1"), "w-1", &["v1.34.9", "v1.37.1"]);
        assert_eq!(rollbacks(&s, &names(&["w-1"])).unwrap()[0].to, v("v1.34.9"));
    }

    #[test]
    fn a_gate_the_older_kubelet_does_not_know_yet_refuses_the_rollback() {
        let mut s = with_images(state("v1.36.2"), "w-1", &["v1.35.3", "v1.36.2"]);
        let n = s.nodes.iter_mut().find(|n| n.name == "w-1").unwrap();
        n.facts.cgroup.kubelet_config = Some(
            "kind: KubeletConfiguration\nfeatureGates:\n  WorkloadAwarePreemption: true\n".into(),
        );
        let err = rollbacks(&s, &names(&["w-1"])).unwrap_err();
        assert!(
            err[0].starts_with(
                "w-1: /var/lib/kubelet/config.yaml (featureGates) sets feature gate \
                 WorkloadAwarePreemption, added in v1.36"
            ),
            "{err:?}"
        );
        assert!(
            err[0].contains("the v1.35.3 kubelet would refuse to start"),
            "{err:?}"
        );
        // A flag file's `--feature-gates` counts the same.
        let n = s.nodes.iter_mut().find(|n| n.name == "w-1").unwrap();
        n.facts.cgroup.kubelet_config = None;
        n.facts.kubelet_files.insert(
            "/etc/default/kubelet".into(),
            "KUBELET_EXTRA_ARGS=--feature-gates=GangScheduling=true\n".into(),
        );
        assert_eq!(rollbacks(&s, &names(&["w-1"])).unwrap()[0].to, v("v1.35.3"));
        let n = s.nodes.iter_mut().find(|n| n.name == "w-1").unwrap();
        n.facts.kubelet_files.insert(
            "/etc/default/kubelet".into(),
            "KUBELET_EXTRA_ARGS=--feature-gates=WorkloadAwarePreemption=true\n".into(),
        );
        let err = rollbacks(&s, &names(&["w-1"])).unwrap_err();
        assert!(err[0].contains("/etc/default/kubelet"), "{err:?}");
    }

    #[test]
    fn a_control_plane_whose_static_pods_kubeadm_upgraded_says_so() {
        let mut s = with_images(state("v1.37.1"), "cp-1", &["v1.33.9", "v1.37.1"]);
        s.nodes[0].facts.kubeadm_step = Some(v("v1.37.1"));
        let err = rollbacks(&s, &names(&["cp-1"])).unwrap_err();
        assert!(
            err[0].starts_with("cp-1: its own static pods were upgraded by kubeadm to v1.37"),
            "{err:?}"
        );
    }

    #[test]
    fn the_running_kube_apiservers_bound_the_skew_not_kubeadm_config_alone() {
        let mut s = fleet("v1.36.2")
            .cp("cp-1", "v1.36.2")
            .worker("w-1", "v1.36.2")
            .build();
        s.nodes[1].facts.kubernetes.images = vec![v("v1.33.9"), v("v1.36.2")];
        // kubeadm-config alone: v1.33 is three minors behind v1.36, allowed.
        assert_eq!(
            rollbacks(&s, &["w-1".to_string()]).unwrap()[0].to,
            v("v1.33.9")
        );
        // A kube-apiserver already runs v1.37: four behind, refused.
        s.cluster.apiservers = vec![v("v1.36.2"), v("v1.37.1")];
        let err = rollbacks(&s, &["w-1".to_string()]).unwrap_err();
        assert_eq!(
            err,
            vec![
                "w-1: a v1.33.9 kubelet would be 4 minors behind the v1.37 kube-apiserver; the \
                 skew policy allows at most 3"
            ]
        );
    }
}

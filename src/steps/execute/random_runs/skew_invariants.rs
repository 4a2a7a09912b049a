//! The rules every random run of `super` keeps, in one place: checked
//! after every effect of the script (`super::model_world`) and after every
//! step of a roll (through `FakeFleet::observe`), on a neutral view of the
//! fleet ([`FleetNow`]) both build.
//!
//! The version skew policy (kubernetes/website,
//! `content/en/releases/version-skew-policy.md`, "kubelet"): "kubelet must
//! not be newer than kube-apiserver" and "may be up to three minor
//! versions older than kube-apiserver"; in an HA cluster whose
//! kube-apiserver instances differ, a kubelet newer than the oldest
//! instance is not supported (the page's example after that rule).
//! Its "Supported component upgrade order" puts kube-apiserver first and
//! the kubelets after, and kubeadm's upgrade page
//! (`content/en/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade.md`)
//! runs `kubeadm upgrade apply` on the first control plane, `kubeadm
//! upgrade node` on the others, then each control plane's kubelet, then
//! the workers' (`upgrade node`, drain, kubelet, uncordon). fleetctl's own
//! rules come from the same place (`crate::plan::KUBELET_SKEW`).

use std::collections::BTreeMap;

use crate::version::{Minor, Version};

/// One node as the rules see it.
#[derive(Debug, Clone)]
pub(super) struct NodeNow {
    pub(super) name: String,
    pub(super) control_plane: bool,
    pub(super) up: bool,
    pub(super) ready: bool,
    pub(super) cordoned: bool,
    /// The kubelet it runs (the last it ran, while down).
    pub(super) kubelet: Version,
    /// What it boots next (a power cut would boot it).
    pub(super) staged: Version,
    /// The minor of its last kubeadm step (`upgrade apply` or `node`).
    pub(super) kubeadm: Option<Minor>,
}

/// The fleet as the rules see it.
#[derive(Debug, Clone)]
pub(super) struct FleetNow {
    pub(super) nodes: Vec<NodeNow>,
    /// Each control plane's kube-apiserver: where its last kubeadm step
    /// left its static pods.
    pub(super) apiservers: BTreeMap<String, Minor>,
    /// kubeadm-config's version: the newest kube-apiserver.
    pub(super) cluster: Minor,
    /// How many nodes may be out of service at once: one control plane,
    /// or `--max-unavailable` workers.
    pub(super) max_out: usize,
}

/// Every breach of the rules after `after` (a step's words), empty when
/// none.
pub(super) fn check(now: &FleetNow, after: &str) -> Vec<String> {
    let mut breaches = Vec::new();
    let mut breach = |text: String| breaches.push(format!("after `{after}`: {text}"));
    let oldest_api = now.apiservers.values().min().copied();
    let newest_api = now
        .apiservers
        .values()
        .max()
        .copied()
        .unwrap_or(now.cluster);
    let oldest_cp = now
        .nodes
        .iter()
        .filter(|n| n.control_plane)
        .map(|n| n.kubelet.minor())
        .min();
    let mut out = Vec::new();
    for n in &now.nodes {
        let (kubelet, staged) = (n.kubelet.minor(), n.staged.minor());
        if let Some(api) = oldest_api {
            // Never newer than any kube-apiserver, running or armed.
            if kubelet > api {
                breach(format!(
                    "{} runs kubelet {} with a kube-apiserver at {api}",
                    n.name, n.kubelet
                ));
            }
            if staged > api {
                breach(format!(
                    "{} would boot kubelet {} with a kube-apiserver at {api}",
                    n.name, n.staged
                ));
            }
        }
        // At most three minors older than the newest kube-apiserver.
        if kubelet.minor + crate::plan::KUBELET_SKEW < newest_api.minor {
            breach(format!(
                "{} runs kubelet {} with the API at {newest_api}",
                n.name, n.kubelet
            ));
        }
        // kubeadm's step on a node comes after `upgrade apply` moved the
        // cluster to its minor, and a node armed with a new minor had its
        // own kubeadm step for it.
        if n.kubeadm.is_some_and(|k| k > now.cluster) {
            breach(format!(
                "{}'s kubeadm step ran before `upgrade apply` to its minor",
                n.name
            ));
        }
        if staged > kubelet && n.kubeadm != Some(staged) {
            breach(format!(
                "{} staged {} before its kubeadm step for it",
                n.name, n.staged
            ));
        }
        // Control planes before workers within a hop.
        if !n.control_plane && oldest_cp.is_some_and(|cp| kubelet > cp) {
            breach(format!(
                "worker {} runs {} before every control plane does",
                n.name, n.kubelet
            ));
        }
        if !n.up || !n.ready || n.cordoned {
            out.push(n.name.as_str());
        }
    }
    if out.len() > now.max_out {
        breach(format!(
            "{out:?} out of service at once (at most {})",
            now.max_out
        ));
    }
    breaches
}

/// The step that reboots `node`: onto a newer minor only after its
/// kubeadm step for that minor.
pub(super) fn check_reboot(now: &FleetNow, node: &str, after: &str) -> Vec<String> {
    let Some(n) = now.nodes.iter().find(|n| n.name == node) else {
        return vec![format!(
            "after `{after}`: {node} is not a node of the fleet"
        )];
    };
    let staged = n.staged.minor();
    match staged > n.kubelet.minor() && n.kubeadm != Some(staged) {
        true => vec![format!(
            "after `{after}`: {node} rebooted into {} before its kubeadm step",
            n.staged
        )],
        false => Vec::new(),
    }
}

/// Each rule, broken on its own, is reported (so none of them passes
/// vacuously in the property tests).
#[test]
fn each_rule_broken_alone_is_reported() {
    let v = |s: &str| -> Version { s.parse().unwrap() };
    let m = |s: &str| -> Minor { s.parse().unwrap() };
    let node = |name: &str, control_plane: bool, kubelet: &str| NodeNow {
        name: name.into(),
        control_plane,
        up: true,
        ready: true,
        cordoned: false,
        kubelet: v(kubelet),
        staged: v(kubelet),
        kubeadm: None,
    };
    let fleet = FleetNow {
        nodes: vec![node("cp-1", true, "v1.34.1"), node("w-1", false, "v1.34.1")],
        apiservers: [("cp-1".to_string(), m("v1.34"))].into(),
        cluster: m("v1.34"),
        max_out: 1,
    };
    assert_eq!(check(&fleet, "nothing"), Vec::<String>::new());
    let broken = |f: &dyn Fn(&mut FleetNow), words: &str| {
        let mut now = fleet.clone();
        f(&mut now);
        let breaches = check(&now, "the step");
        assert!(
            breaches.iter().any(|b| b.contains(words)),
            "{words}: {breaches:?}"
        );
    };
    broken(
        &|f| f.nodes[1].kubelet = v("v1.35.0"),
        "runs kubelet v1.35.0 with a kube-apiserver",
    );
    broken(
        &|f| f.nodes[1].staged = v("v1.35.0"),
        "would boot kubelet v1.35.0",
    );
    broken(
        &|f| f.nodes[1].kubelet = v("v1.30.9"),
        "runs kubelet v1.30.9 with the API at",
    );
    broken(
        &|f| f.nodes[1].kubeadm = Some(m("v1.35")),
        "before `upgrade apply`",
    );
    broken(
        &|f| {
            f.apiservers.insert("cp-1".into(), m("v1.35"));
            f.cluster = m("v1.35");
            f.nodes[1].staged = v("v1.35.0");
        },
        "w-1 staged v1.35.0 before its kubeadm step",
    );
    broken(
        &|f| {
            f.apiservers.insert("cp-1".into(), m("v1.35"));
            f.cluster = m("v1.35");
            f.nodes[1].kubelet = v("v1.35.0");
        },
        "worker w-1 runs v1.35.0 before every control plane",
    );
    broken(
        &|f| (f.nodes[0].cordoned, f.nodes[1].ready) = (true, false),
        "out of service at once",
    );
    let mut armed = fleet.clone();
    (armed.cluster, armed.nodes[1].staged) = (m("v1.35"), v("v1.35.0"));
    assert_eq!(check_reboot(&armed, "w-1", "reboot w-1").len(), 1);
    armed.nodes[1].kubeadm = Some(m("v1.35"));
    assert_eq!(
        check_reboot(&armed, "w-1", "reboot w-1"),
        Vec::<String>::new()
    );
}

//! Which nodes `fleetctl reboot` takes through a rolling reboot, and why:
//! the nodes whose next boot changes something (a staged Flatcar update, a
//! staged sysext patch of the minor they run) or that ask for one
//! (`/run/reboot-required`), or the nodes the operator names. A node with
//! a *new minor* staged is refused: booting it needs that minor's kubeadm
//! step first, which only `plan`/`apply` do. Pure.

use std::fmt;

use crate::inventory::{Inventory, Role};
use crate::version::{Minor, Version};

use super::batches::{MaxUnavailable, batches};
use super::state::FleetState;

/// One node to reboot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reboot {
    pub node: String,
    pub role: Role,
    /// The minor it runs, and will still run after the reboot.
    pub minor: Minor,
    /// Why: `kubernetes v1.34.6`, `Flatcar 4152.2.1`, `/run/reboot-required`,
    /// or `asked for` when named without a reason of its own.
    pub reasons: Vec<String>,
}

/// Why `fleetctl reboot` refuses: nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebootRefusal {
    UnknownNode(String),
    /// A node that boots another minor than it runs.
    NewMinorStaged {
        node: String,
        running: Version,
        staged: Version,
    },
    /// The node's kubelet cannot be read, so the minor it stays on is unknown.
    UnknownRunning(String),
}

impl fmt::Display for RebootRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RebootRefusal::UnknownNode(n) => {
                write!(f, "`{n}` is not a node of the inventory")
            }
            RebootRefusal::NewMinorStaged {
                node,
                running,
                staged,
            } => write!(
                f,
                "{node} has kubernetes {staged} staged while it runs {running}: booting a new minor needs \
                 its kubeadm step first, and the control plane before it. Use `fleetctl plan {}` and \
                 `fleetctl apply`, which do both",
                staged.minor()
            ),
            RebootRefusal::UnknownRunning(n) => write!(
                f,
                "{n}: cannot tell which kubelet it runs, so not which minor it would boot; check \
                 `fleetctl status`"
            ),
        }
    }
}

impl std::error::Error for RebootRefusal {}

/// The nodes to reboot, in inventory order: `named` when given (each must
/// exist), otherwise every node that needs a reboot. Refuses any chosen
/// node that would boot a new minor.
pub fn reboots(state: &FleetState, named: &[String]) -> Result<Vec<Reboot>, RebootRefusal> {
    if let Some(unknown) = named
        .iter()
        .find(|n| !state.nodes.iter().any(|x| &x.name == *n))
    {
        return Err(RebootRefusal::UnknownNode(unknown.clone()));
    }
    let mut out = Vec::new();
    for node in &state.nodes {
        let mut reasons = node.facts.reboot_reasons();
        let asked = named.contains(&node.name);
        if !(asked || (named.is_empty() && !reasons.is_empty())) {
            continue;
        }
        let k8s = &node.facts.kubernetes;
        let Some(running) = &k8s.running else {
            return Err(RebootRefusal::UnknownRunning(node.name.clone()));
        };
        if let Some(staged) = &k8s.staged
            && staged.minor() != running.minor()
        {
            return Err(RebootRefusal::NewMinorStaged {
                node: node.name.clone(),
                running: running.clone(),
                staged: staged.clone(),
            });
        }
        if reasons.is_empty() {
            reasons.push("asked for".to_string());
        }
        out.push(Reboot {
            node: node.name.clone(),
            role: node.role,
            minor: running.minor(),
            reasons,
        });
    }
    Ok(out)
}

/// The order of the reboots: control planes alone, in inventory order,
/// then workers in batches of one zone and one minor (the minor each must
/// still boot), at most `max` of them down at once.
pub fn reboot_batches(
    inv: &Inventory,
    chosen: &[Reboot],
    max: MaxUnavailable,
) -> Vec<(Vec<String>, Minor)> {
    let mut out: Vec<(Vec<String>, Minor)> = chosen
        .iter()
        .filter(|r| r.role == Role::ControlPlane)
        .map(|r| (vec![r.node.clone()], r.minor))
        .collect();
    let workers_total = inv.nodes.iter().filter(|n| n.role == Role::Worker).count();
    let mut minors: Vec<Minor> = chosen
        .iter()
        .filter(|r| r.role == Role::Worker)
        .map(|r| r.minor)
        .collect();
    minors.sort();
    minors.dedup();
    for minor in minors {
        let nodes: Vec<(&str, Option<&str>)> = chosen
            .iter()
            .filter(|r| r.role == Role::Worker && r.minor == minor)
            .map(|r| {
                let zone = inv.node(&r.node).and_then(|n| n.zone.as_deref());
                (r.node.as_str(), zone)
            })
            .collect();
        for batch in batches(&nodes, max.of(workers_total)) {
            out.push((batch.into_iter().map(String::from).collect(), minor));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testkit::{fleet, m, v};

    fn names(r: &[Reboot]) -> Vec<&str> {
        r.iter().map(|r| r.node.as_str()).collect()
    }

    #[test]
    fn only_nodes_that_need_it_unless_named() {
        let state = fleet("v1.35.3")
            .cp("cp-1", "v1.35.3")
            .worker("w-1", "v1.35.3")
            .worker("w-2", "v1.35.3")
            .worker("w-3", "v1.35.3")
            .with("w-1", |f| f.kubernetes.staged = Some(v("v1.35.4")))
            .with("w-2", |f| f.os.staged = Some("4152.2.1".into()))
            .with("cp-1", |f| f.reboot_required = true)
            .build();
        let all = reboots(&state, &[]).unwrap();
        assert_eq!(names(&all), ["cp-1", "w-1", "w-2"]);
        assert_eq!(all[1].reasons, ["kubernetes v1.35.4"]);
        assert_eq!(all[2].reasons, ["Flatcar 4152.2.1"]);
        assert_eq!(all[2].minor, Minor::new(1, 35));
        let named = reboots(&state, &["w-3".to_string()]).unwrap();
        assert_eq!(names(&named), ["w-3"]);
        assert_eq!(named[0].reasons, ["asked for"]);
        assert_eq!(
            reboots(&state, &["w-9".to_string()]),
            Err(RebootRefusal::UnknownNode("w-9".into()))
        );
    }

    #[test]
    fn a_staged_new_minor_is_refused_with_the_way_forward() {
        let state = fleet("v1.35.3")
            .cp("cp-1", "v1.35.3")
            .worker("w-1", "v1.35.3")
            .with("w-1", |f| f.kubernetes.staged = Some(v("v1.36.1")))
            .build();
        let err = reboots(&state, &[]).unwrap_err();
        assert_eq!(
            err,
            RebootRefusal::NewMinorStaged {
                node: "w-1".into(),
                running: v("v1.35.3"),
                staged: v("v1.36.1"),
            }
        );
        assert!(err.to_string().contains("`fleetctl plan v1.36`"), "{err}");
        // Named or not: it is refused either way.
        assert!(reboots(&state, &["w-1".to_string()]).is_err());
        assert_eq!(
            names(&reboots(&state, &["cp-1".to_string()]).unwrap()),
            ["cp-1"]
        );
    }

    #[test]
    fn control_planes_go_alone_then_workers_by_minor_and_zone() {
        let yaml = "kubernetes_version: v1.35\nsysupdate:\n  hub: https://hub.example\nnodes:\n\
            \x20 - {name: cp-1, address: a1, role: control-plane}\n\
            \x20 - {name: cp-2, address: a2, role: control-plane}\n\
            \x20 - {name: w-1, address: b1, role: worker, zone: a}\n\
            \x20 - {name: w-2, address: b2, role: worker, zone: b}\n\
            \x20 - {name: w-3, address: b3, role: worker, zone: a}\n\
            \x20 - {name: w-4, address: b4, role: worker, zone: a}\n";
        let inv = crate::inventory::parse(yaml, std::path::Path::new("/inv.yaml")).unwrap();
        let reboot = |node: &str, role: Role, minor: &str| Reboot {
            node: node.into(),
            role,
            minor: m(minor),
            reasons: vec!["asked for".into()],
        };
        let chosen = [
            reboot("cp-1", Role::ControlPlane, "v1.35"),
            reboot("cp-2", Role::ControlPlane, "v1.35"),
            reboot("w-1", Role::Worker, "v1.35"),
            reboot("w-2", Role::Worker, "v1.35"),
            reboot("w-3", Role::Worker, "v1.35"),
            reboot("w-4", Role::Worker, "v1.34"),
        ];
        let order = |max: &str| -> Vec<(Vec<String>, Minor)> {
            reboot_batches(&inv, &chosen, max.parse().unwrap())
        };
        let names = |b: &[(Vec<String>, Minor)]| -> Vec<String> {
            b.iter()
                .map(|(n, minor)| format!("{}@{minor}", n.join("+")))
                .collect()
        };
        // Two at a time: never two zones, never two minors in one batch;
        // the older minor's workers first.
        assert_eq!(
            names(&order("2")),
            [
                "cp-1@v1.35",
                "cp-2@v1.35",
                "w-4@v1.34",
                "w-1+w-3@v1.35",
                "w-2@v1.35"
            ]
        );
        // One at a time (the default): every worker alone.
        assert_eq!(order("1").len(), 6);
    }
}

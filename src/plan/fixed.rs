//! The plan of a command that plans no upgrade (`fleetctl reboot`,
//! `fleetctl rollback`): apply's runner and journal work from a [`Plan`],
//! so these commands hand it one with the steps they decided, the cluster's
//! own minor as its target, and nothing to save. Pure.

use crate::inventory::Inventory;
use crate::version::TargetVersion;

use super::fingerprint::Fingerprint;
use super::model::{Hop, Plan, PlannedNode};
use super::state::FleetState;

/// A plan of `hops` (none for a reboot) over the fleet as it is: its target
/// is the minor the cluster runs, or the inventory's when kubeadm-config
/// says none.
pub fn fixed_plan(inv: &Inventory, state: &FleetState, hops: Vec<Hop>) -> Plan {
    let minor = state
        .cluster
        .version
        .as_ref()
        .map_or(inv.kubernetes_version, |v| v.minor());
    Plan {
        requested: TargetVersion::Minor(minor),
        target: minor,
        cluster_from: state.cluster.version.clone(),
        hub: inv.hub.clone(),
        containerd: inv.containerd_version,
        nodes: PlannedNode::of_fleet(state),
        hops,
        warnings: Vec::new(),
        fingerprint: Fingerprint::of(state),
        ignored_checks: Vec::new(),
        workers: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::inventory::Role;
    use crate::plan::testkit::{fleet, m};

    const INVENTORY: &str = "kubernetes_version: v1.37\ncontainerd_version: v2.1\n\
        sysupdate:\n  hub: https://hub.example\nnodes:\n\
        \x20 - {name: cp-1, address: 10.0.0.11, role: control-plane}\n\
        \x20 - {name: w-1, address: 10.0.0.21, role: worker}\n";

    #[test]
    fn the_target_is_the_clusters_minor_and_the_nodes_are_the_fleets() {
        let inv = crate::inventory::parse(INVENTORY, Path::new("/ops/inventory.yaml")).unwrap();
        let state = fleet("v1.35.3")
            .cp("cp-1", "v1.35.3")
            .worker("w-1", "v1.35.3")
            .build();
        let plan = fixed_plan(&inv, &state, Vec::new());
        assert_eq!(plan.target, m("v1.35"));
        assert_eq!(plan.requested, TargetVersion::Minor(m("v1.35")));
        assert_eq!(plan.hub, "https://hub.example");
        assert_eq!(plan.containerd, Some(m("v2.1")));
        let nodes: Vec<(&str, Role)> = plan
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.role))
            .collect();
        assert_eq!(nodes, [("cp-1", Role::ControlPlane), ("w-1", Role::Worker)]);
        assert!(plan.hops.is_empty() && plan.warnings.is_empty());
        assert_eq!(plan.fingerprint, Fingerprint::of(&state));

        // kubeadm-config names no version: the inventory's minor.
        let mut unknown = state.clone();
        unknown.cluster.version = None;
        assert_eq!(fixed_plan(&inv, &unknown, Vec::new()).target, m("v1.37"));
    }
}

//! The planner's input: the inventory's nodes in file order (order decides
//! who runs `upgrade apply` and who reboots first), each with the facts
//! gathered from it, plus what the API server says. Planning needs every
//! node's facts, so building this refuses a fleet with a node missing.

use std::collections::BTreeMap;

use anyhow::bail;

use crate::inventory::{Inventory, Role};
use crate::node::{ClusterFacts, ClusterNode, NodeFacts};
use crate::version::Minor;

/// Everything the planner reads. No I/O happens after this is built.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetState {
    /// Base URL of the extension hub, without a trailing slash.
    pub hub: String,
    /// The containerd series the inventory pins, if it manages containerd.
    pub containerd_version: Option<Minor>,
    /// In inventory order.
    pub nodes: Vec<FleetNode>,
    pub cluster: ClusterFacts,
}

#[derive(Debug, Clone, PartialEq)]
pub struct FleetNode {
    pub name: String,
    pub role: Role,
    pub facts: NodeFacts,
}

impl FleetState {
    /// Joins the inventory with the facts gathered from each of its nodes.
    /// Refuses when a node has no facts: a plan computed without it could
    /// leave it a minor behind the API server.
    pub fn new(
        inventory: &Inventory,
        mut facts: BTreeMap<String, NodeFacts>,
        cluster: ClusterFacts,
    ) -> anyhow::Result<FleetState> {
        let missing: Vec<&str> = inventory
            .nodes
            .iter()
            .filter(|n| !facts.contains_key(&n.name))
            .map(|n| n.name.as_str())
            .collect();
        if !missing.is_empty() {
            bail!(
                "no facts from {}: planning needs every node of {}; \
                 fix its SSH access (see `fleetctl status`) and plan again",
                missing.join(", "),
                inventory.path.display()
            );
        }
        let nodes = inventory
            .nodes
            .iter()
            .filter_map(|n| {
                facts.remove(&n.name).map(|f| FleetNode {
                    name: n.name.clone(),
                    role: n.role,
                    facts: f,
                })
            })
            .collect();
        Ok(FleetState {
            hub: inventory.hub.clone(),
            containerd_version: inventory.containerd_version,
            nodes,
            cluster,
        })
    }

    /// The node `kubeadm upgrade apply` runs on: the first control-plane
    /// node in inventory order.
    pub fn first_control_plane(&self) -> Option<&FleetNode> {
        self.nodes.iter().find(|n| n.role == Role::ControlPlane)
    }

    /// What the API server says about `name`, if it knows the node.
    pub fn cluster_node(&self, name: &str) -> Option<&ClusterNode> {
        self.cluster.nodes.iter().find(|n| n.name == name)
    }

    /// `spec.unschedulable` as the API server reports it; a node the API
    /// server does not know is not cordoned.
    pub fn cordoned(&self, name: &str) -> bool {
        self.cluster_node(name).is_some_and(|n| n.cordoned)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::inventory::{HostKeyChecking, Node, SshDefaults};
    use crate::plan::testkit::{fleet, m};

    fn inventory(names: &[(&str, Role)]) -> Inventory {
        Inventory {
            path: PathBuf::from("/ops/fleet/inventory.yaml"),
            kubernetes_version: m("v1.37"),
            containerd_version: Some(m("v2.1")),
            hub: "https://hub.example".into(),
            ssh: SshDefaults {
                user: None,
                port: None,
                identity_file: None,
                known_hosts: PathBuf::from("/home/op/.ssh/known_hosts"),
                host_key_checking: HostKeyChecking::Strict,
                jump: None,
            },
            health_checks: Vec::new(),
            kured: None,
            window: None,
            provenance: Vec::new(),
            nodes: names
                .iter()
                .map(|(name, role)| Node {
                    name: name.to_string(),
                    address: format!("{name}.example"),
                    role: *role,
                    port: None,
                    user: None,
                    identity_file: None,
                    zone: None,
                })
                .collect(),
        }
    }

    fn facts_for(names: &[&str]) -> BTreeMap<String, NodeFacts> {
        let mut f = fleet("v1.36.1");
        for n in names {
            f = f.worker(n, "v1.36.1");
        }
        f.build()
            .nodes
            .into_iter()
            .map(|n| (n.name, n.facts))
            .collect()
    }

    #[test]
    fn keeps_inventory_order_roles_hub_and_containerd() {
        let inv = inventory(&[("w-1", Role::Worker), ("cp-1", Role::ControlPlane)]);
        let cluster = fleet("v1.36.1").build().cluster;
        let state = FleetState::new(&inv, facts_for(&["cp-1", "w-1"]), cluster).unwrap();
        let order: Vec<(&str, Role)> = state
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.role))
            .collect();
        assert_eq!(order, [("w-1", Role::Worker), ("cp-1", Role::ControlPlane)]);
        assert_eq!(state.hub, "https://hub.example");
        assert_eq!(state.containerd_version, Some(m("v2.1")));
        assert_eq!(state.first_control_plane().unwrap().name, "cp-1");
    }

    #[test]
    fn refuses_a_node_without_facts_and_names_it() {
        let inv = inventory(&[
            ("cp-1", Role::ControlPlane),
            ("w-1", Role::Worker),
            ("w-2", Role::Worker),
        ]);
        let cluster = fleet("v1.36.1").build().cluster;
        let err = FleetState::new(&inv, facts_for(&["cp-1"]), cluster).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.starts_with("no facts from w-1, w-2:"), "{text}");
        assert!(text.contains("/ops/fleet/inventory.yaml"), "{text}");
    }
}

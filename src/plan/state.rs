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

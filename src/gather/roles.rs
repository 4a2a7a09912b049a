//! Whether the inventory and the cluster agree on which nodes are control
//! planes. kubeadm labels every control plane's Node
//! `node-role.kubernetes.io/control-plane` (kubernetes/kubernetes
//! `cmd/kubeadm/app/phases/markcontrolplane`, `MarkControlPlane`); a node the
//! inventory calls a worker but the cluster labels a control plane (or the
//! reverse) would get the wrong kubeadm step, so nothing runs until they
//! agree. An Ansible inventory says why it gave the role (its group, or
//! `fleetctl_role` with file and line), and the message names both.

use crate::inventory::{Inventory, Role};
use crate::node::ClusterFacts;

/// One line per node whose role the cluster contradicts; nodes the cluster
/// does not list (not joined yet, or a name the cluster does not know) are
/// left to the checks that already report them.
pub fn disagreements(inv: &Inventory, cluster: &ClusterFacts) -> Vec<String> {
    let mut out = Vec::new();
    for node in &inv.nodes {
        let Some(seen) = cluster.nodes.iter().find(|c| c.name == node.name) else {
            continue;
        };
        let labelled = if seen.control_plane {
            Role::ControlPlane
        } else {
            Role::Worker
        };
        if labelled == node.role {
            continue;
        }
        let why = inv
            .provenance
            .iter()
            .find(|p| p.node == node.name && p.setting == "role")
            .map_or_else(
                || format!("{}", inv.path.display()),
                |p| format!("{}, {}", inv.path.display(), p.from),
            );
        let label = match labelled {
            Role::ControlPlane => "has",
            Role::Worker => "does not have",
        };
        out.push(format!(
            "{}: the inventory makes it a {} ({why}), but its Node {label} kubeadm's \
             node-role.kubernetes.io/control-plane label: correct the inventory (or the label), \
             then run fleetctl again",
            node.name, node.role
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::Provenance;
    use crate::node::ClusterNode;

    fn cluster(nodes: &[(&str, bool)]) -> ClusterFacts {
        ClusterFacts {
            nodes: nodes
                .iter()
                .map(|(n, cp)| ClusterNode {
                    name: n.to_string(),
                    ready: true,
                    cordoned: false,
                    kubelet_version: None,
                    control_plane: *cp,
                })
                .collect(),
            version: None,
            kube_proxy: false,
            apiservers: Vec::new(),
        }
    }

    fn inventory() -> Inventory {
        let text = "kubernetes_version: v1.37\nnodes:\n\
                    \x20 - {name: cp-1, address: 10.0.0.1, role: control-plane}\n\
                    \x20 - {name: w-1, address: 10.0.0.2, role: worker}\n";
        crate::inventory::parse(text, std::path::Path::new("/ops/inventory.yaml")).unwrap()
    }

    #[test]
    fn agreeing_roles_and_unknown_nodes_say_nothing() {
        let inv = inventory();
        assert!(disagreements(&inv, &cluster(&[("cp-1", true), ("w-1", false)])).is_empty());
        assert!(disagreements(&inv, &cluster(&[("cp-1", true)])).is_empty());
    }

    #[test]
    fn a_worker_the_cluster_labels_a_control_plane_is_named_with_both_sides() {
        let mut inv = inventory();
        inv.provenance.push(Provenance {
            node: "w-1".into(),
            setting: "role".into(),
            value: "worker".into(),
            from: "group kube_node".into(),
        });
        let found = disagreements(&inv, &cluster(&[("cp-1", true), ("w-1", true)]));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("w-1: the inventory makes it a worker"),
            "{}",
            found[0]
        );
        assert!(found[0].contains("group kube_node"), "{}", found[0]);
        assert!(found[0].contains("has kubeadm's node-role.kubernetes.io/control-plane"));
        let found = disagreements(&inv, &cluster(&[("cp-1", false), ("w-1", false)]));
        assert!(found[0].contains("does not have"), "{}", found[0]);
    }
}

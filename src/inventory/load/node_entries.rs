//! The inventory's node list read into the model: each node's keys
//! checked, then the list as a whole (no name or machine twice, at least
//! one control plane).

use std::collections::HashMap;

use serde_saphyr::Spanned;

use super::{Builder, scoped};
use crate::inventory::raw::RawNode;
use crate::inventory::{Node, validate};

impl Builder {
    pub(super) fn nodes(
        &mut self,
        raw: Spanned<Vec<RawNode>>,
        default_port: u16,
    ) -> Option<Vec<Node>> {
        if raw.value.is_empty() {
            self.problems.at(
                raw.referenced,
                "nodes: the inventory lists no nodes: add at least one control-plane node",
            );
            return None;
        }
        let mut nodes = Some(Vec::with_capacity(raw.value.len()));
        for node in &raw.value {
            let built = self.node(node);
            nodes = nodes.zip(built).map(|(mut all, one)| {
                all.push(one);
                all
            });
        }
        self.duplicate_names(&raw.value);
        self.duplicate_endpoints(&raw.value, default_port);
        let any_control_plane = raw.value.iter().any(|n| n.role.value == "control-plane");
        if !any_control_plane {
            self.problems.at(
                raw.referenced,
                "nodes: no node has role `control-plane`: fleetctl upgrades the control plane \
                 first and needs at least one",
            );
            return None;
        }
        nodes
    }

    fn node(&mut self, raw: &RawNode) -> Option<Node> {
        let label = node_label(raw);
        let scope = format!("{label}: ");
        let in_node = scoped(&scope);
        let name = self.problems.check(
            raw.name.referenced,
            validate::node_name(&raw.name.value).map(|()| raw.name.value.clone()),
        );
        let address = self.problems.check(
            raw.address.referenced,
            validate::address(&raw.address.value).map_err(&in_node),
        );
        let role = self.problems.check(
            raw.role.referenced,
            validate::role(&raw.role.value).map_err(&in_node),
        );
        let port = self.opt(raw.port.as_ref(), |p| validate::port(*p).map_err(&in_node));
        let user = self.opt(raw.user.as_ref(), |u| validate::user(u).map_err(&in_node));
        let zone = self.opt(raw.zone.as_ref(), |z| validate::zone(z).map_err(&in_node));
        let identity_file = match &raw.identity_file {
            Some(f) => self
                .identity_file(f, &format!("{label}: identity_file"))
                .map(Some),
            None => Some(None),
        };
        Some(Node {
            name: name?,
            address: address?,
            role: role?,
            port: port?,
            user: user?,
            identity_file: identity_file?,
            zone: zone?,
        })
    }

    fn duplicate_names(&mut self, nodes: &[RawNode]) {
        let mut seen: HashMap<&str, u64> = HashMap::new();
        for node in nodes {
            let name = &node.name;
            match seen.get(name.value.as_str()) {
                Some(first) => self.problems.at(
                    name.referenced,
                    format!(
                        "node name `{}` is used twice (first on line {first}): \
                         each node needs its own Kubernetes node name",
                        name.value
                    ),
                ),
                None => {
                    seen.insert(&name.value, name.referenced.line());
                }
            }
        }
    }

    /// Two nodes at the same address and port are the same machine, listed
    /// twice. A node without a port uses `ssh.port`, else 22 (a port set only
    /// in ~/.ssh/config applies to both alike, so it cannot tell them apart).
    fn duplicate_endpoints(&mut self, nodes: &[RawNode], default_port: u16) {
        let mut seen: HashMap<(String, u16), (&str, u64)> = HashMap::new();
        for node in nodes {
            let port = node.port.as_ref().map_or(default_port, |p| p.value);
            let key = (node.address.value.to_ascii_lowercase(), port);
            match seen.get(&key) {
                Some((other, line)) => self.problems.at(
                    node.address.referenced,
                    format!(
                        "{}: address {} port {port} is also node `{other}`'s (line {line}): \
                         each node must be a different machine",
                        node_label(node),
                        node.address.value
                    ),
                ),
                None => {
                    seen.insert(key, (&node.name.value, node.address.referenced.line()));
                }
            }
        }
    }
}

/// `node `cp-1``, or a placeholder when the name itself is missing.
fn node_label(node: &RawNode) -> String {
    if node.name.value.is_empty() {
        "node without a name".to_string()
    } else {
        format!("node `{}`", node.name.value)
    }
}

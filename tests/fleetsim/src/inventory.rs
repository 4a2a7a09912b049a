//! The inventory fleetctl reads for a simulated fleet, in the format of
//! fleetctl's inventory loader. Written by hand rather than serialized: the
//! layout (one flow-style line per node) is part of what a newcomer reads
//! in the demo.

use std::net::Ipv4Addr;

use crate::layout::FleetDir;
use crate::provision::NodePlan;
use crate::state::Role;
use crate::version::Minor;

pub fn render(
    fleet: &FleetDir,
    minor: &Minor,
    hub_url: &str,
    port: u16,
    nodes: &[NodePlan],
) -> String {
    let mut out = format!(
        "# A simulated fleet, written by `fleetsim up` (see docs/simulator.md).\n\
         kubernetes_version: {minor}\n\
         sysupdate:\n  hub: {hub_url}\n\
         ssh:\n  user: root\n  port: {port}\n  identity_file: {}\n  known_hosts: {}\n  host_key_checking: strict\n\
         nodes:\n",
        fleet.identity().display(),
        fleet.known_hosts().display(),
    );
    for n in nodes {
        out.push_str(&node_line(
            &n.spec.name,
            n.address,
            n.spec.role,
            n.spec.user.as_deref(),
        ));
    }
    out
}

fn node_line(name: &str, address: Ipv4Addr, role: Role, user: Option<&str>) -> String {
    let role = match role {
        Role::ControlPlane => "control-plane",
        Role::Worker => "worker",
    };
    let user = match user {
        Some(u) if u != "root" => format!(", user: {u}"),
        _ => String::new(),
    };
    format!("  - {{name: {name}, address: {address}, role: {role}{user}}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::NodeSpec;

    #[test]
    fn renders_fleetctls_format() {
        let fleet = FleetDir::new("/tmp/f");
        let mut core = NodeSpec::new("w-1", Role::Worker);
        core.user = Some("core".into());
        let nodes = [
            NodePlan {
                spec: NodeSpec::new("cp-1", Role::ControlPlane),
                address: Ipv4Addr::new(127, 100, 3, 10),
                port: 2222,
            },
            NodePlan {
                spec: core,
                address: Ipv4Addr::new(127, 100, 3, 11),
                port: 2222,
            },
        ];
        let text = render(
            &fleet,
            &Minor::parse("v1.34").unwrap(),
            "http://127.0.0.1:4000",
            2222,
            &nodes,
        );
        assert!(text.contains("\nkubernetes_version: v1.34\n"));
        assert!(text.contains("\nsysupdate:\n  hub: http://127.0.0.1:4000\n"));
        assert!(text.contains("  identity_file: /tmp/f/ssh/id_ed25519\n"));
        assert!(
            text.contains("  known_hosts: /tmp/f/ssh/known_hosts\n  host_key_checking: strict\n")
        );
        assert!(text.ends_with(
            "nodes:\n  - {name: cp-1, address: 127.100.3.10, role: control-plane}\n  - {name: w-1, address: 127.100.3.11, role: worker, user: core}\n"
        ));
    }
}

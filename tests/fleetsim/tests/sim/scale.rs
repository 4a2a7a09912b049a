//! Fleets of benchmark size. Timing is printed, never asserted
//! (tests/fleetsim/bench-up.sh measures start-up on purpose).

use std::time::Instant;

use crate::common::{run, start};
use fleetsim::Scenario;

#[test]
fn fifty_nodes_boot_and_answer() {
    let t = Instant::now();
    let fleet = start(
        Scenario::new()
            .control_planes(3)
            .workers(47)
            .kubernetes("v1.34.2"),
    );
    eprintln!("50 nodes ready in {:.2} s", t.elapsed().as_secs_f64());
    let cluster = fleet.cluster().unwrap();
    assert_eq!(cluster.nodes.len(), 50);
    assert!(cluster.nodes.values().all(|n| n.up));
    for node in ["cp-1", "w-23", "w-47"] {
        assert_eq!(run(&fleet, node, "root", "hostname").trim(), node);
    }
    let addresses: std::collections::BTreeSet<String> = fleet
        .info()
        .nodes
        .iter()
        .map(|n| n.address.clone())
        .collect();
    assert_eq!(addresses.len(), 50);
}

//! containerd's sysext, pinned as sysext-bakery names it (`containerd-2.1.@v-%a.raw`,
//! no `v`): a node pinned to 2.1 keeps its working pin, and a change of
//! containerd minor really stages and boots the new one.

use std::fs;

use fleetctl::plan::Plan;

use super::support::{self, Fleet};

use super::support::run_on as run;

/// Sets the inventory's `containerd_version`.
fn pin_containerd(fleet: &Fleet, minor: &str) {
    let path = fleet.inventory();
    let text = fs::read_to_string(&path).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("containerd_version:"))
        .map(|l| {
            if l.starts_with("kubernetes_version:") {
                format!("{l}\ncontainerd_version: {minor}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    fs::write(&path, text).unwrap();
}

fn node_says(fleet: &Fleet, node: &str, cmd: &str) -> String {
    fleet.ssh_ok(node, "root", cmd).unwrap()
}

#[test]
fn a_node_pinned_to_containerd_2_1_keeps_its_pin_and_a_new_minor_really_stages() {
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.3");
    scenario.containerd = Some("2.1.4".into());
    scenario.hub.containerd = vec!["2.2.0".into()];
    let fleet = support::start(scenario);
    // The hub's newest v1.34 patch: kubernetes has nothing to do here.
    assert_eq!(
        support::newest_on_hub(&fleet, "v1.34").to_string(),
        "v1.34.3"
    );
    let conf = "grep MatchPattern /etc/sysupdate.containerd.d/containerd.conf";

    pin_containerd(&fleet, "v2.1");
    let out = run(&fleet, &["plan", "v1.34", "--output", "json"]).expect_code(0);
    let plan: Plan = serde_json::from_str(&out.stdout).unwrap();
    assert!(
        plan.is_noop(),
        "the bakery's own 2.1 pin is already right: {:?}",
        plan.hops
    );
    for node in ["cp-1", "w-1"] {
        assert_eq!(
            node_says(&fleet, node, conf),
            "MatchPattern=containerd-2.1.@v-%a.raw\n"
        );
    }

    pin_containerd(&fleet, "v2.2");
    let text = run(&fleet, &["plan", "v1.34"]).expect_code(0);
    assert!(
        text.stdout
            .contains("+MatchPattern=containerd-2.2.@v-%a.raw"),
        "{}",
        text.stdout
    );
    run(&fleet, &["apply", "--yes"]).expect_code(0);
    for node in ["cp-1", "w-1"] {
        assert_eq!(
            node_says(&fleet, node, conf),
            "MatchPattern=containerd-2.2.@v-%a.raw\n",
            "{node}"
        );
        let version = node_says(&fleet, node, "containerd --version");
        assert!(
            version.starts_with("containerd github.com/containerd/containerd/v2 v2.2.0 "),
            "{node} runs {version}"
        );
    }
    let c = fleet.cluster().unwrap();
    for (name, node) in &c.nodes {
        assert_eq!(node.kubelet_version, "v1.34.3", "{name}: kubernetes stays");
        assert!(!node.unschedulable, "{name}");
    }
}

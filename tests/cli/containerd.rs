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

#[test]
fn a_containerd_staged_with_the_new_kubelet_is_rolled_back_with_it() {
    // One reboot brings w-1 both kubernetes v1.35 and containerd 2.2, and
    // that containerd serves no CRI: the new kubelet crash-loops because of
    // containerd, not of itself. `--on-failure rollback` must put both
    // sysexts back in one reboot; kubernetes alone would still crash.
    let mut scenario = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.2")
        .kubelet_restart(1.0)
        .faults(|f| {
            f.containerd_no_cri = [("w-1".to_string(), "2.2".to_string())].into();
        });
    scenario.containerd = Some("2.1.4".into());
    scenario.hub.containerd = vec!["2.2.0".into()];
    let fleet = support::start(scenario);
    pin_containerd(&fleet, "v2.2");
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let w1_boot = fleet.boot("w-1").unwrap().boot_id;

    let out = super::on_failure::apply_rolling_back(&fleet);
    support::assert_has(
        &out.stderr,
        &[
            "apply stopped: w-1: its new kubelet is crash-looping",
            "unknown service runtime.v1.RuntimeService",
            "rolled back to v1.34.2 and containerd 2.1.4",
        ],
    );
    assert!(!out.stderr.contains("ROLLBACK FAILED"), "{}", out.stderr);

    let boot = fleet.boot("w-1").unwrap();
    assert_ne!(boot.boot_id, w1_boot);
    assert_eq!(
        (boot.kubernetes.as_str(), boot.containerd.as_str()),
        ("v1.34.2", "2.1.4"),
        "w-1 booted both kept images in one reboot"
    );
    let link = node_says(&fleet, "w-1", "readlink /etc/extensions/containerd.raw");
    assert!(link.contains("containerd-2.1.4-"), "{link}");
    assert_eq!(
        node_says(
            &fleet,
            "w-1",
            "grep MatchPattern /etc/sysupdate.containerd.d/containerd.conf"
        ),
        "MatchPattern=containerd-2.1.@v-%a.raw\n",
        "w-1's containerd config is pinned back to 2.1"
    );
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-1"].kubelet_version, "v1.34.2");
    assert!(
        c.node_ready("w-1", fleetsim::state::now()) && !c.nodes["w-1"].unschedulable,
        "w-1 is Ready and schedulable"
    );
    // cp-1 took the same hop, under a containerd that works: it keeps both.
    assert_eq!(fleet.boot("cp-1").unwrap().containerd, "2.2.0");
    assert!(c.nodes["cp-1"].kubelet_version.starts_with("v1.35."));
    let rolled: Vec<String> = support::journal_records(&fleet)
        .iter()
        .filter(|r| r["kind"] == "rollback")
        .map(|r| r["detail"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        rolled
            .iter()
            .any(|m| m.contains("containerd 2.2.0 back to 2.1.4")),
        "the journal records containerd's rollback: {rolled:?}"
    );
}

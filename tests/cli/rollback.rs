//! `fleetctl rollback NODE…`: back to the image the node kept, pinned to
//! its minor, under the lock and the gates; refused, touching nothing, when
//! the kept image no longer matches the hub's sum (checked on the node).
//! The refusals decided from the facts alone (no kept image, the skew
//! policy, an unknown node) are proven on pure code
//! (docs/rules-on-the-fake.md).

use crate::support::{self, Fleet};

const CONFIG: &str = "/etc/sysupdate.kubernetes.d/kubernetes.conf";

fn fleetctl(fleet: &Fleet, args: &[&str]) -> support::Run {
    support::run(&fleet.inventory(), args)
}

/// What a refused rollback must leave as it was on `node`.
fn node_state(fleet: &Fleet, node: &str) -> (String, String, String) {
    let c = fleet.cluster().unwrap();
    let n = &c.nodes[node];
    (
        fleet
            .ssh_ok(
                node,
                "root",
                "readlink /etc/extensions/kubernetes.raw; cat /proc/sys/kernel/random/boot_id",
            )
            .unwrap(),
        fleet
            .ssh_ok(node, "root", &format!("cat {CONFIG}"))
            .unwrap(),
        format!("{} {}", n.kubelet_version, n.unschedulable),
    )
}

#[test]
fn rollback_after_a_hop_returns_the_worker_to_the_previous_minor_under_the_lock() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    support::apply(&fleet, &["--yes"]).expect_code(0);
    let after_hop = fleet.cluster().unwrap().nodes["w-1"]
        .kubelet_version
        .clone();
    assert!(after_hop.starts_with("v1.35."), "{after_hop}");
    let status = fleetctl(&fleet, &["status"]).expect_code(0);
    assert!(
        status.stdout.contains("v1.34.2"),
        "status shows what w-1 could go back to:\n{}",
        status.stdout
    );

    let dry = fleetctl(&fleet, &["rollback", "w-1", "--dry-run"]).expect_code(0);
    assert!(
        dry.stdout
            .contains("w-1: drain, reboot back into v1.34.2, wait, uncordon"),
        "{}",
        dry.stdout
    );
    let run = fleetctl(&fleet, &["rollback", "w-1", "--yes"]).expect_code(0);
    assert!(
        run.stderr.contains("done: w-1 to v1.34.2"),
        "{}",
        run.stderr
    );

    let c = fleet.cluster().unwrap();
    let w1 = &c.nodes["w-1"];
    assert_eq!(
        w1.kubelet_version, "v1.34.2",
        "w-1 runs the previous kubelet"
    );
    assert!(w1.up && !w1.unschedulable, "w-1 is Ready and schedulable");
    assert_eq!(fleet.boot("w-1").unwrap().kubernetes, "v1.34.2");
    // cp-1 was not touched.
    assert_eq!(c.nodes["cp-1"].kubelet_version, after_hop);
    let config = fleet
        .ssh_ok("w-1", "root", &format!("cat {CONFIG}"))
        .unwrap();
    assert!(
        config.contains("MatchPattern=kubernetes-v1.34.@v-%a.raw\n"),
        "w-1's sysupdate config is pinned back to v1.34:\n{config}"
    );
    // Under fleetctl's lock (no Kured here), taken and given back.
    let kinds: Vec<String> = support::journal_records(&fleet)
        .iter()
        .filter_map(|r| r["kind"].as_str().map(String::from))
        .collect();
    let last = |k: &str| kinds.iter().rposition(|x| x == k);
    let (rolled, taken, released) = (
        last("rollback"),
        last("lock-acquired"),
        last("lock-released"),
    );
    assert!(
        taken < rolled && rolled < released && taken.is_some(),
        "lock taken, rollback, lock released: {kinds:?}"
    );
    // The fleet is consistent: a plan back to v1.35 finds w-1 to upgrade.
    let plan = fleetctl(&fleet, &["plan", "v1.35"]).expect_code(0);
    assert!(plan.stdout.contains("w-1"), "{}", plan.stdout);
}

#[test]
fn a_kept_image_altered_on_the_node_is_refused_before_anything_moves() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.35.1")
            .with_node("w-1", |n| n.images = vec!["v1.34.3".into()]),
    );
    let kept = "/opt/extensions/kubernetes/kubernetes-v1.34.3-x86-64.raw";
    // One byte more: what a disk error or someone with root on w-1 leaves.
    fleet
        .ssh_ok("w-1", "root", &format!("printf x >> {kept}"))
        .unwrap();
    let found = fleet
        .ssh_ok("w-1", "root", &format!("sha256sum {kept}"))
        .unwrap();
    let found = found.split_whitespace().next().unwrap().to_string();
    let before = node_state(&fleet, "w-1");

    let run = fleetctl(&fleet, &["rollback", "w-1", "--yes"]);
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    for why in [
        format!("w-1: the kept {kept} has sha256 {found}, but the hub's "),
        "/kubernetes/SHA256SUMS gives ".to_string(),
        "The rollback of w-1 was refused before it changed anything".to_string(),
        "Replace it with kubernetes-v1.34.3-x86-64.raw from the hub".to_string(),
    ] {
        assert!(run.stderr.contains(&why), "no `{why}` in\n{}", run.stderr);
    }
    assert_eq!(
        node_state(&fleet, "w-1"),
        before,
        "the refused rollback changed w-1"
    );
    // The file is kept for the operator to inspect.
    fleet
        .ssh_ok("w-1", "root", &format!("test -f {kept}"))
        .unwrap();
}

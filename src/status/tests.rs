//! The status report built from facts, and the table it prints.

use super::*;

#[test]
fn reason_line_names_the_node_once() {
    console::set_colors_enabled(false);
    assert_eq!(
        reason_line(
            "w-2",
            "w-2: cannot connect to 10.0.0.2:22 over SSH: refused"
        ),
        "w-2: cannot connect to 10.0.0.2:22 over SSH: refused\n"
    );
    assert_eq!(
        reason_line(
            "w-1",
            "w-1 (10.0.0.1:22): WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!"
        ),
        "w-1 (10.0.0.1:22): WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\n"
    );
    // Another node's name as a prefix is not this node's.
    assert_eq!(reason_line("w-1", "w-10: gone"), "w-1: w-10: gone\n");
    assert_eq!(reason_line("w-1", "timed out"), "w-1: timed out\n");
}

fn facts() -> NodeFacts {
    use crate::node::{Extension, OsFacts};
    let v = |s: &str| s.parse::<Version>().unwrap();
    NodeFacts {
        hostname: "w-3".into(),
        boot_id: "b".into(),
        uptime_seconds: 1,
        os: OsFacts {
            running: "4081.2.0".into(),
            staged: None,
            current_op: "UPDATE_STATUS_IDLE".into(),
        },
        kubernetes: Extension {
            running: Some(v("v1.34.2")),
            staged: Some(v("v1.34.2")),
            staged_target: None,
            images: vec![v("v1.34.2")],
            configs: Vec::new(),
        },
        containerd: None,
        reboot_required: false,
        kubeadm_step: None,
        arch: None,
        kubelet_files: Default::default(),
        cgroup: Default::default(),
        stage_records: Default::default(),
    }
}

#[test]
fn a_staged_flatcar_update_alone_is_a_pending_reboot() {
    let mut f = facts();
    assert!(f.reboot_reasons().is_empty());
    f.os.staged = Some("4152.2.1".into());
    assert_eq!(f.reboot_reasons(), ["Flatcar 4152.2.1"]);
    f.kubernetes.staged = Some("v1.34.3".parse().unwrap());
    f.reboot_required = true;
    assert_eq!(
        f.reboot_reasons(),
        [
            "kubernetes v1.34.3",
            "Flatcar 4152.2.1",
            "/run/reboot-required"
        ]
    );
    let report = build(
        vec![NodeInput {
            name: "w-3",
            role: Role::Worker,
            address: "10.0.0.23",
            facts: Ok(&f),
        }],
        Err("not asked".into()),
    );
    assert!(report.nodes[0].reboot_pending);
    assert_eq!(report.summary.reboot_pending, 1);
}

#[test]
fn a_node_whose_running_image_is_gone_is_flagged_and_warned_about() {
    console::set_colors_enabled(false);
    let mut f = facts();
    f.kubernetes.staged_target =
        Some("../../opt/extensions/kubernetes/kubernetes-v1.34.3-x86-64.raw".into());
    f.kubernetes.staged = Some("v1.34.3".parse().unwrap());
    f.kubernetes.images = vec!["v1.34.3".parse().unwrap()];
    fn input(f: &NodeFacts) -> NodeInput<'_> {
        NodeInput {
            name: "w-3",
            role: Role::Worker,
            address: "10.0.0.23",
            facts: Ok(f),
        }
    }
    let report = build(vec![input(&f)], Err("not asked".into()));
    assert_eq!(
        report.nodes[0].running_image_gone,
        Some("v1.34.2".parse().unwrap())
    );
    let w = &report.summary.warnings;
    assert!(
        w.iter().any(|w| w.starts_with(
            "w-3: runs kubernetes v1.34.2, but its image is gone from /opt/extensions/kubernetes/"
        )),
        "{w:?}"
    );
    let table = render_table(&report);
    assert!(
        table.contains("v1.34.2 → v1.34.3 (reboot pending) (running image gone)"),
        "{table}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["nodes"][0]["running_image_gone"], "v1.34.2");

    // Its image present, or no symlink at all (not a sysext node): nothing.
    f.kubernetes.images.push("v1.34.2".parse().unwrap());
    let report = build(vec![input(&f)], Err("not asked".into()));
    assert_eq!(report.nodes[0].running_image_gone, None);
    f.kubernetes.images.clear();
    f.kubernetes.staged_target = None;
    f.kubernetes.staged = None;
    let report = build(vec![input(&f)], Err("not asked".into()));
    assert_eq!(report.nodes[0].running_image_gone, None);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["nodes"][0]["running_image_gone"].is_null());
}

/// Issue 38: what a node printed reaches the table escaped, so with colour
/// on it cannot pass for fleetctl's own green.
#[test]
fn a_nodes_words_in_the_table_cannot_carry_our_colours() {
    let line = super::reason_line("w-1", "w-1: \u{1b}[32mfine\u{1b}[0m");
    let shown = crate::ui::escape::escape_controls_keeping_colours(&line);
    assert!(shown.contains("\\033[32mfine\\033[0m"), "{shown:?}");
}

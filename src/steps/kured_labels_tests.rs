//! Kured's pre- and post-reboot node labels (`super::kured_labels`) on the
//! fake world (`super::fake_holds`): set on each node, journaled, and
//! what a refusal leaves. Where they sit around the drain, the reboot and
//! the uncordon is the roll's order (`roll/flow_tests.rs`).

use futures_util::FutureExt;

use super::fake_holds::FakeHolds;
use super::kured_labels::{When, set_in};
use super::{Interrupted, Rerun};

fn set(w: &mut FakeHolds, nodes: &[&str], when: When) -> anyhow::Result<()> {
    let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    set_in(w, &["kured=rebooting".into()], &nodes, when, Rerun::Apply)
        .now_or_never()
        .expect("the fake world never waits")
}

#[test]
fn kureds_labels_are_set_on_each_node_and_journaled_by_node() {
    let mut w = FakeHolds::default();
    set(&mut w, &["cp-1", "w-1"], When::BeforeDrain).unwrap();
    set(&mut w, &["cp-1"], When::AfterUncordon).unwrap();
    assert_eq!(
        w.reads,
        [
            (0, "label cp-1 kured=rebooting (cp-1: Kured's --pre-reboot-node-labels kured=rebooting)".to_string()),
            (0, "label w-1 kured=rebooting (w-1: Kured's --pre-reboot-node-labels kured=rebooting)".to_string()),
            (0, "label cp-1 kured=rebooting (cp-1: Kured's --post-reboot-node-labels kured=rebooting)".to_string()),
        ]
    );
    let journaled: Vec<(&str, Option<&str>)> = w
        .journaled
        .iter()
        .map(|(_, k, n, _)| (k.as_str(), n.as_deref()))
        .collect();
    assert_eq!(
        journaled,
        [
            ("kured-labels-pre", Some("cp-1")),
            ("kured-labels-pre", Some("w-1")),
            ("kured-labels-post", Some("cp-1")),
        ]
    );
    assert_eq!(
        w.said[1],
        "  w-1: labelled kured=rebooting (Kured's --pre-reboot-node-labels)"
    );
}

#[test]
fn a_refused_label_stops_the_run_saying_what_was_done() {
    let mut w = FakeHolds::default();
    w.label_refused
        .insert("w-1".into(), "nodes \"w-1\" is forbidden".into());
    let e = set(&mut w, &["w-1", "w-2"], When::BeforeDrain).unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("w-1: Kured's --pre-reboot-node-labels (kured=rebooting) could not be set")
            && text.contains("w-1 was not drained; nothing was rebooted"),
        "{text}"
    );
    assert_eq!(w.reads.len(), 1, "stopped at the first: {:?}", w.reads);
    let e = set(&mut w, &["w-1"], When::AfterUncordon).unwrap_err();
    assert!(
        format!("{e:#}")
            .contains("set them yourself (`kubectl label node w-1 kured=rebooting --overwrite`)"),
        "{e:#}"
    );
}

#[test]
fn a_stop_is_a_safe_point_before_the_drains_labels_not_after_the_return() {
    let mut w = FakeHolds {
        stop_at: Some(std::time::Duration::ZERO),
        ..FakeHolds::default()
    };
    let e = set(&mut w, &["w-1"], When::BeforeDrain).unwrap_err();
    assert!(e.is::<Interrupted>(), "{e:#}");
    assert!(w.reads.is_empty());
    set(&mut w, &["w-1"], When::AfterUncordon).unwrap();
    assert_eq!(w.kinds(), ["kured-labels-post"]);
}

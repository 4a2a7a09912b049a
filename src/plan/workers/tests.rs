//! Example tests of `--workers jump`: the fleets issue 17 names, with the
//! exact steps each worker takes and the reboots counted.

use crate::version::TargetVersion;

use super::super::testkit::*;
use super::super::*;

fn target(s: &str) -> TargetVersion {
    s.parse().unwrap()
}

/// Hub with v1.34.0 … v1.38.0, one patch each.
fn hub_all() -> HubVersions {
    hub(&[(34, 0), (35, 0), (36, 0), (37, 0), (38, 0)])
}

/// 1 control plane + 3 workers settled on `version`.
fn four(version: &str) -> testkit::Fleet {
    fleet(version)
        .cp("cp-1", version)
        .worker("w-1", version)
        .worker("w-2", version)
        .worker("w-3", version)
}

fn jump(state: &FleetState, to: &str) -> Plan {
    plan_with(state, &target(to), &hub_all(), WorkerStrategy::Jump).unwrap()
}

/// The steps of one node over the whole plan, as `hop-minor outline`,
/// without the removal of old images (housekeeping).
fn of(plan: &Plan, node: &str) -> Vec<String> {
    plan.hops
        .iter()
        .flat_map(|h| {
            let steps: Vec<Step> = h
                .steps()
                .filter(|s| s.node == node && !matches!(s.action, Action::RemoveImages { .. }))
                .cloned()
                .collect();
            outline(&steps)
                .into_iter()
                .map(move |line| format!("{} {line}", h.minor))
        })
        .collect()
}

const KUBEADM_FLAGS_WITH_POD_INFRA: &str = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=\
     unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";

#[test]
fn workers_jump_from_v1_35_to_v1_37_with_one_kubeadm_step_and_one_reboot_each() {
    let state = four("v1.35.0").build();
    let plan = jump(&state, "v1.37");
    assert_eq!(plan.hops.len(), 2);
    // The control plane takes both hops, the workers only the last.
    assert!(
        plan.hops[0]
            .steps()
            .all(|s| s.node == "cp-1" || matches!(s.action, Action::RemoveImages { .. })),
        "{:?}",
        outline(&flat(&plan))
    );
    for w in ["w-1", "w-2", "w-3"] {
        assert_eq!(
            of(&plan, w),
            vec![
                format!("v1.37 {w} download kubernetes v1.37.0"),
                format!("v1.37 {w} upgrade-node v1.37.0"),
                format!("v1.37 {w} pin kubernetes v1.37"),
                format!("v1.37 {w} stage kubernetes v1.37.0"),
                format!("v1.37 {w} roll"),
            ]
        );
    }
    // The workers' kubeadm step waits for the control plane's last reboot.
    let last = &plan.hops[1];
    let kinds: Vec<PhaseKind> = last.phases.iter().map(|p| p.kind).collect();
    assert_eq!(
        &kinds[..5],
        &[
            PhaseKind::Prepare,
            PhaseKind::FirstControlPlane,
            PhaseKind::ControlPlaneReboots,
            PhaseKind::WorkerPreparation,
            PhaseKind::WorkerReboots
        ]
    );
    assert_eq!(plan.workers.strategy, WorkerStrategy::Jump);
    assert_eq!(plan.workers.reboots, 5);
    assert_eq!(plan.workers.every_hop_reboots, 8);
    assert_eq!(plan.workers.saved(), 3);
    assert!(plan.workers.stops.is_empty());
    assert!(plan.workers.leaves_behind(m("v1.36"), "w-2"));
    assert!(!plan.workers.leaves_behind(m("v1.36"), "cp-1"));
    assert!(!plan.workers.leaves_behind(m("v1.37"), "w-2"));
}

#[test]
fn every_hop_keeps_todays_order() {
    let state = four("v1.35.0").build();
    let every = plan_with(
        &state,
        &target("v1.37"),
        &hub_all(),
        WorkerStrategy::EveryHop,
    )
    .unwrap();
    let mut today = plan(&state, &target("v1.37"), &hub_all()).unwrap();
    today.workers.every_hop_reboots = every.workers.every_hop_reboots;
    assert_eq!(every, today);
    assert_eq!(every.total_reboots(), 8);
    assert_eq!(every.workers.saved(), 0);
    assert!(every.workers.behind.is_empty());
    assert_eq!(
        of(&every, "w-1")
            .iter()
            .filter(|s| s.ends_with("roll"))
            .count(),
        2
    );
}

#[test]
fn a_v1_34_worker_with_pod_infra_in_kubeadm_flags_takes_the_v1_35_hop() {
    // kubeadm v1.35 alone strips the flag (kubernetes/kubernetes#133778,
    // #135807): w-2 must run it before it boots any kubelet ≥ v1.35.
    let state = four("v1.34.0")
        .with("w-2", |f| {
            f.kubelet_files.insert(
                crate::checks::KUBEADM_FLAGS_ENV.to_string(),
                KUBEADM_FLAGS_WITH_POD_INFRA.to_string(),
            );
        })
        .build();
    let plan = jump(&state, "v1.37");
    assert_eq!(plan.hops.len(), 3);
    let rolls = |n: &str| -> Vec<String> {
        of(&plan, n)
            .into_iter()
            .filter(|s| s.ends_with("roll") || s.contains("upgrade-node"))
            .collect()
    };
    assert_eq!(
        rolls("w-2"),
        vec![
            "v1.35 w-2 upgrade-node v1.35.0",
            "v1.35 w-2 roll",
            "v1.37 w-2 upgrade-node v1.37.0",
            "v1.37 w-2 roll"
        ]
    );
    assert_eq!(
        rolls("w-1"),
        vec!["v1.37 w-1 upgrade-node v1.37.0", "v1.37 w-1 roll"]
    );
    assert_eq!(plan.workers.stops.len(), 1);
    let stop = &plan.workers.stops[0];
    assert_eq!(stop.node, "w-2");
    assert_eq!(stop.minors, vec![m("v1.35")]);
    assert!(
        stop.reason.contains("--pod-infra-container-image"),
        "{}",
        stop.reason
    );
    assert!(stop.reason.contains("kubeadm v1.35"), "{}", stop.reason);
    // 3 (cp) + 1 + 2 + 1 against 3 × 4.
    assert_eq!(plan.workers.reboots, 7);
    assert_eq!(plan.workers.saved(), 5);
}

#[test]
fn the_flag_outside_kubeadm_flags_env_is_no_reason_to_stop() {
    // kubeadm never edits KUBELET_EXTRA_ARGS: no hop helps, the
    // kubelet-flags check blocks the plan instead.
    let state = four("v1.34.0")
        .with("w-2", |f| {
            f.kubelet_files.insert(
                "/etc/sysconfig/kubelet".to_string(),
                "KUBELET_EXTRA_ARGS=--pod-infra-container-image=pause:3.10\n".to_string(),
            );
        })
        .build();
    let plan = jump(&state, "v1.37");
    assert!(plan.workers.stops.is_empty());
}

#[test]
fn a_worker_that_would_fall_more_than_three_minors_behind_stops_on_the_way() {
    // w-1 runs v1.34 with the cluster at v1.35: the v1.38 API server would
    // be four minors ahead of it, so it takes v1.37 (three ahead) first.
    let state = fleet("v1.35.0")
        .cp("cp-1", "v1.35.0")
        .worker("w-1", "v1.34.0")
        .worker("w-2", "v1.35.0")
        .build();
    let plan = jump(&state, "v1.38");
    assert_eq!(plan.workers.stops.len(), 1);
    let stop = &plan.workers.stops[0];
    assert_eq!(
        (stop.node.as_str(), stop.minors.clone()),
        ("w-1", vec![m("v1.37")])
    );
    assert!(
        stop.reason.contains("more than 3 minors behind"),
        "{}",
        stop.reason
    );
    let rolls = |n: &str| -> Vec<String> {
        of(&plan, n)
            .into_iter()
            .filter(|s| s.ends_with("roll"))
            .collect()
    };
    assert_eq!(rolls("w-1"), vec!["v1.37 w-1 roll", "v1.38 w-1 roll"]);
    assert_eq!(rolls("w-2"), vec!["v1.38 w-2 roll"]);
}

#[test]
fn a_single_hop_plan_is_the_same_either_way() {
    let state = four("v1.36.0").build();
    let j = jump(&state, "v1.37");
    let e = plan_with(
        &state,
        &target("v1.37"),
        &hub_all(),
        WorkerStrategy::EveryHop,
    )
    .unwrap();
    assert_eq!(j.hops, e.hops);
    assert_eq!(j.workers.saved(), 0);
}

#[test]
fn resuming_with_control_planes_done_and_one_worker_jumped_finishes_the_others() {
    let hub = hub_all();
    let state = four("v1.35.0").build();
    let p0 = jump(&state, "v1.37");
    let steps = flat(&p0);
    let cut = steps
        .iter()
        .position(|s| s.node == "w-1" && s.action == Action::Roll)
        .unwrap()
        + 1;
    let half = after_steps(&state, &p0, cut, &hub);
    let p1 = jump(&half, "v1.37");
    assert_eq!(p1.hops.len(), 1, "{:?}", outline(&flat(&p1)));
    assert!(of(&p1, "cp-1").is_empty());
    assert!(of(&p1, "w-1").is_empty());
    for w in ["w-2", "w-3"] {
        let rolls: Vec<String> = of(&p1, w)
            .into_iter()
            .filter(|s| s.ends_with("roll") || s.contains("upgrade-node"))
            .collect();
        assert_eq!(
            rolls,
            vec![format!("v1.37 {w} roll")],
            "{w}: its kubeadm step already ran"
        );
    }
    // Cut before the workers' kubeadm steps ran: they get them on resume.
    let before = steps
        .iter()
        .position(|s| s.node == "w-1" && matches!(s.action, Action::UpgradeNode { .. }))
        .unwrap();
    let p2 = jump(&after_steps(&state, &p0, before, &hub), "v1.37");
    for w in ["w-1", "w-2", "w-3"] {
        assert!(
            of(&p2, w).contains(&format!("v1.37 {w} upgrade-node v1.37.0")),
            "{:?}",
            outline(&flat(&p2))
        );
    }
}

#[test]
fn a_cordoned_worker_is_uncordoned_in_a_hop_it_jumps_over() {
    let state = four("v1.35.0").api("w-3", |n| n.cordoned = true).build();
    let plan = jump(&state, "v1.37");
    assert!(
        hop_steps(&plan.hops[0]).contains(&"w-3 uncordon".to_string()),
        "{:?}",
        hop_steps(&plan.hops[0])
    );
    assert_eq!(
        of(&plan, "w-3")
            .iter()
            .filter(|s| s.ends_with("roll"))
            .count(),
        1
    );
}

fn hop_steps(hop: &Hop) -> Vec<String> {
    outline(&hop.steps().cloned().collect::<Vec<_>>())
}

#[test]
fn the_strategy_is_saved_and_an_older_plan_reads_as_every_hop() {
    let state = four("v1.35.0").build();
    let plan = jump(&state, "v1.37");
    let json = serde_json::to_value(&plan).unwrap();
    assert_eq!(json["workers"]["strategy"], "jump");
    assert_eq!(json["workers"]["reboots"], 5);
    assert_eq!(json["workers"]["every-hop-reboots"], 8);
    assert_eq!(json["workers"]["behind"][0]["nodes"][0], "w-1");
    let back: Plan = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back, plan);
    let mut old = json;
    old.as_object_mut().unwrap().remove("workers");
    let read: Plan = serde_json::from_value(old).unwrap();
    assert_eq!(read.workers.strategy, WorkerStrategy::EveryHop);
}

#[test]
fn the_plan_text_shows_the_strategy_and_the_reboots_saved() {
    let state = four("v1.34.0")
        .with("w-2", |f| {
            f.kubelet_files.insert(
                crate::checks::KUBEADM_FLAGS_ENV.to_string(),
                KUBEADM_FLAGS_WITH_POD_INFRA.to_string(),
            );
        })
        .build();
    let text = render(&jump(&state, "v1.37"), false);
    assert!(
        text.contains("  workers: jump: each worker keeps its kubelet"),
        "{text}"
    );
    assert!(
        text.contains("  reboots: 7, 5 saved against --workers every-hop (12)"),
        "{text}"
    );
    assert!(
        text.contains("  w-2 also takes v1.35: --pod-infra-container-image"),
        "{text}"
    );
    let every = plan_with(
        &state,
        &target("v1.37"),
        &hub_all(),
        WorkerStrategy::EveryHop,
    )
    .unwrap();
    let text = render(&every, false);
    assert!(
        text.contains("  workers: every-hop: every node reboots once per minor"),
        "{text}"
    );
    assert!(!text.contains("  reboots: "), "{text}");
}

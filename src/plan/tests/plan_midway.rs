//! The planner on fleets caught half-way: interrupted hops, cordoned nodes,
//! the order nodes roll in, kubelet skew, an unreadable hub or cluster, and
//! which old images a node sheds.

use super::*;

#[test]
fn a_half_done_fleet_continues_where_it_stands() {
    // Hop v1.35 was interrupted: `upgrade apply` ran and cp-1 rebooted,
    // w-1 ran its kubeadm step and was staged but not rebooted, w-2 was
    // not touched yet.
    let state = small("v1.35.3", "v1.34.2")
        .with("cp-1", |f| {
            f.kubernetes = settled(Component::Kubernetes, &v("v1.35.3"));
            f.kubernetes.images.insert(0, v("v1.34.2"));
            f.kubeadm_step = Some(v("v1.35.3"));
        })
        .with("w-1", |f| {
            f.kubernetes.staged = Some(v("v1.35.3"));
            f.kubernetes.images.push(v("v1.35.3"));
            f.kubernetes.configs = vec![pinned(Component::Kubernetes, m("v1.35"))];
            f.kubeadm_step = Some(v("v1.35.3"));
        })
        .build();
    let hub = hub(&[(34, 2), (35, 3), (36, 1), (37, 2)]);
    let plan = plan(&state, &target("v1.37"), &hub).unwrap();
    let minors: Vec<String> = plan.hops.iter().map(|h| h.minor.to_string()).collect();
    assert_eq!(minors, ["v1.35", "v1.36", "v1.37"]);
    assert_eq!(plan.hops[0].kind, HopKind::Finish);
    assert_eq!(
        phased(&plan.hops[0]),
        vec![
            (
                PhaseKind::Prepare,
                strings(&["w-2 download kubernetes v1.35.3"])
            ),
            (
                PhaseKind::WorkerPreparation,
                strings(&[
                    "w-2 upgrade-node v1.35.3",
                    "w-2 pin kubernetes v1.35",
                    "w-2 stage kubernetes v1.35.3"
                ])
            ),
            (PhaseKind::WorkerReboots, strings(&["w-1 roll", "w-2 roll"])),
        ]
    );
    assert_eq!(
        phased(&plan.hops[1]),
        full_hop("v1.36", "v1.36.1", Some("v1.34.2"))
    );
    assert_eq!(plan.total_reboots(), 2 + 3 + 3);
}

#[test]
fn a_first_control_plane_booted_before_upgrade_apply_gets_the_apply_then_a_reboot() {
    // What an older fleetctl, or a hand-made reboot, left behind: cp-1 runs
    // v1.35 while the cluster is at v1.34. Its `upgrade apply` comes first,
    // then the reboot is the kubelet restart that loads the config it wrote.
    let state = small("v1.34.2", "v1.34.2")
        .with("cp-1", |f| {
            f.kubernetes = settled(Component::Kubernetes, &v("v1.35.3"));
        })
        .api("cp-1", |n| n.cordoned = true)
        .build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    let mut expected = full_hop("v1.35", "v1.35.3", None);
    expected[0].1.remove(0);
    expected[2].1 = strings(&["cp-1 roll"]);
    assert_eq!(phased(&plan.hops[0]), expected);
}

#[test]
fn a_node_rebooted_but_still_cordoned_is_uncordoned() {
    // Interrupted after its reboot, before its uncordon: its kubeadm step
    // ran before the reboot, so only the uncordon remains.
    let state = small("v1.35.3", "v1.35.3")
        .api("w-1", |n| n.cordoned = true)
        .with("w-1", |f| f.kubeadm_step = Some(v("v1.35.3")))
        .build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(35, 3)])).unwrap();
    assert_eq!(hop_outline(&plan, 0), ["w-1 uncordon"]);
    assert!(!plan.hops[0].kubeadm);
    assert!(
        plan.warnings
            .contains(&Warning::Cordoned { node: "w-1".into() })
    );
}

#[test]
fn a_cordoned_first_control_plane_is_not_uncordoned_just_to_be_drained_again() {
    // Interrupted between its drain and its reboot: upgrade apply ran,
    // cp-1 is staged and cordoned. It rolls first, still cordoned.
    let state = small("v1.35.3", "v1.34.2")
        .with("cp-1", |f| {
            f.kubernetes.staged = Some(v("v1.35.3"));
            f.kubernetes.images.push(v("v1.35.3"));
            f.kubernetes.configs = vec![pinned(Component::Kubernetes, m("v1.35"))];
            f.kubeadm_step = Some(v("v1.35.3"));
        })
        .api("cp-1", |n| n.cordoned = true)
        .build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    let mut expected = full_hop("v1.35", "v1.35.3", None);
    expected[0].1.remove(0);
    expected.remove(1);
    expected[1].1 = strings(&["cp-1 roll"]);
    assert_eq!(phased(&plan.hops[0]), expected);
}

#[test]
fn a_cordoned_worker_is_uncordoned_before_the_control_planes_roll() {
    let state = small("v1.34.2", "v1.34.2")
        .api("w-2", |n| n.cordoned = true)
        .build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    // A Finish hop gives it its capacity back first; then the upgrade.
    assert_eq!(
        phased(&plan.hops[0]),
        vec![(PhaseKind::Prepare, strings(&["w-2 uncordon"]))]
    );
    assert_eq!(phased(&plan.hops[1]), full_hop("v1.35", "v1.35.3", None));
}

#[test]
fn other_control_planes_roll_before_workers() {
    let state = fleet("v1.34.2")
        .worker("w-1", "v1.34.2")
        .cp("cp-1", "v1.34.2")
        .cp("cp-2", "v1.34.2")
        .worker("w-2", "v1.34.2")
        .cp("cp-3", "v1.34.2")
        .build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 0)])).unwrap();
    let order: Vec<&str> = plan.hops[0]
        .steps()
        .filter(|s| s.action == Action::Roll)
        .map(|s| s.node.as_str())
        .collect();
    assert_eq!(order, ["cp-1", "cp-2", "cp-3", "w-1", "w-2"]);
    // Every control plane's kubeadm step before any of them reboots.
    let kinds: Vec<PhaseKind> = plan.hops[0].phases.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            PhaseKind::Prepare,
            PhaseKind::FirstControlPlane,
            PhaseKind::OtherControlPlanes,
            PhaseKind::ControlPlaneReboots,
            PhaseKind::WorkerPreparation,
            PhaseKind::WorkerReboots
        ]
    );
    assert_eq!(
        outline(&plan.hops[0].phases[2].steps),
        ["cp-2 upgrade-node v1.35.0", "cp-3 upgrade-node v1.35.0"]
    );
    let applies: Vec<&str> = plan
        .steps()
        .filter(|s| matches!(s.action, Action::UpgradeApply { .. }))
        .map(|s| s.node.as_str())
        .collect();
    assert_eq!(applies, ["cp-1"]);
}

#[test]
fn kubelet_skew_the_path_cannot_fix_is_refused() {
    let hub = hub(&[(30, 0), (31, 0), (32, 0), (33, 0), (34, 2), (35, 3)]);
    let ahead = small("v1.34.2", "v1.34.2")
        .with("w-1", |f| f.kubernetes.running = Some(v("v1.35.0")))
        .build();
    let err = plan(&ahead, &target("v1.35"), &hub).unwrap_err();
    assert!(
        matches!(&err, Refusal::KubeletAhead { node, .. } if node == "w-1"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("newer than the API server (v1.34)"),
        "{err}"
    );

    let too_old = small("v1.34.2", "v1.34.2")
        .with("w-2", |f| f.kubernetes.running = Some(v("v1.30.0")))
        .build();
    let err = plan(&too_old, &target("v1.35"), &hub).unwrap_err();
    assert!(
        matches!(&err, Refusal::KubeletTooOld { node, .. } if node == "w-2"),
        "{err}"
    );

    let cp_behind = fleet("v1.34.2")
        .cp("cp-1", "v1.34.2")
        .cp("cp-2", "v1.32.0")
        .build();
    let err = plan(&cp_behind, &target("v1.35"), &hub).unwrap_err();
    assert!(
        matches!(&err, Refusal::ControlPlaneBehind { node, .. } if node == "cp-2"),
        "{err}"
    );

    // A worker three minors behind is within policy and is caught up first.
    let lagging = small("v1.34.2", "v1.34.2")
        .with("w-2", |f| {
            f.kubernetes = settled(Component::Kubernetes, &v("v1.31.0"))
        })
        .build();
    let plan = plan(&lagging, &target("v1.35"), &hub).unwrap();
    assert_eq!(plan.hops[0].kind, HopKind::Finish);
    assert_eq!(plan.hops[0].minor, m("v1.34"));
}

#[test]
fn the_first_control_plane_may_be_one_minor_ahead_only_mid_hop() {
    let hub = hub(&[(34, 2), (35, 3), (36, 0)]);
    let state = small("v1.34.2", "v1.34.2")
        .with("cp-1", |f| {
            f.kubernetes = settled(Component::Kubernetes, &v("v1.36.0"))
        })
        .build();
    let err = plan(&state, &target("v1.36"), &hub).unwrap_err();
    assert!(matches!(err, Refusal::KubeletAhead { .. }), "{err}");
    let state = small("v1.34.2", "v1.34.2")
        .with("cp-1", |f| {
            f.kubernetes = settled(Component::Kubernetes, &v("v1.35.3"))
        })
        .build();
    let err = plan(&state, &target("v1.34"), &hub).unwrap_err();
    assert!(matches!(err, Refusal::KubeletAhead { .. }), "{err}");
}

#[test]
fn an_unreadable_hub_plans_with_patches_unresolved() {
    let state = small("v1.34.2", "v1.34.2").build();
    let hub = HubVersions::Unresolved("curl: (7) Failed to connect".into());
    let plan = plan(&state, &target("v1.36"), &hub).unwrap();
    assert_eq!(plan.hops.len(), 2);
    assert!(plan.hops.iter().all(|h| h.version.is_none()));
    assert_eq!(
        hop_outline(&plan, 0)[..4],
        [
            "cp-1 download kubernetes v1.35",
            "w-1 download kubernetes v1.35",
            "w-2 download kubernetes v1.35",
            "cp-1 apply v1.35",
        ]
    );
    assert!(
        matches!(&plan.warnings[0], Warning::HubUnresolved { reason } if reason.contains("(7)"))
    );
    let text = render(&plan, false);
    assert!(text.contains("patch unresolved"), "{text}");
    assert!(
        text.contains("kubeadm upgrade apply <newest v1.35> --skip-phases addon/kube-proxy --yes"),
        "{text}"
    );
}

#[test]
fn an_unknown_cluster_version_falls_back_to_the_first_control_plane() {
    let mut state = small("v1.34.2", "v1.34.2").build();
    state.cluster.version = None;
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 1)])).unwrap();
    assert_eq!(
        plan.warnings[0],
        Warning::ClusterVersionUnknown {
            node: "cp-1".into(),
            assumed: v("v1.34.2")
        }
    );
    assert_eq!(plan.hops.len(), 1);
    state.nodes[0].facts.kubernetes.running = None;
    let err = super::plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 1)])).unwrap_err();
    assert!(matches!(err, Refusal::UnknownClusterVersion { .. }));
}

#[test]
fn a_fleet_without_a_control_plane_is_refused() {
    let state = fleet("v1.34.2").worker("w-1", "v1.34.2").build();
    assert_eq!(
        plan(&state, &target("v1.35"), &hub(&[(35, 0)])).unwrap_err(),
        Refusal::NoControlPlane
    );
}

#[test]
fn not_ready_and_unknown_nodes_are_warned_about() {
    let state = small("v1.34.2", "v1.34.2")
        .api("w-1", |n| n.ready = false)
        .build();
    let mut state = state;
    state.cluster.nodes.retain(|n| n.name != "w-2");
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 1)])).unwrap();
    assert_eq!(
        plan.warnings,
        vec![
            Warning::NotReady { node: "w-1".into() },
            Warning::NotInCluster { node: "w-2".into() }
        ]
    );
}

#[test]
fn hops_below_v1_32_are_refused_because_upgrade_node_has_no_addon_phase_there() {
    let state = small("v1.30.2", "v1.30.2").build();
    let hub = hub(&[(30, 2), (31, 1), (32, 0)]);
    let err = plan(&state, &target("v1.32"), &hub).unwrap_err();
    assert_eq!(err, Refusal::KubeadmTooOld { minor: m("v1.31") });
    assert!(
        err.to_string()
            .contains("fleetctl upgrades only to v1.32 and later"),
        "{err}"
    );
    let from_31 = small("v1.31.1", "v1.31.1").build();
    assert!(plan(&from_31, &target("v1.32"), &hub).is_ok());
}

#[test]
fn old_images_go_but_the_running_staged_and_one_previous_minor_stay() {
    let images: Vec<Version> = [
        "v1.33.1", "v1.34.0", "v1.34.2", "v1.35.1", "v1.35.3", "v1.36.0",
    ]
    .iter()
    .map(|s| v(s))
    .collect();
    assert_eq!(
        images_to_remove(&images, &v("v1.35.3"), Some(&v("v1.35.3"))),
        [v("v1.33.1"), v("v1.34.0")]
    );
    // Whatever the rule says, the running and the staged image stay.
    assert_eq!(
        images_to_remove(&images, &v("v1.35.3"), Some(&v("v1.34.0"))),
        [v("v1.33.1")]
    );
    assert!(images_to_remove(&[v("v1.35.3")], &v("v1.35.3"), None).is_empty());
}

#[test]
fn a_jumped_worker_keeps_the_image_it_ran_before_the_jump() {
    // v1.34 to v1.37 in one reboot: no v1.36 image, so the v1.34 one is
    // what a rollback repoints the symlink to.
    let images = [v("v1.34.2"), v("v1.37.0")];
    assert!(images_to_remove(&images, &v("v1.37.0"), Some(&v("v1.37.0"))).is_empty());
    // Older patches of that minor, and anything older, still go.
    let images = [v("v1.33.4"), v("v1.34.1"), v("v1.34.2"), v("v1.37.0")];
    assert_eq!(
        images_to_remove(&images, &v("v1.37.0"), Some(&v("v1.37.0"))),
        [v("v1.33.4"), v("v1.34.1")]
    );
}

//! Example tests of the planner: each fleet state the issue names, with the
//! exact steps (or refusal) expected.

use crate::node::Pin;
use crate::version::{TargetVersion, Version};

use super::testkit::*;
use super::*;

fn target(s: &str) -> TargetVersion {
    s.parse().unwrap()
}

/// 1 CP + 2 workers on `version`, pinned and settled.
fn small(cluster: &str, version: &str) -> testkit::Fleet {
    fleet(cluster)
        .cp("cp-1", version)
        .worker("w-1", version)
        .worker("w-2", version)
}

fn hop_outline(plan: &Plan, i: usize) -> Vec<String> {
    outline(&plan.hops[i].steps().cloned().collect::<Vec<_>>())
}

type Phased = Vec<(PhaseKind, Vec<String>)>;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// An upgrade hop of the small fleet when nothing was done yet, in
/// kubeadm's order; `cleanup`: the images each node sheds at its end.
fn full_hop(minor: &str, version: &str, cleanup: Option<&str>) -> Phased {
    let nodes = ["cp-1", "w-1", "w-2"];
    let mut hop = vec![
        (
            PhaseKind::Prepare,
            nodes
                .iter()
                .map(|n| format!("{n} download kubernetes {version}"))
                .collect(),
        ),
        (
            PhaseKind::FirstControlPlane,
            vec![format!("cp-1 apply {version}")],
        ),
        (
            PhaseKind::ControlPlaneReboots,
            vec![
                format!("cp-1 pin kubernetes {minor}"),
                format!("cp-1 stage kubernetes {version}"),
                "cp-1 roll".to_string(),
            ],
        ),
        (
            PhaseKind::WorkerPreparation,
            ["w-1", "w-2"]
                .iter()
                .flat_map(|w| {
                    [
                        format!("{w} upgrade-node {version}"),
                        format!("{w} pin kubernetes {minor}"),
                        format!("{w} stage kubernetes {version}"),
                    ]
                })
                .collect(),
        ),
        (PhaseKind::WorkerReboots, strings(&["w-1 roll", "w-2 roll"])),
    ];
    if let Some(old) = cleanup {
        hop.push((
            PhaseKind::Cleanup,
            nodes
                .iter()
                .map(|n| format!("{n} remove-images {old}"))
                .collect(),
        ));
    }
    hop
}

#[test]
fn three_hops_from_v1_34_to_v1_37_with_the_hubs_newest_patches() {
    let state = small("v1.34.2", "v1.34.2").build();
    let hub = hub(&[(34, 3), (35, 3), (36, 1), (37, 2), (38, 0)]);
    let plan = plan(&state, &target("v1.37"), &hub).unwrap();

    let minors: Vec<String> = plan.hops.iter().map(|h| h.minor.to_string()).collect();
    assert_eq!(minors, ["v1.35", "v1.36", "v1.37"]);
    let versions: Vec<String> = plan
        .hops
        .iter()
        .map(|h| h.version.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(versions, ["v1.35.3", "v1.36.1", "v1.37.2"]);
    assert!(
        plan.hops
            .iter()
            .all(|h| h.kind == HopKind::Upgrade && h.kubeadm)
    );
    assert_eq!(phased(&plan.hops[0]), full_hop("v1.35", "v1.35.3", None));
    assert_eq!(
        phased(&plan.hops[1]),
        full_hop("v1.36", "v1.36.1", Some("v1.34.2"))
    );
    assert_eq!(
        phased(&plan.hops[2]),
        full_hop("v1.37", "v1.37.2", Some("v1.35.3"))
    );
    assert_eq!(plan.total_reboots(), 9);
    assert!(plan.reboots().values().all(|&n| n == 3));
    assert_eq!(plan.final_version(), Some(&v("v1.37.2")));
    assert_eq!(plan.cluster_from, Some(v("v1.34.2")));
    // The patch lag within v1.34 does not earn an extra rolling reboot.
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

#[test]
fn kubeadm_commands_carry_the_skip_phases_flag() {
    let state = small("v1.34.2", "v1.34.2").build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    let lines: Vec<String> = plan.steps().map(|s| s.describe()).collect();
    assert!(lines.contains(
        &"cp-1: kubeadm upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes (the v1.35.3 image's kubeadm)"
            .to_string()
    ));
    assert!(lines.contains(
        &"w-1: kubeadm upgrade node --skip-phases addon/kube-proxy (the v1.35.3 image's kubeadm)"
            .to_string()
    ));
}

#[test]
fn pins_carry_the_rendered_config_and_what_it_replaces() {
    let state = small("v1.34.2", "v1.34.2").build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    let Some(Action::Pin {
        config,
        previous,
        path,
        replaces,
        ..
    }) = plan
        .steps()
        .map(|s| &s.action)
        .find(|a| matches!(a, Action::Pin { .. }))
    else {
        panic!("the plan should pin");
    };
    assert_eq!(path, "/etc/sysupdate.kubernetes.d/kubernetes.conf");
    assert_eq!(
        config,
        &render_config(Component::Kubernetes, m("v1.35"), HUB).unwrap()
    );
    assert_eq!(
        previous.as_deref(),
        Some(
            render_config(Component::Kubernetes, m("v1.34"), HUB)
                .unwrap()
                .as_str()
        )
    );
    assert!(replaces.is_empty());
}

#[test]
fn same_version_is_nothing_to_do() {
    let state = small("v1.37.2", "v1.37.2").build();
    let hub = hub(&[(36, 4), (37, 2)]);
    for t in ["v1.37", "1.37", "v1.37.2"] {
        let plan = plan(&state, &target(t), &hub).unwrap();
        assert!(plan.is_noop(), "{t}: {:?}", plan.hops);
        assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
        assert_eq!(
            summary(&plan),
            "Nothing to do: the cluster is at v1.37.2 and every node runs, stages and pins v1.37."
        );
    }
}

#[test]
fn downgrades_are_refused() {
    let state = small("v1.37.2", "v1.37.2").build();
    let hub = hub(&[(36, 4), (37, 2)]);
    let err = plan(&state, &target("v1.36"), &hub).unwrap_err();
    assert_eq!(
        err,
        Refusal::Downgrade {
            cluster: "v1.37.2".into(),
            target: target("v1.36")
        }
    );
    assert!(err.to_string().contains("refusing to downgrade"));
    let err = plan(&state, &target("v1.37.1"), &hub).unwrap_err();
    assert!(matches!(err, Refusal::Downgrade { .. }), "{err}");
    let err = plan(&state, &target("v2.0"), &hub).unwrap_err();
    assert!(matches!(err, Refusal::MajorChange { .. }), "{err}");
}

#[test]
fn a_target_absurdly_far_ahead_is_refused_even_without_the_hubs_list() {
    let state = small("v1.37.2", "v1.37.2").build();
    let unreadable = HubVersions::Unresolved("timeout".into());
    let err = plan(&state, &target("v1.370"), &unreadable).unwrap_err();
    assert_eq!(
        err.to_string(),
        "v1.37 → v1.370 is more than 12 minors: check the target for a typo, or upgrade in stages"
    );
    let huge = format!("v1.{}", u64::MAX);
    assert!(matches!(
        plan(&state, &target(&huge), &unreadable),
        Err(Refusal::TooFar { .. })
    ));
    assert_eq!(
        plan(&state, &target("v1.49"), &unreadable)
            .unwrap()
            .hops
            .len(),
        12
    );
}

#[test]
fn an_unpublished_minor_on_the_path_is_refused() {
    let state = small("v1.34.2", "v1.34.2").build();
    let hub = hub(&[(34, 2), (35, 3), (37, 1)]);
    let err = plan(&state, &target("v1.37"), &hub).unwrap_err();
    assert_eq!(
        err,
        Refusal::Unpublished {
            minor: m("v1.36"),
            published: vec![m("v1.34"), m("v1.35"), m("v1.37")]
        }
    );
    assert!(
        err.to_string()
            .contains("publishes no kubernetes v1.36 image (it has: v1.34, v1.35, v1.37)")
    );
    let err = plan(&state, &target("v1.38"), &hub).unwrap_err();
    assert!(matches!(err, Refusal::Unpublished { .. }));
}

#[test]
fn an_exact_target_must_be_on_the_hub() {
    let state = small("v1.36.0", "v1.36.0").build();
    let hub = hub(&[(36, 0), (37, 2)]);
    let err = plan(&state, &target("v1.37.5"), &hub).unwrap_err();
    assert_eq!(
        err,
        Refusal::NotOnHub {
            requested: v("v1.37.5"),
            available: vec![v("v1.37.0"), v("v1.37.1"), v("v1.37.2")]
        }
    );
}

#[test]
fn an_exact_target_older_than_the_hubs_newest_warns_and_stages_the_newest() {
    let state = small("v1.36.0", "v1.36.0").build();
    let plan = plan(&state, &target("v1.37.1"), &hub(&[(36, 0), (37, 2)])).unwrap();
    assert_eq!(plan.final_version(), Some(&v("v1.37.2")));
    assert_eq!(
        plan.warnings,
        vec![Warning::ExactOlderThanHub {
            requested: v("v1.37.1"),
            staged: v("v1.37.2")
        }]
    );
    assert!(
        plan.warnings[0]
            .to_string()
            .contains("the nodes will get v1.37.2")
    );
}

#[test]
fn floating_configs_and_staged_os_updates_warn_and_get_repinned() {
    let state = small("v1.34.2", "v1.34.2")
        .with("w-1", |f| {
            f.kubernetes.configs = vec![floating()];
            f.kubernetes.staged = Some(v("v1.38.0"));
            f.os.staged = Some("4230.2.1".into());
        })
        .build();
    let hub = hub(&[(34, 2), (35, 3), (38, 0)]);
    let plan = plan(&state, &target("v1.35"), &hub).unwrap();
    assert!(plan.warnings.contains(&Warning::Floating {
        node: "w-1".into(),
        component: Component::Kubernetes,
        path: "/etc/sysupdate.kubernetes.d/kubernetes.conf".into(),
        would_stage: Some(v("v1.38.0")),
    }));
    assert!(plan.warnings.contains(&Warning::OsUpdateStaged {
        node: "w-1".into(),
        version: "4230.2.1".into(),
        reboot_hop: Some(m("v1.35")),
    }));
    assert!(plan.warnings.contains(&Warning::StagedAhead {
        node: "w-1".into(),
        staged: v("v1.38.0"),
        cluster: m("v1.34"),
    }));
    let floating_text = plan
        .warnings
        .iter()
        .find(|w| matches!(w, Warning::Floating { .. }))
        .unwrap()
        .to_string();
    assert!(floating_text.starts_with("w-1: /etc/sysupdate.kubernetes.d/kubernetes.conf floats"));
    assert!(floating_text.contains("stage v1.38.0 on its own"));
    // w-1 is re-pinned and re-staged like the others, after its kubeadm step.
    assert_eq!(phased(&plan.hops[0]), full_hop("v1.35", "v1.35.3", None));
    let text = render(&plan, false);
    assert!(
        text.contains("-MatchPattern=kubernetes-@v-%a.raw"),
        "{text}"
    );
    assert!(
        text.contains("+MatchPattern=kubernetes-v1.35.@v-%a.raw"),
        "{text}"
    );
}

#[test]
fn a_floating_node_at_the_target_is_converged_without_kubeadm() {
    let state = small("v1.37.2", "v1.37.2")
        .with("w-2", |f| f.kubernetes.configs = vec![floating()])
        .build();
    let plan = plan(&state, &target("v1.37"), &hub(&[(37, 2)])).unwrap();
    assert_eq!(plan.hops.len(), 1);
    assert_eq!(plan.hops[0].kind, HopKind::Converge);
    assert!(!plan.hops[0].kubeadm);
    // Already running and staging the newest patch: re-pin only, no reboot.
    assert_eq!(hop_outline(&plan, 0), ["w-2 pin kubernetes v1.37"]);
}

#[test]
fn stray_configs_are_replaced_and_named() {
    let stray_path = "/etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf";
    let state = small("v1.37.2", "v1.37.2")
        .with("w-1", |f| {
            f.kubernetes.configs.insert(
                0,
                config(
                    stray_path,
                    "MatchPattern=kubernetes-v1.32.@v-%a.raw\n",
                    Pin::Pinned(m("v1.32")),
                ),
            );
        })
        .build();
    let plan = plan(&state, &target("v1.37"), &hub(&[(37, 2)])).unwrap();
    assert_eq!(hop_outline(&plan, 0), ["w-1 pin kubernetes v1.37"]);
    let Some(Action::Pin { replaces, .. }) = plan.steps().map(|s| &s.action).next() else {
        panic!("expected a pin");
    };
    assert_eq!(replaces, &vec![stray_path.to_string()]);
    let warning = plan
        .warnings
        .iter()
        .find(|w| matches!(w, Warning::StrayConfigs { .. }))
        .unwrap();
    assert_eq!(
        warning.to_string(),
        "w-1: sysupdate reads every kubernetes config: \
         /etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf (pulls v1.32), \
         /etc/sysupdate.kubernetes.d/kubernetes.conf (pulls v1.37); \
         the plan replaces them with one pinned /etc/sysupdate.kubernetes.d/kubernetes.conf"
    );
    assert!(render(&plan, false).contains(&format!("(disables {stray_path})")));
}

#[test]
fn a_patch_lag_at_the_target_converges_with_a_rolling_reboot_and_no_kubeadm() {
    let state = small("v1.37.1", "v1.37.1")
        .with("w-2", |f| f.kubernetes.staged = Some(v("v1.37.3")))
        .build();
    let plan = plan(&state, &target("v1.37"), &hub(&[(37, 3)])).unwrap();
    assert_eq!(plan.hops.len(), 1);
    assert!(!plan.hops[0].kubeadm);
    assert_eq!(
        phased(&plan.hops[0]),
        vec![
            (
                PhaseKind::Prepare,
                strings(&[
                    "cp-1 download kubernetes v1.37.3",
                    "w-1 download kubernetes v1.37.3"
                ])
            ),
            (
                PhaseKind::ControlPlaneReboots,
                strings(&["cp-1 stage kubernetes v1.37.3", "cp-1 roll"])
            ),
            (
                PhaseKind::WorkerPreparation,
                strings(&["w-1 stage kubernetes v1.37.3"])
            ),
            (PhaseKind::WorkerReboots, strings(&["w-1 roll", "w-2 roll"])),
        ]
    );
    assert!(plan.warnings.contains(&Warning::ControlPlaneStays {
        cluster: v("v1.37.1"),
        kubelets: v("v1.37.3")
    }));
}

#[test]
fn a_staged_but_not_booted_node_at_the_target_gets_its_reboot() {
    let state = small("v1.37.3", "v1.37.3")
        .with("w-1", |f| {
            f.kubernetes.running = Some(v("v1.37.2"));
        })
        .build();
    let plan = plan(&state, &target("v1.37"), &hub(&[(37, 3)])).unwrap();
    assert_eq!(hop_outline(&plan, 0), ["w-1 roll"]);
}

#[test]
fn without_the_hubs_list_a_staged_patch_still_gets_its_reboot() {
    let state = small("v1.37.2", "v1.37.2")
        .with("w-1", |f| f.kubernetes.staged = Some(v("v1.37.3")))
        .build();
    let hub = HubVersions::Unresolved("timeout".into());
    let plan = plan(&state, &target("v1.37"), &hub).unwrap();
    assert_eq!(hop_outline(&plan, 0), ["w-1 roll"]);
}

#[test]
fn containerd_is_pinned_in_the_first_hop_only_and_adds_no_reboot() {
    let state = small("v1.34.2", "v1.34.2")
        .containerd("v2.1", "v2.0.5")
        .build();
    let hub = hub(&[(34, 2), (35, 3), (36, 1)]);
    let plan = plan(&state, &target("v1.36"), &hub).unwrap();
    assert_eq!(plan.containerd, Some(m("v2.1")));
    assert_eq!(plan.total_reboots(), 6);
    let containerd_steps = |i: usize| -> Vec<String> {
        hop_outline(&plan, i)
            .into_iter()
            .filter(|s| s.contains("containerd"))
            .collect()
    };
    assert_eq!(
        containerd_steps(0),
        [
            "cp-1 pin containerd v2.1",
            "cp-1 stage containerd v2.1",
            "w-1 pin containerd v2.1",
            "w-1 stage containerd v2.1",
            "w-2 pin containerd v2.1",
            "w-2 stage containerd v2.1",
        ]
    );
    assert!(containerd_steps(1).is_empty());
    // The containerd pin for each node precedes that node's reboot.
    let steps = hop_outline(&plan, 0);
    for node in ["cp-1", "w-1", "w-2"] {
        let stage = steps
            .iter()
            .position(|s| s == &format!("{node} stage containerd v2.1"))
            .unwrap();
        let reboot = steps
            .iter()
            .position(|s| s == &format!("{node} roll"))
            .unwrap();
        assert!(stage < reboot, "{node}: {steps:?}");
    }
    let Some(Action::Pin { config, .. }) = plan.steps().map(|s| &s.action).find(|a| {
        matches!(
            a,
            Action::Pin {
                component: Component::Containerd,
                ..
            }
        )
    }) else {
        panic!("no containerd pin");
    };
    assert!(config.contains("MatchPattern=containerd-2.1.@v-%a.raw\n"));
    assert!(config.contains("CurrentSymlink=/etc/extensions/containerd.raw\n"));
}

#[test]
fn a_node_pinned_to_containerd_2_1_by_the_bakery_config_keeps_its_pin() {
    // sysext-bakery's containerd.conf, as published: no `v` in the series.
    let bakery = "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\n\
                  Path=https://extensions.flatcar.org/extensions/containerd/\n\
                  MatchPattern=containerd-2.1.@v-%a.raw\n\n[Target]\nInstancesMax=3\n\
                  Type=regular-file\nPath=/opt/extensions/containerd\n\
                  CurrentSymlink=/etc/extensions/containerd.raw\n";
    assert_eq!(
        crate::node::detect_pin("containerd", bakery),
        Pin::Pinned(m("v2.1"))
    );
    let state = small("v1.34.2", "v1.34.2")
        .containerd("v2.1", "v2.1.4")
        .build();
    for node in &state.nodes {
        let c = node.facts.containerd.as_ref().unwrap();
        assert_eq!(c.configs[0].pin, Pin::Pinned(m("v2.1")));
        assert!(
            c.configs[0]
                .content
                .contains("MatchPattern=containerd-2.1.@v-%a.raw\n")
        );
    }
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    assert_eq!(plan.containerd, Some(m("v2.1")));
    let touched: Vec<String> = hop_outline(&plan, 0)
        .into_iter()
        .filter(|s| s.contains("containerd"))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
}

#[test]
fn containerd_alone_gets_a_converge_hop_at_the_target() {
    let state = small("v1.37.2", "v1.37.2")
        .containerd("v2.1", "v2.0.5")
        .build();
    let plan = plan(&state, &target("v1.37"), &hub(&[(37, 2)])).unwrap();
    assert_eq!(plan.hops.len(), 1);
    assert_eq!(plan.hops[0].kind, HopKind::Converge);
    assert_eq!(plan.total_reboots(), 3);
    assert!(!plan.hops[0].kubeadm);
}

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
fn the_plan_text_shows_header_hops_parallel_groups_and_warnings() {
    let state = small("v1.34.2", "v1.34.2")
        .with("w-2", |f| f.os.staged = Some("4230.2.1".into()))
        .build();
    let plan = plan(&state, &target("v1.36"), &hub(&[(34, 2), (35, 3), (36, 1)])).unwrap();
    let text = render(&plan, false);
    let expected_start = "\
Plan: cluster v1.34.2 → v1.36.1
  2 hops from v1.34.2 to v1.36.1, 6 reboots.
  reboots per node: cp-1 2, w-1 2, w-2 2
  workers: every-hop: every node reboots once per minor
  hub: https://extensions.flatcar.org/extensions

Hop 1/2: upgrade to v1.35 (stages v1.35.3)
    download the new image (in parallel):
    1. │ cp-1  download kubernetes v1.35.3 (systemd-sysupdate; not staged yet)
    2. │ w-1   download kubernetes v1.35.3 (systemd-sysupdate; not staged yet)
    3. │ w-2   download kubernetes v1.35.3 (systemd-sysupdate; not staged yet)
    first control plane: kubeadm upgrade:
    4. cp-1  kubeadm upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes (the v1.35.3 image's kubeadm)
    control planes: reboot onto the new kubelet:
    5. cp-1  pin kubernetes to v1.35: write /etc/sysupdate.kubernetes.d/kubernetes.conf
    6. cp-1  stage kubernetes v1.35.3: point /etc/extensions/kubernetes.raw at it
    7. cp-1  drain, reboot into the staged images, wait until Ready, uncordon
    workers: kubeadm upgrade node, stage (in parallel):
    8. │ w-1   kubeadm upgrade node --skip-phases addon/kube-proxy (the v1.35.3 image's kubeadm)
";
    assert!(text.starts_with(expected_start), "{text}");
    assert!(
        text.contains("\nHop 2/2: upgrade to v1.36 (stages v1.36.1)\n"),
        "{text}"
    );
    assert!(
        text.contains("   33. │ w-2   remove old kubernetes images: v1.34.2\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "\nWarnings\n  ! w-2: Flatcar 4230.2.1 is staged; its reboot in hop v1.35 boots the new OS too\n"
        ),
        "{text}"
    );
    // One diff for the three nodes whose file changes the same way.
    assert!(
        text.contains(
            "\nConfig changes\n  cp-1, w-1, w-2: /etc/sysupdate.kubernetes.d/kubernetes.conf\n  --- now\n  +++ pinned to v1.35\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  @@ -5,5 +5,5 @@\n   Type=url-file\n   Path=https://extensions.flatcar.org/extensions/kubernetes/\n  -MatchPattern=kubernetes-v1.34.@v-%a.raw\n  +MatchPattern=kubernetes-v1.35.@v-%a.raw\n"
        ),
        "{text}"
    );
    // No colour codes unless asked for.
    assert!(!text.contains('\u{1b}'));
    assert!(render(&plan, true).contains('\u{1b}'));
}

#[test]
fn json_output_round_trips_and_uses_kebab_case_tags() {
    let state = small("v1.34.2", "v1.34.2")
        .containerd("v2.1", "v2.0.5")
        .build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    let json = serde_json::to_string_pretty(&plan).unwrap();
    assert!(json.contains("\"kind\": \"upgrade-apply\""), "{json}");
    assert!(json.contains("\"kind\": \"first-control-plane\""), "{json}");
    assert!(json.contains("\"cluster-from\": \"v1.34.2\""), "{json}");
    assert!(json.contains("\"component\": \"containerd\""), "{json}");
    let back: Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn the_saved_plan_round_trips_through_yaml() {
    let stray = "/etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf";
    let state = small("v1.34.2", "v1.34.2")
        .with("w-1", |f| {
            // Sorted by path, as the facts parser lists them.
            f.kubernetes.configs = vec![
                config(
                    stray,
                    "  leading spaces\ttab\ntrailing space \nno final newline",
                    Pin::Unknown,
                ),
                floating(),
            ];
            f.os.staged = Some("4230.2.1".into());
        })
        .api("w-2", |n| n.cordoned = true)
        .containerd("v2.1", "v2.0.5")
        .build();
    let plan = plan(&state, &target("v1.36"), &hub(&[(34, 2), (35, 3), (36, 1)])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".fleetctl/plan.yaml");
    save(&plan, &path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# fleetctl plan:"), "{text}");
    assert!(text.contains("apply refuses it"));
    assert_eq!(load(&path).unwrap(), plan);
    // Saving again replaces the file and leaves no temporary behind.
    save(&plan, &path).unwrap();
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["plan.yaml"]);
}

#[test]
fn loading_a_missing_or_foreign_file_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("plan.yaml");
    let err = format!("{:#}", load(&missing).unwrap_err());
    assert!(err.contains("run `fleetctl plan` first"), "{err}");
    std::fs::write(&missing, "format: 9\nplan: {}\n").unwrap();
    let err = format!("{:#}", load(&missing).unwrap_err());
    assert!(err.contains("run `fleetctl plan` again"), "{err}");
}

#[test]
fn the_plan_fingerprints_the_state_it_saw() {
    let state = small("v1.34.2", "v1.34.2").build();
    let plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    assert!(plan.fingerprint.diff(&Fingerprint::of(&state)).is_empty());
    // The three downloads, the apply, the pin, the stage, the roll.
    let rebooted = after_steps(&state, &plan, 7, &hub(&[(34, 2), (35, 3)]));
    assert_eq!(
        plan.fingerprint.diff(&Fingerprint::of(&rebooted)),
        [
            "cluster: kubeadm-config says v1.35.3, was v1.34.2",
            "cp-1: rebooted since the plan (boot id changed)",
            "cp-1: runs kubernetes v1.35.3, was v1.34.2",
            "cp-1: staged v1.35.3, was v1.34.2",
            "cp-1: /etc/sysupdate.kubernetes.d/kubernetes.conf changed",
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

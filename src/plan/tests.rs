//! Example tests of the planner: each fleet state the issue names, with the
//! exact steps (or refusal) expected.

use crate::node::Pin;
use crate::version::{TargetVersion, Version};

use super::testkit::*;
use super::*;

mod plan_exact;
mod plan_midway;
mod plan_output;

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
    // An older patch of the cluster's minor is what `plan` stages the
    // newest in place of (tests/plan_exact.rs); past the hub's newest
    // patch it is a downgrade.
    let err = plan(&state, &target("v1.37.1"), &testkit::hub(&[(37, 1)])).unwrap_err();
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

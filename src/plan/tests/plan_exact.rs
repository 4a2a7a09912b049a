//! An exact target older than the hub's newest patch of its minor: the plan
//! stages the newest (a pinned config cannot hold a node on an older patch),
//! so the cluster ends past the asked patch. Its own reruns, and a plan after
//! the finished run, are not downgrades; a cluster past every patch the hub
//! offers still is.

use super::*;

/// The shrunk case of `steps::execute::random_runs`: v1.33 to an exact
/// v1.34.0 while the hub publishes v1.34.2.
fn before() -> (FleetState, HubVersions) {
    let state = fleet("v1.33.1")
        .cp("cp-1", "v1.33.1")
        .worker("w-1", "v1.33.1")
        .build();
    (state, hub(&[(33, 1), (34, 2)]))
}

fn exact_warning() -> Warning {
    Warning::ExactOlderThanHub {
        requested: v("v1.34.0"),
        staged: v("v1.34.2"),
    }
}

#[test]
fn a_rerun_after_upgrade_apply_of_the_newer_patch_resumes() {
    let (state, hub) = before();
    let p0 = plan(&state, &target("v1.34.0"), &hub).unwrap();
    assert_eq!(p0.final_version(), Some(&v("v1.34.2")));
    let steps = flat(&p0);
    let apply = steps
        .iter()
        .position(|s| matches!(s.action, Action::UpgradeApply { .. }))
        .unwrap();
    // Stopped right after `upgrade apply v1.34.2`: kubeadm-config is past
    // the asked v1.34.0.
    let half = after_steps(&state, &p0, apply + 1, &hub);
    assert_eq!(half.cluster.version, Some(v("v1.34.2")));

    let p1 = plan(&half, &target("v1.34.0"), &hub).unwrap();
    assert_eq!(outline(&flat(&p1)), outline(&steps[apply + 1..]));
    assert_eq!(p1.final_version(), Some(&v("v1.34.2")));
    assert!(p1.warnings.contains(&exact_warning()), "{:?}", p1.warnings);

    let done = after_steps(&half, &p1, flat(&p1).len(), &hub);
    let again = plan(&done, &target("v1.34.0"), &hub).unwrap();
    assert!(again.is_noop(), "{:?}", again.hops);
}

#[test]
fn a_plan_after_the_finished_run_is_nothing_to_do_with_the_warning() {
    // Also a cluster at v1.34.2 from before that never asked for v1.34.0:
    // the fleet is where `plan v1.34.0` leads, nothing moves.
    let state = small("v1.34.2", "v1.34.2").build();
    let hub = hub(&[(33, 1), (34, 2)]);
    let plan = plan(&state, &target("v1.34.0"), &hub).unwrap();
    assert!(plan.is_noop(), "{:?}", plan.hops);
    assert_eq!(plan.warnings, vec![exact_warning()]);
    assert_eq!(
        summary(&plan),
        "Nothing to do: the cluster is at v1.34.2 and every node runs, stages and pins v1.34."
    );
}

#[test]
fn a_cluster_behind_the_newest_patch_converges_to_it_with_the_warning() {
    // At v1.34.1 from before, `plan v1.34.0` with v1.34.2 on the hub: what
    // sysupdate stages is the newest patch, and the plan says so.
    let state = small("v1.34.1", "v1.34.1").build();
    let plan = plan(&state, &target("v1.34.0"), &hub(&[(34, 2)])).unwrap();
    assert_eq!(plan.hops.len(), 1);
    assert_eq!(plan.hops[0].kind, HopKind::Converge);
    assert_eq!(plan.final_version(), Some(&v("v1.34.2")));
    assert_eq!(plan.warnings[0], exact_warning());
}

#[test]
fn a_cluster_past_every_patch_the_hub_offers_is_a_downgrade() {
    // v1.34.3 is no longer on the hub: this plan stages at most v1.34.2, so
    // it never put the cluster at v1.34.3.
    let state = small("v1.34.3", "v1.34.3").build();
    let err = plan(&state, &target("v1.34.0"), &hub(&[(34, 2)])).unwrap_err();
    assert_eq!(
        err,
        Refusal::Downgrade {
            cluster: "v1.34.3".into(),
            target: target("v1.34.0")
        }
    );
}

#[test]
fn with_the_hub_unreadable_a_rerun_is_not_refused() {
    // Nothing can be staged below the cluster without the list (a node's
    // patch only moves up), and apply keeps the saved plan's patches.
    let (state, hub) = before();
    let p0 = plan(&state, &target("v1.34.0"), &hub).unwrap();
    let apply = flat(&p0)
        .iter()
        .position(|s| matches!(s.action, Action::UpgradeApply { .. }))
        .unwrap();
    let half = after_steps(&state, &p0, apply + 1, &hub);
    let unreadable = HubVersions::Unresolved("timeout".into());
    let p1 = plan(&half, &target("v1.34.0"), &unreadable).unwrap();
    assert!(!p1.is_noop());
}

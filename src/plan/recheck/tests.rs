//! apply's decisions about a saved plan against the plan made again from the
//! live fleet, on real plans of a small fleet.

use crate::checks::{Check, CheckName, Verdict};
use crate::error::UsageError;
use crate::version::TargetVersion;

use super::super::planner::plan;
use super::super::testkit::*;
use super::super::{HubVersions, Phase, PhaseKind, Step};
use super::*;

/// One control plane and one worker on v1.34.2, planned to v1.35 with the
/// hub's `newest` v1.35 patch.
fn planned(hub_now: &HubVersions) -> Plan {
    let state = fleet("v1.34.2")
        .cp("cp-1", "v1.34.2")
        .worker("w-1", "v1.34.2")
        .build();
    let target: TargetVersion = "v1.35".parse().unwrap();
    plan(&state, &target, hub_now).unwrap()
}

fn unread() -> HubVersions {
    HubVersions::Unresolved("cp-1 could not read the hub".into())
}

fn message(e: anyhow::Error) -> String {
    assert!(e.is::<UsageError>(), "exit 2: {e:#}");
    e.to_string()
}

fn check(name: CheckName, verdict: Verdict) -> Check {
    Check {
        verdict,
        ..Check::pass(name, format!("{name} found something"))
    }
}

#[test]
fn a_blocking_check_refuses_the_plan_and_names_the_flag_to_go_past_it() {
    let mut p = planned(&hub(&[(34, 2), (35, 3)]));
    p.hops[0].checks = vec![
        check(CheckName::Pdb, Verdict::Warn),
        check(CheckName::Hub, Verdict::Ignored),
    ];
    refuse_blocked(&p).unwrap();
    p.hops[0].checks.push(check(CheckName::Pdb, Verdict::Block));
    p.hops[0]
        .checks
        .push(check(CheckName::Certificates, Verdict::Block));
    assert_eq!(
        message(refuse_blocked(&p).unwrap_err()),
        "the checks block this plan:\n  - hop to v1.35: pdb: pdb found something\n  - hop to v1.35: \
         certificates: certificates found something\nFix what each says (the plan above lists the \
         details), then plan again; or, to go past a check on purpose, plan again with \
         --ignore-check pdb --ignore-check certificates"
    );
}

#[test]
fn a_saved_sha256_that_is_not_one_is_refused() {
    let mut p = planned(&hub(&[(34, 2), (35, 3)]));
    refuse_bad_digests(&p, Path::new("plan.yaml")).unwrap();
    p.hops[0].sha256 = Some("abc".into());
    let e = message(refuse_bad_digests(&p, Path::new("plan.yaml")).unwrap_err());
    assert!(
        e.starts_with(
            "plan.yaml records a sha256 that is not 64 hexadecimal characters (hop to v1.35: `abc`)"
        ),
        "{e}"
    );
}

#[test]
fn a_plain_http_hub_is_refused_unless_allowed() {
    refuse_insecure_hub("https://hub.example", false).unwrap();
    refuse_insecure_hub("http://hub.example", true).unwrap();
    let e = message(refuse_insecure_hub("http://hub.example", false).unwrap_err());
    assert!(
        e.starts_with("the hub http://hub.example is plain HTTP"),
        "{e}"
    );
}

#[test]
fn ignored_checks_are_the_plans_and_apply_s_once_each() {
    let mut p = planned(&hub(&[(34, 2), (35, 3)]));
    p.ignored_checks = vec![CheckName::Pdb];
    assert_eq!(
        ignored_checks(&p, &[CheckName::Hub, CheckName::Pdb]),
        [CheckName::Pdb, CheckName::Hub]
    );
    assert_eq!(ignored_checks(&p, &[]), [CheckName::Pdb]);
}

#[test]
fn the_worker_strategy_is_the_plans_unless_apply_is_told() {
    let mut p = planned(&hub(&[(34, 2), (35, 3)]));
    p.workers.strategy = WorkerStrategy::EveryHop;
    assert_eq!(worker_strategy(&p, None), WorkerStrategy::EveryHop);
    assert_eq!(
        worker_strategy(&p, Some(WorkerStrategy::Jump)),
        WorkerStrategy::Jump
    );
}

#[test]
fn the_same_plan_again_is_not_stale() {
    let saved = planned(&hub(&[(34, 2), (35, 3)]));
    refuse_stale(&saved, &planned(&hub(&[(34, 2), (35, 3)]))).unwrap();
}

#[test]
fn a_newer_patch_on_the_hub_makes_the_plan_stale() {
    let saved = planned(&hub(&[(34, 2), (35, 3)]));
    let fresh = planned(&hub(&[(34, 2), (35, 4)]));
    let e = message(refuse_stale(&saved, &fresh).unwrap_err());
    assert_eq!(
        e,
        "the plan is stale: the fleet changed since it was made:\n  - hub: the newest v1.35 patch \
         is now v1.35.4, the plan stages v1.35.3\nRun `fleetctl plan` again, read it, then \
         `fleetctl apply`"
    );
}

#[test]
fn a_replaced_or_ambiguous_image_makes_the_plan_stale() {
    let saved = planned(&hub(&[(34, 2), (35, 3)]));
    let mut replaced = saved.clone();
    replaced.hops[0].sha256 = Some(sha("another image"));
    let e = message(refuse_stale(&saved, &replaced).unwrap_err());
    assert!(
        e.contains("hub: the sha256 of kubernetes v1.35.3 changed since the plan"),
        "{e}"
    );
    let mut ambiguous = saved.clone();
    ambiguous.hops[0].sha256 = None;
    let e = message(refuse_stale(&saved, &ambiguous).unwrap_err());
    assert!(
        e.contains("hub: SHA256SUMS no longer gives one sha256 for kubernetes v1.35.3"),
        "{e}"
    );
}

#[test]
fn an_unreadable_hub_keeps_the_saved_patches_and_sha256s() {
    let saved = planned(&hub(&[(34, 2), (35, 3)]));
    let mut fresh = planned(&unread());
    assert_eq!(fresh.hops[0].version, None);
    assert_eq!(
        keep_saved_patches(&saved, &mut fresh).as_deref(),
        Some("cp-1 could not read the hub")
    );
    assert_eq!(fresh.hops[0].version, Some(v("v1.35.3")));
    assert_eq!(fresh.hops[0].sha256, saved.hops[0].sha256);
    assert!(
        !fresh
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::HubUnresolved { .. })),
        "the warning is answered: {:?}",
        fresh.warnings
    );
    // Every step that names the image names the saved patch.
    let unresolved: Vec<String> = fresh
        .steps()
        .filter(|s| match &s.action {
            Action::Download { expect, .. }
            | Action::Stage {
                component: Component::Kubernetes,
                expect,
                ..
            } => expect.is_none(),
            Action::UpgradeApply { version, .. } | Action::UpgradeNode { version, .. } => {
                version.is_none()
            }
            _ => false,
        })
        .map(|s| format!("{s:?}"))
        .collect();
    assert!(unresolved.is_empty(), "{unresolved:?}");
    // And apply then goes on: the fresh plan is neither stale nor unverifiable.
    refuse_stale(&saved, &fresh).unwrap();
    refuse_unverifiable(&fresh).unwrap();
}

#[test]
fn with_no_saved_patch_either_the_hubs_warning_stays() {
    let saved = planned(&unread());
    let mut fresh = planned(&unread());
    assert_eq!(keep_saved_patches(&saved, &mut fresh), None);
    assert!(
        fresh
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::HubUnresolved { .. }))
    );
    assert_eq!(fresh.hops[0].version, None);
}

#[test]
fn a_hop_whose_image_has_no_sha256_cannot_start() {
    refuse_unverifiable(&planned(&hub(&[(34, 2), (35, 3)]))).unwrap();
    let e = message(refuse_unverifiable(&planned(&unread())).unwrap_err());
    assert!(
        e.starts_with(
            "fleetctl cannot verify an image this plan needs:\n  - the v1.35 image: the hub's \
             SHA256SUMS could not be read (cp-1 could not read the hub) and the saved plan \
             records no sha256 for it\n"
        ),
        "{e}"
    );
    let mut ambiguous = planned(&hub(&[(34, 2), (35, 3)]));
    ambiguous.hops[0].sha256 = None;
    let e = message(refuse_unverifiable(&ambiguous).unwrap_err());
    assert!(
        e.contains("kubernetes v1.35.3: the hub's SHA256SUMS gives no single sha256 for it"),
        "{e}"
    );
}

#[test]
fn only_a_hop_that_fetches_stages_or_runs_kubeadm_uses_its_image() {
    let upgrade = planned(&hub(&[(34, 2), (35, 3)]));
    assert!(uses_image(&upgrade.hops[0]));
    let mut hop = upgrade.hops[0].clone();
    let reboots_only = |steps: Vec<Step>| {
        vec![Phase {
            kind: PhaseKind::WorkerReboots,
            steps,
        }]
    };
    hop.phases = reboots_only(vec![Step::new("w-1", Action::Roll)]);
    assert!(!uses_image(&hop));
    hop.phases = reboots_only(vec![Step::new(
        "w-1",
        Action::Stage {
            component: Component::Containerd,
            minor: m("v1.35"),
            expect: None,
        },
    )]);
    assert!(!uses_image(&hop), "containerd's image is not the hop's");
    hop.phases = reboots_only(vec![Step::new(
        "w-1",
        Action::Stage {
            component: Component::Kubernetes,
            minor: m("v1.35"),
            expect: None,
        },
    )]);
    assert!(uses_image(&hop));
}

//! `fleetctl plan` against the simulated fleet (issue 4's "Done means"):
//! the three-hop path with the hub's patches, no-ops, refusals, warnings,
//! half-done fleets and the saved plan file. The planner's rules have unit
//! and property tests in src/plan; these check that the real binary, talking
//! to real sshd nodes, gathers the right facts, reads the hub through the
//! first control-plane node, prints and saves what it decided, and changes
//! nothing on any node while doing so.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use fleetctl::node::Pin;
use fleetctl::plan::{Action, Component, Hop, HopKind, Plan, Warning};
use fleetctl::version::{Minor, TargetVersion as Target, Version};

use super::support::{self, Fleet, Run, Scenario, Seat, SharedFleet, m, newest_on_hub, v};

const NODES: [&str; 3] = ["cp-1", "w-1", "w-2"];
const CONFIG: &str = "/etc/sysupdate.kubernetes.d/kubernetes.conf";

/// 1 control plane + 2 workers at v1.34.2. The hub has a different number of
/// patches per minor (v1.35: 5, v1.36: 2, every other minor: 4), so a hop
/// that announced another minor's patch count, or the first patch instead of
/// the newest, would show.
fn scenario_at(cluster: &str) -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(2)
        .kubernetes(cluster)
        .hub(|h| {
            h.patches_for = BTreeMap::from([("v1.35".to_string(), 5), ("v1.36".to_string(), 2)]);
        })
}

/// [`scenario_at`] v1.34.2, shared by the tests that only plan on it.
pub(crate) static AT_V1_34_2: SharedFleet =
    SharedFleet::new("plan: 1 + 2 at v1.34.2", || scenario_at("v1.34.2"));

fn plan(fleet: &impl Seat, args: &[&str]) -> Run {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    support::run(&fleet.inventory(), &all)
}

/// `plan ARGS --output json`, which must succeed and parse as a plan.
/// The plan as JSON, less the warning every simulated fleet earns: its hub
/// is plain HTTP (asserted here, once, so the tests below can compare the
/// other warnings exactly).
fn plan_json(fleet: &impl Seat, args: &[&str]) -> Plan {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--output", "json"]);
    let run = plan(fleet, &all).expect_code(0);
    let mut plan: Plan = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("--output json is not a plan: {e}\n{}", run.stdout));
    let insecure = Warning::InsecureHub {
        hub: fleet.fleet().hub_url().to_string(),
    };
    assert_eq!(
        plan.warnings.iter().filter(|w| **w == insecure).count(),
        1,
        "the sim's http:// hub is warned about once: {:?}",
        plan.warnings
    );
    plan.warnings.retain(|w| *w != insecure);
    plan
}

/// The Warnings section of the plan text, one line per warning, less the
/// plain-HTTP hub warning every simulated fleet earns.
fn text_warnings(stdout: &str) -> Vec<&str> {
    stdout
        .split("\nWarnings\n")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .take_while(|l| l.starts_with("  "))
                .filter(|l| !l.contains("is plain HTTP"))
                .collect()
        })
        .unwrap_or_default()
}

fn default_plan_path(fleet: &impl Seat) -> PathBuf {
    fleet.dir().join(".fleetctl/plan.yaml")
}

/// One line per step, `node action [version]`, to compare whole hops.
fn outline(hop: &Hop) -> Vec<String> {
    hop.steps()
        .map(|s| {
            let what = match &s.action {
                Action::Download { expect, .. } => format!("download {}", opt(expect)),
                Action::UpgradeApply { version, .. } => format!("upgrade-apply {}", opt(version)),
                Action::UpgradeNode { version, .. } => format!("upgrade-node {}", opt(version)),
                Action::Pin {
                    component, minor, ..
                } => format!("pin {component} {minor}"),
                Action::Stage {
                    component, expect, ..
                } => format!("stage {component} {}", opt(expect)),
                Action::Roll => "roll".into(),
                Action::Uncordon => "uncordon".into(),
                Action::RemoveImages { versions } => format!(
                    "remove-images {}",
                    versions
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            format!("{} {what}", s.node)
        })
        .collect()
}

fn opt(version: &Option<Version>) -> String {
    version
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "?".into())
}

/// What a full upgrade hop to `minor` staging `patch` looks like on this
/// fleet, in kubeadm's order: every node downloads the image; cp-1 runs its
/// `upgrade apply` with it before anything is staged; cp-1 is staged and
/// rolled; only then the workers run `upgrade node` and are staged; then
/// they roll one at a time. `old`: the images each node sheds at the end.
fn upgrade_hop_outline(minor: &str, patch: &str, old: Option<&str>) -> Vec<String> {
    let mut lines: Vec<String> = NODES
        .iter()
        .map(|n| format!("{n} download {patch}"))
        .collect();
    lines.push(format!("cp-1 upgrade-apply {patch}"));
    lines.push(format!("cp-1 pin kubernetes {minor}"));
    lines.push(format!("cp-1 stage kubernetes {patch}"));
    lines.push("cp-1 roll".into());
    for w in ["w-1", "w-2"] {
        lines.extend(worker_prep(w, minor, patch));
    }
    lines.push("w-1 roll".into());
    lines.push("w-2 roll".into());
    if let Some(old) = old {
        lines.extend(NODES.iter().map(|n| format!("{n} remove-images {old}")));
    }
    lines
}

fn worker_prep(node: &str, minor: &str, patch: &str) -> Vec<String> {
    vec![
        format!("{node} upgrade-node {patch}"),
        format!("{node} pin kubernetes {minor}"),
        format!("{node} stage kubernetes {patch}"),
    ]
}

fn hop_summary(plan: &Plan) -> Vec<(HopKind, Minor, Option<Version>)> {
    plan.hops
        .iter()
        .map(|h| (h.kind, h.minor, h.version.clone()))
        .collect()
}

/// Everything a plan must leave alone: per node its sysupdate configs, the
/// staged symlink, the downloaded images, the reboot flag and the boot id;
/// the API server's state; and the event log of mutating calls.
#[derive(Debug, PartialEq)]
struct Untouched {
    nodes: BTreeMap<String, String>,
    cluster: serde_json::Value,
    events: Vec<String>,
}

const NODE_STATE: &str = r#"
for f in /etc/sysupdate.kubernetes.d/*; do echo "== $f"; cat "$f"; done
echo "link $(readlink /etc/extensions/kubernetes.raw)"
ls /opt/extensions/kubernetes
test -e /run/reboot-required && echo reboot-required
cat /var/lib/fleetsim/os-update.json 2>/dev/null
echo "boot $(cat /proc/sys/kernel/random/boot_id)"
"#;

fn untouched(fleet: &Fleet) -> Untouched {
    let nodes = NODES
        .iter()
        .map(|n| (n.to_string(), fleet.ssh_ok(n, "root", NODE_STATE).unwrap()))
        .collect();
    let events = fleet
        .events()
        .unwrap()
        .iter()
        .map(|e| format!("{} {} → {}", e.node, e.argv.join(" "), e.result))
        .collect();
    Untouched {
        nodes,
        cluster: serde_json::to_value(fleet.cluster().unwrap()).unwrap(),
        events,
    }
}

fn assert_untouched(fleet: &Fleet, before: &Untouched) {
    let after = untouched(fleet);
    assert_eq!(
        after.events, before.events,
        "plan must not run anything that changes a node"
    );
    assert_eq!(
        after.cluster, before.cluster,
        "plan changed the API server's state"
    );
    assert_eq!(after.nodes, before.nodes, "plan changed a node");
}

#[test]
fn v1_34_to_v1_37_is_three_hops_with_the_hubs_newest_patches() {
    let fleet = AT_V1_34_2.get();
    let before = untouched(&fleet);
    let patches: Vec<Version> = ["v1.35", "v1.36", "v1.37"]
        .iter()
        .map(|minor| newest_on_hub(&fleet, minor))
        .collect();
    assert_eq!(patches, [v("v1.35.4"), v("v1.36.1"), v("v1.37.3")]);

    let text = plan(&fleet, &["v1.37", "--workers", "every-hop"]).expect_code(0);
    for line in [
        "Plan: cluster v1.34.2 → v1.37.3",
        "3 hops from v1.34.2 to v1.37.3, 9 reboots.",
        "reboots per node: cp-1 3, w-1 3, w-2 3",
        "Hop 1/3: upgrade to v1.35 (stages v1.35.4)",
        "Hop 2/3: upgrade to v1.36 (stages v1.36.1)",
        "Hop 3/3: upgrade to v1.37 (stages v1.37.3)",
        "cp-1  kubeadm upgrade apply v1.36.1 --skip-phases addon/kube-proxy --yes",
        "-MatchPattern=kubernetes-v1.34.@v-%a.raw",
        "+MatchPattern=kubernetes-v1.35.@v-%a.raw",
    ] {
        assert!(
            text.stdout.contains(line),
            "no `{line}` in\n{}",
            text.stdout
        );
    }
    assert!(text_warnings(&text.stdout).is_empty(), "{}", text.stdout);
    let saved_note = format!("plan saved to {}", default_plan_path(&fleet).display());
    assert!(text.stderr.contains(&saved_note), "{}", text.stderr);

    let json = plan_json(&fleet, &["v1.37", "--workers", "every-hop"]);
    assert_eq!(json.requested, Target::Minor(m("v1.37")));
    assert_eq!(json.cluster_from, Some(v("v1.34.2")));
    assert_eq!(json.hub, fleet.hub_url());
    assert_eq!(
        hop_summary(&json),
        [
            (HopKind::Upgrade, m("v1.35"), Some(patches[0].clone())),
            (HopKind::Upgrade, m("v1.36"), Some(patches[1].clone())),
            (HopKind::Upgrade, m("v1.37"), Some(patches[2].clone())),
        ]
    );
    let olds = [None, Some("v1.34.2"), Some("v1.35.4")];
    for ((hop, patch), old) in json.hops.iter().zip(&patches).zip(olds) {
        assert!(hop.kubeadm);
        assert_eq!(
            outline(hop),
            upgrade_hop_outline(&hop.minor.to_string(), &patch.to_string(), old)
        );
    }
    assert!(json.warnings.is_empty(), "{:?}", json.warnings);
    // The pin writes exactly what sysext-bakery publishes for the minor,
    // pointing at this fleet's hub.
    let Some(Action::Pin { config, .. }) = json.hops[2]
        .steps()
        .map(|s| &s.action)
        .find(|a| matches!(a, Action::Pin { .. }))
    else {
        panic!("hop 3 pins nothing: {:?}", outline(&json.hops[2]));
    };
    assert!(config.contains(&format!("Path={}/kubernetes/\n", fleet.hub_url())));
    assert!(config.contains("\nMatchPattern=kubernetes-v1.37.@v-%a.raw\n"));

    assert_untouched(&fleet, &before);
}

#[test]
fn the_saved_plan_is_yaml_beside_the_inventory_with_every_boot_id() {
    let fleet = AT_V1_34_2.get();
    let path = default_plan_path(&fleet);
    assert!(!path.exists());

    let printed = plan_json(&fleet, &["v1.36"]);
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# fleetctl plan"),
        "the saved plan should say what it is:\n{text}"
    );
    let mut saved = fleetctl::plan::load(&path).unwrap();
    saved
        .warnings
        .retain(|w| !matches!(w, Warning::InsecureHub { .. }));
    assert_eq!(saved, printed, "the saved plan is not the one printed");
    assert_eq!(hop_summary(&saved).len(), 2);

    let fp = &saved.fingerprint;
    assert_eq!(fp.cluster_version, Some(v("v1.34.2")));
    assert_eq!(
        fp.nodes.keys().map(String::as_str).collect::<Vec<_>>(),
        NODES
    );
    for node in NODES {
        let f = &fp.nodes[node];
        assert_eq!(f.boot_id, fleet.boot(node).unwrap().boot_id, "{node}");
        assert_eq!(f.kubernetes_running, Some(v("v1.34.2")), "{node}");
        assert_eq!(f.kubernetes_staged, Some(v("v1.34.2")), "{node}");
        assert_eq!(
            f.configs.keys().map(String::as_str).collect::<Vec<_>>(),
            [CONFIG],
            "{node}"
        );
    }

    // --out writes there instead, and leaves the default plan alone.
    let default_before = fs::read(&path).unwrap();
    let out = fleet.dir().join("elsewhere/next.yaml");
    let run = plan(&fleet, &["v1.37", "--out", out.to_str().unwrap()]).expect_code(0);
    assert!(
        run.stderr
            .contains(&format!("plan saved to {}", out.display())),
        "{}",
        run.stderr
    );
    let elsewhere = fleetctl::plan::load(&out).unwrap();
    assert_eq!(elsewhere.requested, Target::Minor(m("v1.37")));
    assert_eq!(elsewhere.hops.len(), 3);
    assert_eq!(elsewhere.fingerprint, saved.fingerprint);
    assert_eq!(fs::read(&path).unwrap(), default_before);
    assert_no_temp_files(&path);
    assert_no_temp_files(&out);
}

/// The atomic save leaves nothing but the plan in its directory.
fn assert_no_temp_files(plan: &Path) {
    let dir = plan.parent().unwrap();
    let names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let expected = plan.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(names, [expected], "in {}", dir.display());
}

#[test]
fn the_same_version_is_a_no_op() {
    // v1.34.3 is the hub's newest v1.34 patch: nothing to stage anywhere.
    let fleet = support::start(scenario_at("v1.34.3"));
    assert_eq!(newest_on_hub(&fleet, "v1.34"), v("v1.34.3"));
    let before = untouched(&fleet);

    // Without a target the inventory's kubernetes_version (v1.34) is used.
    for args in [&["v1.34"][..], &[], &["v1.34.3"]] {
        let run = plan(&fleet, args).expect_code(0);
        assert!(
            run.stdout.contains(
                "Nothing to do: the cluster is at v1.34.3 and every node runs, stages and pins v1.34."
            ),
            "plan {args:?}:\n{}",
            run.stdout
        );
        assert!(!run.stdout.contains("Hop "), "{}", run.stdout);
        let json = plan_json(&fleet, args);
        assert!(json.is_noop(), "plan {args:?}: {:?}", json.hops);
        assert!(
            json.warnings.is_empty(),
            "plan {args:?}: {:?}",
            json.warnings
        );
        assert_eq!(json.total_reboots(), 0);
    }
    assert_untouched(&fleet, &before);
}

#[test]
fn refusals_exit_2_name_the_reason_and_change_nothing() {
    // The hub does not serve v1.36, so v1.37 is unreachable.
    let fleet = support::start(scenario_at("v1.34.2").hub(|h| h.missing = vec!["v1.36".into()]));
    let saved = default_plan_path(&fleet);
    plan(&fleet, &["v1.35"]).expect_code(0);
    let saved_before = fs::read(&saved).unwrap();
    let before = untouched(&fleet);

    // An older patch of the cluster's minor is no downgrade while the hub
    // has a newer one (it is staged instead, docs/upgrade-path.md "The
    // target"); past every patch the hub has, it is:
    // `plan::tests::plan_exact::a_cluster_past_every_patch_the_hub_offers_is_a_downgrade`.
    let cases: [(&str, &[&str]); 4] = [
        (
            "v1.33",
            &[
                "refusing to downgrade: the cluster is at v1.34.2 and the target is v1.33",
                "restore from an etcd backup",
            ],
        ),
        (
            "v1.37",
            &[
                "the hub publishes no kubernetes v1.36 image",
                "Pick a published target or another hub",
            ],
        ),
        (
            "v1.35.9",
            &["v1.35.9 is not on the hub (it has: v1.35.0, v1.35.1, v1.35.2, v1.35.3, v1.35.4)"],
        ),
        ("v2.0", &["fleetctl plans within one major version"]),
    ];
    for (target, messages) in cases {
        for output in ["text", "json"] {
            let run = plan(&fleet, &[target, "--output", output]).expect_code(2);
            assert!(
                run.stderr.starts_with("fleetctl: error: "),
                "plan {target}: {}",
                run.stderr
            );
            for message in messages {
                assert!(
                    run.stderr.contains(message),
                    "plan {target}: no `{message}` in\n{}",
                    run.stderr
                );
            }
            assert_eq!(
                run.stdout, "",
                "plan {target} --output {output} printed a plan"
            );
            assert!(!run.stderr.contains("plan saved"), "{}", run.stderr);
            assert_eq!(
                fs::read(&saved).unwrap(),
                saved_before,
                "a refused plan {target} replaced the saved plan"
            );
        }
    }

    let out = fleet.dir().join("refused/plan.yaml");
    plan(&fleet, &["v1.37", "--out", out.to_str().unwrap()]).expect_code(2);
    assert!(!out.exists(), "a refused plan was written to --out");
    assert_untouched(&fleet, &before);
}

#[test]
fn a_down_hub_leaves_patches_unresolved_with_a_warning() {
    let fleet = support::start(scenario_at("v1.34.2").faults(|f| f.hub_down = true));
    let before = untouched(&fleet);

    let text = plan(&fleet, &["v1.37", "--workers", "every-hop"]).expect_code(0);
    for line in [
        "Plan: cluster v1.34.2 → v1.37",
        "Hop 1/3: upgrade to v1.35 (patch unresolved)",
        "Hop 3/3: upgrade to v1.37 (patch unresolved)",
        "could not read the hub's image list",
        "kubeadm upgrade apply <newest v1.35> --skip-phases addon/kube-proxy --yes",
    ] {
        assert!(
            text.stdout.contains(line),
            "no `{line}` in\n{}",
            text.stdout
        );
    }

    let json = plan_json(&fleet, &["v1.37", "--workers", "every-hop"]);
    assert_eq!(
        hop_summary(&json),
        [
            (HopKind::Upgrade, m("v1.35"), None),
            (HopKind::Upgrade, m("v1.36"), None),
            (HopKind::Upgrade, m("v1.37"), None),
        ]
    );
    for hop in &json.hops {
        // Without the hub's list the patches are unknown, and so are the
        // images each hop makes old: the clean-up is decided at apply time.
        let expected: Vec<String> = upgrade_hop_outline(&hop.minor.to_string(), "?", None);
        let got: Vec<String> = outline(hop)
            .into_iter()
            .filter(|l| !l.contains("remove-images"))
            .collect();
        assert_eq!(got, expected);
    }
    let reasons: Vec<&str> = json
        .warnings
        .iter()
        .filter_map(|w| match w {
            Warning::HubUnresolved { reason } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1, "{:?}", json.warnings);
    let url = format!("{}/kubernetes/SHA256SUMS", fleet.hub_url());
    assert!(
        reasons[0].contains("cp-1") && reasons[0].contains(&url) && reasons[0].contains("503"),
        "the warning should say who could not read what: {}",
        reasons[0]
    );
    assert!(default_plan_path(&fleet).exists());
    assert_untouched(&fleet, &before);
}

#[test]
fn an_exact_target_older_than_the_hubs_newest_patch_warns() {
    let fleet = AT_V1_34_2.get();

    let text = plan(&fleet, &["v1.37.1"]).expect_code(0);
    for line in [
        "Plan: cluster v1.34.2 → v1.37.3 (asked for v1.37.1)",
        "v1.37.1 was asked for, but sysupdate always stages the newest patch of the pinned series: the nodes will get v1.37.3",
    ] {
        assert!(
            text.stdout.contains(line),
            "no `{line}` in\n{}",
            text.stdout
        );
    }
    let json = plan_json(&fleet, &["v1.37.1"]);
    assert_eq!(json.requested, Target::Exact(v("v1.37.1")));
    assert_eq!(json.final_version(), Some(&v("v1.37.3")));
    assert_eq!(
        json.warnings,
        [Warning::ExactOlderThanHub {
            requested: v("v1.37.1"),
            staged: v("v1.37.3"),
        }]
    );

    // Asking for the newest patch itself is not worth a warning.
    let newest = plan_json(&fleet, &["v1.37.3"]);
    assert!(newest.warnings.is_empty(), "{:?}", newest.warnings);
    assert_eq!(newest.hops, json.hops);
}

#[test]
fn floating_configs_stray_configs_and_staged_os_updates_are_warned_about() {
    let fleet = support::start(
        scenario_at("v1.34.2")
            .with_node("w-1", |n| n.pin = fleetsim::Pin::Floating)
            .with_node("w-2", |n| {
                n.os_update = Some("4081.3.0".into());
                n.extra_configs = vec!["v1.32".into()];
            }),
    );
    let before = untouched(&fleet);
    let newest_overall = newest_on_hub(&fleet, "v1.38");

    let json = plan_json(&fleet, &["v1.35"]);
    let stray = "/etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf";
    assert_eq!(json.warnings.len(), 3, "{:#?}", json.warnings);
    for w in &json.warnings {
        match w {
            Warning::Floating {
                node,
                component,
                path,
                would_stage,
            } => {
                assert_eq!(node, "w-1");
                assert_eq!(*component, Component::Kubernetes);
                assert_eq!(path, CONFIG);
                assert_eq!(would_stage.as_ref(), Some(&newest_overall));
            }
            Warning::OsUpdateStaged {
                node,
                version,
                reboot_hop,
            } => {
                assert_eq!(node, "w-2");
                assert_eq!(version, "4081.3.0");
                assert_eq!(*reboot_hop, Some(m("v1.35")));
            }
            Warning::StrayConfigs {
                node,
                component,
                configs,
            } => {
                assert_eq!(node, "w-2");
                assert_eq!(*component, Component::Kubernetes);
                let paths: Vec<(&str, &Pin)> =
                    configs.iter().map(|c| (c.path.as_str(), &c.pin)).collect();
                assert!(
                    paths.contains(&(stray, &Pin::Pinned(m("v1.32")))),
                    "{configs:?}"
                );
            }
            other => panic!("unexpected warning {other:?}"),
        }
    }

    // The plan fixes what it warns about: w-1 is re-pinned from its
    // floating config, w-2's stray config is disabled by the same pin.
    let hop = &json.hops[0];
    let pin_of = |node: &str| {
        hop.steps()
            .find_map(|s| match &s.action {
                Action::Pin {
                    previous, replaces, ..
                } if s.node == node => Some((previous.clone(), replaces.clone())),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{node} is not pinned in {:?}", outline(hop)))
    };
    let (previous, replaces) = pin_of("w-1");
    assert!(
        previous
            .unwrap_or_default()
            .contains("MatchPattern=kubernetes-@v-%a.raw"),
        "w-1's pin should replace its floating config"
    );
    assert!(replaces.is_empty());
    assert_eq!(pin_of("w-2").1, [stray]);
    assert_eq!(outline(hop), upgrade_hop_outline("v1.35", "v1.35.4", None));

    let text = plan(&fleet, &["v1.35"]).expect_code(0);
    for line in [
        &format!(
            "w-1: {CONFIG} floats (kubernetes-@v-%a.raw): it would stage {newest_overall} on its own"
        ),
        "4081.3.0",
        stray,
        &format!("(disables {stray})"),
    ] {
        assert!(
            text.stdout.contains(line),
            "no `{line}` in\n{}",
            text.stdout
        );
    }
    assert_untouched(&fleet, &before);
}

#[test]
fn a_fleet_left_halfway_finishes_the_clusters_minor_first() {
    // Interrupted after `upgrade apply v1.35.4` on cp-1: the cluster and
    // cp-1 are at v1.35, both workers still run v1.34. Every hop for every
    // node, as before workers could jump (tests/cli/jump.rs has the jump).
    let fleet = support::start(
        scenario_at("v1.35.4")
            .with_node("w-1", |n| n.running = Some("v1.34.2".into()))
            .with_node("w-2", |n| n.running = Some("v1.34.2".into())),
    );
    let before = untouched(&fleet);

    let json = plan_json(&fleet, &["v1.37", "--workers", "every-hop"]);
    assert_eq!(json.cluster_from, Some(v("v1.35.4")));
    assert_eq!(
        hop_summary(&json),
        [
            (HopKind::Finish, m("v1.35"), Some(v("v1.35.4"))),
            (HopKind::Upgrade, m("v1.36"), Some(v("v1.36.1"))),
            (HopKind::Upgrade, m("v1.37"), Some(v("v1.37.3"))),
        ]
    );
    let mut finish = vec![
        "w-1 download v1.35.4".to_string(),
        "w-2 download v1.35.4".into(),
    ];
    finish.extend(worker_prep("w-1", "v1.35", "v1.35.4"));
    finish.extend(worker_prep("w-2", "v1.35", "v1.35.4"));
    finish.extend(["w-1 roll".to_string(), "w-2 roll".into()]);
    assert_eq!(outline(&json.hops[0]), finish);
    // cp-1 was provisioned at v1.35.4: it never had a v1.34.2 image.
    let mut second = upgrade_hop_outline("v1.36", "v1.36.1", Some("v1.34.2"));
    second.retain(|l| l != "cp-1 remove-images v1.34.2");
    assert_eq!(outline(&json.hops[1]), second);
    assert_eq!(
        json.reboots(),
        BTreeMap::from([
            ("cp-1".to_string(), 2),
            ("w-1".to_string(), 3),
            ("w-2".to_string(), 3),
        ])
    );

    let text = plan(&fleet, &["v1.37"]).expect_code(0);
    assert!(
        text.stdout.contains(
            "Hop 1/3: finish v1.35: the cluster is there, some nodes are not (stages v1.35.4)"
        ),
        "{}",
        text.stdout
    );
    assert_untouched(&fleet, &before);
}

#[test]
fn a_worker_already_staged_is_only_rebooted() {
    // Interrupted later: w-1 was pinned to v1.35 and staged v1.35.4, then
    // the run stopped before its reboot; w-2 was not reached.
    let fleet = support::start(
        scenario_at("v1.35.4")
            .with_node("w-1", |n| {
                n.running = Some("v1.34.2".into());
                n.staged = Some("v1.35.4".into());
            })
            .with_node("w-2", |n| n.running = Some("v1.34.2".into())),
    );
    // fleetsim pins a node's config to the minor it runs; the pin step that
    // preceded this stage had moved it to v1.35.
    fleet
        .ssh_ok(
            "w-1",
            "root",
            &format!("sed -i 's/kubernetes-v1\\.34\\./kubernetes-v1.35./' {CONFIG}"),
        )
        .unwrap();
    let before = untouched(&fleet);

    let json = plan_json(&fleet, &["v1.37"]);
    assert_eq!(json.hops[0].kind, HopKind::Finish);
    // w-1 has no fleetctl marker of its kubeadm step: it runs it (harmless
    // to repeat) before its reboot, from the image it staged.
    let mut finish = vec!["w-2 download v1.35.4".to_string()];
    finish.push("w-1 upgrade-node v1.35.4".into());
    finish.extend(worker_prep("w-2", "v1.35", "v1.35.4"));
    finish.extend(["w-1 roll".to_string(), "w-2 roll".into()]);
    assert_eq!(outline(&json.hops[0]), finish);
    assert!(json.warnings.is_empty(), "{:?}", json.warnings);
    assert_eq!(
        json.fingerprint.nodes["w-1"].kubernetes_staged,
        Some(v("v1.35.4"))
    );

    // Stopping at the cluster's minor converges the stragglers, and the
    // staged worker still gets its `upgrade node` before its reboot.
    let converge = plan_json(&fleet, &["v1.35"]);
    assert_eq!(
        hop_summary(&converge),
        [(HopKind::Converge, m("v1.35"), Some(v("v1.35.4")))]
    );
    assert!(converge.hops[0].kubeadm);
    assert_eq!(outline(&converge.hops[0]), finish);
    assert_untouched(&fleet, &before);
}

#[test]
fn a_first_control_plane_booted_before_upgrade_apply_gets_the_apply_then_a_reboot() {
    // Interrupted between cp-1's reboot onto v1.35.4 and its `upgrade apply`:
    // kubeadm-config still says v1.34.2 and cp-1 is still cordoned.
    let fleet = support::start(
        scenario_at("v1.34.2").with_node("cp-1", |n| n.running = Some("v1.35.4".into())),
    );
    fleet
        .ssh_ok(
            "cp-1",
            "root",
            "kubectl --kubeconfig /etc/kubernetes/admin.conf cordon cp-1",
        )
        .unwrap();
    let before = untouched(&fleet);

    let json = plan_json(&fleet, &["v1.36"]);
    assert_eq!(json.cluster_from, Some(v("v1.34.2")));
    assert_eq!(
        hop_summary(&json),
        [
            (HopKind::Upgrade, m("v1.35"), Some(v("v1.35.4"))),
            (HopKind::Upgrade, m("v1.36"), Some(v("v1.36.1"))),
        ]
    );
    // cp-1 runs the v1.35.4 image already (an older fleetctl's order): it
    // stays cordoned, runs `upgrade apply`, and reboots: the kubelet
    // restart that loads the config apply wrote.
    let mut first = vec![
        "w-1 download v1.35.4".to_string(),
        "w-2 download v1.35.4".into(),
        "cp-1 upgrade-apply v1.35.4".into(),
        "cp-1 roll".into(),
    ];
    for w in ["w-1", "w-2"] {
        first.extend(worker_prep(w, "v1.35", "v1.35.4"));
    }
    first.extend(["w-1 roll".to_string(), "w-2 roll".into()]);
    assert_eq!(outline(&json.hops[0]), first);
    // cp-1 was provisioned at v1.35.4: it never had a v1.34.2 image.
    let mut second = upgrade_hop_outline("v1.36", "v1.36.1", Some("v1.34.2"));
    second.retain(|l| l != "cp-1 remove-images v1.34.2");
    assert_eq!(outline(&json.hops[1]), second);
    assert_eq!(
        json.warnings,
        [Warning::Cordoned {
            node: "cp-1".into()
        }]
    );
    assert_untouched(&fleet, &before);
}

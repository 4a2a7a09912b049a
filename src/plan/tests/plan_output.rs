//! What the planner hands on: the plan as text and JSON, the saved file and
//! the fingerprint apply compares.

use super::*;

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

/// Issue 38: escape first, then colour. A node's words in the plan (here a
/// stray config's path in a warning) are escaped even where they are not
/// styled, so with colour on they cannot pass for fleetctl's own green.
#[test]
fn remote_text_in_the_plan_cannot_carry_our_colours() {
    let state = small("v1.34.2", "v1.34.2").build();
    let mut plan = plan(&state, &target("v1.35"), &hub(&[(34, 2), (35, 3)])).unwrap();
    plan.warnings.push(Warning::Floating {
        node: "w-1".into(),
        component: Component::Kubernetes,
        path: "/etc/sysupdate.d/\u{1b}[32mfine\u{1b}[0m.conf".into(),
        would_stage: None,
    });
    let text = render(&plan, true);
    assert!(text.contains("\\033[32mfine\\033[0m"), "{text}");
    // Our own styles still colour.
    assert!(text.contains("\u{1b}[1m"), "{text}");
    assert!(!text.contains('\u{e000}'), "{text}");
}

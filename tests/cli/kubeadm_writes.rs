//! Issue 23, part A, against the simulated fleet: the hop's kubeadm writes
//! the kubelet configuration as the real one does (kubeadm v1.37 moves the
//! runtime endpoint out of kubeadm-flags.env into instance-config.yaml), and
//! a cgroup v1 node gets past kubeadm's SystemVerification preflight only on
//! the operator's word: the one end-to-end proof that the flag reaches that
//! node's kubeadm alone, which refuses cgroup v1 without it. The plan's
//! judgement of what kubeadm will write and which nodes skip the preflight
//! are proven on pure code (docs/rules-on-the-fake.md).

use std::fs;

use fleetsim::state::Event;

use super::support::{self};

use super::support::run_on as run;

/// The kubeadm upgrade events of `node`, as typed.
fn kubeadm_calls<'a>(events: &'a [Event], node: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.node == node && e.argv.join(" ").starts_with("kubeadm upgrade"))
        .collect()
}

fn skips_system_verification(e: &Event) -> bool {
    e.argv
        .iter()
        .any(|a| a == "--ignore-preflight-errors=SystemVerification")
}

#[test]
fn a_cgroup_v1_worker_allowed_by_the_configmap_passes_only_with_ignore_check_cgroup() {
    // Real-OS nodes boot on cgroup v2 only (docs/simulator.md).
    let mut scenario = support::on_emulated_os(support::scenario())
        .control_planes(1)
        .workers(2)
        .kubernetes("v1.34.2")
        .with_node("w-1", |n| n.cgroup_v1 = true);
    scenario.kubelet_config = Some("failCgroupV1: false\n".into());
    let fleet = support::start(scenario);

    let before = fleet.events().unwrap().len();
    let blocked = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    let text = format!("{}\n{}", blocked.stdout, blocked.stderr);
    support::assert_has(
        &text,
        &[
            "BLOCK   cgroup",
            "w-1: cgroup v1; its kubelet allows it",
            "SystemVerification",
            "kubernetes/kubernetes#134744",
            "--ignore-check cgroup",
        ],
    );
    assert!(!text.contains("cp-1: cgroup v1"), "{text}");
    assert!(!text.contains("w-2: cgroup v1"), "{text}");
    assert!(!fleet.dir().join(".fleetctl/plan.yaml").exists());
    let events = fleet.events().unwrap();
    assert!(
        events[before..]
            .iter()
            .all(|e| !e.argv.join(" ").starts_with("kubeadm upgrade") && !support::is_reboot(e)),
        "plan changed nothing: {}",
        support::describe(&events[before..])
    );

    // The operator goes past it on purpose.
    run(&fleet, &["plan", "v1.35", "--ignore-check", "cgroup"]).expect_code(0);
    let saved = fs::read_to_string(fleet.dir().join(".fleetctl/plan.yaml")).unwrap();
    assert!(
        saved.contains("skip-system-verification:\n    - w-1\n"),
        "{saved}"
    );
    let start = fleet.events().unwrap().len();
    support::apply(&fleet, &["--yes"]).expect_code(0);
    let events = fleet.events().unwrap();
    let log = &events[start..];
    let w1 = kubeadm_calls(log, "w-1");
    assert!(!w1.is_empty(), "{}", support::describe(log));
    assert!(
        w1.iter()
            .all(|e| skips_system_verification(e) && e.result == "ok"),
        "{}",
        support::describe(log)
    );
    for other in ["cp-1", "w-2"] {
        let calls = kubeadm_calls(log, other);
        assert!(!calls.is_empty(), "{other}: {}", support::describe(log));
        assert!(
            calls.iter().all(|e| !skips_system_verification(e)),
            "only w-1 skips SystemVerification: {}",
            support::describe(log)
        );
    }
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-1"].kubelet_version, c.version, "w-1's kubelet");
    // The journal says which node's kubeadm ran with the override.
    let journal = fs::read_dir(fleet.dir().join(".fleetctl"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("journal"))
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() {
                fs::read_dir(p)
                    .unwrap()
                    .filter_map(|f| fs::read_to_string(f.ok()?.path()).ok())
                    .collect::<Vec<_>>()
            } else {
                fs::read_to_string(p).into_iter().collect()
            }
        })
        .collect::<String>();
    assert!(
        journal.contains("kubeadm-preflight-ignored") && journal.contains("w-1"),
        "{journal}"
    );
    support::assert_invariants_hold(&events);
}

#[test]
fn the_hop_to_1_37_moves_the_runtime_endpoint_out_of_kubeadm_flags_env() {
    const FLAGS: &str = "/var/lib/kubelet/kubeadm-flags.env";
    const INSTANCE: &str = "/var/lib/kubelet/instance-config.yaml";
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.36.2"),
    );
    // The flag kubeadm up to v1.33 wrote, still in w-1's file (an
    // operator's hand, or config management), beside its instance-config.
    fleet
        .ssh_ok(
            "w-1",
            "root",
            &format!(
                "printf 'KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\\n' > {FLAGS}"
            ),
        )
        .unwrap();
    run(&fleet, &["plan", "v1.37"]).expect_code(0);
    support::apply(&fleet, &["--yes"]).expect_code(0);
    for node in ["cp-1", "w-1"] {
        let flags = fleet.ssh_ok(node, "root", &format!("cat {FLAGS}")).unwrap();
        assert!(
            !flags.contains("--container-runtime-endpoint"),
            "{node}: {flags}"
        );
        let instance = fleet
            .ssh_ok(node, "root", &format!("cat {INSTANCE}"))
            .unwrap();
        assert!(
            instance
                .contains("containerRuntimeEndpoint: \"unix:///run/containerd/containerd.sock\""),
            "{node}: {instance}"
        );
    }
    let c = fleet.cluster().unwrap();
    for node in ["cp-1", "w-1"] {
        assert_eq!(c.nodes[node].kubelet_version, c.version, "{node}'s kubelet");
    }
    assert!(c.version.starts_with("v1.37."), "{}", c.version);
    support::assert_invariants_hold(&fleet.events().unwrap());
}

//! Issue 23, part A, against the simulated fleet: the hop's kubeadm writes
//! the kubelet configuration as the real one does (kubeadm v1.37 moves the
//! runtime endpoint out of kubeadm-flags.env into instance-config.yaml).
//! The plan's judgement of what kubeadm will write, and the cgroup v1 node
//! let past SystemVerification on the operator's word, are proven on pure
//! code (docs/rules-on-the-fake.md).

use super::support::{self};

use super::support::run_on as run;

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

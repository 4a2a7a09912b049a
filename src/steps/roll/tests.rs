//! Tests of the roll: their own file, so the order of a node's roll reads as
//! one piece under the 500-line bound.

use super::*;

#[test]
fn names_the_pods_a_budget_protects() {
    let stderr = "evicting pod default/web-7d9f\n\
                error when evicting pods/\"web-7d9f\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n\
                error when evicting pods/\"web-7d9f\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget.\n\
                error: unable to drain node \"w-1\" due to error: [error when evicting pods/\"db-0\" -n \"data\": global timeout reached: 2s], continuing command...";
    assert_eq!(blocked_pods(stderr), vec!["data/db-0", "default/web-7d9f"]);
    assert!(blocked_pods("node/w-1 cordoned\n").is_empty());
}

#[test]
fn the_command_before_a_reboot_prints_the_link_then_the_boot_id() {
    assert_eq!(
        upgrade::before_reboot(),
        "readlink '/etc/extensions/kubernetes.raw' && cat /proc/sys/kernel/random/boot_id"
    );
    assert_eq!(
        link_and_boot_id("../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw\nb1c2\n")
            .unwrap(),
        (
            "../../opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw",
            "b1c2"
        )
    );
    for bad in ["", "only-a-link\n", "a\nb\nc\n"] {
        assert!(link_and_boot_id(bad).is_err(), "{bad:?}");
    }
}

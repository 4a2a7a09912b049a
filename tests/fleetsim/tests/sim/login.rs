//! Who can log in and what they may do: root directly, core with
//! passwordless sudo, and nobody whose host key does not match.

use crate::common::{run, small, start, stderr};

#[test]
fn root_and_core_with_sudo_both_work() {
    let fleet = start(small(0));
    assert_eq!(run(&fleet, "cp-1", "root", "id -u").trim(), "0");
    assert_eq!(run(&fleet, "cp-1", "core", "id -un").trim(), "core");
    // uid 500 on every host, as on Flatcar, and it owns its ~/.ssh.
    assert_eq!(
        run(&fleet, "cp-1", "core", "id -u; id -g; stat -c %u ~/.ssh").trim(),
        "500\n500\n500"
    );
    assert_eq!(
        run(&fleet, "cp-1", "core", "echo $HOME").trim(),
        "/home/core"
    );
    assert_eq!(run(&fleet, "cp-1", "core", "sudo -n id -u").trim(), "0");
}

#[test]
fn core_needs_sudo_for_root_only_files_and_reboot() {
    let fleet = start(small(0));
    let out = fleet
        .ssh("cp-1", "core", "cat /etc/kubernetes/admin.conf")
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    let conf = run(
        &fleet,
        "cp-1",
        "core",
        "sudo -n cat /etc/kubernetes/admin.conf",
    );
    assert!(conf.contains("kind: Config"), "{conf}");

    let before = crate::common::boot_id(&fleet, "cp-1");
    let out = fleet.ssh("cp-1", "core", "/usr/sbin/reboot").unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("Interactive authentication required"));
    assert_eq!(
        crate::common::boot_id(&fleet, "cp-1"),
        before,
        "no reboot happened"
    );
}

#[test]
fn a_wrong_host_key_is_refused_by_strict_checking() {
    let fleet = start(small(1).with_node("w-1", |n| n.wrong_host_key = true));
    run(&fleet, "cp-1", "root", "true");
    let out = fleet.ssh("w-1", "root", "true").unwrap();
    assert_eq!(out.status.code(), Some(255));
    assert!(
        stderr(&out).contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{}",
        stderr(&out)
    );
}

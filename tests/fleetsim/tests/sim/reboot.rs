//! Reboots: the session drops for real, the node is down for the boot
//! delay, and what was staged is what runs afterwards.

use std::time::Duration;

use crate::common::{boot_id, node_events, run, small, start, stderr, wait_child};

#[test]
fn reboot_drops_every_session_and_boots_fresh() {
    let fleet = start(small(1));
    run(
        &fleet,
        "w-1",
        "root",
        "touch /run/marker /var/tmp/disk-marker",
    );
    let before = boot_id(&fleet, "w-1");
    let mut idle = fleet
        .ssh_command("w-1", "root")
        .unwrap()
        .arg("sleep 600")
        .spawn()
        .unwrap();

    let out = fleet.ssh("w-1", "root", "reboot").unwrap();
    assert_eq!(
        out.status.code(),
        Some(255),
        "the session drops: {}",
        stderr(&out)
    );
    let idle_status = wait_child(&mut idle, Duration::from_secs(20)).expect("idle session dropped");
    assert_eq!(idle_status.code(), Some(255));

    fleet.wait_down("w-1").unwrap();
    assert!(
        fleet.cluster().unwrap().nodes["cp-1"].up,
        "only w-1 went down"
    );
    fleet.wait_rebooted("w-1", &before).unwrap();

    let after = boot_id(&fleet, "w-1");
    assert_ne!(after, before);
    assert_eq!(fleet.boot("w-1").unwrap().boot_id, after);
    run(&fleet, "w-1", "root", "test ! -e /run/marker");
    run(&fleet, "w-1", "root", "test -e /var/tmp/disk-marker");
    fleet.wait_ready("w-1").unwrap();
    assert_eq!(
        node_events(&fleet, "w-1"),
        [
            "(boot)",
            "(kubelet)",
            "reboot",
            "(shutdown)",
            "(boot)",
            "(kubelet)"
        ]
    );
}

#[test]
fn shutdown_r_now_and_sudo_reboot_also_reboot() {
    let fleet = start(small(2).with_node("w-2", |n| n.user = Some("core".into())));
    let (b1, b2) = (boot_id(&fleet, "w-1"), boot_id(&fleet, "w-2"));
    let out = fleet.ssh("w-1", "root", "shutdown -r now").unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", stderr(&out));
    let out = fleet.ssh("w-2", "core", "sudo reboot").unwrap();
    assert_eq!(out.status.code(), Some(255), "{}", stderr(&out));
    fleet.wait_rebooted("w-1", &b1).unwrap();
    fleet.wait_rebooted("w-2", &b2).unwrap();
    assert_ne!(boot_id(&fleet, "w-1"), b1);
    assert_ne!(boot_id(&fleet, "w-2"), b2);
    assert!(node_events(&fleet, "w-1").contains(&"shutdown -r now".to_string()));
    assert!(node_events(&fleet, "w-2").contains(&"reboot".to_string()));
}

#[test]
fn unsupported_power_commands_fail_loudly_and_do_nothing() {
    let fleet = start(small(0));
    let before = boot_id(&fleet, "cp-1");
    let out = fleet.ssh("cp-1", "root", "shutdown -h now").unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("fleetsim: unsupported: shutdown -h now"),
        "{}",
        stderr(&out)
    );
    assert_eq!(boot_id(&fleet, "cp-1"), before);
    let recorded = fleet.events().unwrap();
    assert!(
        recorded
            .iter()
            .any(|e| e.argv == ["shutdown", "-h", "now"] && e.result == "unsupported")
    );
}

#[test]
fn staged_is_not_running_until_reboot() {
    let fleet = start(small(1).with_node("w-1", |n| n.staged = Some("v1.34.3".into())));
    // A reboot is pending from the start, and the old version still runs.
    run(&fleet, "w-1", "root", "test -e /run/reboot-required");
    assert_eq!(fleet.boot("w-1").unwrap().kubernetes, "v1.34.2");
    assert_eq!(
        fleet.cluster().unwrap().nodes["w-1"].kubelet_version,
        "v1.34.2"
    );

    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    let boot = fleet.wait_rebooted("w-1", &id).unwrap();
    assert_eq!(boot.kubernetes, "v1.34.3");
    // The API learns the new version from the kubelet, once it started.
    fleet.wait_ready("w-1").unwrap();
    assert_eq!(
        fleet.cluster().unwrap().nodes["w-1"].kubelet_version,
        "v1.34.3"
    );
    run(&fleet, "w-1", "root", "test ! -e /run/reboot-required");

    // By hand, the way sysupdate writes it (relative): staged again, not running.
    run(
        &fleet,
        "w-1",
        "root",
        "ln -sfn ../../opt/extensions/kubernetes/kubernetes-v1.34.2-x86-64.raw /etc/extensions/kubernetes.raw",
    );
    let record = run(&fleet, "w-1", "root", "cat /var/lib/fleetsim/node.json");
    assert!(record.contains("\"kubernetes\": \"v1.34.3\""), "{record}");
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    assert_eq!(
        fleet.wait_rebooted("w-1", &id).unwrap().kubernetes,
        "v1.34.2"
    );
}

#[test]
fn a_dangling_sysext_link_merges_nothing_and_says_so() {
    let fleet = start(small(1));
    run(
        &fleet,
        "w-1",
        "root",
        "ln -sfn /opt/extensions/kubernetes/kubernetes-v1.35.0-x86-64.raw /etc/extensions/kubernetes.raw",
    );
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    assert_eq!(fleet.wait_rebooted("w-1", &id).unwrap().kubernetes, "");
    let boot = fleet
        .events()
        .unwrap()
        .into_iter()
        .rfind(|e| e.node == "w-1" && e.argv == ["(boot)"])
        .unwrap();
    assert!(
        boot.result
            .starts_with("warning: no kubernetes sysext merged: /etc/extensions/kubernetes.raw → "),
        "{}",
        boot.result
    );
    assert!(
        boot.result.contains("No such file or directory"),
        "{}",
        boot.result
    );
    assert_eq!(boot.version, None);
    // No image, no kubelet: the shell cannot find one, systemd has no unit,
    // and the Node posts no status.
    let out = fleet.ssh("w-1", "root", "kubelet --version").unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    run(&fleet, "w-1", "root", "test ! -e /usr/bin/kubeadm");
    let out = fleet
        .ssh("w-1", "root", "systemctl status kubelet")
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(stderr(&out), "Unit kubelet.service could not be found.\n");
    let kubelet = fleet
        .events()
        .unwrap()
        .into_iter()
        .rfind(|e| e.node == "w-1" && e.argv == ["(kubelet)"])
        .unwrap();
    assert_eq!(kubelet.result, "failed: Unit kubelet.service not found.");
    assert!(
        !fleet
            .cluster()
            .unwrap()
            .node_ready("w-1", fleetsim::state::now() + 3600.0)
    );
}

#[test]
fn the_running_version_is_the_images_content_not_its_name() {
    let fleet = start(small(1).with_node("w-1", |n| n.staged = Some("v1.34.3".into())));
    // A v1.34.3 image under a v1.35.0 name: the boot reads what is inside.
    run(
        &fleet,
        "w-1",
        "root",
        "cd /opt/extensions/kubernetes && mv kubernetes-v1.34.3-x86-64.raw kubernetes-v1.35.0-x86-64.raw \
         && ln -sfn ../../opt/extensions/kubernetes/kubernetes-v1.35.0-x86-64.raw /etc/extensions/kubernetes.raw",
    );
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    assert_eq!(
        fleet.wait_rebooted("w-1", &id).unwrap().kubernetes,
        "v1.34.3"
    );
    assert_eq!(
        run(&fleet, "w-1", "root", "kubelet --version"),
        "Kubernetes v1.34.3\n"
    );
    let boot = fleet
        .events()
        .unwrap()
        .into_iter()
        .rfind(|e| e.node == "w-1" && e.argv == ["(boot)"])
        .unwrap();
    assert_eq!(
        (boot.result.as_str(), boot.version.as_deref()),
        ("ok", Some("v1.34.3"))
    );
}

#[test]
fn a_staged_os_update_runs_after_reboot() {
    let fleet = start(small(1).with_node("w-1", |n| n.os_update = Some("4081.3.0".into())));
    let os = run(&fleet, "w-1", "root", "grep ^VERSION= /etc/os-release");
    assert_eq!(os.trim(), "VERSION=4081.2.0");
    let staged = run(
        &fleet,
        "w-1",
        "root",
        "cat /var/lib/fleetsim/os-update.json",
    );
    assert!(staged.contains("\"new_version\": \"4081.3.0\""), "{staged}");
    run(&fleet, "w-1", "root", "test -e /run/reboot-required");

    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    assert_eq!(fleet.wait_rebooted("w-1", &id).unwrap().os, "4081.3.0");
    let os = run(&fleet, "w-1", "root", "grep ^VERSION= /etc/os-release");
    assert_eq!(os.trim(), "VERSION=4081.3.0");
    run(
        &fleet,
        "w-1",
        "root",
        "test ! -e /var/lib/fleetsim/os-update.json",
    );
}

#[test]
fn ssh_answers_before_the_kubelet_is_ready_and_the_api_answers() {
    // Long delays, so "not yet" cannot flip while the test looks.
    let fleet = start(small(0).kubelet_delay(600.0).api_delay(600.0));
    let id = boot_id(&fleet, "cp-1");
    let _ = fleet.ssh("cp-1", "root", "reboot");
    fleet.wait_rebooted("cp-1", &id).unwrap();
    run(&fleet, "cp-1", "root", "true");
    let c = fleet
        .wait_for("cp-1's kubelet runs", |c| {
            c.nodes["cp-1"].kubelet_running().is_some()
        })
        .unwrap();
    let now = fleetsim::state::now();
    assert!(!c.node_ready("cp-1", now));
    assert!(!c.api_up(now));
    // Both delays count from the kubelet's start.
    let started = c.nodes["cp-1"].kubelet_running().unwrap().started_at;
    assert!(!c.node_ready("cp-1", started + 599.0));
    assert!(c.node_ready("cp-1", started + 600.0));
    assert!(c.api_up(started + 600.0));
}

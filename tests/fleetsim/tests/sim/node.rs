//! A node looks like a Flatcar node: paths, files and tools where fleetctl
//! expects them.

use crate::common::{run, small, start, stderr};
use fleetsim::Pin;

#[test]
fn a_control_plane_has_flatcar_paths_and_a_pinned_config() {
    let fleet = start(small(0));
    assert_eq!(run(&fleet, "cp-1", "root", "hostname").trim(), "cp-1");
    let os = run(&fleet, "cp-1", "root", "cat /etc/os-release");
    assert!(os.contains("\nID=flatcar\n"), "{os}");
    assert!(os.contains("\nVERSION=4081.2.0\n"), "{os}");
    assert_eq!(
        run(
            &fleet,
            "cp-1",
            "root",
            "readlink /etc/extensions/kubernetes.raw"
        )
        .trim(),
        "/opt/extensions/kubernetes/kubernetes-v1.34.2-x86-64.raw"
    );
    assert_eq!(
        run(&fleet, "cp-1", "root", "ls /opt/extensions/kubernetes").trim(),
        "kubernetes-v1.34.2-x86-64.raw"
    );
    // The image is the hub's, byte for byte (the same reproducible build).
    let on_node = run(
        &fleet,
        "cp-1",
        "root",
        "sha256sum /opt/extensions/kubernetes/kubernetes-v1.34.2-x86-64.raw",
    );
    let (_, sums) =
        fleetsim::hub::get(&format!("{}/kubernetes/SHA256SUMS", fleet.hub_url())).unwrap();
    let sums = String::from_utf8(sums).unwrap();
    let hub_sum = sums
        .lines()
        .find(|l| l.ends_with("  kubernetes-v1.34.2-x86-64.raw"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap();
    assert_eq!(on_node.split_whitespace().next(), Some(hub_sum));
    let conf = run(
        &fleet,
        "cp-1",
        "root",
        "cat /etc/sysupdate.kubernetes.d/kubernetes.conf",
    );
    let expected = format!(
        "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\nPath={}/kubernetes/\nMatchPattern=kubernetes-v1.34.@v-%a.raw\n\n[Target]\nInstancesMax=3\nType=regular-file\nPath=/opt/extensions/kubernetes\nCurrentSymlink=/etc/extensions/kubernetes.raw\n",
        fleet.hub_url()
    );
    assert_eq!(conf, expected);
    run(&fleet, "cp-1", "root", "test -s /etc/kubernetes/admin.conf");
    run(&fleet, "cp-1", "root", "test ! -e /run/reboot-required");
}

#[test]
fn the_tools_are_at_their_real_paths() {
    let fleet = start(small(0));
    for path in [
        "/usr/bin/kubelet",
        "/usr/bin/kubeadm",
        "/usr/bin/kubectl",
        "/usr/bin/update_engine_client",
        "/usr/bin/systemctl",
        "/usr/bin/systemd-sysext",
        "/usr/lib/systemd/systemd-sysupdate",
        "/usr/sbin/reboot",
        "/usr/sbin/shutdown",
    ] {
        run(&fleet, "cp-1", "root", &format!("test -x {path}"));
    }
    // One binary for all: the hard links share an inode.
    let inodes = run(
        &fleet,
        "cp-1",
        "root",
        "stat -c %i /usr/lib/fleetsim/kubelet /usr/sbin/reboot /usr/lib/systemd/systemd-sysupdate",
    );
    let distinct: std::collections::BTreeSet<&str> = inodes.lines().collect();
    assert_eq!(distinct.len(), 1, "{inodes}");
}

#[test]
fn kubelet_kubeadm_and_kubectl_come_from_the_merged_sysext() {
    let fleet = start(small(0));
    // /usr is the image's usr over the node's, read-only, as systemd-sysext merges it.
    let mounts = run(&fleet, "cp-1", "root", "grep ' /usr ' /proc/self/mountinfo");
    let top = mounts.lines().last().unwrap();
    assert!(top.contains(" ro,"), "{mounts}");
    assert!(
        top.contains("lowerdir=") && top.contains("/sysext/usr:/usr"),
        "{mounts}"
    );
    let out = fleet.ssh("cp-1", "root", "touch /usr/bin/x").unwrap();
    assert!(
        stderr(&out).contains("Read-only file system"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        run(
            &fleet,
            "cp-1",
            "root",
            "cat /usr/local/share/kubernetes-version"
        ),
        "v1.34.2\n"
    );
    // The image's wrapper, not a link to fleetsim, and its version is the image's.
    let wrapper = run(&fleet, "cp-1", "root", "cat /usr/bin/kubeadm");
    assert!(
        wrapper.contains("FLEETSIM_TOOL_VERSION=v1.34.2"),
        "{wrapper}"
    );
    assert_eq!(
        run(&fleet, "cp-1", "root", "kubelet --version"),
        "Kubernetes v1.34.2\n"
    );
    // The loop device is the image's, read-only and cleared with the node.
    let loops = run(
        &fleet,
        "cp-1",
        "root",
        "losetup -l -n -O RO,AUTOCLEAR,BACK-FILE",
    );
    assert!(
        loops
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "1",
                    "1",
                    "/opt/extensions/kubernetes/kubernetes-v1.34.2-x86-64.raw"
                ]),
        "{loops}"
    );
    // The internal entry point refuses to guess a version.
    let out = fleet
        .ssh("cp-1", "root", "/usr/lib/fleetsim/kubeadm version")
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("run the one a kubernetes sysext image provides"));
}

#[test]
fn a_worker_can_float_and_carry_extra_configs() {
    let fleet = start(small(1).with_node("w-1", |n| {
        n.pin = Pin::Floating;
        n.extra_configs = vec!["v1.32".into()];
    }));
    let ls = run(&fleet, "w-1", "root", "ls /etc/sysupdate.kubernetes.d");
    assert_eq!(ls, "kubernetes-v1.32.conf\nkubernetes.conf\n");
    let conf = run(
        &fleet,
        "w-1",
        "root",
        "cat /etc/sysupdate.kubernetes.d/kubernetes.conf",
    );
    assert!(
        conf.contains("\nMatchPattern=kubernetes-@v-%a.raw\n"),
        "{conf}"
    );
    let extra = run(
        &fleet,
        "w-1",
        "root",
        "cat /etc/sysupdate.kubernetes.d/kubernetes-v1.32.conf",
    );
    assert!(
        extra.contains("\nMatchPattern=kubernetes-v1.32.@v-%a.raw\n"),
        "{extra}"
    );
    run(
        &fleet,
        "w-1",
        "root",
        "test ! -e /etc/kubernetes/admin.conf",
    );
}

#[test]
fn boot_record_and_boot_id_agree() {
    let fleet = start(small(1));
    let record = run(&fleet, "w-1", "root", "cat /var/lib/fleetsim/node.json");
    let boot: fleetsim::state::NodeBoot = serde_json::from_str(&record).unwrap();
    assert_eq!(boot.name, "w-1");
    assert_eq!(boot.kubernetes, "v1.34.2");
    assert_eq!(boot.os, "4081.2.0");
    assert_eq!(crate::common::boot_id(&fleet, "w-1"), boot.boot_id);
    assert_ne!(crate::common::boot_id(&fleet, "cp-1"), boot.boot_id);
    // The boot record is read-only inside the node, even for root.
    let out = fleet
        .ssh("w-1", "root", "echo {} > /var/lib/fleetsim/node.json")
        .unwrap();
    assert!(!out.status.success());
    let cluster = fleet.cluster().unwrap();
    assert!(
        cluster
            .nodes
            .values()
            .all(|n| n.up && n.kubelet_version == "v1.34.2")
    );
    assert_eq!(cluster.version, "v1.34.2");
    assert!(!cluster.kube_proxy);
    assert_eq!(
        cluster.nodes["cp-1"].control_plane_version.as_deref(),
        Some("v1.34.2")
    );
    assert_eq!(cluster.nodes["w-1"].control_plane_version, None);
}

#[test]
fn the_inventory_describes_the_fleet() {
    let fleet = start(small(2).with_node("w-2", |n| n.user = Some("core".into())));
    let text = std::fs::read_to_string(fleet.inventory()).unwrap();
    assert!(text.contains("kubernetes_version: v1.34\n"), "{text}");
    assert!(
        text.contains(&format!("  hub: {}\n", fleet.hub_url())),
        "{text}"
    );
    assert!(text.contains("  host_key_checking: strict\n"), "{text}");
    let w2 = fleet.address("w-2").unwrap();
    assert!(
        text.contains(&format!(
            "  - {{name: w-2, address: {w2}, role: worker, user: core}}\n"
        )),
        "{text}"
    );
}

#[test]
fn kured_is_installed_when_asked() {
    let fleet = start(small(0).kured(true));
    let kured = fleet.cluster().unwrap().kured.expect("kured DaemonSet");
    assert_eq!(
        (kured.namespace.as_str(), kured.name.as_str()),
        ("kube-system", "kured")
    );
    assert_eq!(
        kured.command,
        [
            "/usr/bin/kured",
            "--reboot-sentinel=/sentinel/reboot-required"
        ],
        "upstream kured-ds.yaml"
    );
    assert!(!kured.active, "its pods idle unless the scenario says run");
}

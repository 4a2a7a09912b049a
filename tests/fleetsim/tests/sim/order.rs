//! The order of a minor upgrade, replayed by hand through ssh, and judged by
//! `fleetsim::invariants`: the old order (stage, reboot into the new
//! kubelet, then kubeadm) breaks the rules the way reality breaks — the
//! v1.35 kubelet refuses kubeadm v1.34's flags, the only control plane's API
//! stays down, kubeadm cannot even start — and the new order (download, run
//! the staged image's kubeadm, then stage and reboot) keeps every rule, with
//! the API down only while cp-1 itself reboots.

use std::time::{Duration, Instant};

use fleetsim::Fleet;
use fleetsim::invariants::{self, Rule};

use crate::common::{boot_id, run, small, start, stderr, stdout};

const TO: &str = "v1.35.3";
const IMAGE: &str = "/opt/extensions/kubernetes/kubernetes-v1.35.3-x86-64.raw";

/// Runs `cmd` as root, or as core through `sudo -n` (how fleetctl works
/// when it logs in as core).
fn as_user(fleet: &Fleet, node: &str, user: &str, cmd: &str) -> String {
    if user == "root" {
        run(fleet, node, "root", cmd)
    } else {
        let quoted = format!("'{}'", cmd.replace('\'', r"'\''"));
        run(fleet, node, user, &format!("sudo -n sh -c {quoted}"))
    }
}

/// Polls `cmd` on `node` until it prints `want` (30 s).
fn wait_output(fleet: &Fleet, node: &str, user: &str, cmd: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = fleet.ssh(node, user, cmd).unwrap();
        if stdout(&out) == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "`{cmd}` on {node} kept printing {:?}, not {want:?}",
            stdout(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn reboot(fleet: &Fleet, node: &str, user: &str) {
    let id = boot_id(fleet, node);
    let cmd = if user == "root" {
        "systemctl reboot"
    } else {
        "sudo -n systemctl reboot"
    };
    let out = fleet.ssh(node, user, cmd).unwrap();
    assert_eq!(
        out.status.code(),
        Some(255),
        "the session drops: {}",
        stderr(&out)
    );
    fleet.wait_rebooted(node, &id).unwrap();
}

#[test]
fn the_old_order_crashes_the_kubelet_and_the_checks_say_so() {
    let fleet = start(small(1).kubelet_restart(0.3));
    fleet.wait_ready("cp-1").unwrap();
    fleet.wait_ready("w-1").unwrap();
    // Pin the next minor and let the bakery's sysupdate stage it.
    run(
        &fleet,
        "cp-1",
        "root",
        "sed -i 's/kubernetes-v1.34.@v/kubernetes-v1.35.@v/' /etc/sysupdate.kubernetes.d/kubernetes.conf \
         && systemctl start systemd-sysupdate \
         && readlink /etc/extensions/kubernetes.raw \
         && kubectl --kubeconfig=/etc/kubernetes/admin.conf drain cp-1 --ignore-daemonsets --delete-emptydir-data",
    );
    reboot(&fleet, "cp-1", "root");
    fleet
        .wait_for("cp-1's v1.35 kubelet failed", |_| {
            fleet.events().unwrap().iter().any(|e| {
                e.node == "cp-1" && e.argv == ["(kubelet)"] && e.result.starts_with("failed")
            })
        })
        .unwrap();
    // Waiting for its next restart (checked in one go: each restart makes
    // it `active` for a moment).
    wait_output(
        &fleet,
        "cp-1",
        "root",
        "systemctl is-active kubelet; echo \"exit $?\"",
        "activating\nexit 3\n",
    );
    // The booted image's kubeadm is the new one, but the API it needs is gone:
    // the only control plane's static pods never started.
    let out = fleet
        .ssh(
            "cp-1",
            "root",
            &format!("/usr/bin/kubeadm upgrade apply {TO} --skip-phases addon/kube-proxy --yes"),
        )
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("connect: connection refused"),
        "{}",
        stderr(&out)
    );
    let out = fleet
        .ssh(
            "cp-1",
            "root",
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf get nodes",
        )
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "the API stays down");

    let events = fleet.events().unwrap();
    let violations = invariants::check(&events);
    let on_cp: Vec<Rule> = violations
        .iter()
        .filter(|v| v.node == "cp-1")
        .map(|v| v.rule)
        .collect();
    assert!(
        on_cp.contains(&Rule::KubeletBeforeKubeadm) && on_cp.contains(&Rule::KubeletCrashed),
        "{violations:#?}"
    );
    let shutdown = events
        .iter()
        .find(|e| e.node == "cp-1" && e.argv == ["(shutdown)"])
        .unwrap()
        .t;
    assert_eq!(
        invariants::api_outages(&events),
        [(shutdown, f64::INFINITY)],
        "down from cp-1's shutdown on, for good"
    );
}

/// The new order on one node: download without staging, run the staged
/// image's kubeadm, pin and link, drain, reboot, wait for what fleetctl
/// waits for.
fn upgrade_node(fleet: &Fleet, node: &str, user: &str, kubeadm_args: &str) {
    let script = format!(
        "set -e
         d=$(mktemp -d /run/fleetctl-XXXXXX)
         sed -e 's/kubernetes-v1.34.@v/kubernetes-v1.35.@v/' -e '/^CurrentSymlink=/d' \
             /etc/sysupdate.kubernetes.d/kubernetes.conf > $d/kubernetes.conf
         /usr/lib/systemd/systemd-sysupdate --definitions=$d update 2>/dev/null
         test \"$(readlink /etc/extensions/kubernetes.raw)\" != '../../{IMAGE}'
         mkdir $d/mnt
         mount -o loop,ro {IMAGE} $d/mnt
         $d/mnt/usr/bin/kubeadm version -o short
         $d/mnt/usr/bin/kubeadm {kubeadm_args} >/dev/null
         umount $d/mnt
         rm -r $d
         sed -i 's/kubernetes-v1.34.@v/kubernetes-v1.35.@v/' /etc/sysupdate.kubernetes.d/kubernetes.conf
         ln -s ../..{IMAGE} /etc/extensions/.kubernetes.raw.new
         mv -T /etc/extensions/.kubernetes.raw.new /etc/extensions/kubernetes.raw"
    );
    assert_eq!(as_user(fleet, node, user, &script), format!("{TO}\n"));
    // Still the old kubelet until the reboot.
    assert_eq!(
        as_user(fleet, node, user, "kubelet --version"),
        "Kubernetes v1.34.2\n"
    );
    run(
        fleet,
        "cp-1",
        "root",
        &format!(
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf drain {node} --ignore-daemonsets --delete-emptydir-data"
        ),
    );
    reboot(fleet, node, user);
    wait_output(fleet, node, user, "systemctl is-active kubelet", "active\n");
    assert_eq!(
        as_user(fleet, node, user, "kubelet --version"),
        format!("Kubernetes {TO}\n")
    );
    // The real kubectl's `wait` fails at once while the API server is not
    // listening yet (cp-1 itself just rebooted): wait for it to answer first.
    wait_output(
        fleet,
        "cp-1",
        "root",
        "kubectl --kubeconfig=/etc/kubernetes/admin.conf get --raw /readyz",
        "ok",
    );
    run(
        fleet,
        "cp-1",
        "root",
        &format!(
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf wait --for=condition=Ready node/{node} --timeout=30s && kubectl --kubeconfig=/etc/kubernetes/admin.conf uncordon {node}"
        ),
    );
}

#[test]
fn the_new_order_keeps_every_rule() {
    let fleet = start(
        small(1)
            .kubelet_restart(0.3)
            .with_node("w-1", |n| n.user = Some("core".into())),
    );
    fleet.wait_ready("cp-1").unwrap();
    fleet.wait_ready("w-1").unwrap();

    upgrade_node(
        &fleet,
        "cp-1",
        "root",
        &format!("upgrade apply {TO} --skip-phases addon/kube-proxy --yes"),
    );
    // Its static pods run again, at the new version, as fleetctl checks them.
    fleet
        .wait_for("the API answers", |c| c.api_up(fleetsim::state::now()))
        .unwrap();
    let pods = run(
        &fleet,
        "cp-1",
        "root",
        "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s -n kube-system \
         get pod kube-apiserver-cp-1 kube-controller-manager-cp-1 kube-scheduler-cp-1 -o json",
    );
    let list: serde_json::Value = serde_json::from_str(&pods).unwrap();
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    for pod in items {
        assert_eq!(pod["status"]["phase"], "Running");
        let image = pod["spec"]["containers"][0]["image"].as_str().unwrap();
        assert!(image.ends_with(&format!(":{TO}")), "{image}");
    }

    upgrade_node(
        &fleet,
        "w-1",
        "core",
        "upgrade node --skip-phases addon/kube-proxy",
    );

    let events = fleet.events().unwrap();
    let violations = invariants::check(&events);
    assert!(violations.is_empty(), "{violations:#?}");
    // kubeadm ran from the staged image: the event has what was typed and
    // the binary's version.
    let kubeadm: Vec<(&str, String, Option<&str>)> = events
        .iter()
        .filter(|e| e.argv.first().is_some_and(|a| a == "kubeadm") && e.result == "ok")
        .map(|e| {
            (
                e.node.as_str(),
                e.argv[1..3].join(" "),
                e.version.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        kubeadm,
        [
            ("cp-1", "upgrade apply".to_string(), Some(TO)),
            ("w-1", "upgrade node".to_string(), Some(TO))
        ]
    );
    // The API was unavailable only while cp-1 itself rebooted.
    let cp1 = |what: &str| -> Vec<f64> {
        events
            .iter()
            .filter(|e| e.node == "cp-1" && e.argv == [what])
            .map(|e| e.t)
            .collect()
    };
    let (down, up) = (cp1("(shutdown)")[0], cp1("(static-pods)")[2]);
    let outages = invariants::api_outages(&events);
    assert_eq!(outages.len(), 1, "{outages:?}");
    assert!(outages[0].0 >= down && outages[0].1 <= up, "{outages:?}");
    let cluster = fleet.cluster().unwrap();
    assert_eq!(cluster.version, TO);
    assert!(cluster.nodes.values().all(|n| n.kubelet_version == TO));
}

//! Issue 14, parts 1 and 3, against the simulated fleet: the etcd snapshot
//! before each `upgrade apply` verified by etcd's own sha256 whatever tools
//! the etcd image has, and the nodes a v1.35 kubelet would refuse (cgroup
//! v1 without `failCgroupV1: false`).

use std::fs;
use std::path::{Path, PathBuf};

use fleetsim::state::{Event, SnapshotDamage};
use sha2::{Digest, Sha256};

use super::support::{self, Fleet, Scenario};

/// One control plane and one worker at v1.34.2, whose etcd runs the image
/// kubeadm v1.34.0 and v1.34.1 deployed: 3.6.4-0, no etcdutl, and an
/// etcdctl without `snapshot status` that prints its help and exits 0.
fn on_etcd_3_6_4() -> Scenario {
    let mut s = support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.2");
    s.etcd = Some("3.6.4-0".into());
    s
}

use super::support::run_on as run;

fn backups(fleet: &Fleet) -> Vec<PathBuf> {
    let dir = fleet.dir().join(".fleetctl/backups");
    let mut dbs: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    dbs.retain(|p| p.extension().is_some_and(|e| e == "db"));
    dbs.sort();
    dbs
}

fn upgrade_applies(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| {
            e.argv
                .starts_with(&["kubeadm".into(), "upgrade".into(), "apply".into()])
        })
        .count()
}

/// etcd's own check, done here independently of fleetctl: whole 512-byte
/// sectors plus 32 bytes, the last 32 the sha256 of the rest.
fn etcd_trailer_matches(path: &Path) -> bool {
    let bytes = fs::read(path).unwrap();
    if bytes.len() % 512 != 32 {
        return false;
    }
    let (db, sum) = bytes.split_at(bytes.len() - 32);
    Sha256::digest(db).as_slice() == sum
}

#[test]
fn a_v1_34_cluster_on_etcd_3_6_4_gets_both_snapshots_each_verified() {
    let fleet = support::start(on_etcd_3_6_4());
    run(&fleet, &["plan", "v1.36"]).expect_code(0);
    let out = support::apply(&fleet, &["--yes"]).expect_code(0);
    let dbs = backups(&fleet);
    assert_eq!(dbs.len(), 2, "{dbs:?}\n{}", out.stderr);
    for db in &dbs {
        assert!(etcd_trailer_matches(db), "{}", db.display());
        support::assert_has(
            &out.stderr,
            &[&format!("etcd snapshot saved to {}", db.display())],
        );
    }
    assert_eq!(
        out.stderr.matches("etcd's integrity hash verified").count(),
        2,
        "{}",
        out.stderr
    );
    // The v1.35 hop's snapshot came from etcd 3.6.4 (no tool reads it in the
    // pod); after it kubeadm v1.35 runs etcd 3.6.6, whose etcdutl does.
    support::assert_has(
        &out.stderr,
        &["no etcdutl or etcdctl in the pod reads snapshots"],
    );
    assert!(out.stderr.contains(" keys, sha256 "), "{}", out.stderr);
    let events = fleet.events().unwrap();
    assert_eq!(
        upgrade_applies(&events),
        2,
        "{}",
        support::describe(&events)
    );
    assert!(fleet.cluster().unwrap().etcd_images.is_empty());
}

#[test]
fn a_damaged_snapshot_stops_the_hop_before_upgrade_apply() {
    let fleet = support::start(on_etcd_3_6_4());
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    for (damage, words) in [
        (SnapshotDamage::Truncate, "it is truncated"),
        (SnapshotDamage::Flip, "it is corrupt"),
    ] {
        fleet
            .faults(|f| f.damage_etcd_snapshot = Some(damage))
            .unwrap();
        let out = support::apply(&fleet, &["--yes"]);
        assert_ne!(out.code, Some(0), "{}", out.stderr);
        support::assert_has(
            &out.stderr,
            &[
                "the etcd snapshot before upgrade apply to v1.35 failed, and nothing of the \
                 hop's kubeadm step ran",
                "fails etcd's own integrity check",
                words,
            ],
        );
        let events = fleet.events().unwrap();
        assert_eq!(
            upgrade_applies(&events),
            0,
            "{}",
            support::describe(&events)
        );
        assert!(backups(&fleet).is_empty(), "no damaged copy is kept");
        let c = fleet.cluster().unwrap();
        assert!(
            c.nodes.values().all(|n| n.kubelet_version == "v1.34.2"
                && n.control_plane_version
                    .as_deref()
                    .is_none_or(|v| v == "v1.34.2")),
            "nothing upgraded"
        );
        let left = fleet
            .ssh_ok(
                "cp-1",
                "root",
                "ls /var/lib/etcd/ | grep -c fleetctl-etcd || true",
            )
            .unwrap();
        assert_eq!(left.trim(), "0", "the node's copy is removed");
    }
}

/// Whether an event changed something on a node or in the cluster (reads
/// by fleetctl's scripts and kubectl `get`s are not events that mutate).
fn mutations(events: &[Event]) -> Vec<&Event> {
    events
        .iter()
        .filter(|e| {
            let a = e.argv.join(" ");
            a.starts_with("kubeadm upgrade")
                || a.starts_with("systemd-sysupdate")
                || support::is_reboot(e)
                || a.contains(" cordon ")
                || a.contains(" drain ")
                || a.contains(" annotate ")
                || a.contains(" create ")
        })
        .collect()
}

#[test]
fn a_cgroup_v1_node_blocks_the_hop_to_1_35_until_its_kubelet_allows_it() {
    // Real-OS nodes boot on cgroup v2 only (docs/simulator.md).
    let scenario = support::on_emulated_os(support::scenario())
        .control_planes(1)
        .workers(1)
        .kubernetes("v1.34.2")
        .with_node("w-1", |n| n.cgroup_v1 = true);
    let fleet = support::start(scenario);
    // The simulated nodes do not show the host's hierarchy: cp-1 is v2, w-1 v1.
    let probe = "test -e /sys/fs/cgroup/cgroup.controllers && echo v2 || echo v1";
    assert_eq!(fleet.ssh_ok("cp-1", "root", probe).unwrap().trim(), "v2");
    assert_eq!(fleet.ssh_ok("w-1", "root", probe).unwrap().trim(), "v1");

    let before = fleet.events().unwrap().len();
    let blocked = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    let text = format!("{}\n{}", blocked.stdout, blocked.stderr);
    support::assert_has(
        &text,
        &[
            "BLOCK   cgroup",
            "w-1: cgroup v1",
            "systemd.unified_cgroup_hierarchy=0",
            "failCgroupV1: false",
            "--ignore-check cgroup",
        ],
    );
    assert!(!text.contains("cp-1: cgroup v1"), "{text}");
    assert!(
        !fleet.dir().join(".fleetctl/plan.yaml").exists(),
        "a blocked plan is not saved"
    );
    let events = fleet.events().unwrap();
    assert!(
        mutations(&events[before..]).is_empty(),
        "plan changed nothing: {}",
        support::describe(&events[before..])
    );
    // A hop to v1.34 does not care.
    run(&fleet, &["plan", "v1.34"]).expect_code(0);

    // The operator allows cgroup v1 in w-1's own config.yaml only. kubeadm's
    // `upgrade node` rewrites that file from the cluster's kubelet-config:
    // the plan says so before anything changes (issue 23).
    fleet
        .ssh_ok(
            "w-1",
            "root",
            "printf 'failCgroupV1: false\\n' >> /var/lib/kubelet/config.yaml",
        )
        .unwrap();
    let before = fleet.events().unwrap().len();
    let lost = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    let text = format!("{}\n{}", lost.stdout, lost.stderr);
    support::assert_has(
        &text,
        &[
            "BLOCK   cgroup",
            "w-1: cgroup v1 (no /sys/fs/cgroup/cgroup.controllers), and `failCgroupV1: false` is \
             only in its own /var/lib/kubelet/config.yaml, which is lost at the kubeadm step",
            "BLOCK   kubelet-config",
            "w-1: `failCgroupV1: false` in its /var/lib/kubelet/config.yaml is lost at the kubeadm step",
            "--ignore-check kubelet-config",
        ],
    );
    // Going past the kubelet-config block alone leaves the kubelet's refusal.
    let still = run(
        &fleet,
        &["plan", "v1.35", "--ignore-check", "kubelet-config"],
    )
    .expect_code(2);
    let text = format!("{}\n{}", still.stdout, still.stderr);
    assert!(!text.contains("BLOCK   kubelet-config"), "{text}");
    support::assert_has(&text, &["BLOCK   cgroup", "lost at the kubeadm step"]);
    let events = fleet.events().unwrap();
    assert!(
        mutations(&events[before..]).is_empty(),
        "plan changed nothing: {}",
        support::describe(&events[before..])
    );

    // Set where kubeadm reads it, only kubeadm's own preflight is left, and
    // `--ignore-check cgroup` passes it.
    fleet
        .shared()
        .update_cluster(|c| {
            let cm = c.configmaps.get_mut("kube-system/kubelet-config").unwrap();
            let doc = cm.data.get_mut("kubelet").unwrap();
            doc.push_str("failCgroupV1: false\n");
            Ok(())
        })
        .unwrap();
    let preflight = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    let text = format!("{}\n{}", preflight.stdout, preflight.stderr);
    assert!(!text.contains("BLOCK   kubelet-config"), "{text}");
    support::assert_has(
        &text,
        &[
            "w-1: cgroup v1; its kubelet allows it",
            "SystemVerification",
        ],
    );
    run(&fleet, &["plan", "v1.35", "--ignore-check", "cgroup"]).expect_code(0);
    support::apply(&fleet, &["--yes"]).expect_code(0);
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-1"].kubelet_version, c.version, "w-1's kubelet");
    support::assert_invariants_hold(&fleet.events().unwrap());
}

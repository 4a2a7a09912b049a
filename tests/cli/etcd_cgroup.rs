//! Issues 11 and 14 (part 1) against the simulated fleet: an etcd snapshot
//! on this machine before every `kubeadm upgrade apply`, taken by the real
//! etcdctl in the real etcd's pod, verified by etcd's own sha256 whatever
//! tools the etcd image has. The one test of the real snapshot; its rules
//! (a damaged copy stops the hop and is not kept, `--skip-etcd-snapshot`,
//! an external etcd) and the cgroup v1 checks are proven on the fakes and
//! on pure code (docs/rules-on-the-fake.md).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fleetsim::state::Event;
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

/// The indexes of the successful `etcdctl snapshot save` in the etcd pod.
fn snapshot_saves(events: &[Event]) -> Vec<usize> {
    (0..events.len())
        .filter(|&i| {
            let a = &events[i].argv;
            a.iter().any(|w| w == "exec")
                && a.iter().any(|w| w == "etcdctl")
                && a.windows(2).any(|w| w == ["snapshot", "save"])
                && events[i].result == "ok"
        })
        .collect()
}

/// The indexes of the `kubeadm upgrade apply` runs.
fn upgrade_applies(events: &[Event]) -> Vec<usize> {
    (0..events.len())
        .filter(|&i| {
            events[i]
                .argv
                .starts_with(&["kubeadm".into(), "upgrade".into(), "apply".into()])
        })
        .collect()
}

fn sha256sum(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
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
    let dir = fleet.dir().join(".fleetctl/backups");
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700,
        "the backups hold every Secret: only the operator reads them"
    );
    for (db, minor) in dbs.iter().zip(["v1.35", "v1.36"]) {
        let name = db.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("kubernetes-{minor}-")),
            "named with the cluster, the minor and the time: {name}"
        );
        assert_eq!(
            fs::metadata(db).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(etcd_trailer_matches(db), "{}", db.display());
        let sums = fs::read_to_string(db.with_extension("db.sha256")).unwrap();
        assert_eq!(sums, format!("{}  {name}\n", sha256sum(db)));
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
    // Each hop's snapshot is taken before its own upgrade apply, and after
    // the previous hop's.
    let events = fleet.events().unwrap();
    let (saves, applies) = (snapshot_saves(&events), upgrade_applies(&events));
    assert_eq!(applies.len(), 2, "{}", support::describe(&events));
    assert_eq!(saves.len(), 2, "{}", support::describe(&events));
    assert!(
        saves[0] < applies[0] && applies[0] < saves[1] && saves[1] < applies[1],
        "{}",
        support::describe(&events)
    );
    // The node's copies are gone.
    let left = fleet
        .ssh_ok(
            "cp-1",
            "root",
            "ls /var/lib/etcd/ | grep -c fleetctl-etcd || true",
        )
        .unwrap();
    assert_eq!(left.trim(), "0", "snapshot copies left on cp-1");
    let journal = support::journal_records(&fleet);
    assert!(
        journal.iter().any(|r| r["kind"] == "etcd-snapshot"),
        "the journal records the snapshots"
    );
    assert!(fleet.cluster().unwrap().etcd_images.is_empty());
}

//! Issue 26 item 3: docs/apply.md's "Restoring from the snapshot", followed
//! step by step over SSH on the simulated fleet's real etcd, from the
//! snapshot fleetctl copied to this machine before `upgrade apply`: on one
//! control plane, and on three.
//!
//! What a restore brings back is etcd's keyspace (`/registry/…`); the sim's
//! API server keeps its own objects outside etcd (docs/simulator.md "etcd
//! is real"), so the proof is at that level: every key and value as at the
//! snapshot, a key changed after it as it was, a key deleted after it back,
//! a key written after it gone, and the members one new, healthy cluster.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::support::{self, Fleet, run_on as run};

/// Where the operator puts the etcd release's client on a node: Flatcar
/// has no etcd tools, and `/opt/bin` is its place for added binaries. The
/// host's is Debian's etcd-client 3.4, the member's own version: its
/// `ETCDCTL_API=3 etcdctl snapshot restore` is what etcd 3.5 moved to
/// `etcdutl snapshot restore`.
const ETCDCTL: &str = "/opt/bin/etcdctl";
const HOST_ETCDCTL: &str = "/usr/bin/etcdctl";
const MANIFESTS: &str = "/etc/kubernetes/manifests";
/// A watchdog for each wait below, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(180);

const KEPT: &str = "/registry/configmaps/default/kept";
const DELETED: &str = "/registry/configmaps/default/deleted-after-the-snapshot";
const ADDED: &str = "/registry/configmaps/default/added-after-the-snapshot";

fn control_planes(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("cp-{i}")).collect()
}

fn ssh(fleet: &Fleet, node: &str, cmd: &str) -> String {
    match fleet.ssh_ok(node, "root", cmd) {
        Ok(out) => out,
        Err(e) => panic!("{e:#}"),
    }
}

/// Sends the host file `from` to `node`'s `to`, as `scp` would.
fn copy_to(fleet: &Fleet, node: &str, from: &Path, to: &str, mode: &str) {
    let bytes = fs::read(from).unwrap();
    let mut child = fleet
        .ssh_command(node, "root")
        .unwrap()
        .arg("--")
        .arg(format!(
            "mkdir -p \"$(dirname {to})\" && cat > {to} && chmod {mode} {to}"
        ))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "copying {} to {node}:{to}: {}",
        from.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// etcdctl on `node` against its own member, with kubeadm's health-check
/// client pair. The member listens on the node's address, not 127.0.0.1
/// (the sim's shared network namespace: docs/simulator.md). Its reads are
/// linearizable: on a loaded 2-core host a member just restored can take
/// longer than etcdctl's default 5 s to agree with its peers (CI saw
/// `context deadline exceeded` there), so each command may take 30 s.
fn etcdctl(fleet: &Fleet, node: &str, args: &str) -> std::process::Output {
    let address = fleet.address(node).unwrap();
    let pki = "/etc/kubernetes/pki/etcd";
    let cmd = format!(
        "ETCDCTL_API=3 {ETCDCTL} --command-timeout=30s --endpoints=https://{address}:2379 \
         --cacert={pki}/ca.crt --cert={pki}/healthcheck-client.crt \
         --key={pki}/healthcheck-client.key {args}"
    );
    fleet.ssh(node, "root", &cmd).unwrap()
}

fn etcdctl_ok(fleet: &Fleet, node: &str, args: &str) -> String {
    let out = etcdctl(fleet, node, args);
    assert!(
        out.status.success(),
        "etcdctl {args} on {node}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every key under `/registry` and its value (etcdctl's simple output: a
/// key line, then a value line; the sim's values are one-line JSON).
fn keyspace(fleet: &Fleet, node: &str) -> BTreeMap<String, String> {
    let out = etcdctl_ok(fleet, node, "get /registry --prefix");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len() % 2, 0, "{out}");
    lines
        .chunks(2)
        .map(|kv| (kv[0].to_string(), kv[1].to_string()))
        .collect()
}

/// The member's response header: (cluster id, revision).
fn header(fleet: &Fleet, node: &str) -> (u64, i64) {
    let out = etcdctl_ok(
        fleet,
        node,
        "get /registry --prefix --keys-only --limit=1 -w json",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    (
        v["header"]["cluster_id"].as_u64().unwrap(),
        v["header"]["revision"].as_i64().unwrap(),
    )
}

/// Polls `check` until it holds, failing with `what` past the deadline.
fn wait(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The snapshot fleetctl saved under `.fleetctl/backups/` before `upgrade
/// apply` of v1.35, which then failed (`fail_upgrade_apply`): the cluster
/// stays as the snapshot found it but for what the test changes.
fn snapshot_by_fleetctl(fleet: &Fleet) -> PathBuf {
    run(fleet, &["plan", "v1.35"]).expect_code(0);
    fleet.faults(|f| f.fail_upgrade_apply = 1).unwrap();
    let out = support::apply(fleet, &["--yes"]);
    assert_ne!(out.code, Some(0), "{}", out.stderr);
    support::assert_has(&out.stderr, &["injected fault fail_upgrade_apply"]);
    let dir = fleet.dir().join(".fleetctl/backups");
    let dbs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "db"))
        .collect();
    assert_eq!(dbs.len(), 1, "{dbs:?}\n{}", out.stderr);
    dbs[0].clone()
}

/// The snapshot's revision, read by the host's etcdctl.
fn snapshot_revision(db: &Path) -> i64 {
    let out = Command::new(HOST_ETCDCTL)
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "status", "-w", "json"])
        .arg(db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["revision"].as_i64().unwrap()
}

/// `--name=…` and `--initial-advertise-peer-urls=…` of the node's etcd
/// manifest, moved to /root by step 2: what step 3 restores it as.
fn member_of(fleet: &Fleet, node: &str) -> (String, String) {
    let text = ssh(fleet, node, "cat /root/etcd.yaml");
    let flag = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("- --{name}=")))
            .unwrap_or_else(|| panic!("{node}: no --{name} in etcd.yaml:\n{text}"))
            .to_string()
    };
    (flag("name"), flag("initial-advertise-peer-urls"))
}

/// docs/apply.md "Restoring from the snapshot", steps 1 to 5, on every
/// control plane of `cps`.
fn restore(fleet: &Fleet, cps: &[String], db: &Path) {
    let file = db.file_name().unwrap().to_string_lossy().into_owned();
    // 1. Check the copy on this machine, then copy it to every node.
    let check = Command::new("sha256sum")
        .args(["-c", &format!("{file}.sha256")])
        .current_dir(db.parent().unwrap())
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    let on_node = format!("/var/tmp/{file}");
    for cp in cps {
        copy_to(fleet, cp, db, &on_node, "0600");
    }
    // 2. The API servers and etcd out of the kubelet's way, and gone.
    for cp in cps {
        ssh(
            fleet,
            cp,
            &format!("mv {MANIFESTS}/kube-apiserver.yaml {MANIFESTS}/etcd.yaml /root/"),
        );
    }
    for cp in cps {
        wait(&format!("etcd to stop on {cp}"), || {
            fleet
                .ssh(cp, "root", "pgrep -x etcd || pgrep -x kube-apiserver")
                .is_ok_and(|o| o.status.code() == Some(1))
        });
    }
    fleet
        .wait_for("no API server to answer", |c| {
            !c.api_up(fleetsim::state::now())
        })
        .unwrap();
    // 3. Each member restored from the one snapshot, as its manifest names it.
    let members: Vec<(String, String)> = cps.iter().map(|cp| member_of(fleet, cp)).collect();
    let initial = members
        .iter()
        .map(|(name, url)| format!("{name}={url}"))
        .collect::<Vec<_>>()
        .join(",");
    for (cp, (name, url)) in cps.iter().zip(&members) {
        ssh(
            fleet,
            cp,
            &format!(
                "ETCDCTL_API=3 {ETCDCTL} snapshot restore {on_node} --data-dir /var/lib/etcd-restored \
                 --name {name} --initial-cluster {initial} --initial-cluster-token restore-{file} \
                 --initial-advertise-peer-urls {url}"
            ),
        );
    }
    // 4. The restored directory in the old one's place; the manifests back.
    for cp in cps {
        ssh(
            fleet,
            cp,
            "mv /var/lib/etcd /var/lib/etcd.before-restore && mv /var/lib/etcd-restored /var/lib/etcd",
        );
        ssh(
            fleet,
            cp,
            &format!("mv /root/etcd.yaml /root/kube-apiserver.yaml {MANIFESTS}/"),
        );
    }
    for cp in cps {
        wait(&format!("{cp}'s member to answer"), || {
            etcdctl(fleet, cp, "endpoint health").status.success()
        });
    }
    // 5. Every kubelet restarted (the sim's kube-controller-manager and
    // kube-scheduler are no processes: nothing of theirs to restart).
    for cp in cps {
        ssh(fleet, cp, "systemctl restart kubelet");
    }
    fleet
        .wait_for("the API server answers and every node is Ready", |c| {
            let now = fleetsim::state::now();
            c.api_up(now) && c.nodes.keys().all(|n| c.node_ready(n, now))
        })
        .unwrap();
    // The API server's writes went through a leader; each member answers a
    // linearizable read of its own before the keyspace is compared.
    for cp in cps {
        wait(
            &format!("{cp}'s member to answer after the restarts"),
            || etcdctl(fleet, cp, "endpoint health").status.success(),
        );
    }
}

fn a_restore_brings_the_keyspace_back(n: usize) {
    let fleet = support::start(
        support::scenario()
            .control_planes(n)
            .workers(0)
            .kubernetes("v1.34.2"),
    );
    let cps = control_planes(n);
    for cp in &cps {
        copy_to(&fleet, cp, Path::new(HOST_ETCDCTL), ETCDCTL, "0755");
    }
    let first = &cps[0];
    etcdctl_ok(&fleet, first, &format!("put {KEPT} '{{\"v\":\"before\"}}'"));
    etcdctl_ok(&fleet, first, &format!("put {DELETED} '{{\"v\":\"x\"}}'"));
    let db = snapshot_by_fleetctl(&fleet);
    // The keyspace at the snapshot: read live, and proven the snapshot's by
    // the revision, unchanged from the snapshot's on both sides of the read.
    let (old_cluster, before) = header(&fleet, first);
    let recorded = keyspace(&fleet, first);
    let (_, after) = header(&fleet, first);
    let at_snapshot = snapshot_revision(&db);
    assert_eq!((before, after), (at_snapshot, at_snapshot));
    assert_eq!(recorded[KEPT], "{\"v\":\"before\"}");
    assert!(recorded.contains_key(DELETED), "{recorded:?}");
    for cp in &cps {
        assert!(recorded.contains_key(&format!("/registry/minions/{cp}")));
    }

    etcdctl_ok(&fleet, first, &format!("put {KEPT} '{{\"v\":\"after\"}}'"));
    etcdctl_ok(&fleet, first, &format!("del {DELETED}"));
    etcdctl_ok(&fleet, first, &format!("put {ADDED} '{{\"v\":\"new\"}}'"));
    assert_ne!(keyspace(&fleet, first), recorded);

    restore(&fleet, &cps, &db);

    // The kubelets' restarts wrote their nodes' objects again: the same
    // values (same boot, and the sim's objects carry no renew times), at
    // new revisions, which the values do not show.
    for cp in &cps {
        let now = keyspace(&fleet, cp);
        assert_eq!(
            now.get(KEPT).map(String::as_str),
            Some("{\"v\":\"before\"}"),
            "{cp}"
        );
        assert!(now.contains_key(DELETED), "{cp}: {DELETED} is back");
        assert!(!now.contains_key(ADDED), "{cp}: {ADDED} is gone");
        assert_eq!(now, recorded, "{cp}'s keyspace");
        etcdctl_ok(&fleet, cp, "endpoint health");
    }
    let list = etcdctl_ok(&fleet, first, "member list -w json");
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    let names: Vec<&str> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names.len(), n, "{list}");
    for cp in &cps {
        assert!(names.contains(&cp.as_str()), "{list}");
        let (cluster, revision) = header(&fleet, cp);
        assert_ne!(cluster, old_cluster, "{cp}: a new cluster ID");
        assert!(revision >= at_snapshot, "{cp}: revision {revision}");
    }
    let clusters: std::collections::BTreeSet<u64> =
        cps.iter().map(|cp| header(&fleet, cp).0).collect();
    assert_eq!(clusters.len(), 1, "one cluster: {clusters:?}");
}

#[test]
fn a_single_control_plane_restored_from_fleetctls_snapshot_has_its_keys_back() {
    a_restore_brings_the_keyspace_back(1);
}

#[test]
fn three_control_planes_restored_from_fleetctls_snapshot_form_one_new_cluster() {
    a_restore_brings_the_keyspace_back(3);
}

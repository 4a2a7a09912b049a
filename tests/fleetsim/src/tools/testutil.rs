//! Test scaffolding for the tools: a fleet of node roots in a temp dir that
//! share one cluster directory (as the bind mount does inside real nodes),
//! a way to run a tool against a node with in-memory streams, and a tiny
//! extensions hub on loopback. Each test builds its own, so tests stay
//! independent and can run in parallel.

use std::collections::HashMap;
use std::io::{Cursor, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use sha2::{Digest, Sha256};

use super::{Env, Tool};
use crate::state::{self, Cluster, ClusterNode, Event, KubeletRun, NodeBoot, Role, Shared};

/// What a tool run printed and returned.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// A temp dir holding node roots and the shared cluster directory.
pub struct Fleet {
    dir: Arc<tempfile::TempDir>,
}

impl Fleet {
    pub fn new() -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cluster")).unwrap();
        Fleet { dir: Arc::new(dir) }
    }

    pub fn shared(&self) -> Shared {
        Shared::new(self.dir.path().join("cluster"))
    }

    /// Adds a node that booted an hour ago with `version` merged, Ready, API up.
    pub fn node(&self, name: &str, role: Role, version: &str) -> Node {
        let root = self.dir.path().join("roots").join(name);
        let node = Node {
            _dir: self.dir.clone(),
            root,
            name: name.to_string(),
        };
        let booted_at = state::now() - 3600.0;
        let boot = NodeBoot {
            name: name.to_string(),
            role,
            boot_id: format!("boot-{name}"),
            kubernetes: version.to_string(),
            os: "4081.2.0".to_string(),
            booted_at,
            containerd: String::new(),
        };
        node.write(state::NODE_FILE, &serde_json::to_string(&boot).unwrap());
        let link = node.path(state::CLUSTER_DIR);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(self.dir.path().join("cluster"), &link).unwrap();
        node.write(
            "/etc/os-release",
            "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION=4081.2.0\nVERSION_ID=4081.2.0\n",
        );
        // What the boot merged (the kubelet unit; the tools themselves run
        // in-process) and what kubeadm init/join left, as on a node.
        let v = crate::version::Version::parse(version).unwrap();
        for e in crate::image::tree(&v)
            .into_iter()
            .filter(|e| e.path.contains("/kubelet.service"))
        {
            node.write(&format!("/{}", e.path), &e.content);
        }
        node.write(
            crate::kubelet_files::FLAGS_FILE,
            &crate::kubelet_files::initial_flags(&v),
        );
        let instance = crate::kubelet_files::initial_instance(&v);
        if let Some(text) = &instance {
            node.write(crate::kubelet_files::INSTANCE_FILE, text);
        }
        node.write(
            crate::kubelet_files::CONFIG_FILE,
            &crate::kubelet_files::written_config(
                version,
                &crate::kubelet_files::cluster_config(""),
                instance.as_deref(),
            ),
        );
        crate::cgroup::populate(&node.root, false).unwrap();
        crate::unit::write_state(
            &node.root,
            super::kubelet::UNIT,
            &crate::unit::UnitState {
                active: "active".into(),
                sub: "running".into(),
                since: booted_at,
                main_pid: 812,
                command: vec!["/usr/bin/kubelet".into()],
                exit: None,
                result: None,
                restarts: 0,
                description: None,
            },
        )
        .unwrap();
        if role == Role::ControlPlane {
            node.write(
                "/etc/kubernetes/admin.conf",
                &format!("apiVersion: v1\nclusters:\n- cluster:\n    server: https://{name}:6443\n  name: kubernetes\n"),
            );
        }
        self.shared()
            .update_cluster(|c| {
                if c.version.is_empty() {
                    c.version = version.to_string();
                }
                // What kubeadm init uploaded.
                c.configmaps
                    .entry(crate::kubelet_files::CONFIGMAP.to_string())
                    .or_insert_with(|| state::ConfigMap {
                        data: [(
                            crate::kubelet_files::CONFIGMAP_KEY.to_string(),
                            crate::kubelet_files::cluster_config(""),
                        )]
                        .into(),
                        resource_version: 1,
                        created: booted_at,
                        uid: "kubelet-config".into(),
                    });
                c.nodes.insert(
                    name.to_string(),
                    ClusterNode {
                        role,
                        up: true,
                        booted_at,
                        kubelet_version: version.to_string(),
                        unschedulable: false,
                        control_plane_version: (role == Role::ControlPlane)
                            .then(|| version.to_string()),
                        os: "4081.2.0".to_string(),
                        boot_id: format!("boot-{name}"),
                        address: format!("10.0.0.{}", 10 + c.nodes.len()),
                        kubelet: Some(KubeletRun {
                            boot_id: format!("boot-{name}"),
                            started_at: booted_at,
                            manifests_out: Vec::new(),
                        }),
                        labels: Default::default(),
                    },
                );
                Ok(())
            })
            .unwrap();
        node
    }
}

/// One node's root directory.
pub struct Node {
    _dir: Arc<tempfile::TempDir>,
    pub root: PathBuf,
    pub name: String,
}

impl Node {
    pub fn worker(name: &str, version: &str) -> Node {
        Fleet::new().node(name, Role::Worker, version)
    }

    pub fn control_plane(name: &str, version: &str) -> Node {
        Fleet::new().node(name, Role::ControlPlane, version)
    }

    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    pub fn write(&self, abs: &str, text: &str) {
        let p = self.path(abs);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    pub fn read(&self, abs: &str) -> String {
        std::fs::read_to_string(self.path(abs)).unwrap()
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    pub fn shared(&self) -> Shared {
        Shared::new(self.path(state::CLUSTER_DIR))
    }

    pub fn events(&self) -> Vec<Event> {
        self.shared().events().unwrap()
    }

    pub fn cluster(&self) -> Cluster {
        self.shared().cluster().unwrap()
    }

    pub fn update_cluster(&self, f: impl FnOnce(&mut Cluster)) {
        self.shared()
            .update_cluster(|c| {
                f(c);
                Ok(())
            })
            .unwrap();
    }

    /// As if the node rebooted into `version`: boot record and kubelet follow.
    pub fn reboot_into(&self, version: &str) {
        let mut boot: NodeBoot = serde_json::from_str(&self.read(state::NODE_FILE)).unwrap();
        boot.kubernetes = version.to_string();
        self.write(state::NODE_FILE, &serde_json::to_string(&boot).unwrap());
        let name = self.name.clone();
        self.update_cluster(|c| {
            if let Some(n) = c.nodes.get_mut(&name) {
                n.kubelet_version = version.to_string();
            }
        });
    }

    pub fn run(&self, tool: &str, args: &[&str]) -> Output {
        self.run_with_stdin(tool, args, "")
    }

    pub fn run_with_stdin(&self, tool: &str, args: &[&str], stdin: &str) -> Output {
        // /usr/bin/kubelet|kubeadm|kubectl are the merged image's.
        let booted = (crate::image::IMAGE_TOOLS.contains(&tool))
            .then(|| self.booted())
            .filter(|v| !v.is_empty());
        self.run_as(tool, booted.as_deref(), args, stdin, None)
    }

    /// Runs the merged image's `tool` as node-init starts a service.
    pub fn run_service(&self, tool: &str, args: &[&str]) -> Output {
        let booted = self.booted();
        self.run_as(tool, Some(&booted), args, "", Some(super::kubelet::UNIT))
    }

    /// Runs another image's binary (a staged image mounted by hand).
    pub fn run_image(&self, version: &str, tool: &str, args: &[&str]) -> Output {
        self.run_as(tool, Some(version), args, "", None)
    }

    /// The version this node's boot merged ("" for none).
    pub fn booted(&self) -> String {
        let boot: NodeBoot = serde_json::from_str(&self.read(state::NODE_FILE)).unwrap();
        boot.kubernetes
    }

    fn run_as(
        &self,
        tool: &str,
        version: Option<&str>,
        args: &[&str],
        stdin: &str,
        unit: Option<&str>,
    ) -> Output {
        let tool = Tool::from_name(tool).expect("a tool name");
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut input = Cursor::new(stdin.as_bytes().to_vec());
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = {
            let mut env = Env {
                root: self.root.clone(),
                input: &mut input,
                out: &mut out,
                err: &mut err,
                utf8: false,
                tool_version: version.map(str::to_string),
                unit: unit.map(str::to_string),
                daemon: false,
            };
            super::run(&mut env, tool, &args)
        };
        Output {
            code,
            stdout: String::from_utf8_lossy(&out).into_owned(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        }
    }
}

type Files = Arc<Mutex<HashMap<String, Vec<u8>>>>;

/// A tiny HTTP server on loopback serving files from memory; stops on drop.
pub struct Hub {
    port: u16,
    files: Files,
    stop: Arc<AtomicBool>,
}

impl Hub {
    pub fn start() -> Hub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let files: Files = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (f, s) = (files.clone(), stop.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    serve(conn, &f);
                }
            }
        });
        Hub { port, files, stop }
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn put(&self, path: &str, body: Vec<u8>) {
        self.files.lock().unwrap().insert(format!("/{path}"), body);
    }

    /// Publishes kubernetes images for `versions` and a matching SHA256SUMS.
    pub fn publish(&self, versions: &[&str]) {
        let mut sums = String::new();
        for v in versions {
            let name = image_name(v);
            let body = image_body(v);
            sums.push_str(&format!("{}  {name}\n", sha256_hex(&body)));
            self.put(&format!("kubernetes/{name}"), body);
        }
        self.put("kubernetes/SHA256SUMS", sums.into_bytes());
    }

    /// Replaces an image's bytes without updating SHA256SUMS.
    pub fn corrupt(&self, version: &str) {
        self.put(
            &format!("kubernetes/{}", image_name(version)),
            b"not the image".to_vec(),
        );
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(mut conn: TcpStream, files: &Files) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let request = String::from_utf8_lossy(&buf);
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
    let body = files.lock().unwrap().get(&path).cloned();
    let response = match body {
        Some(b) => {
            let mut r =
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", b.len()).into_bytes();
            r.extend_from_slice(&b);
            r
        }
        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec(),
    };
    let _ = conn.write_all(&response);
}

pub fn image_name(version: &str) -> String {
    format!("kubernetes-{version}-x86-64.raw")
}

pub fn image_body(version: &str) -> Vec<u8> {
    format!("fake sysext image for kubernetes {version}\n").into_bytes()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A loopback port nothing listens on, held for as long as the value
/// lives: a TCP socket bound to it but never listening, so a connection is
/// refused and no other test's listener can take the port meanwhile. (A
/// port bound, then released, was taken by a test running beside it, which
/// accepted and reset the connection: CI saw "Connection reset by peer".)
pub struct ClosedPort {
    fd: libc::c_int,
    pub port: u16,
}

impl Drop for ClosedPort {
    fn drop(&mut self) {
        // SAFETY: `fd` is the socket this value opened and alone owns.
        unsafe { libc::close(self.fd) };
    }
}

pub fn closed_port() -> ClosedPort {
    // SAFETY: plain socket calls on a socket this function owns; every
    // result is checked.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let bound = libc::bind(fd, (&raw const addr).cast(), len);
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        let mut got: libc::sockaddr_in = std::mem::zeroed();
        let mut got_len = len;
        let named = libc::getsockname(fd, (&raw mut got).cast(), &mut got_len);
        assert_eq!(named, 0, "getsockname: {}", std::io::Error::last_os_error());
        ClosedPort {
            fd,
            port: u16::from_be(got.sin_port),
        }
    }
}

/// Lists the file names in a node directory, sorted.
pub fn list(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

//! The transport against a real OpenSSH server: each test starts a
//! throwaway `sshd -D -e` on 127.0.0.1 with its own host key and
//! authorized_keys, so what is proven here is what OpenSSH actually does
//! (host keys, key types, agent, jump host forwarding, sudo, dropped
//! connections), not what we think it does.
//!
//! Needs root (sshd's privilege separation) and /usr/sbin/sshd; without them
//! the tests print a note and pass vacuously. CI has both.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::*;

const SSHD: &str = "/usr/sbin/sshd";

/// Why the real-sshd tests cannot run here, if they cannot.
fn unavailable() -> Option<String> {
    if !Path::new(SSHD).exists() {
        return Some(format!("{SSHD} is missing"));
    }
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Some("not running as root".into());
    }
    if Command::new("ssh-keygen").arg("-?").output().is_err() {
        return Some("ssh-keygen is missing".into());
    }
    None
}

macro_rules! require_sshd {
    () => {
        if let Some(why) = unavailable() {
            eprintln!("skipping real-sshd test: {why}");
            return;
        }
    };
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `ssh-keygen -t <kind>` into `path` (and `path.pub`).
fn keygen(path: &Path, kind: &str, passphrase: &str) -> PathBuf {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", kind, "-N", passphrase, "-C", kind, "-f"])
        .arg(path);
    if kind == "rsa" {
        cmd.args(["-b", "2048"]);
    }
    run(&mut cmd);
    path.to_path_buf()
}

fn public(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub")).unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A temp dir with an authorized_keys file every test sshd reads.
struct Fixture {
    dir: TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        // Readable by a throwaway non-root user too (sshd reads keys as the user).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        Fixture { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A new client key of `kind`, authorized on every sshd of this fixture.
    fn user_key(&self, name: &str, kind: &str, passphrase: &str) -> PathBuf {
        let key = keygen(&self.path(name), kind, passphrase);
        self.authorize(&key);
        key
    }

    /// Puts `key`'s public half in the authorized_keys every sshd reads.
    fn authorize(&self, key: &Path) {
        let authorized = self.path("authorized_keys");
        let mut text = std::fs::read_to_string(&authorized).unwrap_or_default();
        text.push_str(&public(key));
        std::fs::write(&authorized, text).unwrap();
        std::fs::set_permissions(&authorized, std::fs::Permissions::from_mode(0o644)).unwrap();
    }

    fn known_hosts(&self) -> PathBuf {
        self.path("ssh/known_hosts")
    }

    fn global_known_hosts(&self) -> PathBuf {
        self.path("etc/ssh_known_hosts")
    }

    fn known_hosts_text(&self) -> String {
        std::fs::read_to_string(self.known_hosts()).unwrap_or_default()
    }

    fn trust(&self, sshd: &Sshd) {
        let line = format!("[127.0.0.1]:{} {}", sshd.port, public(&sshd.host_key));
        std::fs::create_dir_all(self.path("ssh")).unwrap();
        std::fs::write(self.known_hosts(), line).unwrap();
    }

    fn options(&self, checking: HostKeyChecking) -> Options {
        Options {
            connect_timeout: Duration::from_secs(10),
            command_timeout: Duration::from_secs(20),
            keepalive_interval: Duration::from_secs(2),
            keepalive_max: 3,
            agent_socket: None,
            prompt_passphrase: false,
            // Never the machine's own /etc/ssh/ssh_known_hosts.
            global_known_hosts: vec![self.global_known_hosts()],
            ..Options::new(self.known_hosts(), checking)
        }
    }

    fn sshd(&self, name: &str, extra: &str) -> Sshd {
        Sshd::start(self.path(name), self.path("authorized_keys"), extra)
    }
}

/// One running `sshd -D -e`; killed with everything it forked on drop.
struct Sshd {
    dir: PathBuf,
    port: u16,
    host_key: PathBuf,
    authorized_keys: PathBuf,
    extra: String,
    child: Option<Child>,
    starts: usize,
}

impl Sshd {
    fn start(dir: PathBuf, authorized_keys: PathBuf, extra: &str) -> Sshd {
        std::fs::create_dir_all(&dir).unwrap();
        let mut sshd = Sshd {
            host_key: dir.join("host_key"),
            dir,
            port: free_port(),
            authorized_keys,
            extra: extra.to_string(),
            child: None,
            starts: 0,
        };
        keygen(&sshd.host_key, "ed25519", "");
        sshd.spawn();
        sshd
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(format!("sshd.{}.log", self.starts))
    }

    fn spawn(&mut self) {
        self.starts += 1;
        let config = self.dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {key}\nAuthorizedKeysFile {ak}\n\
                 StrictModes no\nPidFile none\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n{extra}\n",
                port = self.port,
                key = self.host_key.display(),
                ak = self.authorized_keys.display(),
                extra = self.extra
            ),
        )
        .unwrap();
        let log = std::fs::File::create(self.log_path()).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        self.wait_listening();
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!("sshd exited with {status}: {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Successful logins since the last (re)start.
    fn accepted(&self) -> usize {
        self.log().matches("Accepted publickey").count()
    }

    /// SIGKILL the listener and every process it forked (the per-connection
    /// sshd and the commands they run): the connection drops like a reboot.
    fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pids = descendants(child.id());
        if !pids.is_empty() {
            let _ = Command::new("kill")
                .arg("-9")
                .args(pids.iter().map(u32::to_string))
                .stderr(Stdio::null())
                .status();
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGSTOP everything the listener forked: the connection stays open but
    /// the peer goes silent, like a node that hung or dropped off the network.
    fn freeze_sessions(&self) {
        let Some(child) = &self.child else {
            return;
        };
        let pids = descendants(child.id());
        assert!(!pids.is_empty(), "no session process to freeze");
        let _ = Command::new("kill")
            .arg("-STOP")
            .args(pids.iter().map(u32::to_string))
            .stderr(Stdio::null())
            .status();
    }

    /// The node was "reinstalled": same port, new host key.
    fn restart_with_new_host_key(&mut self) {
        self.kill();
        std::fs::remove_file(&self.host_key).unwrap();
        std::fs::remove_file(self.host_key.with_extension("pub")).unwrap();
        keygen(&self.host_key, "ed25519", "");
        self.spawn();
    }

    fn fingerprint(&self) -> String {
        let out = run(Command::new("ssh-keygen")
            .arg("-lf")
            .arg(self.host_key.with_extension("pub")));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace().nth(1).unwrap().to_string()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill();
    }
}

/// All processes below `root`, read from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": comm may contain spaces, so split after ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            out.push(child);
            stack.push(child);
        }
    }
    out
}

fn target(node: &str, sshd: &Sshd, user: &str, keys: &[&Path]) -> Target {
    Target {
        node: node.into(),
        host: "127.0.0.1".into(),
        port: sshd.port,
        user: user.into(),
        identity_files: keys.iter().map(|k| k.to_path_buf()).collect(),
        jump: None,
        ..Target::default()
    }
}

fn rejection(err: &anyhow::Error) -> &HostKeyRejected {
    err.chain()
        .find_map(|e| e.downcast_ref::<HostKeyRejected>())
        .unwrap_or_else(|| panic!("not a HostKeyRejected: {err:#}"))
}

// After the fixture and `require_sshd!`, which the tests below use.
mod connections;
mod host_keys;
mod identities;

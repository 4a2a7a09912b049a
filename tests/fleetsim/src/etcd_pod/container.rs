//! The etcd static pod's container: what `kubectl exec etcd-<node> -- …`
//! runs. The real etcdctl does the work against this node's member; what
//! differs between kubeadm's etcd images is modelled on top:
//!
//! - The registry.k8s.io images up to 3.6.4-0 ship `etcd` and `etcdctl`
//!   only (etcd-io/etcd#13764; KubeMarine still found no `etcdutl` in the
//!   1.34 image); from 3.6.5 the image is etcd's official one, with
//!   `etcdutl`. None has a shell. A missing binary is the container
//!   runtime's exec error, which the kubelet returns as an InternalError
//!   Status (`error executing command in container: …`), not an exit code.
//! - `etcdctl snapshot save PATH` is the real etcdctl (3.4): it streams the
//!   member's database and keeps the sha256 the server sends as the
//!   stream's last message (`Save` in clientv3/snapshot/v3_snapshot.go
//!   copies the whole stream into the file; `saveDB` there reads the
//!   trailer back, `hasHash := (off % 512) == sha256.Size`). PATH must be
//!   in the pod's hostPath, `/var/lib/etcd/`, which is the node's. A 3.6
//!   etcdctl then prints `Server version 3.6.0` (the storage version the
//!   3.6 server sends with the snapshot).
//! - `etcdutl snapshot status PATH -w json` (3.6.5+) and etcdctl 3.5's
//!   `snapshot status` run the real 3.4 reader (`Status` in the same file:
//!   bbolt's own check, then the keys, the revision and a crc32 of the
//!   data, not etcd's sha256 trailer) and add what 3.5 and 3.6 print
//!   beside it: `version`, the snapshot's storage version (`3.6.0` from a
//!   3.6 server, empty before). etcdctl 3.5 says `Deprecated: Use
//!   \`etcdutl snapshot status\` instead.` on stderr first. etcdctl 3.6 has
//!   no `snapshot status` (etcd-io/etcd#13809): `snapshot` has subcommands
//!   and no `Run`, so cobra (v1.8) prints its help, etcdctl's usage
//!   template (pkg/cobrautl/help.go), on stdout and exits 0.
//! - Any other etcdctl command is the real one, unchanged but for the
//!   local endpoint (see `etcd_pod`: `127.0.0.1:2379` is this node's
//!   address). Certificate flags must name files in the pod's mounts.
//! - `damage_etcd_snapshot` (a failing disk) damages the saved file after
//!   etcdctl wrote it, or makes it a 10 GiB one (`grow`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

use super::command_line::{Words, json_output, local_endpoints, split};
use super::tag::{has_etcdutl, is_3_6};
use super::{CLIENT_PORT, DATA_DIR, PKI_DIR, binary};
use crate::state::SnapshotDamage;
use crate::tools::util::hex_of;

/// The last stderr line of the exec entry when the runtime, not the
/// command, failed; `api::exec` turns it into the kubelet's Status.
pub const RUNTIME_ERROR: &str = "fleetsim-runtime-error: ";
/// The exec entry's exit code with [`RUNTIME_ERROR`].
pub const RUNTIME_ERROR_CODE: i32 = 255;
/// The exec entry's name (a hard link to fleetsim inside every node).
pub const ENTRY: &str = "etcd-container";
pub const ENTRY_PATH: &str = "/usr/lib/fleetsim/etcd-container";

/// How a command in the container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Exited(i32),
    /// The runtime could not start it: the Status message.
    RuntimeError(String),
}

/// The etcd container of the pod `pod` on this node.
pub struct Container<'a> {
    /// The node's `/` (a temporary directory in unit tests).
    pub root: &'a Path,
    pub pod: &'a str,
    /// The image tag (`3.6.4-0`).
    pub tag: &'a str,
    /// The node's address, where its member listens.
    pub address: &'a str,
    pub damage: Option<SnapshotDamage>,
}

impl Container<'_> {
    /// A path the command names, inside the node: only the pod's mounts
    /// (`/var/lib/etcd`, `/etc/kubernetes/pki/etcd`) are the node's.
    fn mounted(&self, path: &str) -> Option<PathBuf> {
        let ok = [DATA_DIR, PKI_DIR].iter().any(|m| {
            path.strip_prefix(m)
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(|r| !r.is_empty() && !r.split('/').any(|p| p == ".."))
        });
        ok.then(|| self.root.join(path.trim_start_matches('/')))
    }

    fn not_found(&self, exe: &str) -> Outcome {
        let id = hex_of(&format!("exec {} {}", self.pod, crate::state::now()), 64);
        Outcome::RuntimeError(format!(
            "error executing command in container: failed to exec in container: failed to start exec \
             \"{id}\": OCI runtime exec failed: exec failed: unable to start container process: exec: \
             \"{exe}\": executable file not found in $PATH: unknown"
        ))
    }

    /// Runs `argv` in the container; its output goes to `out` and `err`.
    pub fn exec(
        &self,
        argv: &[String],
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<Outcome> {
        let Some((exe, args)) = argv.split_first() else {
            return Ok(self.not_found(""));
        };
        let tool = exe.rsplit('/').next().unwrap_or(exe);
        match tool {
            "etcdctl" => self.etcdctl(args, out, err),
            "etcdutl" if has_etcdutl(self.tag) => {
                let w = split(args);
                match (w.rest.as_slice(), json_output(&w.flags)) {
                    ([s, st, path], true) if s == "snapshot" && st == "status" => {
                        self.status(path, out, err)
                    }
                    _ => Ok(unsupported(argv, err)),
                }
            }
            // Only what an image runs, never a second etcd.
            "etcd" => Ok(unsupported(argv, err)),
            _ => Ok(self.not_found(exe)),
        }
    }

    fn etcdctl(
        &self,
        args: &[String],
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<Outcome> {
        let w = split(args);
        let rest: Vec<&str> = w.rest.iter().map(String::as_str).collect();
        match rest.as_slice() {
            ["snapshot", "status", ..] if is_3_6(self.tag) => {
                let _ = writeln!(out, "{}", snapshot_help(self.tag));
                Ok(Outcome::Exited(0))
            }
            ["snapshot", "status", path] if json_output(&w.flags) => {
                let _ = writeln!(err, "Deprecated: Use `etcdutl snapshot status` instead.\n");
                self.status(path, out, err)
            }
            ["snapshot", "save", path] => {
                let Some(file) = self.mounted(path).filter(|_| path.starts_with(DATA_DIR)) else {
                    // Outside the hostPath the file would stay in the container.
                    let _ = writeln!(
                        err,
                        "fleetsim: unsupported: a snapshot outside {DATA_DIR}/ (the etcd pod's hostPath)"
                    );
                    return Ok(Outcome::Exited(1));
                };
                let Some(mut real) = self.real_args(&w, err)? else {
                    return Ok(Outcome::Exited(1));
                };
                real.extend(["snapshot".into(), "save".into(), file.display().to_string()]);
                let code = self.run_etcdctl(&real, out, err, |text| {
                    text.replace(&file.display().to_string(), path)
                })?;
                if code == 0 {
                    self.damage_file(&file)?;
                    if is_3_6(self.tag) {
                        let _ = writeln!(out, "Server version 3.6.0");
                    }
                }
                Ok(Outcome::Exited(code))
            }
            ["snapshot", ..] => Ok(unsupported(args, err)),
            _ => {
                let Some(mut real) = self.real_args(&w, err)? else {
                    return Ok(Outcome::Exited(1));
                };
                real.extend(w.rest.iter().cloned());
                Ok(Outcome::Exited(
                    self.run_etcdctl(&real, out, err, |t| t.to_string())?,
                ))
            }
        }
    }

    /// The flags for the real etcdctl: the local endpoint rewritten, the
    /// certificate paths in the pod's mounts. `None` after saying why not.
    fn real_args(&self, w: &Words, err: &mut dyn Write) -> Result<Option<Vec<String>>> {
        let mut real = Vec::new();
        let mut endpoint = false;
        for (name, value) in &w.flags {
            let value = value.clone().unwrap_or_default();
            let v = match name.as_str() {
                "endpoints" => {
                    endpoint = true;
                    local_endpoints(&value, self.address)
                }
                "cacert" | "cert" | "key" => match self.mounted(&value) {
                    Some(p) => p.display().to_string(),
                    None => {
                        let _ = writeln!(
                            err,
                            "fleetsim: unsupported: --{name}={value} is outside the pod's mounts ({PKI_DIR}, {DATA_DIR})"
                        );
                        return Ok(None);
                    }
                },
                _ => {
                    // One letter is a shorthand (`-w`), which cobra takes
                    // only with one dash.
                    let dash = if name.len() == 1 { "-" } else { "--" };
                    let value = if value.is_empty() {
                        String::new()
                    } else {
                        format!("={value}")
                    };
                    real.push(format!("{dash}{name}{value}"));
                    continue;
                }
            };
            real.push(format!("--{name}={v}"));
        }
        if !endpoint {
            // etcdctl's default, `127.0.0.1:2379`, is this node's member.
            real.push(format!(
                "--endpoints={}",
                local_endpoints(&format!("127.0.0.1:{CLIENT_PORT}"), self.address)
            ));
        }
        Ok(Some(real))
    }

    /// Runs the real etcdctl; `fix` maps what it printed back to the pod's
    /// paths.
    fn run_etcdctl(
        &self,
        args: &[String],
        out: &mut dyn Write,
        err: &mut dyn Write,
        fix: impl Fn(&str) -> String,
    ) -> Result<i32> {
        let exe = binary(self.root, "etcdctl");
        let o = Command::new(&exe)
            .args(args)
            .env_clear()
            .env("ETCDCTL_API", "3")
            .envs(crate::clients::GO_RUNTIME.iter().copied())
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {}", exe.display()))?;
        let _ = out.write_all(fix(&String::from_utf8_lossy(&o.stdout)).as_bytes());
        let _ = err.write_all(fix(&String::from_utf8_lossy(&o.stderr)).as_bytes());
        Ok(o.status.code().unwrap_or(1))
    }

    /// The real 3.4 reader, with what the image's tool adds.
    fn status(&self, path: &str, out: &mut dyn Write, err: &mut dyn Write) -> Result<Outcome> {
        let Some(file) = self.mounted(path) else {
            let _ = writeln!(err, "Error: stat {path}: no such file or directory");
            return Ok(Outcome::Exited(1));
        };
        let shown = file.display().to_string();
        let mut stdout = Vec::new();
        let code = self.run_etcdctl(
            &[
                "snapshot".into(),
                "status".into(),
                shown.clone(),
                "-w".into(),
                "json".into(),
            ],
            &mut stdout,
            err,
            |t| t.replace(&shown, path),
        )?;
        let text = String::from_utf8_lossy(&stdout);
        if code != 0 {
            let _ = out.write_all(text.as_bytes());
            return Ok(Outcome::Exited(code));
        }
        let Ok(serde_json::Value::Object(mut doc)) = serde_json::from_str(text.trim()) else {
            let _ = out.write_all(text.as_bytes());
            return Ok(Outcome::Exited(code));
        };
        let version = if is_3_6(self.tag) { "3.6.0" } else { "" };
        doc.insert("version".into(), version.into());
        let _ = writeln!(out, "{}", serde_json::Value::Object(doc));
        Ok(Outcome::Exited(0))
    }

    /// A failing disk: what etcdctl wrote is not what is read back.
    fn damage_file(&self, file: &Path) -> Result<()> {
        let Some(damage) = self.damage else {
            return Ok(());
        };
        if damage == SnapshotDamage::Grow {
            // Sparse: 10 GiB that `stat` reports and `cat` would stream as
            // zeros, without using the disk.
            return std::fs::OpenOptions::new()
                .write(true)
                .open(file)
                .and_then(|f| f.set_len(10 << 30))
                .with_context(|| format!("growing {}", file.display()));
        }
        let mut bytes =
            std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        match damage {
            SnapshotDamage::Truncate => bytes.truncate(bytes.len().saturating_sub(100)),
            // Inside the first page, past bbolt's meta: the data etcd's
            // sha256 covers, not what bbolt's own check reads.
            SnapshotDamage::Flip => {
                if let Some(b) = bytes.get_mut(100) {
                    *b ^= 0x01;
                }
            }
            SnapshotDamage::Grow => {}
        }
        std::fs::write(file, &bytes).with_context(|| format!("writing {}", file.display()))
    }
}

fn unsupported(argv: &[String], err: &mut dyn Write) -> Outcome {
    let _ = writeln!(
        err,
        "fleetsim: unsupported in the etcd container: {}",
        argv.join(" ")
    );
    Outcome::Exited(1)
}

/// What etcdctl 3.6 prints for `etcdctl snapshot …` with no subcommand it
/// knows: the usage of `snapshot` through etcdctl's template
/// (pkg/cobrautl/help.go: NAME, USAGE, API VERSION, Examples, COMMANDS,
/// OPTIONS, GLOBAL OPTIONS, tab-indented), abridged to its first options.
fn snapshot_help(tag: &str) -> String {
    let api = super::tag::parse(tag).map_or("3.6".to_string(), |(a, b, ..)| format!("{a}.{b}"));
    format!(
        "NAME:\n\tsnapshot - Manages etcd node snapshots\n\n\
         USAGE:\n\tetcdctl snapshot <subcommand> [flags]\n\n\
         API VERSION:\n\t{api}\n\n\
         Examples:\n\t# Save snapshot to a given file\n\tetcdctl snapshot save /backup/etcd-snapshot.db\n\n\
         COMMANDS:\n\tsave\tStores an etcd node backend snapshot to a given file\n\n\
         OPTIONS:\n  -h, --help[=false]\thelp for snapshot\n\n\
         GLOBAL OPTIONS:\n      --cacert=\"\"\t\t\t\tverify certificates of TLS-enabled secure servers using this CA bundle\n\
         \x20     --endpoints=[127.0.0.1:2379]\t\tgRPC endpoints\n\
         \x20 -w, --write-out=\"simple\"\t\tset the output format (fields, json, protobuf, simple, table)"
    )
}

/// The entry the API server's exec runs on the pod's node:
/// `etcd-container POD TAG -- ARGV…`, as root. The runtime's own failure
/// is the last stderr line after [`RUNTIME_ERROR`], exit [`RUNTIME_ERROR_CODE`].
pub fn main(args: &[String]) -> i32 {
    let mut stdout = std::io::stdout();
    let mut stderr = std::io::stderr();
    let code = match entry(args, &mut stdout, &mut stderr) {
        Ok(Outcome::Exited(code)) => code,
        Ok(Outcome::RuntimeError(msg)) => {
            let _ = writeln!(stderr, "{RUNTIME_ERROR}{msg}");
            RUNTIME_ERROR_CODE
        }
        Err(e) => {
            let _ = writeln!(
                stderr,
                "{RUNTIME_ERROR}error executing command in container: fleetsim: {e:#}"
            );
            RUNTIME_ERROR_CODE
        }
    };
    let _ = stdout.flush();
    let _ = stderr.flush();
    code
}

fn entry(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> Result<Outcome> {
    let [pod, tag, dashes, argv @ ..] = args else {
        anyhow::bail!("usage: {ENTRY} POD TAG -- COMMAND…");
    };
    anyhow::ensure!(dashes == "--", "usage: {ENTRY} POD TAG -- COMMAND…");
    let shared = crate::state::Shared::in_node();
    let boot: crate::state::NodeBoot = serde_json::from_slice(
        &std::fs::read(crate::state::NODE_FILE)
            .with_context(|| format!("reading {}", crate::state::NODE_FILE))?,
    )
    .with_context(|| format!("parsing {}", crate::state::NODE_FILE))?;
    let cluster = shared.cluster()?;
    let address = cluster
        .nodes
        .get(&boot.name)
        .map(|n| n.address.clone())
        .with_context(|| format!("{} is not in the cluster", boot.name))?;
    let damage = shared.faults()?.damage_etcd_snapshot;
    let c = Container {
        root: Path::new("/"),
        pod,
        tag,
        address: &address,
        damage,
    };
    c.exec(argv, out, err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn container<'a>(root: &'a Path, tag: &'a str) -> Container<'a> {
        Container {
            root,
            pod: "etcd-cp-1",
            tag,
            address: "127.1.2.10",
            damage: None,
        }
    }

    fn run(c: &Container<'_>, argv: &str) -> (Outcome, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let o = c.exec(&words(argv), &mut out, &mut err).unwrap();
        (
            o,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn the_real_etcdctl_gets_the_nodes_paths_and_member() {
        let dir = tempfile::tempdir().unwrap();
        let c = container(dir.path(), "3.5.21-0");
        let mut err = Vec::new();
        let w = split(&words(
            "--cacert /etc/kubernetes/pki/etcd/ca.crt -w json --debug member list",
        ));
        let real = c.real_args(&w, &mut err).unwrap().unwrap();
        let ca = dir.path().join("etc/kubernetes/pki/etcd/ca.crt");
        assert_eq!(
            real,
            [
                format!("--cacert={}", ca.display()),
                "-w=json".into(),
                "--debug".into(),
                "--endpoints=127.1.2.10:2379".into(),
            ]
        );
        let w = split(&words("--cert=/root/client.crt member list"));
        assert_eq!(c.real_args(&w, &mut err).unwrap(), None, "not mounted");
    }

    #[test]
    fn each_image_has_its_own_tools() {
        let dir = tempfile::tempdir().unwrap();
        let (o, out, err) = run(
            &container(dir.path(), "3.6.4-0"),
            "etcdutl snapshot status /var/lib/etcd/s.db -w json",
        );
        let Outcome::RuntimeError(msg) = o else {
            panic!("{o:?} {out} {err}");
        };
        assert!(
            msg.ends_with("exec: \"etcdutl\": executable file not found in $PATH: unknown"),
            "{msg}"
        );
        let (o, out, _) = run(
            &container(dir.path(), "3.6.5-0"),
            "etcdctl snapshot status /var/lib/etcd/s.db -w json",
        );
        assert_eq!(o, Outcome::Exited(0));
        assert!(
            out.starts_with("NAME:\n\tsnapshot - Manages etcd node snapshots\n"),
            "{out}"
        );
        assert!(!out.contains('{'));
        for tag in ["3.5.21-0", "3.6.8-0"] {
            let (o, ..) = run(&container(dir.path(), tag), "sh -c ls");
            assert!(matches!(o, Outcome::RuntimeError(m) if m.contains("exec: \"sh\"")));
        }
        // Outside the hostPath the snapshot would stay in the container.
        let (o, _, err) = run(
            &container(dir.path(), "3.5.21-0"),
            "etcdctl snapshot save /tmp/s.db",
        );
        assert_eq!(o, Outcome::Exited(1));
        assert!(err.contains("outside /var/lib/etcd/"), "{err}");
        assert_eq!(
            container(dir.path(), "3.5.21-0").mounted("/var/lib/etcd/../x"),
            None
        );
    }
}

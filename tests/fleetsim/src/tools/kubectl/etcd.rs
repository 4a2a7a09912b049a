//! `kubectl -n kube-system exec etcd-<node> -- etcdctl|etcdutl …`: the
//! snapshot commands inside kubeadm's stacked etcd static pod, as the etcd
//! the cluster's kubeadm deploys would answer them.
//!
//! - The image is the one kubeadm's `SupportedEtcdVersion` names for the
//!   control plane's minor: 3.5.21-0 up to v1.33, 3.6.4-0 for v1.34,
//!   3.6.6-0 for v1.35 and 3.6.8-0 from v1.36.
//! - The registry.k8s.io images up to 3.6.4-0 ship `etcd` and `etcdctl`
//!   only (etcd-io/etcd#13764; KubeMarine still found no `etcdutl` in the
//!   1.34 image); later 3.6 images also `etcdutl`. A missing binary is the
//!   container runtime's exec error.
//! - `etcdctl snapshot save PATH` needs kubeadm's client certificates and
//!   the local endpoint; it logs zap JSON lines on stderr and prints
//!   `Snapshot saved at PATH` (3.6: and `Server version 3.6.0`) on stdout.
//!   The file is written into the node's `/var/lib/etcd` (the pod's hostPath
//!   data dir): a header with the cluster's revision and key count, padded
//!   to whole 4 KiB pages like a bbolt file.
//! - `etcdutl snapshot status PATH -w json` prints `{"hash":…,"revision":…,
//!   "totalKey":…,"totalSize":…,"version":…}` (`version` the storage
//!   version, empty for a 3.5 snapshot); etcdctl 3.5 prints the same after
//!   `Deprecated: Use \`etcdutl snapshot status\` instead.` on stderr; 3.6
//!   removed it (`unknown command "status" for "etcdctl snapshot"`).
//!
//! Only the etcd pod of the node kubectl runs on is emulated (its hostPath
//! is this node's disk); anything else is refused as unsupported.

use std::fs;

use anyhow::Result;
use sha2::{Digest, Sha256};

use super::{Cli, Env, Res, connect};
use crate::tools::util::{hex_of, rfc3339};
use crate::tools::{complain, say};

const DATA_DIR: &str = "/var/lib/etcd";
const PKI: &str = "/etc/kubernetes/pki/etcd";
/// First line of a simulated snapshot; the rest is padding.
const MAGIC: &str = "fleetsim etcd snapshot";

/// The etcd image tag kubeadm deploys for a control plane at `version`.
pub(super) fn image_tag(version: &str) -> &'static str {
    let minor = crate::tools::util::KubeVersion::parse(version).map_or(34, |v| v.minor);
    match minor {
        ..=33 => "3.5.21-0",
        34 => "3.6.4-0",
        35 => "3.6.6-0",
        _ => "3.6.8-0",
    }
}

fn is_36(tag: &str) -> bool {
    tag.starts_with("3.6.")
}

fn has_etcdutl(tag: &str) -> bool {
    is_36(tag) && tag != "3.6.4-0"
}

/// The outcome of the command in the container: its exit code.
type Code = i32;

pub(super) fn exec(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let [_, pod, command @ ..] = cli.words.as_slice() else {
        return Ok(Res::unsupported(env, args));
    };
    if command.is_empty() || !pod.starts_with("etcd-") {
        return Ok(Res::unsupported(env, args));
    }
    let c = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    let ns = cli.namespace();
    let found = super::pods::all_pods(&c, crate::state::now())
        .into_iter()
        .find(|p| p.namespace == ns && &p.name == pod);
    let Some(found) = found else {
        return Ok(Res::fail(
            env,
            &format!("Error from server (NotFound): pods \"{pod}\" not found"),
        ));
    };
    if found.node != env.node_name() {
        return Ok(Res::unsupported(env, args));
    }
    let version = c
        .nodes
        .get(&found.node)
        .and_then(|n| n.control_plane_version.clone())
        .unwrap_or_else(|| c.version.clone());
    let tag = image_tag(&version);
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let code = match words.as_slice() {
        ["etcdutl", rest @ ..] if has_etcdutl(tag) => match status_args(rest) {
            Some(path) => status(env, path, tag),
            None => return Ok(Res::unsupported(env, args)),
        },
        ["etcdutl", ..] => {
            let msg = format!(
                "error: Internal error occurred: error executing command in container: failed to exec in container: \
                 failed to start exec \"{}\": OCI runtime exec failed: exec failed: unable to start container process: \
                 exec: \"etcdutl\": executable file not found in $PATH: unknown",
                hex_of(&format!("exec {pod} {}", crate::state::now()), 64)
            );
            return Ok(Res::fail(env, &msg));
        }
        ["etcdctl", rest @ ..] => {
            let (conn, rest) = connection(rest);
            match rest {
                ["snapshot", "save", path] => match conn {
                    Some(true) => save(env, path, tag, &c)?,
                    _ => {
                        complain!(env, "Error: context deadline exceeded");
                        1
                    }
                },
                ["snapshot", "status", more @ ..] if is_36(tag) && !more.is_empty() => {
                    complain!(
                        env,
                        "Error: unknown command \"status\" for \"etcdctl snapshot\""
                    );
                    complain!(env, "Run 'etcdctl snapshot --help' for usage.");
                    1
                }
                ["snapshot", "status", more @ ..] => {
                    match status_args(&[&["snapshot", "status"], more].concat()) {
                        Some(path) => {
                            complain!(env, "Deprecated: Use `etcdutl snapshot status` instead.\n");
                            status(env, path, tag)
                        }
                        None => return Ok(Res::unsupported(env, args)),
                    }
                }
                _ => return Ok(Res::unsupported(env, args)),
            }
        }
        _ => return Ok(Res::unsupported(env, args)),
    };
    if code == 0 {
        return Ok(Res::ok());
    }
    complain!(env, "command terminated with exit code {code}");
    Ok(Res {
        code,
        record: Some(format!("command terminated with exit code {code}")),
    })
}

/// Strips etcdctl's connection flags; `Some(true)` when they are the ones
/// kubeadm's etcd accepts (its CA, a client certificate it issued, the
/// local endpoint), `None` when none were given.
fn connection<'a>(words: &'a [&'a str]) -> (Option<bool>, &'a [&'a str]) {
    let mut ok = true;
    let mut seen = false;
    let mut rest = words;
    while let Some((w, tail)) = rest.split_first() {
        let Some((flag, value)) = w.strip_prefix("--").and_then(|f| f.split_once('=')) else {
            break;
        };
        seen = true;
        ok &= match flag {
            "endpoints" => value == "https://127.0.0.1:2379" || value == "127.0.0.1:2379",
            "cacert" => value == format!("{PKI}/ca.crt"),
            "cert" => [
                format!("{PKI}/server.crt"),
                format!("{PKI}/healthcheck-client.crt"),
            ]
            .contains(&value.to_string()),
            "key" => [
                format!("{PKI}/server.key"),
                format!("{PKI}/healthcheck-client.key"),
            ]
            .contains(&value.to_string()),
            _ => false,
        };
        rest = tail;
    }
    (seen.then_some(ok && words.len() - rest.len() >= 3), rest)
}

/// `snapshot status PATH -w json` (or `--write-out=json`): the path.
fn status_args<'a>(words: &[&'a str]) -> Option<&'a str> {
    match words {
        ["snapshot", "status", path, "-w", "json"]
        | ["snapshot", "status", path, "--write-out=json"]
        | ["snapshot", "status", "-w", "json", path] => Some(path),
        _ => None,
    }
}

fn zap_line(tag: &str, caller: &str, msg: &str, fields: &str) -> String {
    let now = crate::state::now();
    let ts = if is_36(tag) {
        format!(
            "\"{}\"",
            rfc3339(now).replace('Z', &format!(".{:06}Z", ((now.fract()) * 1e6) as u32))
        )
    } else {
        format!("{now:.7}")
    };
    format!("{{\"level\":\"info\",\"ts\":{ts},\"caller\":\"{caller}\",\"msg\":\"{msg}\"{fields}}}")
}

fn save(env: &mut Env, path: &str, tag: &str, c: &crate::state::Cluster) -> Result<Code> {
    let Some(file) = path
        .strip_prefix(&format!("{DATA_DIR}/"))
        .filter(|f| !f.is_empty() && !f.contains('/'))
    else {
        // Outside the hostPath the file would stay inside the container.
        complain!(
            env,
            "fleetsim: unsupported: a snapshot outside {DATA_DIR}/ (the etcd pod's hostPath)"
        );
        return Ok(1);
    };
    let keys = c.nodes.len() * 3 + c.configmaps.len() + c.pods.len() + c.pdbs.len() + 40;
    let storage = if is_36(tag) { "3.6.0" } else { "" };
    let header = format!(
        "{MAGIC}\n{}\n",
        serde_json::json!({"revision": c.resource_version, "totalKey": keys, "version": storage})
    );
    let size = (20_480 + keys * 1_024).div_ceil(4_096) * 4_096;
    let mut bytes = header.into_bytes();
    bytes.resize(size, 0);
    let target = env.path(DATA_DIR).join(file);
    let part = env.path(DATA_DIR).join(format!("{file}.part"));
    if let Some(dir) = target.parent() {
        fs::create_dir_all(dir)?;
    }
    let endpoint = ",\"endpoint\":\"https://127.0.0.1:2379\"";
    complain!(
        env,
        "{}",
        zap_line(
            tag,
            "snapshot/v3_snapshot.go:65",
            "created temporary db file",
            &format!(",\"path\":\"{path}.part\"")
        )
    );
    complain!(
        env,
        "{}",
        zap_line(
            tag,
            "v3/maintenance.go:212",
            "opened snapshot stream; downloading",
            ""
        )
    );
    complain!(
        env,
        "{}",
        zap_line(
            tag,
            "snapshot/v3_snapshot.go:73",
            "fetching snapshot",
            endpoint
        )
    );
    fs::write(&part, &bytes)?;
    fs::rename(&part, &target)?;
    complain!(
        env,
        "{}",
        zap_line(
            tag,
            "v3/maintenance.go:220",
            "completed snapshot read; closing",
            ""
        )
    );
    let mb = format!("{:.1} MB", size as f64 / 1e6);
    complain!(
        env,
        "{}",
        zap_line(
            tag,
            "snapshot/v3_snapshot.go:88",
            "fetched snapshot",
            &format!("{endpoint},\"size\":\"{mb}\",\"took\":\"now\"")
        )
    );
    complain!(
        env,
        "{}",
        zap_line(
            tag,
            "snapshot/v3_snapshot.go:97",
            "saved",
            &format!(",\"path\":\"{path}\"")
        )
    );
    say!(env, "Snapshot saved at {path}");
    if is_36(tag) {
        say!(env, "Server version 3.6.0");
    }
    Ok(0)
}

fn status(env: &mut Env, path: &str, tag: &str) -> Code {
    let bytes = match fs::read(env.path(path)) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            complain!(env, "Error: stat {path}: no such file or directory");
            return 1;
        }
        Err(e) => {
            complain!(env, "Error: {e}");
            return 1;
        }
    };
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned();
    let header = text
        .strip_prefix(&format!("{MAGIC}\n"))
        .and_then(|r| r.lines().next())
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    let Some(h) = header else {
        complain!(env, "Error: invalid database");
        return 1;
    };
    let digest = Sha256::digest(&bytes);
    let hash = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    // etcdutl 3.5 and 3.6 both print the storage version (empty before 3.6).
    let _ = tag;
    let out = format!(
        "{{\"hash\":{hash},\"revision\":{},\"totalKey\":{},\"totalSize\":{},\"version\":{}}}",
        h["revision"].as_u64().unwrap_or(0),
        h["totalKey"].as_u64().unwrap_or(0),
        bytes.len(),
        serde_json::to_string(h["version"].as_str().unwrap_or("")).unwrap_or_default()
    );
    say!(env, "{out}");
    0
}

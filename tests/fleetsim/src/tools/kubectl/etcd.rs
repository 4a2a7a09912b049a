//! `kubectl -n kube-system exec etcd-<node> -- etcdctl|etcdutl …`: the
//! snapshot commands inside kubeadm's stacked etcd static pod, as the etcd
//! the cluster's kubeadm deploys would answer them.
//!
//! - The image is the one kubeadm's `SupportedEtcdVersion`
//!   (cmd/kubeadm/app/constants/constants.go) names for the control plane's
//!   version: 3.5.21-0 up to v1.33; for v1.34, 3.6.4-0 from kubeadm v1.34.0
//!   and v1.34.1 and 3.6.5-0 from v1.34.2 (kubernetes/kubernetes#134251);
//!   3.6.6-0 for v1.35 (kubernetes/kubernetes#135271) and 3.6.8-0 from v1.36
//!   (kubernetes/kubernetes#137107). A scenario's `etcd:` starts the control
//!   planes on another tag (a cluster set up by an older kubeadm patch);
//!   `kubeadm upgrade apply|node` deploys its own tag when that is newer
//!   (`Cluster::etcd_images`).
//! - The registry.k8s.io images up to 3.6.4-0 ship `etcd` and `etcdctl`
//!   only (etcd-io/etcd#13764; KubeMarine still found no `etcdutl` in the
//!   1.34 image); from 3.6.5 the image is etcd's official one, with
//!   `etcdutl` and no shell. A missing binary is the container runtime's
//!   exec error.
//! - `etcdctl snapshot save PATH` needs kubeadm's client certificates and
//!   the local endpoint; it logs zap JSON lines on stderr and prints
//!   `Snapshot saved at PATH` (3.6: and `Server version 3.6.0`) on stdout.
//!   The file is written into the node's `/var/lib/etcd` (the pod's hostPath
//!   data dir) with etcd's layout: the database (a header with the
//!   cluster's revision and key count, padded to whole 4 KiB pages like a
//!   bbolt file) followed by the sha256 of the database, which the server
//!   sends as the last message of the snapshot stream (`Snapshot` in
//!   server/etcdserver/api/v3rpc/maintenance.go) and etcdctl keeps
//!   (`hasChecksum` in client/v3/snapshot/v3_snapshot.go).
//! - `etcdutl snapshot status PATH -w json` prints `{"hash":…,"revision":…,
//!   "totalKey":…,"totalSize":…,"version":…}` (`version` the storage
//!   version, empty for a 3.5 snapshot); like the real one it reads the
//!   database, not etcd's sha256 trailer, so a flipped byte in the data
//!   passes it. etcdctl 3.5 prints the same after `Deprecated: Use
//!   \`etcdutl snapshot status\` instead.` on stderr. etcdctl 3.6 has no
//!   `snapshot status` (etcd-io/etcd#13809): `snapshot` has subcommands and
//!   no `Run`, so cobra (v1.8) prints its help, etcdctl's usage template
//!   (pkg/cobrautl/help.go), on stdout and exits 0.
//!
//! Only the etcd pod of the node kubectl runs on is emulated (its hostPath
//! is this node's disk); anything else is refused as unsupported.

use std::fs;

use anyhow::Result;
use sha2::{Digest, Sha256};

use super::{Cli, Env, Res, connect};
use crate::state::SnapshotDamage;
use crate::tools::util::{hex_of, rfc3339};
use crate::tools::{complain, say};

const DATA_DIR: &str = "/var/lib/etcd";
const PKI: &str = "/etc/kubernetes/pki/etcd";
/// First line of a simulated snapshot; the rest is padding.
const MAGIC: &str = "fleetsim etcd snapshot";

/// The etcd image tag kubeadm at `version` deploys.
pub(super) fn image_tag(version: &str) -> &'static str {
    let v = crate::tools::util::KubeVersion::parse(version);
    let (minor, patch) = v.map_or((34, 2), |v| (v.minor, v.patch));
    match (minor, patch) {
        (..=33, _) => "3.5.21-0",
        (34, ..=1) => "3.6.4-0",
        (34, _) => "3.6.5-0",
        (35, _) => "3.6.6-0",
        _ => "3.6.8-0",
    }
}

/// The tag the etcd static pod of control plane `node` runs.
pub(crate) fn running_tag(c: &crate::state::Cluster, node: &str) -> String {
    if let Some(tag) = c.etcd_images.get(node) {
        return tag.clone();
    }
    let version = c
        .nodes
        .get(node)
        .and_then(|n| n.control_plane_version.clone())
        .unwrap_or_else(|| c.version.clone());
    image_tag(&version).to_string()
}

/// After kubeadm at `version` upgraded control plane `node`: its etcd runs
/// kubeadm's tag, unless it already ran a newer one (kubeadm never
/// downgrades etcd).
pub(crate) fn upgraded_by_kubeadm(c: &mut crate::state::Cluster, node: &str, version: &str) {
    let ours = image_tag(version);
    if c.etcd_images
        .get(node)
        .is_some_and(|t| crate::tools::vercmp(t, ours).is_le())
    {
        c.etcd_images.remove(node);
    }
}

/// `3.6.4-0` → (3, 6, 4, 0); `None` for anything else.
pub(crate) fn etcd_tag(tag: &str) -> Option<(u64, u64, u64, u64)> {
    let (version, build) = tag.split_once('-')?;
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let t = (
        parts.next()??,
        parts.next()??,
        parts.next()??,
        build.parse().ok()?,
    );
    parts.next().is_none().then_some(t)
}

fn is_36(tag: &str) -> bool {
    etcd_tag(tag).is_some_and(|(major, minor, ..)| (major, minor) >= (3, 6))
}

/// etcd's official image (3.6.5 and later): etcdutl, no shell.
fn has_etcdutl(tag: &str) -> bool {
    etcd_tag(tag).is_some_and(|(major, minor, patch, _)| (major, minor, patch) >= (3, 6, 5))
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
    let tag = running_tag(&c, &found.node);
    let tag = tag.as_str();
    let damage = env.shared().faults()?.damage_etcd_snapshot;
    let words: Vec<&str> = command.iter().map(String::as_str).collect();
    let code = match words.as_slice() {
        ["etcdutl", rest @ ..] if has_etcdutl(tag) => match status_args(rest) {
            Some(path) => status(env, path, tag),
            None => return Ok(Res::unsupported(env, args)),
        },
        ["etcdutl", ..] | ["sh" | "/bin/sh", ..] => {
            let msg = format!(
                "error: Internal error occurred: error executing command in container: failed to exec in container: \
                 failed to start exec \"{}\": OCI runtime exec failed: exec failed: unable to start container process: \
                 exec: \"{}\": executable file not found in $PATH: unknown",
                hex_of(&format!("exec {pod} {}", crate::state::now()), 64),
                words[0]
            );
            return Ok(Res::fail(env, &msg));
        }
        ["etcdctl", rest @ ..] => {
            let (conn, rest) = connection(rest);
            match rest {
                ["snapshot", "save", path] => match conn {
                    Some(true) => save(env, path, tag, &c, damage)?,
                    _ => {
                        complain!(env, "Error: context deadline exceeded");
                        1
                    }
                },
                ["snapshot", "status", ..] if is_36(tag) => {
                    say!(env, "{}", snapshot_help(tag));
                    0
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

fn save(
    env: &mut Env,
    path: &str,
    tag: &str,
    c: &crate::state::Cluster,
    damage: Option<SnapshotDamage>,
) -> Result<Code> {
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
    let sum = Sha256::digest(&bytes);
    bytes.extend_from_slice(&sum);
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
    // A failing disk: what etcdctl wrote is not what is read back.
    match damage {
        Some(SnapshotDamage::Truncate) => {
            bytes.truncate(bytes.len() - 100);
            fs::write(&target, &bytes)?;
        }
        Some(SnapshotDamage::Flip) => {
            bytes[100] ^= 0x01;
            fs::write(&target, &bytes)?;
        }
        None => {}
    }
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
    // The database (bbolt's `tx.Size()`), without etcd's sha256 trailer.
    let db = if bytes.len() % 512 == 32 {
        &bytes[..bytes.len() - 32]
    } else {
        &bytes[..]
    };
    let digest = Sha256::digest(db);
    let hash = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    // etcdutl 3.5 and 3.6 both print the storage version (empty before 3.6).
    let _ = tag;
    let out = format!(
        "{{\"hash\":{hash},\"revision\":{},\"totalKey\":{},\"totalSize\":{},\"version\":{}}}",
        h["revision"].as_u64().unwrap_or(0),
        h["totalKey"].as_u64().unwrap_or(0),
        db.len(),
        serde_json::to_string(h["version"].as_str().unwrap_or("")).unwrap_or_default()
    );
    say!(env, "{out}");
    0
}

/// What etcdctl 3.6 prints for `etcdctl snapshot …` with no subcommand it
/// knows: the usage of `snapshot` through etcdctl's template
/// (pkg/cobrautl/help.go: NAME, USAGE, API VERSION, Examples, COMMANDS,
/// OPTIONS, GLOBAL OPTIONS, tab-indented), abridged to its first options.
fn snapshot_help(tag: &str) -> String {
    let api = etcd_tag(tag).map_or("3.6".to_string(), |(a, b, ..)| format!("{a}.{b}"));
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

//! The etcd snapshot before each `kubeadm upgrade apply`: the way back if
//! the hop breaks the control plane. kubeadm only copies etcd's data
//! directory on the node (and never cleans it up); this puts a verified
//! snapshot on the operator's laptop instead.
//!
//! 1. kubeadm-config says where etcd lives: stacked (its data directory on
//!    the host) or external, which fleetctl cannot reach and says so;
//! 2. `etcdctl snapshot save` inside the first control plane's etcd static
//!    pod, through the API, into the data directory the pod mounts from the
//!    host;
//! 3. `snapshot status` on that file where the image has a tool that still
//!    reads one (etcdutl from etcd 3.6.5, etcdctl up to 3.5; etcd 3.6.4's
//!    image has neither), and its sha256 on the node;
//! 4. the file copied over the node's SSH connection into
//!    `.fleetctl/backups/` (mode 0600: it holds every Secret), its sha256
//!    compared with the node's, and etcd's own integrity hash (the sha256
//!    etcd appends to every snapshot, `crate::checks::SnapshotVerifier`)
//!    checked on this machine, whatever tools the image has: a truncated or
//!    corrupt copy stops the hop before `upgrade apply`;
//! 5. the node's copy removed, whatever happened.
//!
//! docs/apply.md says how to restore from it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

use super::context::Apply;
use super::runner::Remote;
use crate::checks::{self, EtcdTopology, SnapshotDigest, SnapshotStatus, SnapshotVerifier};
use crate::remote::{before_hop, snapshot_file};
use crate::version::Minor;

/// How long saving, checking or copying one snapshot may take: etcd's
/// default quota is 2 GiB, and the copy crosses the operator's link.
const TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The snapshot the hop to `minor` starts from, on the laptop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub path: PathBuf,
    pub sha256: String,
    pub bytes: u64,
    /// `None` when neither etcdutl nor etcdctl could read it in the pod;
    /// etcd's integrity hash, checked here, vouches for the copy then.
    pub status: Option<SnapshotStatus>,
}

/// Where the snapshots go: `.fleetctl/backups/` beside the inventory.
pub fn backups_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("backups")
}

/// `<dir>/<cluster>-<minor>-<stamp>.db`: the cluster's name comes from the
/// cluster, and must not lead out of `dir` (crate::local_fs::name_part).
fn local_path(dir: &Path, cluster: &str, minor: Minor, stamp: &str) -> anyhow::Result<PathBuf> {
    let cluster = crate::local_fs::name_part("the cluster name (clusterName)", cluster)?;
    Ok(dir.join(format!("{cluster}-{minor}-{stamp}.db")))
}

/// Takes, copies and verifies the snapshot on `node` (the first control
/// plane, which runs `upgrade apply`) before the hop to `minor`. `Ok(None)`
/// for an external etcd, after saying so.
pub async fn snapshot(
    apply: &Apply<'_>,
    node: &str,
    minor: Minor,
    dir: &Path,
) -> anyhow::Result<Option<Snapshot>> {
    let r = apply.remote(node)?;
    let config = r
        .check_root("read kubeadm-config", &before_hop::get_kubeadm_config())
        .await?;
    let data_dir = match local_data_dir(node, &config.stdout)? {
        Ok(data_dir) => data_dir,
        Err(text) => {
            apply.progress.line(&format!("  warning: {text}"));
            apply.journal_event("etcd-external", Some(node), &text);
            return Ok(None);
        }
    };
    let cluster = checks::cluster_name(&config.stdout)?;
    let stamp = stamp(SystemTime::now());
    let local = local_path(dir, &cluster, minor, &stamp)
        .with_context(|| format!("{node}: kubeadm-config"))?;
    let on_node = format!(
        "{}/fleetctl-etcd-{minor}-{stamp}.db",
        data_dir.trim_end_matches('/')
    );
    apply
        .progress
        .step(&format!("{node}: etcd snapshot before upgrade apply"));
    let saved = r
        .run_root_timeout(
            "etcd snapshot save",
            &before_hop::etcd_snapshot_save(node, &data_dir, file_name(&on_node)),
            None,
            TIMEOUT,
        )
        .await;
    // From here the node may hold a copy: it goes, whatever else happens.
    let result = match saved {
        Ok(out) if out.success() => {
            let max = apply.settings.etcd_snapshot_max;
            fetch(&r, node, &on_node, &local, max).await
        }
        Ok(out) => Err(anyhow::Error::new(super::runner::CommandFailed::new(
            node,
            "etcd snapshot save",
            &out,
        ))),
        Err(e) => Err(e),
    };
    let removed = r
        .run_root(
            "remove the node's snapshot copy",
            &snapshot_file::remove(&on_node),
            None,
        )
        .await;
    let snapshot = result.with_context(|| {
        format!(
            "{node}: the etcd snapshot before upgrade apply to {minor} failed, and nothing of the \
             hop's kubeadm step ran. Fix the cause and run `fleetctl apply` again, or go on without \
             a snapshot with `fleetctl apply --skip-etcd-snapshot`"
        )
    })?;
    if !removed.as_ref().is_ok_and(|o| o.success()) {
        apply.progress.line(&format!(
            "  warning: {node}: could not remove {on_node}; remove it by hand (it holds every Secret)"
        ));
    }
    let status = match &snapshot.status {
        Some(s) => format!("revision {}, {} keys", s.revision, s.total_key),
        None => "no etcdutl or etcdctl in the pod reads snapshots".into(),
    };
    let text = format!(
        "etcd snapshot saved to {} ({} bytes, {status}, sha256 {}, etcd's integrity hash verified)",
        snapshot.path.display(),
        snapshot.bytes,
        snapshot.sha256
    );
    apply.progress.line(&format!("  {text}"));
    apply.journal_event("etcd-snapshot", Some(node), &text);
    Ok(Some(snapshot))
}

/// The snapshot's size against the ceiling, `snapshot status` in the pod,
/// the node's sha256, the copy and its sha256; the copy only gets its final
/// name once it matches.
async fn fetch(
    r: &Remote,
    node: &str,
    on_node: &str,
    local: &Path,
    max: u64,
) -> anyhow::Result<Snapshot> {
    let size = r
        .check_root("size of the snapshot", &snapshot_file::size(on_node))
        .await?;
    let Ok(size) = size.stdout.trim().parse::<u64>() else {
        bail!(
            "{node}: stat printed {:?} for the size of {on_node}",
            size.stdout.trim()
        );
    };
    check_size(size, max).with_context(|| format!("{node}: {on_node}"))?;
    let status = status(r, node, on_node).await?;
    let sum = r
        .check_root("sha256 of the snapshot", &snapshot_file::sha256(on_node))
        .await?;
    let Some(node_sha) = sum.stdout.split_whitespace().next().map(str::to_string) else {
        bail!("{node}: sha256sum printed nothing for {on_node}");
    };
    let dir = local
        .parent()
        .context("the backups directory has no parent")?;
    crate::local_fs::private_dir(dir)?;
    let partial = local.with_extension("db.partial");
    let bytes = match copy(r, on_node, &partial, size).await {
        Ok(()) => keep_verified(&partial, local, on_node, &node_sha)?,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let sums = local.with_extension("db.sha256");
    let name = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    crate::local_fs::create_new_or_fail(&sums)
        .and_then(|mut f| {
            Ok(std::io::Write::write_all(
                &mut f,
                format!("{node_sha}  {name}\n").as_bytes(),
            )?)
        })
        .with_context(|| format!("writing {}", sums.display()))?;
    Ok(Snapshot {
        path: local.to_path_buf(),
        sha256: node_sha,
        bytes,
        status,
    })
}

/// Where the snapshot is taken, from kubeadm-config: `Ok(data_dir)` for a
/// stacked etcd (the static pod's, on the host), `Err(warning)` for an
/// external one, which fleetctl cannot reach: the hop goes on without a
/// snapshot, and says so.
fn local_data_dir(node: &str, kubeadm_config: &str) -> anyhow::Result<Result<String, String>> {
    let topology = checks::etcd_topology(kubeadm_config)
        .with_context(|| format!("{node}: reading where etcd lives from kubeadm-config"))?;
    Ok(match topology {
        EtcdTopology::Local { data_dir } => Ok(data_dir),
        EtcdTopology::External { endpoints } => Err(format!(
            "etcd is external ({}): fleetctl did not snapshot it. Take a snapshot with your \
             etcd's own tools before this hop if you have not",
            endpoints.join(", ")
        )),
    })
}

/// The copy at `partial` becomes `local` only if it is the node's file
/// (`node_sha`) and passes etcd's own integrity check; otherwise it is
/// removed: no damaged snapshot is kept to be restored later.
fn keep_verified(
    partial: &Path,
    local: &Path,
    on_node: &str,
    node_sha: &str,
) -> anyhow::Result<u64> {
    let verified = digest_of(partial).and_then(|digest| {
        if digest.sha256 != node_sha {
            bail!(
                "the copy of {on_node} on this machine has sha256 {}, the node's file {node_sha}: \
                 the copy is damaged",
                digest.sha256
            );
        }
        if let Err(e) = digest.integrity {
            bail!("the snapshot {on_node} fails etcd's own integrity check: {e}");
        }
        Ok(digest.bytes)
    });
    let bytes = match verified {
        Ok(b) => b,
        Err(e) => {
            let _ = std::fs::remove_file(partial);
            return Err(e);
        }
    };
    std::fs::rename(partial, local)
        .with_context(|| format!("renaming {} to {}", partial.display(), local.display()))?;
    Ok(bytes)
}

/// A snapshot bigger than `max` (`--etcd-snapshot-max`) is not copied: the
/// size is the node's word, and the copy is bounded by it, so without a
/// ceiling a node could fill the laptop's disk. The default, 8 GiB, is
/// etcd's largest suggested quota (`MaxQuotaBytes` in etcd's
/// server/storage/quota.go, 2 GiB by default; etcd.io dev-guide/limit).
fn check_size(size: u64, max: u64) -> anyhow::Result<()> {
    if size > max {
        bail!(
            "the snapshot is {size} bytes, more than the {max} bytes fleetctl copies \
             (--etcd-snapshot-max, FLEETCTL_ETCD_SNAPSHOT_MAX; 8GiB by default, etcd's largest \
             suggested quota): nothing was copied. If the cluster's etcd is that big, raise the \
             ceiling (with room on this machine's disk)"
        );
    }
    Ok(())
}

/// etcdutl's `snapshot status` in the etcd pod, else etcdctl's (v3.5 images
/// without etcdutl); `None` when neither can run there. A status that
/// shows an empty snapshot is an error.
async fn status(r: &Remote, node: &str, on_node: &str) -> anyhow::Result<Option<SnapshotStatus>> {
    let tries = [
        (
            "etcdutl snapshot status",
            before_hop::etcdutl_snapshot_status(node, on_node),
        ),
        (
            "etcdctl snapshot status",
            before_hop::etcdctl_snapshot_status(node, on_node),
        ),
    ];
    for (label, cmd) in tries {
        let out = r.run_root_timeout(label, &cmd, None, TIMEOUT).await?;
        if out.success() {
            // Exit 0 without JSON is etcdctl 3.6 printing its help: no such
            // command, so no verdict (the integrity hash still gets one).
            if let Some(status) = checks::parse_snapshot_status(&out.stdout)
                .with_context(|| format!("{node}: {label}"))?
            {
                return Ok(Some(status));
            }
            continue;
        }
        if !missing_tool(&out.stderr) {
            bail!(
                "{node}: `{label}` failed: {}",
                out.stderr
                    .trim()
                    .lines()
                    .last()
                    .unwrap_or("no error output")
            );
        }
    }
    Ok(None)
}

/// What `kubectl exec` says when the container has no such executable
/// (the OCI runtime's "executable file not found in $PATH"), or when the
/// etcdctl there no longer has `snapshot status` (etcd v3.6).
fn missing_tool(stderr: &str) -> bool {
    stderr.contains("executable file not found")
        || stderr.contains("no such file or directory")
        || stderr.contains("unknown command")
}

/// Streams the node's file into `dest`, created 0600; never more than the
/// `size` the node reported before the copy (the file is complete by then).
async fn copy(r: &Remote, on_node: &str, dest: &Path, size: u64) -> anyhow::Result<()> {
    let mut file = private_file(dest).await?;
    let out = r
        .run_root_into(
            "copy the snapshot to this machine",
            &snapshot_file::cat(on_node),
            &mut file,
            size,
            TIMEOUT,
        )
        .await;
    use tokio::io::AsyncWriteExt;
    file.flush()
        .await
        .with_context(|| format!("writing {}", dest.display()))?;
    file.sync_all()
        .await
        .with_context(|| format!("writing {}", dest.display()))?;
    let out = out?;
    super::runner::succeeded(r.node(), "copy the snapshot to this machine", out)?;
    Ok(())
}

async fn private_file(path: &Path) -> anyhow::Result<tokio::fs::File> {
    Ok(tokio::fs::File::from_std(
        crate::local_fs::create_new_or_fail(path)?,
    ))
}

/// The copy's sha256 and etcd's integrity check of it, in one read.
fn digest_of(path: &Path) -> anyhow::Result<SnapshotDigest> {
    use std::io::Read;
    let mut file =
        std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut verifier = SnapshotVerifier::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        verifier.update(&buf[..n]);
    }
    Ok(verifier.finish())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `20261201T153000Z`: sorts by time, and has no `:` for the file systems
/// that refuse one.
fn stamp(now: SystemTime) -> String {
    humantime::format_rfc3339_seconds(now)
        .to_string()
        .replace(['-', ':'], "")
}

#[cfg(test)]
mod tests;

//! What the etcd snapshot before each hop needs to read: where etcd lives
//! (kubeadm's stacked etcd, or an external one fleetctl cannot snapshot),
//! and whether a snapshot file is whole.
//!
//! kubeadm records the choice in the `ClusterConfiguration` of the
//! `kube-system/kubeadm-config` ConfigMap: `etcd.local` (with `dataDir`,
//! `/var/lib/etcd` by default, the host directory the etcd static pod
//! mounts) or `etcd.external` (with `endpoints`); the two are mutually
//! exclusive (the kubeadm configuration API reference, `Etcd`).
//!
//! `snapshot status -w json` prints one line of JSON with `hash`,
//! `revision`, `totalKey` and `totalSize` (the etcdutl and etcdctl READMEs:
//! `{"hash":3474280699,"revision":3,"totalKey":3,"totalSize":24576}`);
//! etcdutl v3.6 adds `version` (its `snapshot.Status` struct).
//!
//! Whether a snapshot is whole does not depend on which tools the etcd
//! image ships (3.5: etcdctl only; 3.6.4: etcdctl without `snapshot status`;
//! 3.6.5+: etcdutl): etcd itself appends the sha256 of the database to the
//! snapshot stream (`Snapshot` in server/etcdserver/api/v3rpc/maintenance.go
//! sends it as the last message), `etcdctl snapshot save` refuses a stream
//! whose size is not a whole number of 512-byte sectors plus those 32 bytes
//! (`hasChecksum` in client/v3/snapshot/v3_snapshot.go), and `etcdutl
//! snapshot restore` compares the trailer with the sha256 of the rest before
//! it restores anything (`copyAndVerifyDB` in etcdutl/snapshot/v3_snapshot.go).
//! [`SnapshotVerifier`] makes the same two checks on this machine, so a copy
//! that would fail that restore never counts as a backup.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::node::{CLUSTER_CONFIGURATION_KEY, ClusterConfiguration, configmap_data};

/// Where kubeadm's local etcd keeps its data when `dataDir` is not set.
pub const DEFAULT_ETCD_DATA_DIR: &str = "/var/lib/etcd";

/// `snapshot status -w json` of a snapshot file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// CRC-32C over the database's buckets: two copies of one snapshot agree.
    pub hash: u64,
    pub revision: i64,
    pub total_key: u64,
    pub total_size: u64,
    /// The etcd storage version (etcdutl v3.6 and later).
    #[serde(default)]
    pub version: Option<String>,
}

/// Reads the JSON line out of what the command printed, skipping anything
/// else on the same stream (etcdctl v3.5 prints a deprecation notice for
/// `snapshot status`). `None` when there is no JSON at all: etcdctl v3.6
/// has no `snapshot status` (etcd-io/etcd#13809), and cobra answers an
/// unknown subcommand of `snapshot`, a command with subcommands and no
/// `Run`, with the help of `snapshot` on stdout and exit 0 (`execute`
/// returns `flag.ErrHelp` for a command that is not runnable, and
/// `ExecuteC` prints the help and returns no error; spf13/cobra command.go).
/// So exit 0 without JSON means "this tool cannot tell", never a verdict
/// on the snapshot. A snapshot with no revision or no bytes is refused:
/// restoring it would bring back an empty cluster.
pub fn parse_snapshot_status(output: &str) -> Result<Option<SnapshotStatus>> {
    let Some(line) = output
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('{'))
    else {
        return Ok(None);
    };
    let status: SnapshotStatus = serde_json::from_str(line)
        .with_context(|| format!("`snapshot status -w json` printed unexpected JSON: {line}"))?;
    if status.revision <= 0 || status.total_size == 0 || status.total_key == 0 {
        bail!(
            "the snapshot is empty (revision {}, {} keys, {} bytes); it cannot restore this cluster",
            status.revision,
            status.total_key,
            status.total_size
        );
    }
    Ok(Some(status))
}

/// The size of the sha256 etcd appends to every snapshot.
const TRAILER: usize = 32;

/// etcd's sector rule (`hasChecksum`): a bbolt database is whole pages, so
/// a snapshot with its trailer is a multiple of 512 bytes plus 32.
pub fn has_snapshot_trailer(bytes: u64) -> bool {
    bytes % 512 == TRAILER as u64
}

/// Reads a snapshot file as it streams by, once: its sha256 (to compare
/// with the node's `sha256sum`) and the sha256 of everything but its last
/// 32 bytes (to compare with those bytes, etcd's own integrity hash).
#[derive(Clone, Default)]
pub struct SnapshotVerifier {
    whole: Sha256,
    payload: Sha256,
    /// The last bytes seen, at most [`TRAILER`] once `update` returns.
    tail: Vec<u8>,
    bytes: u64,
}

/// What [`SnapshotVerifier`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDigest {
    /// Lower-case hex, as `sha256sum` prints it.
    pub sha256: String,
    pub bytes: u64,
    /// `Err` says how the file fails etcd's own check: truncated (no
    /// trailer where etcd puts one) or corrupt (the trailer does not match).
    pub integrity: Result<(), String>,
}

impl SnapshotVerifier {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, chunk: &[u8]) {
        self.whole.update(chunk);
        self.bytes += chunk.len() as u64;
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > TRAILER {
            let done = self.tail.len() - TRAILER;
            self.payload.update(&self.tail[..done]);
            self.tail.drain(..done);
        }
    }

    pub fn finish(self) -> SnapshotDigest {
        let sha256 = hex(&self.whole.finalize());
        let integrity = if !has_snapshot_trailer(self.bytes) {
            Err(format!(
                "it is {} bytes, not whole 512-byte sectors plus the 32-byte sha256 etcd appends to \
                 every snapshot: it is truncated, or not a snapshot `etcdctl snapshot save` wrote",
                self.bytes
            ))
        } else {
            let payload = self.payload.finalize();
            if payload.as_slice() == self.tail.as_slice() {
                Ok(())
            } else {
                Err(format!(
                    "the sha256 etcd appended to it ({}) is not the sha256 of its {} bytes of \
                     data ({}): it is corrupt, and `etcdutl snapshot restore` would refuse it",
                    hex(&self.tail),
                    self.bytes - TRAILER as u64,
                    hex(&payload)
                ))
            }
        };
        SnapshotDigest {
            sha256,
            bytes: self.bytes,
            integrity,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How the cluster runs etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EtcdTopology {
    /// kubeadm's static pod on every control-plane node (stacked), with
    /// its data directory on the host.
    Local { data_dir: String },
    /// An etcd cluster kubeadm does not run: fleetctl does not snapshot it
    /// and says so.
    External { endpoints: Vec<String> },
}

/// The ClusterConfiguration in `kubectl -n kube-system get configmap
/// kubeadm-config -o json`, read by the one parser of it
/// (`crate::node::kubeadm_config`).
fn cluster_configuration(configmap_json: &str) -> Result<ClusterConfiguration> {
    let map = configmap_data(configmap_json).context(
        "`kubectl get configmap kubeadm-config -o json` printed something that is not a ConfigMap",
    )?;
    let Some(yaml) = map.get(CLUSTER_CONFIGURATION_KEY) else {
        bail!("the kubeadm-config ConfigMap has no ClusterConfiguration");
    };
    ClusterConfiguration::parse(yaml)
        .context("the ClusterConfiguration in kubeadm-config is not valid YAML")
}

/// The cluster's name as kubeadm knows it (`clusterName`, `kubernetes` by
/// default): what snapshot files are named after.
pub fn cluster_name(configmap_json: &str) -> Result<String> {
    Ok(cluster_configuration(configmap_json)?
        .cluster_name
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "kubernetes".to_string()))
}

/// The etcd section of the ClusterConfiguration. A configuration without
/// an `etcd` section is kubeadm's default: local, in [`DEFAULT_ETCD_DATA_DIR`].
pub fn etcd_topology(configmap_json: &str) -> Result<EtcdTopology> {
    let config = cluster_configuration(configmap_json)?;
    match (config.etcd_local, config.etcd_external) {
        (Some(_), Some(_)) => bail!(
            "kubeadm-config sets both etcd.local and etcd.external, which kubeadm refuses; \
             check the ConfigMap"
        ),
        (_, Some(endpoints)) => Ok(EtcdTopology::External { endpoints }),
        (local, None) => Ok(EtcdTopology::Local {
            data_dir: local
                .and_then(|l| l.data_dir)
                .filter(|d| !d.is_empty())
                .unwrap_or_else(|| DEFAULT_ETCD_DATA_DIR.to_string()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
        std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
    }

    #[test]
    fn reads_snapshot_status_as_etcdutl_prints_it() {
        let status = parse_snapshot_status(&fixture("etcdutl-snapshot-status.json"))
            .unwrap()
            .unwrap();
        assert_eq!(
            status,
            SnapshotStatus {
                hash: 3_474_280_699,
                revision: 3,
                total_key: 3,
                total_size: 24576,
                version: None,
            }
        );
        let v36 = "{\"hash\":1409316564,\"revision\":48213,\"totalKey\":1287,\"totalSize\":6721536,\"version\":\"3.6.0\"}\n";
        assert_eq!(
            parse_snapshot_status(v36)
                .unwrap()
                .unwrap()
                .version
                .as_deref(),
            Some("3.6.0")
        );
        let noisy = "Deprecated: Use `etcdutl snapshot status` instead.\n\n{\"hash\":1,\"revision\":2,\"totalKey\":3,\"totalSize\":4}\n";
        assert_eq!(parse_snapshot_status(noisy).unwrap().unwrap().revision, 2);
    }

    #[test]
    fn help_on_stdout_is_no_status_at_all() {
        // etcdctl 3.6: `snapshot status` is gone; cobra prints the help of
        // `snapshot` and exits 0.
        let help = "NAME:\n\tsnapshot - Manages etcd node snapshots\n\nUSAGE:\n\tetcdctl snapshot <subcommand> [flags]\n";
        assert_eq!(parse_snapshot_status(help).unwrap(), None);
        assert_eq!(parse_snapshot_status("").unwrap(), None);
    }

    #[test]
    fn refuses_errors_and_empty_snapshots() {
        for bad in [
            "{\"hash\":\"x\"}",
            "{\"hash\":0,\"revision\":0,\"totalKey\":0,\"totalSize\":0}",
        ] {
            assert!(parse_snapshot_status(bad).is_err(), "{bad:?}");
        }
    }

    /// A snapshot as etcd writes one: whole 4 KiB pages, then their sha256.
    fn snapshot(pages: usize) -> Vec<u8> {
        let mut data: Vec<u8> = (0..pages * 4096).map(|i| (i % 251) as u8).collect();
        let sum = Sha256::digest(&data);
        data.extend_from_slice(&sum);
        data
    }

    fn verify(data: &[u8], chunk: usize) -> SnapshotDigest {
        let mut v = SnapshotVerifier::new();
        for c in data.chunks(chunk.max(1)) {
            v.update(c);
        }
        v.finish()
    }

    #[test]
    fn a_whole_snapshot_passes_however_it_is_read() {
        let data = snapshot(3);
        for chunk in [1, 7, 31, 32, 33, 4096, 1 << 20] {
            let d = verify(&data, chunk);
            assert_eq!(d.integrity, Ok(()), "chunk {chunk}");
            assert_eq!(d.bytes, 3 * 4096 + 32);
            assert_eq!(d.sha256, hex(&Sha256::digest(&data)));
        }
    }

    #[test]
    fn a_truncated_or_flipped_snapshot_fails_etcds_check() {
        let data = snapshot(2);
        for cut in [1, 32, 100, data.len() - 1] {
            let d = verify(&data[..data.len() - cut], 4096);
            let e = d.integrity.unwrap_err();
            assert!(e.contains("truncated"), "{cut}: {e}");
        }
        // A cut of whole sectors keeps the size rule; the hash catches it.
        for cut in [512, 4096] {
            let d = verify(&data[..data.len() - cut], 4096);
            assert!(d.integrity.unwrap_err().contains("corrupt"), "{cut}");
        }
        for at in [0, 4097, data.len() - 33, data.len() - 1] {
            let mut bad = data.clone();
            bad[at] ^= 0x01;
            let e = verify(&bad, 1000).integrity.unwrap_err();
            assert!(e.contains("corrupt"), "{at}: {e}");
        }
        assert!(verify(&[], 1).integrity.is_err());
        assert!(has_snapshot_trailer(32) && !has_snapshot_trailer(4096));
    }

    #[test]
    fn stacked_etcd_from_a_real_kubeadm_config() {
        let local = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/node/fixtures/kubeadm-config.json"
        ))
        .unwrap();
        assert_eq!(
            etcd_topology(&local).unwrap(),
            EtcdTopology::Local {
                data_dir: "/var/lib/etcd".into()
            }
        );
    }

    #[test]
    fn external_etcd_is_detected_with_its_endpoints() {
        assert_eq!(
            etcd_topology(&fixture("kubeadm-config-external-etcd.json")).unwrap(),
            EtcdTopology::External {
                endpoints: vec![
                    "https://10.0.0.31:2379".into(),
                    "https://10.0.0.32:2379".into(),
                    "https://10.0.0.33:2379".into(),
                ]
            }
        );
    }

    #[test]
    fn defaults_and_contradictions() {
        let cm =
            |yaml: &str| serde_json::json!({"data": {"ClusterConfiguration": yaml}}).to_string();
        assert_eq!(
            etcd_topology(&cm(
                "kind: ClusterConfiguration\nkubernetesVersion: v1.34.2\n"
            ))
            .unwrap(),
            EtcdTopology::Local {
                data_dir: DEFAULT_ETCD_DATA_DIR.into()
            }
        );
        assert_eq!(
            etcd_topology(&cm("etcd:\n  local:\n    dataDir: /data/etcd\n    extraArgs:\n    - name: quota-backend-bytes\n      value: \"8589934592\"\n")).unwrap(),
            EtcdTopology::Local {
                data_dir: "/data/etcd".into()
            }
        );
        assert!(
            etcd_topology(&cm("etcd:\n  local: {}\n  external:\n    endpoints: []\n")).is_err()
        );
        assert!(etcd_topology(&cm("etcd: [")).is_err());
        assert!(etcd_topology("{\"data\":{}}").is_err());
    }

    #[test]
    fn cluster_name_or_kubeadms_default() {
        let cm =
            |yaml: &str| serde_json::json!({"data": {"ClusterConfiguration": yaml}}).to_string();
        assert_eq!(
            cluster_name(&cm("clusterName: prod-eu\n")).unwrap(),
            "prod-eu"
        );
        assert_eq!(cluster_name(&cm("etcd: {}\n")).unwrap(), "kubernetes");
        assert!(cluster_name("{}").is_err());
    }
}

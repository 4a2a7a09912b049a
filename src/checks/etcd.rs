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

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

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
/// `snapshot status`). A snapshot with no revision or no bytes is refused:
/// restoring it would bring back an empty cluster.
pub fn parse_snapshot_status(output: &str) -> Result<SnapshotStatus> {
    let Some(line) = output
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('{'))
    else {
        bail!(
            "`snapshot status -w json` printed no JSON: {}",
            output.trim().lines().last().unwrap_or("(nothing)")
        );
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
    Ok(status)
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

#[derive(Deserialize)]
struct ConfigMap {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ClusterConfiguration {
    #[serde(default)]
    etcd: Etcd,
    /// kubeadm's default is `kubernetes`.
    cluster_name: Option<String>,
}

#[derive(Deserialize, Default)]
struct Etcd {
    local: Option<Local>,
    external: Option<External>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Local {
    data_dir: Option<String>,
}

#[derive(Deserialize)]
struct External {
    #[serde(default)]
    endpoints: Vec<String>,
}

/// The ClusterConfiguration in `kubectl -n kube-system get configmap
/// kubeadm-config -o json`.
fn cluster_configuration(configmap_json: &str) -> Result<ClusterConfiguration> {
    let map: ConfigMap = serde_json::from_str(configmap_json).context(
        "`kubectl get configmap kubeadm-config -o json` printed something that is not a ConfigMap",
    )?;
    let Some(yaml) = map.data.get("ClusterConfiguration") else {
        bail!("the kubeadm-config ConfigMap has no ClusterConfiguration");
    };
    serde_saphyr::from_str(yaml)
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
    match (config.etcd.local, config.etcd.external) {
        (Some(_), Some(_)) => bail!(
            "kubeadm-config sets both etcd.local and etcd.external, which kubeadm refuses; \
             check the ConfigMap"
        ),
        (_, Some(external)) => Ok(EtcdTopology::External {
            endpoints: external.endpoints,
        }),
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
        let status = parse_snapshot_status(&fixture("etcdutl-snapshot-status.json")).unwrap();
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
            parse_snapshot_status(v36).unwrap().version.as_deref(),
            Some("3.6.0")
        );
        let noisy = "Deprecated: Use `etcdutl snapshot status` instead.\n\n{\"hash\":1,\"revision\":2,\"totalKey\":3,\"totalSize\":4}\n";
        assert_eq!(parse_snapshot_status(noisy).unwrap().revision, 2);
    }

    #[test]
    fn refuses_errors_and_empty_snapshots() {
        for bad in [
            "",
            "Error: snapshot file integrity check failed. 2 errors found.\n",
            "{\"hash\":\"x\"}",
            "{\"hash\":0,\"revision\":0,\"totalKey\":0,\"totalSize\":0}",
        ] {
            assert!(parse_snapshot_status(bad).is_err(), "{bad:?}");
        }
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

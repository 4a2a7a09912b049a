//! The snapshot's pure parts: its path, its stamp, its size, its digest,
//! which copy is kept, and where etcd lives.

use super::*;

#[test]
fn a_snapshot_above_the_ceiling_is_not_copied() {
    assert!(check_size(8 << 30, 8 << 30).is_ok());
    let err = check_size(10 << 30, 8 << 30).unwrap_err().to_string();
    assert!(
        err.starts_with("the snapshot is 10737418240 bytes, more than the 8589934592 bytes"),
        "{err}"
    );
}

#[test]
fn a_cluster_name_cannot_lead_out_of_the_backups_directory() {
    let dir = Path::new("/w/.fleetctl/backups");
    let minor: Minor = "v1.35".parse().unwrap();
    assert_eq!(
        local_path(dir, "kubernetes", minor, "20261201T153000Z").unwrap(),
        dir.join("kubernetes-v1.35-20261201T153000Z.db")
    );
    for bad in ["/abs", "../../x", ".hidden", "a/b"] {
        assert!(local_path(dir, bad, minor, "s").is_err(), "{bad}");
    }
}

#[test]
fn stamps_sort_and_carry_no_colon() {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_139_000);
    assert_eq!(stamp(t), "20261201T153000Z");
}

#[test]
fn a_tool_the_pod_lacks_is_told_from_a_failure() {
    assert!(missing_tool(
        "error: Internal error occurred: error executing command in container: failed to exec in container: \
         failed to start exec \"3f\": OCI runtime exec failed: exec failed: unable to start container process: \
         exec: \"etcdutl\": executable file not found in $PATH: unknown"
    ));
    assert!(!missing_tool("Error: snapshot file has wrong size"));
}

#[test]
fn the_digest_of_a_file_matches_sha256sum() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    std::fs::write(&path, b"abc").unwrap();
    let d = digest_of(&path).unwrap();
    assert_eq!(
        (d.sha256.as_str(), d.bytes),
        (
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            3
        )
    );
    assert!(d.integrity.is_err(), "3 bytes cannot be an etcd snapshot");
}

/// tests/cli/checks.rs's external etcd: the hop goes on without a
/// snapshot and the warning names the endpoints; a stacked etcd is
/// snapshotted in its data dir.
#[test]
fn an_external_etcd_is_not_snapshotted_and_says_so() {
    let cm = |yaml: &str| serde_json::json!({"data": {"ClusterConfiguration": yaml}}).to_string();
    let external = cm("etcd:\n  external:\n    endpoints:\n    - https://10.0.0.50:2379\n");
    let warning = local_data_dir("cp-1", &external).unwrap().unwrap_err();
    assert!(
        warning
            .starts_with("etcd is external (https://10.0.0.50:2379): fleetctl did not snapshot it"),
        "{warning}"
    );
    let stacked = cm("etcd:\n  local:\n    dataDir: /data/etcd\n");
    assert_eq!(
        local_data_dir("cp-1", &stacked).unwrap(),
        Ok("/data/etcd".into())
    );
}

/// A snapshot of `pages` 4 KiB pages, with etcd's sha256 trailer.
fn snapshot_bytes(pages: usize) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut data: Vec<u8> = (0..pages * 4096).map(|i| (i % 251) as u8).collect();
    let sum = Sha256::digest(&data);
    data.extend_from_slice(&sum);
    data
}

fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// tests/cli/etcd_cgroup.rs's damaged snapshot, on this machine's copy:
/// truncated or flipped, it fails etcd's own check and is not kept; a
/// copy that is not the node's file is not kept either; a whole one
/// gets its final name.
#[test]
fn only_a_verified_copy_of_the_nodes_snapshot_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (partial, local) = (dir.path().join("s.db.partial"), dir.path().join("s.db"));
    let whole = snapshot_bytes(2);
    let truncated = whole[..whole.len() - 100].to_vec();
    let mut flipped = whole.clone();
    flipped[4097] ^= 1;
    for (bad, words) in [(&truncated, "it is truncated"), (&flipped, "it is corrupt")] {
        std::fs::write(&partial, bad).unwrap();
        let e =
            keep_verified(&partial, &local, "/var/lib/etcd/x.db", &sha256_hex(bad)).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("fails etcd's own integrity check"), "{text}");
        assert!(text.contains(words), "{text}");
        assert!(
            !partial.exists() && !local.exists(),
            "a damaged copy was kept"
        );
    }
    std::fs::write(&partial, &whole).unwrap();
    let e = keep_verified(&partial, &local, "/n", &"0".repeat(64)).unwrap_err();
    assert!(format!("{e:#}").contains("the copy is damaged"), "{e:#}");
    assert!(!partial.exists() && !local.exists());

    std::fs::write(&partial, &whole).unwrap();
    let bytes = keep_verified(&partial, &local, "/n", &sha256_hex(&whole)).unwrap();
    assert_eq!(bytes, whole.len() as u64);
    assert!(!partial.exists());
    assert_eq!(std::fs::read(&local).unwrap(), whole);
}

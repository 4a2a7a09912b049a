//! The scripts as text: valid POSIX sh, safe to wrap in single quotes, and
//! the snapshot-file commands run for real with `sh`. What the scripts
//! print, run against a fake root (`super::fake_root`), is tested beside its
//! parsers: `node::script_output_tests` and `checks::checks_script_tests`.

use std::fs;
use std::process::Command;

use super::fake_root::PATH_LINE;
use super::*;

#[test]
fn scripts_are_valid_posix_sh() {
    for (name, script) in [
        ("facts", FACTS_SCRIPT),
        ("cluster", CLUSTER_SCRIPT),
        ("checks", CHECKS_SCRIPT),
        ("checks after cluster", CHECKS_AFTER_CLUSTER_SCRIPT),
        ("gates", GATES_SCRIPT),
        ("ceph discovery", rook::DISCOVER_SCRIPT),
    ] {
        let out = Command::new("sh")
            .args(["-n", "-c", script])
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{name} script: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn scripts_survive_single_quote_wrapping() {
    // `sudo -n sh -c '<script>'` would break on a single quote.
    assert!(!FACTS_SCRIPT.contains('\''));
    assert!(!CLUSTER_SCRIPT.contains('\''));
    assert!(!CHECKS_SCRIPT.contains('\''));
    assert!(!CHECKS_AFTER_CLUSTER_SCRIPT.contains('\''));
    assert!(!GATES_SCRIPT.contains('\''));
}

#[test]
fn prelude_prints_the_markers_the_parser_reads() {
    let prelude = include_str!("prelude.sh");
    for marker in [markers::BEGIN, markers::STDERR, markers::END] {
        assert!(prelude.contains(marker), "prelude lacks {marker}");
    }
    assert!(FACTS_SCRIPT.contains(PATH_LINE));
}

#[test]
fn the_snapshot_file_commands_take_any_path_literally() {
    let dir = tempfile::tempdir().unwrap();
    // A data directory an operator could have chosen, with what a shell
    // would otherwise split, expand or glob.
    let sub = dir.path().join("etcd data $HOME 'x' *");
    fs::create_dir(&sub).unwrap();
    let file = sub.join("fleetctl-etcd-v1.36-20261201T120000Z.db");
    fs::write(&file, b"snapshot bytes").unwrap();
    let decoy = dir.path().join("etcd");
    fs::write(&decoy, b"not this").unwrap();
    let path = file.to_str().unwrap();
    let run = |cmd: &str| {
        Command::new("/bin/sh")
            .arg("-c")
            .arg(cmd)
            .output()
            .expect("sh runs")
    };

    let sum = run(&snapshot_file::sha256(path));
    assert!(sum.status.success(), "{sum:?}");
    // sha256 of "snapshot bytes"
    let expected = {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(b"snapshot bytes");
        format!("{:x}", h.finalize())
    };
    assert_eq!(
        String::from_utf8_lossy(&sum.stdout)
            .split_whitespace()
            .next(),
        Some(expected.as_str())
    );
    assert_eq!(run(&snapshot_file::cat(path)).stdout, b"snapshot bytes");
    assert!(run(&snapshot_file::remove(path)).status.success());
    assert!(!file.exists(), "the snapshot copy is gone");
    assert!(decoy.exists() && sub.exists(), "nothing else was removed");
    // Removing it again is not an error: the removal runs whatever failed before.
    assert!(run(&snapshot_file::remove(path)).status.success());
}

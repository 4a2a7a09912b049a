//! The tables against the real source: `tests/tools/feature_gates/<tag>/`
//! holds kubernetes/kubernetes's feature files at release tags, trimmed to
//! the declarations and locked specs (`feature_gates_from_source.py
//! --trim`), and the script derives from them what each tag removed and
//! locked (`--fixtures`). Every removal between two fixture tags must be a
//! row of `REMOVED_FEATURE_GATES` with that minor and every row of those
//! minors must be derived; every lock the newest fixture declares must be a
//! row of `LOCKED_FEATURE_GATES` with its minor and value, and every row at
//! or below that minor must be declared so. A row that drifts from the
//! source, or a source change nobody copied, fails here. docs/checks.md
//! says where the files came from and how to add the next minor.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use super::*;

/// The script's lines from the fixtures, and the fixtures' minors.
fn derived() -> (Vec<String>, Vec<u64>) {
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tools");
    let out = Command::new("python3")
        .arg(format!("{tools}/feature_gates_from_source.py"))
        .args(["--fixtures", &format!("{tools}/feature_gates")])
        .output()
        .expect("python3 runs tests/tools/feature_gates_from_source.py (tests/run.sh installs it)");
    assert!(
        out.status.success(),
        "the derivation script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut minors: Vec<u64> = std::fs::read_dir(format!("{tools}/feature_gates"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            name.strip_prefix("v1.")?.split('.').next()?.parse().ok()
        })
        .collect();
    minors.sort();
    let lines = String::from_utf8(out.stdout).unwrap();
    (lines.lines().map(str::to_string).collect(), minors)
}

fn m(minor: u64) -> Minor {
    Minor::new(1, minor)
}

/// `1.32` → 32.
fn minor_of(text: &str) -> u64 {
    text.strip_prefix("1.").unwrap().parse().unwrap()
}

/// `(v1.32.10)` → 32.
fn tag_minor(tag: &str) -> u64 {
    minor_of(
        tag.trim_matches(['(', ')', 'v'])
            .rsplit_once('.')
            .unwrap()
            .0,
    )
}

#[test]
fn the_tables_agree_with_kubernetes_own_feature_files_at_the_release_tags() {
    let (lines, minors) = derived();
    let (first, newest) = (minors[0], *minors.last().unwrap());
    let mut removed = BTreeSet::new();
    let mut locked = BTreeMap::new();
    for line in &lines {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f[0] {
            "removed" => {
                removed.insert((f[1].to_string(), minor_of(f[2])));
            }
            // The newest tag's locks: every one still declared there, with
            // the minor its versioned spec locks it from.
            "locked" if tag_minor(f[4]) == newest => {
                locked.insert(f[1].to_string(), (minor_of(f[2]), f[3] == "true"));
            }
            _ => {}
        }
    }
    assert!(!removed.is_empty() && !locked.is_empty(), "{lines:?}");

    let mut wrong = Vec::new();
    for (gate, minor) in &removed {
        if removed_by(gate, m(*minor)).map(|r| r.removed_in) != Some(m(*minor)) {
            wrong.push(format!(
                "{gate}: the source removes it in 1.{minor}; no such row"
            ));
        }
    }
    for r in REMOVED_FEATURE_GATES {
        let minor = r.removed_in.minor;
        if minor > first && minor <= newest && !removed.contains(&(r.gate.to_string(), minor)) {
            wrong.push(format!(
                "{}: a row says removed in 1.{minor}; the source does not",
                r.gate
            ));
        }
    }
    for (gate, (minor, value)) in &locked {
        match LOCKED_FEATURE_GATES.iter().find(|l| l.gate == gate) {
            Some(l) if l.locked_in == m(*minor) && l.value == *value => {}
            other => wrong.push(format!(
                "{gate}: the source locks it to {value} from 1.{minor}; the row: {other:?}"
            )),
        }
    }
    for l in LOCKED_FEATURE_GATES {
        if l.locked_in <= m(newest) && !locked.contains_key(l.gate) {
            wrong.push(format!(
                "{}: a row locks it from {}; the source at 1.{newest} does not",
                l.gate, l.locked_in
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "tables and source disagree:\n{}",
        wrong.join("\n")
    );
}

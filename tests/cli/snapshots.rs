//! Whole-output snapshots (insta) of what an operator reads: `status`,
//! `plan` and `apply --dry-run`, each run on a shared read-only fleet. The
//! other tests pick out the lines that matter; these show every line, so a
//! change to any of them is seen, and reviewed, in the diff of a `.snap`
//! file under `tests/cli/snapshots/`.
//!
//! What differs from run to run (the fleet's temporary directory, the
//! hub's and Prometheus' ports, the nodes' addresses) is replaced by a
//! name in brackets before the comparison ([`normalise`]).
//!
//! After a deliberate change to the output, accept the new text:
//!
//! ```sh
//! INSTA_UPDATE=always cargo test -p fleetctl --test cli -- snapshots::
//! git diff tests/cli/snapshots/      # review, then commit
//! ```
//!
//! (or `cargo insta test -p fleetctl --test cli -- snapshots::` and
//! `cargo insta review` with cargo-insta). A mismatch fails the test; CI
//! (`.ci/run`) sets `INSTA_UPDATE=no`, so it never writes a snapshot.

use crate::support::{self, ReadOnly, Run, Seat};

/// `$ fleetctl ARGS`, the exit code, stdout and stderr, normalised.
fn transcript(fleet: &ReadOnly, args: &[&str], run: &Run) -> String {
    let text = format!(
        "$ fleetctl {}\nexit {:?}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        run.code,
        run.stdout,
        run.stderr
    );
    normalise(fleet, &text)
}

/// Replaces what is particular to this fleet and this run: the test's
/// directory, the fleet's, its hub's and Prometheus' URLs, the nodes' SSH
/// port and addresses, etcd's raft index (one member's: the line has one).
fn normalise(fleet: &ReadOnly, text: &str) -> String {
    let shared = Seat::fleet(fleet);
    let info = shared.info();
    let mut out = text
        .replace(&fleet.dir().display().to_string(), "[TEST-DIR]")
        .replace(&shared.dir().display().to_string(), "[FLEET-DIR]")
        .replace(shared.hub_url(), "[HUB]");
    if !shared.prometheus_url().is_empty() {
        out = out.replace(shared.prometheus_url(), "[PROMETHEUS]");
    }
    // Longest first: 127.0.3.10 must not be half-replaced by 127.0.3.1.
    let mut nodes: Vec<_> = info.nodes.iter().collect();
    nodes.sort_by_key(|n| std::cmp::Reverse(n.address.len()));
    for n in nodes {
        out = out.replace(&n.address, &format!("[{} ADDRESS]", n.name));
    }
    out = out.replace(&format!(":{}", info.port), ":[SSH-PORT]");
    // etcd's raft index counts what the fleet wrote while it booted.
    out.lines()
        .map(|l| match l.split_once("raft index ") {
            Some((head, tail)) => {
                let rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
                format!("{head}raft index [N]{rest}")
            }
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if out.ends_with('\n') { "\n" } else { "" }
}

fn assert_transcript(name: &str, fleet: &ReadOnly, args: &[&str]) -> Run {
    let run = support::run(&fleet.inventory(), args);
    insta::assert_snapshot!(name, transcript(fleet, args, &run));
    run
}

#[test]
fn status_of_the_mixed_fleet() {
    let fleet = crate::status::MIXED.get();
    assert_transcript("status", &fleet, &["status"]).expect_code(0);
}

#[test]
fn plan_v1_34_to_v1_37() {
    let fleet = crate::plan::AT_V1_34_2.get();
    assert_transcript("plan_v1_37", &fleet, &["plan", "v1.37"]).expect_code(0);
}

#[test]
fn apply_dry_run_v1_34_to_v1_36() {
    let fleet = crate::apply::SMALL_V1_34_2.get();
    support::run(&fleet.inventory(), &["plan", "v1.36"]).expect_code(0);
    assert_transcript("apply_dry_run_v1_36", &fleet, &["apply", "--dry-run"]).expect_code(0);
}

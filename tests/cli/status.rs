//! `fleetctl status` end to end: the real binary against simulated nodes
//! (real sshd, real sudo, real host keys), checked against what the
//! simulator knows to be true — its boot records, its sshd logs, its
//! known_hosts. Also the parts of the CLI that must work without any node:
//! inventory errors, completions and the man page.

use std::fs;
use std::io::ErrorKind;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{self, Fleet, Scenario, SharedFleet};

// ---------------------------------------------------------------------------
// Helpers

/// The table's rows (header first), cells split on the two-space gutters.
fn table(stdout: &str) -> Vec<Vec<String>> {
    stdout
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        })
        .collect()
}

/// The table row of `node`, as `[NODE, ROLE, STATE, KUBERNETES, PIN, FLATCAR, REBOOT]`:
/// without its ROLLBACK TO cell, which tests/cli/rollback.rs and the status
/// snapshot look at.
fn row(stdout: &str, node: &str) -> Vec<String> {
    let rows = table(stdout);
    assert_eq!(
        rows.first().map(|h| h.join("|")),
        Some(
            "NODE|ROLE|STATE|KUBERNETES (running → staged)|PIN|ROLLBACK TO|FLATCAR|REBOOT"
                .to_string()
        ),
        "unexpected table header:\n{stdout}"
    );
    let mut row = rows
        .into_iter()
        .find(|r| r.first().is_some_and(|n| n == node))
        .unwrap_or_else(|| panic!("no row for {node} in:\n{stdout}"));
    if row.len() == 8 {
        row.remove(5);
    }
    row
}

/// `node`'s sshd log (the console, or a real-OS node's journal).
fn console(fleet: &Fleet, node: &str) -> String {
    fleet.sshd_log(node).unwrap_or_default()
}

/// Waits until `node`'s sshd has logged `needle` `times` times: sshd writes
/// a line when a connection ends, which may be just after fleetctl exited,
/// and on a real-OS node the line then goes through journald, which a
/// machine busy with parallel fleets may take seconds to get to
/// (`Fleet::sshd_log` says why it reads by identifier).
fn wait_console(fleet: &Fleet, node: &str, needle: &str, times: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = console(fleet, node);
        if log.matches(needle).count() >= times || Instant::now() > deadline {
            return log;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The fleet's inventory with one `ssh:` setting replaced, written beside it.
fn inventory_with(fleet: &Fleet, file: &str, replace: &[(&str, String)]) -> PathBuf {
    let mut text = fs::read_to_string(fleet.inventory()).expect("reading the fleet's inventory");
    for (key, value) in replace {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{key}:")))
            .unwrap_or_else(|| panic!("no `{key}:` in the fleet's inventory:\n{text}"))
            .to_string();
        text = text.replace(&line, &format!("  {key}: {value}"));
    }
    let path = fleet.dir().join(file);
    fs::write(&path, text).expect("writing the inventory");
    path
}

fn known_hosts_lines(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> = fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

/// A fleet whose kubelets are all Ready and whose API server answers: sshd
/// is up before either (`kubelet_delay`, `api_delay`), and status reports
/// exactly that in-between state.
fn start_settled(scenario: Scenario) -> Fleet {
    let fleet = support::start(scenario);
    fleet
        .wait_for("every node is Ready and the API server answers", |c| {
            let now = fleetsim::state::now();
            c.api_up(now) && c.nodes.keys().all(|n| c.node_ready(n, now))
        })
        .expect("the fleet settling");
    fleet
}

/// Reboots `node` while the `hang_on_reboot` fault holds it down.
fn take_down(fleet: &Fleet, node: &str) {
    fleet
        .faults(|f| f.hang_on_reboot.push(node.to_string()))
        .expect("setting hang_on_reboot");
    // The connection drops with the node: the exit status says nothing.
    let _ = fleet.ssh(node, "root", "reboot");
    fleet.wait_down(node).expect("the node going down");
}

// ---------------------------------------------------------------------------
// A mixed fleet, table and JSON

/// cp-1 logs in as `core`: the API server's credentials are root's only, so
/// an answer from cp-1 proves sudo worked. w-1 has a patch staged but not
/// booted, w-2's config floats, w-3 has a Flatcar update staged, w-4 is a
/// `core` worker, w-5 is plain.
pub(crate) static MIXED: SharedFleet = SharedFleet::new("status: a mixed 1 + 5", mixed_scenario);

fn mixed_scenario() -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(5)
        .kubernetes("v1.34.2")
        .with_node("cp-1", |n| n.user = Some("core".into()))
        .with_node("w-1", |n| n.staged = Some("v1.34.3".into()))
        .with_node("w-2", |n| n.pin = fleetsim::Pin::Floating)
        .with_node("w-3", |n| n.os_update = Some("4081.3.0".into()))
        .with_node("w-4", |n| n.user = Some("core".into()))
}

#[test]
fn six_node_fleet_table() {
    let fleet = MIXED.get();
    let run = support::run(&fleet.inventory(), &["status"]).expect_code(0);
    let out = &run.stdout;

    let expect = |node: &str, cells: [&str; 6]| {
        assert_eq!(row(out, node)[1..], cells, "row of {node} in:\n{out}");
    };
    let plain = "v1.34.2";
    expect(
        "cp-1",
        ["control-plane", "Ready", plain, "v1.34", "4081.2.0", "-"],
    );
    expect(
        "w-1",
        [
            "worker",
            "Ready",
            "v1.34.2 → v1.34.3 (reboot pending)",
            "v1.34",
            "4081.2.0",
            "required",
        ],
    );
    expect(
        "w-2",
        ["worker", "Ready", plain, "FLOATING", "4081.2.0", "-"],
    );
    expect(
        "w-3",
        [
            "worker",
            "Ready",
            plain,
            "v1.34",
            "4081.2.0 → 4081.3.0",
            "required",
        ],
    );
    expect("w-4", ["worker", "Ready", plain, "v1.34", "4081.2.0", "-"]);
    expect("w-5", ["worker", "Ready", plain, "v1.34", "4081.2.0", "-"]);
    assert_eq!(table(out).len(), 7, "one row per node:\n{out}");

    assert!(
        out.contains("cluster v1.34.2 · 6 nodes (6 answered) · 2 need a reboot · 1 floating\n"),
        "summary line:\n{out}"
    );
    let warnings: Vec<&str> = out.lines().filter(|l| l.starts_with("warning:")).collect();
    assert!(
        warnings[0]
            .starts_with("warning: cp-1, w-1, w-2, w-3, w-4, w-5: sysupdate fetches from http://")
            && warnings[0].contains("plain HTTP"),
        "the sim's hub is plain HTTP, which every node's config fetches from:\n{out}"
    );
    let warnings = &warnings[1..];
    assert_eq!(
        warnings.len(),
        1,
        "besides the hub, only w-2's pin deserves a warning:\n{out}"
    );
    assert!(warnings[0].starts_with("warning: w-2: its sysupdate config floats"));
    assert!(run.stderr.is_empty(), "nothing on stderr: {}", run.stderr);

    // The core nodes really logged in as core; the others as root. On
    // cp-1 the sim's API server runs each status run's two etcdctl execs in
    // the etcd pod over SSH as root (fleetsim api/exec.rs, standing in for
    // the kubelet's CRI exec): at most two root logins per core one, none
    // of them fleetctl's. (The snapshot test borrows this fleet: more runs.)
    for (node, execs_per_run) in [("cp-1", 2), ("w-4", 0)] {
        let log = console(&fleet, node);
        let core = log.matches("Accepted publickey for core ").count();
        assert!(core > 0, "{node}:\n{log}");
        assert!(
            log.matches("Accepted publickey for root ").count() <= execs_per_run * core,
            "{node}:\n{log}"
        );
    }
    for node in ["w-1", "w-2", "w-3", "w-5"] {
        let log = console(&fleet, node);
        assert!(
            log.contains("Accepted publickey for root "),
            "{node}:\n{log}"
        );
    }
}

#[test]
fn six_node_fleet_json() {
    let fleet = MIXED.get();
    let run = support::run(&fleet.inventory(), &["status", "--output", "json"]).expect_code(0);
    let r = support::status_report(&run);

    assert_eq!(r["schema"], "fleetctl.status/v1");
    assert_eq!(r["cluster"]["version"], "v1.34.2");
    assert_eq!(r["cluster"]["kube_proxy"], false);
    assert_eq!(
        r["cluster"]["answered_by"], "cp-1",
        "sudo on a core control plane"
    );
    assert_eq!(r["cluster"]["error"], Value::Null);
    assert_eq!(r["summary"]["nodes"], 6);
    assert_eq!(r["summary"]["answered"], 6);
    assert_eq!(r["summary"]["reboot_pending"], 2, "w-1 and w-3");
    assert_eq!(r["summary"]["floating"], 1);
    let names: Vec<&str> = r["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(names, ["cp-1", "w-1", "w-2", "w-3", "w-4", "w-5"]);

    for name in names {
        let n = support::status_node(&r, name);
        let f = &n["facts"];
        // Cross-checked against the simulator's own record of this boot.
        let boot = fleet.boot(name).expect("boot record");
        assert_eq!(f["boot_id"], boot.boot_id.as_str(), "{name}");
        assert_eq!(f["hostname"], name);
        assert_eq!(n["address"], fleet.address(name).expect("address").as_str());
        assert_eq!(n["reachable"], true, "{name}");
        assert_eq!(n["error"], Value::Null, "{name}");
        assert_eq!(n["ready"], true, "{name}");
        assert_eq!(n["cordoned"], false, "{name}");
        assert_eq!(f["kubernetes"]["running"], "v1.34.2", "{name}");
        assert_eq!(f["os"]["running"], "4081.2.0", "{name}");
        let role = if name == "cp-1" {
            "control-plane"
        } else {
            "worker"
        };
        assert_eq!(n["role"], role);
    }

    let w1 = support::status_node(&r, "w-1");
    assert_eq!(w1["reboot_pending"], true);
    assert_eq!(w1["facts"]["reboot_required"], true);
    assert_eq!(w1["facts"]["kubernetes"]["staged"], "v1.34.3");
    assert_eq!(
        w1["facts"]["kubernetes"]["staged_target"],
        "/opt/extensions/kubernetes/kubernetes-v1.34.3-x86-64.raw"
    );
    assert_eq!(
        w1["facts"]["kubernetes"]["images"],
        serde_json::json!(["v1.34.2", "v1.34.3"])
    );
    assert_eq!(
        w1["pin"],
        serde_json::json!({"kind": "pinned", "minor": "v1.34"})
    );

    let w2 = support::status_node(&r, "w-2");
    assert_eq!(w2["pin"], serde_json::json!({"kind": "floating"}));
    let config = &w2["facts"]["kubernetes"]["configs"][0];
    assert_eq!(
        config["path"],
        "/etc/sysupdate.kubernetes.d/kubernetes.conf"
    );
    assert_eq!(config["pin"], serde_json::json!({"kind": "floating"}));
    assert!(
        config["content"]
            .as_str()
            .is_some_and(|c| c.contains("\nMatchPattern=kubernetes-@v-%a.raw\n")),
        "{config:#}"
    );
    assert_eq!(w2["reboot_pending"], false);

    let w3 = support::status_node(&r, "w-3");
    assert_eq!(w3["facts"]["os"]["staged"], "4081.3.0");
    assert_eq!(
        w3["facts"]["os"]["current_op"],
        "UPDATE_STATUS_UPDATED_NEED_REBOOT"
    );
    assert_eq!(w3["facts"]["reboot_required"], true);
    assert_eq!(
        w3["reboot_pending"], true,
        "Kubernetes itself is current, but the staged Flatcar update waits for a reboot"
    );

    for name in ["cp-1", "w-4", "w-5"] {
        let n = support::status_node(&r, name);
        assert_eq!(n["reboot_pending"], false, "{name}");
        assert_eq!(n["facts"]["reboot_required"], false, "{name}");
        assert_eq!(n["facts"]["os"]["staged"], Value::Null, "{name}");
        assert_eq!(n["facts"]["kubernetes"]["staged"], "v1.34.2", "{name}");
    }
    assert!(
        run.stderr.is_empty(),
        "stdout must be the JSON alone: {}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------
// The JSON schema against docs/status.md

/// The ```jsonc block of docs/status.md, comments removed.
fn documented_json() -> Value {
    let doc = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/status.md"))
        .expect("reading docs/status.md");
    let block = doc
        .split("```jsonc\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("docs/status.md has a ```jsonc block");
    let json = strip_line_comments(block);
    serde_json::from_str(&json).unwrap_or_else(|e| {
        panic!("docs/status.md's example is not JSON once uncommented ({e}):\n{json}")
    })
}

/// Removes `// …` comments outside strings.
fn strip_line_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let (mut in_string, mut escaped) = (false, false);
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_string => escaped = true,
                '"' => in_string = !in_string,
                '/' if !in_string && line[i..].starts_with("//") => {
                    cut = i;
                    break;
                }
                _ => {}
            }
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// Every object key and value type of `doc` must be in `real` and vice
/// versa; arrays compare their first elements; `null` on either side
/// matches anything (the doc shows one node's values, not every case).
fn compare_shapes(doc: &Value, real: &Value, at: &str, problems: &mut Vec<String>) {
    match (doc, real) {
        (Value::Object(d), Value::Object(r)) => {
            for key in d.keys().filter(|k| !r.contains_key(*k)) {
                problems.push(format!("{at}.{key}: documented but not in the output"));
            }
            for key in r.keys().filter(|k| !d.contains_key(*k)) {
                problems.push(format!("{at}.{key}: in the output but not documented"));
            }
            for (key, d) in d {
                if let Some(r) = r.get(key) {
                    compare_shapes(d, r, &format!("{at}.{key}"), problems);
                }
            }
        }
        (Value::Array(d), Value::Array(r)) => {
            if let (Some(d), Some(r)) = (d.first(), r.first()) {
                compare_shapes(d, r, &format!("{at}[0]"), problems);
            }
        }
        (Value::Null, _) | (_, Value::Null) => {}
        (d, r) if std::mem::discriminant(d) != std::mem::discriminant(r) => {
            problems.push(format!("{at}: documented as {d}, output has {r}"))
        }
        _ => {}
    }
}

#[test]
fn json_output_matches_docs_status_md() {
    // The doc's node is a worker with a patch staged: the mixed fleet's w-1.
    let fleet = MIXED.get();
    let run = support::run(&fleet.inventory(), &["status", "-o", "json"]).expect_code(0);
    let real = support::status_report(&run);
    let doc = documented_json();

    let mut problems = Vec::new();
    for key in ["schema", "cluster", "summary"] {
        compare_shapes(&doc[key], &real[key], key, &mut problems);
    }
    // The doc's node is w-1 with a patch staged: compare it with ours.
    compare_shapes(
        &doc["nodes"][0],
        support::status_node(&real, "w-1"),
        "nodes[w-1]",
        &mut problems,
    );
    let top = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(top(&doc), top(&real), "top-level keys");
    assert_eq!(doc["schema"], real["schema"]);
    assert!(
        problems.is_empty(),
        "docs/status.md and `status --output json` disagree:\n{}",
        problems.join("\n")
    );
}

#[test]
fn shape_comparison_notices_a_difference() {
    // compare_shapes is what keeps the doc honest: it must be able to fail.
    let doc = serde_json::json!({"a": 1, "b": {"c": "x"}, "l": [{"k": 1}]});
    let real = serde_json::json!({"a": "1", "b": {"d": "x"}, "l": [{"k": 1, "n": 2}]});
    let mut problems = Vec::new();
    compare_shapes(&doc, &real, "r", &mut problems);
    problems.sort();
    assert_eq!(
        problems,
        [
            "r.a: documented as 1, output has \"1\"",
            "r.b.c: documented but not in the output",
            "r.b.d: in the output but not documented",
            "r.l[0].n: in the output but not documented",
        ]
    );
    assert_eq!(
        strip_line_comments("{\"u\": \"http://x\", // note\n\"v\": 1 // \"q\"\n}"),
        "{\"u\": \"http://x\", \n\"v\": 1 \n}\n"
    );
}

// ---------------------------------------------------------------------------
// Host keys

#[test]
fn wrong_host_key_is_refused_and_nothing_runs_on_that_node() {
    let fleet = start_settled(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2")
            .with_node("w-1", |n| n.wrong_host_key = true),
    );
    let known_hosts = fleet.layout().known_hosts();
    let before = fs::read(&known_hosts).expect("reading known_hosts");

    let run = support::run(&fleet.inventory(), &["status"]).expect_code(1);
    let out = &run.stdout;
    assert_eq!(row(out, "w-1")[1..3], ["worker", "unreachable"], "{out}");
    assert_eq!(row(out, "cp-1")[2], "Ready", "{out}");
    assert_eq!(row(out, "w-2")[2], "Ready", "{out}");
    let address = fleet.address("w-1").expect("address");
    assert!(
        out.lines().any(|l| l
            == format!(
                "w-1 ({address}:2222): WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! \
                 Refusing to connect. No command was run."
            )),
        "the reason, under the table:\n{out}"
    );
    assert!(
        out.contains(&format!(
            "ssh-keygen -f '{}' -R '[{address}]:2222'",
            known_hosts.display(),
        )),
        "the message says how to fix it:\n{out}"
    );
    assert!(out.contains("3 nodes (2 answered)"), "{out}");

    // accept-new records unknown keys only: a changed one is still refused.
    let accept_new = inventory_with(
        &fleet,
        "accept-new.yaml",
        &[("host_key_checking", "accept-new".into())],
    );
    let run = support::run(&accept_new, &["status", "-o", "json"]).expect_code(1);
    let r = support::status_report(&run);
    let w1 = support::status_node(&r, "w-1");
    assert_eq!(w1["reachable"], false);
    assert_eq!(w1["facts"], Value::Null);
    assert!(
        w1["error"]
            .as_str()
            .is_some_and(|e| e.contains("HAS CHANGED")),
        "{w1:#}"
    );
    assert_eq!(r["summary"]["answered"], 2);
    assert_eq!(
        fs::read(&known_hosts).expect("reading known_hosts"),
        before,
        "known_hosts is left alone"
    );

    // sshd saw the connections end before authentication, twice, and never
    // accepted a login: nothing can have run there. The other nodes show
    // what a login that runs the facts script leaves in the same log.
    let log = wait_console(&fleet, "w-1", "[preauth]", 2);
    assert_eq!(
        log.matches("[preauth]").count(),
        2,
        "w-1's sshd log:\n{log}"
    );
    assert!(!log.contains("Accepted"), "w-1's sshd log:\n{log}");
    // cp-1 also runs status's two etcdctl execs per run, which the sim's
    // API server makes over SSH as root (fleetsim api/exec.rs).
    for (node, logins) in [("cp-1", 2 + 2 * 2), ("w-2", 2)] {
        let log = console(&fleet, node);
        assert_eq!(
            log.matches("Accepted publickey for root ").count(),
            logins,
            "{node}:\n{log}"
        );
    }
}

#[test]
fn accept_new_records_unknown_host_keys() {
    let fleet = start_settled(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    let fresh_dir = fleet.dir().join("fresh");
    let fresh = fresh_dir.join("known_hosts");

    // strict with no known_hosts: every key is unknown, every node refused,
    // and nothing is written.
    let strict = inventory_with(
        &fleet,
        "strict.yaml",
        &[("known_hosts", fresh.display().to_string())],
    );
    let run = support::run(&strict, &["status"]).expect_code(1);
    assert!(
        run.stdout.contains("2 nodes (0 answered)"),
        "{}",
        run.stdout
    );
    assert!(!fresh.exists(), "strict checking recorded a key");

    let accept_new = inventory_with(
        &fleet,
        "accept-new.yaml",
        &[
            ("known_hosts", fresh.display().to_string()),
            ("host_key_checking", "accept-new".into()),
        ],
    );
    let run = support::run(&accept_new, &["status"]).expect_code(0);
    assert!(
        run.stdout.contains("2 nodes (2 answered)"),
        "{}",
        run.stdout
    );
    for node in ["cp-1", "w-1"] {
        let told = format!(
            "warning: {node}: permanently added '[{}]:2222' (ED25519 SHA256:",
            fleet.address(node).expect("address")
        );
        assert!(
            run.stderr
                .lines()
                .any(|l| l.starts_with(&told) && l.ends_with(&format!(" to {}", fresh.display()))),
            "the operator is told {node}'s key was recorded (`{told}…`):\n{}",
            run.stderr
        );
    }
    // Exactly the keys the nodes have, under the names OpenSSH would use.
    assert_eq!(
        known_hosts_lines(&fresh),
        known_hosts_lines(&fleet.layout().known_hosts())
    );
    let mode = |p: &Path| fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&fresh), 0o600);
    assert_eq!(mode(&fresh_dir), 0o700);

    // Recorded keys are now simply known: strict accepts them, silently.
    let run = support::run(&strict, &["status"]).expect_code(0);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let run = support::run(&accept_new, &["status"]).expect_code(0);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    assert_eq!(known_hosts_lines(&fresh).len(), 2, "nothing recorded twice");
}

// ---------------------------------------------------------------------------
// Unreachable nodes and exit codes

#[test]
fn unreachable_node_is_reported_while_the_rest_answer() {
    let fleet = start_settled(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2"),
    );
    support::run(&fleet.inventory(), &["status"]).expect_code(0);
    take_down(&fleet, "w-2");

    let run = support::run(&fleet.inventory(), &["status"]).expect_code(1);
    let out = &run.stdout;
    assert_eq!(
        row(out, "w-2")[1..],
        ["worker", "unreachable", "-", "-", "-", "-"],
        "{out}"
    );
    assert_eq!(row(out, "cp-1")[2..4], ["Ready", "v1.34.2"], "{out}");
    assert_eq!(row(out, "w-1")[2..4], ["Ready", "v1.34.2"], "{out}");
    let address = fleet.address("w-2").expect("address");
    let reason = out
        .lines()
        .find(|l| l.starts_with("w-2: "))
        .unwrap_or_else(|| panic!("no reason under the table:\n{out}"));
    assert!(
        reason.starts_with(&format!("w-2: cannot connect to {address}:2222 over SSH: "))
            && reason.contains("Connection refused"),
        "{reason}"
    );
    assert!(out.contains("3 nodes (2 answered)"), "{out}");

    let run = support::run(&fleet.inventory(), &["status", "-o", "json"]).expect_code(1);
    let r = support::status_report(&run);
    let w2 = support::status_node(&r, "w-2");
    assert_eq!(w2["reachable"], false);
    assert_eq!(w2["facts"], Value::Null);
    assert_eq!(w2["pin"], serde_json::json!({"kind": "unreachable"}));
    assert!(w2["error"].as_str().is_some_and(|e| e.starts_with("w-2")));
    // The API server still answers and knows the node is gone.
    assert_eq!(r["cluster"]["answered_by"], "cp-1");
    assert_eq!(w2["ready"], false);
    assert_eq!(support::status_node(&r, "w-1")["reachable"], true);
    assert_eq!(r["summary"]["answered"], 2);

    // Back up: every node answers again, exit 0.
    fleet.release("w-2").expect("releasing w-2");
    fleet.wait_up("w-2").expect("w-2 back up");
    let run = support::run(&fleet.inventory(), &["status", "-o", "json"]).expect_code(0);
    assert_eq!(support::status_report(&run)["summary"]["answered"], 3);
}

#[test]
fn unreachable_control_plane_leaves_the_api_view_unknown() {
    let fleet = start_settled(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    take_down(&fleet, "cp-1");

    let run = support::run(&fleet.inventory(), &["status"]).expect_code(1);
    let out = &run.stdout;
    assert_eq!(row(out, "cp-1")[2], "unreachable", "{out}");
    assert_eq!(
        row(out, "w-1")[2..4],
        ["?", "v1.34.2"],
        "facts, but no API server to say Ready:\n{out}"
    );
    assert!(
        out.contains("cluster unknown · 2 nodes (1 answered)"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("warning: the API server could not be asked")),
        "{out}"
    );

    let run = support::run(&fleet.inventory(), &["status", "-o", "json"]).expect_code(1);
    let r = support::status_report(&run);
    assert_eq!(r["cluster"]["answered_by"], Value::Null);
    assert_eq!(r["cluster"]["version"], Value::Null);
    assert!(r["cluster"]["error"].is_string(), "{:#}", r["cluster"]);
    assert_eq!(support::status_node(&r, "w-1")["ready"], Value::Null);
    assert_eq!(support::status_node(&r, "w-1")["reachable"], true);
}

// ---------------------------------------------------------------------------
// Without any node

/// A port that records whether anything connected to it.
struct Tripwire(TcpListener);

impl Tripwire {
    fn new() -> Tripwire {
        let l = TcpListener::bind("127.0.0.1:0").expect("binding a tripwire port");
        l.set_nonblocking(true).expect("non-blocking");
        Tripwire(l)
    }

    fn port(&self) -> u16 {
        self.0.local_addr().expect("local address").port()
    }

    /// A connection made while fleetctl ran waits in the backlog.
    fn touched(&self) -> bool {
        match self.0.accept() {
            Ok(_) => true,
            Err(e) if e.kind() == ErrorKind::WouldBlock => false,
            Err(e) => panic!("tripwire accept: {e}"),
        }
    }
}

#[test]
fn inventory_errors_exit_2_with_file_line_column_and_contact_nothing() {
    let wire = Tripwire::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let head = |extra_ssh: &str| {
        format!(
            "kubernetes_version: v1.34\nssh:\n  port: {}\n  user: root\n  known_hosts: {}\n{extra_ssh}nodes:\n  - {{name: cp-1, address: 127.0.0.1, role: control-plane}}\n",
            wire.port(),
            dir.path().join("known_hosts").display()
        )
    };
    // (file text, the location and words the message must have)
    let cases = [
        // a valid node first: a lazy loader would already have contacted it
        (
            head("") + "  - {name: w-1, address: 127.0.0.2, role: wroker}\n",
            "8:43",
            "unknown role `wroker`",
        ),
        (head("  colour: red\n"), "6:3", "unknown field `colour`"),
        (
            head("") + "  - {name: w-1, address: 127.0.0.2, role: worker\n",
            "8:5",
            "unclosed bracket",
        ),
        (head("").replace("v1.34", "v1.34.2"), "1:21", "v1.34.2"),
    ];
    for (i, (text, at, words)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("inventory-{i}.yaml"));
        fs::write(&path, text).expect("writing the inventory");
        let run = support::run(&path, &["status"]).expect_code(2);
        let want = format!("{}:{at}: ", path.display());
        assert!(
            run.stderr.contains(&want) && run.stderr.contains(words),
            "case {i}: expected `{want}…{words}` in:\n{}\n--- inventory\n{text}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "case {i}: {}", run.stdout);
        assert!(!wire.touched(), "case {i}: fleetctl connected to a node");
    }
    // The tripwire works: a valid inventory does connect (and fails there).
    let path = dir.path().join("valid.yaml");
    fs::write(&path, head("")).expect("writing the inventory");
    // (It never answers the SSH banner: give up quickly.)
    support::run(&path, &["--connect-timeout", "1s", "status"]).expect_code(1);
    assert!(
        wire.touched(),
        "the valid inventory did not reach the tripwire"
    );
}

#[test]
fn completions_and_man_page_need_no_inventory() {
    let nowhere = Path::new("/nonexistent/inventory.yaml");
    let run = support::run(nowhere, &["completions", "bash"]).expect_code(0);
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("fleetctl.bash");
    fs::write(&script, &run.stdout).expect("writing the completion script");
    // bash loads it and registers the completion function.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p fleetctl",
            script.display()
        ))
        .output()
        .expect("running bash");
    let registered = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && registered.contains("-F _fleetctl"),
        "{registered}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for word in ["status", "plan", "apply", "--output", "--inventory"] {
        assert!(run.stdout.contains(word), "completion lacks {word}");
    }
    for shell in ["zsh", "fish"] {
        let run = support::run(nowhere, &["completions", shell]).expect_code(0);
        assert!(run.stdout.contains("status"), "{shell}: {}", run.stdout);
    }

    let run = support::run(nowhere, &["man"]).expect_code(0);
    let man = &run.stdout;
    for part in [
        ".TH fleetctl 1",
        ".SH NAME",
        ".SH SYNOPSIS",
        "fleetctl\\-status",
    ] {
        assert!(man.contains(part), "man page lacks {part}:\n{man}");
    }
    assert!(
        man.contains("Exit codes:"),
        "the exit codes are documented:\n{man}"
    );
}

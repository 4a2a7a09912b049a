//! The dry run and the run are one path: `apply --dry-run` prints the
//! script the run then carries out, task for task and line for line: the
//! run journals every line the dry run prints, prose included, in the same
//! task and order (`line` events, each as its step starts), and every
//! command it shows verbatim is one the run really ran, on that node, in
//! that task (`command` records); the lock the dry run says is taken and
//! given back is, around the tasks.

use std::collections::BTreeMap;

use crate::support::{self, Fleet};

/// 1 control plane + 2 workers at v1.34.2.
fn fleet() -> Fleet {
    support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2"),
    )
}

/// One task of the dry run: its heading and every line under it.
#[derive(Debug)]
struct Shown {
    title: String,
    /// `(node, text)` for every `[node] text` line, prose and commands.
    lines: Vec<(String, String)>,
}

/// The dry run as it is printed: the lines before the first task (the
/// lock taken), each task (`== i/n title`) with its `[node] text` lines.
fn shown(stdout: &str) -> (Vec<(String, String)>, Vec<Shown>) {
    let mut before = Vec::new();
    let mut tasks: Vec<Shown> = Vec::new();
    for line in stdout.lines() {
        if let Some(title) = line.strip_prefix("== ") {
            let (_, title) = title.split_once(' ').expect("a numbered heading");
            tasks.push(Shown {
                title: title.to_string(),
                lines: Vec::new(),
            });
            continue;
        }
        let Some((node, text)) = line.strip_prefix('[').and_then(|l| l.split_once("] ")) else {
            continue;
        };
        let line = (node.to_string(), text.to_string());
        match tasks.last_mut() {
            Some(task) => task.lines.push(line),
            None => before.push(line),
        }
    }
    (before, tasks)
}

/// The command a line shows verbatim, if it does: `[node] command` or
/// `[node] (when) command`; a line that is only a parenthesis or a `#`
/// comment describes, a command with an `<angle-bracket>` placeholder is
/// only known when it runs, and `-` and `*` are no one node.
fn verbatim<'l>(node: &str, text: &'l str) -> Option<&'l str> {
    let cmd = after_parenthesis(text);
    let describes = cmd.is_empty() || cmd.starts_with('#') || cmd.contains('<');
    (!describes && node != "-" && node != "*").then_some(cmd)
}

/// `text` without a leading parenthesis (which may nest).
fn after_parenthesis(text: &str) -> &str {
    if !text.starts_with('(') {
        return text;
    }
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return text[i + 1..].trim_start();
                }
            }
            _ => {}
        }
    }
    ""
}

/// Whether `journaled` is `shown` as the journal writes it: every value
/// whose flag names a secret masked (`--key=***`, the etcd client's key
/// file among them), the rest the same.
fn masked_is(journaled: &str, shown: &str) -> bool {
    let mut parts = journaled.split("***");
    let Some(mut rest) = shown.strip_prefix(parts.next().unwrap_or_default()) else {
        return false;
    };
    for part in parts {
        // A masked value runs to the next space or quote.
        let end = rest.find([' ', '\'', '"']).unwrap_or(rest.len());
        match rest[end..].strip_prefix(part) {
            Some(r) if end > 0 => rest = r,
            _ => return false,
        }
    }
    rest.is_empty()
}

/// One task of the run, from the journal.
#[derive(Debug, Default)]
struct Ran {
    title: String,
    /// Its `line` events, `(node, text)`: what the dry run shows of it.
    lines: Vec<(String, String)>,
    /// The commands it ran, `(node, command)`.
    commands: Vec<(String, String)>,
}

/// The run's journal: its tasks, and the kinds of the events before the
/// first and after the last (the lock taken and given back).
fn journaled(fleet: &Fleet) -> (Vec<String>, Vec<Ran>, Vec<String>) {
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut tasks: Vec<Ran> = Vec::new();
    let field = |r: &serde_json::Value, f: &str| r[f].as_str().unwrap_or_default().to_string();
    for r in support::journal_records(fleet) {
        let kind = field(&r, "kind");
        match (kind.as_str(), tasks.last_mut()) {
            ("task", _) => {
                let detail = field(&r, "detail");
                let (_, title) = detail.split_once(' ').expect("a numbered task");
                tasks.push(Ran {
                    title: title.to_string(),
                    ..Ran::default()
                });
                after.clear();
            }
            ("line", Some(task)) => task.lines.push((field(&r, "node"), field(&r, "detail"))),
            ("command", Some(task)) => task.commands.push((field(&r, "node"), field(&r, "cmd"))),
            (_, None) => before.push(kind),
            (_, Some(_)) => after.push(kind),
        }
    }
    (before, tasks, after)
}

#[test]
fn the_dry_run_shows_the_tasks_and_commands_the_run_then_carries_out() {
    let fleet = fleet();
    let args = ["--max-unavailable", "2", "--soak", "1s"];
    support::run(
        &fleet.inventory(),
        &["plan", "v1.36", "--workers", "every-hop"],
    )
    .expect_code(0);
    let mut dry = vec!["--dry-run"];
    dry.extend(args);
    let dry = support::apply(&fleet, &dry).expect_code(0);
    let (lock_taken, mut shown) = shown(&dry.stdout);
    // The listing ends with the lock given back, after the last task.
    let lock_released = shown
        .last_mut()
        .and_then(|t| t.lines.pop())
        .expect("a last line");
    // The tasks the old dry run left out are in it.
    for title in [
        "cp-1: wait until every control plane is Ready, before its kubeadm",
        "cp-1: last look at what the new kubelet will read",
        "w-1, w-2: last look at what the new kubelet will read",
        "soak after the hop to v1.36.",
    ] {
        assert!(
            shown.iter().any(|t| t.title.starts_with(title)),
            "no task `{title}` in the dry run:\n{}",
            dry.stdout
        );
    }
    // Where a node goes down, the dry run names the gates judged there:
    // Ceph's (when a CephCluster exists), etcd's (control planes) and the
    // Kured blockers taken over (when the lock is Kured's).
    for gate in [
        "(when a CephCluster exists: the Ceph gate, until Ceph can spare w-1, w-2: `ceph osd ok-to-stop`",
        "(when a CephCluster exists: the Ceph gate, until every PG is active+clean again",
        "(with a stacked etcd: the etcd gate, until every member is healthy",
        "(when the lock is Kured's, the Kured blockers taken over, until none holds: the alerts at \
         its --prometheus-url, then the pods matching its --blocking-pod-selector on w-2",
        "(when the lock is Kured's and it sets --pre-reboot-node-labels)",
    ] {
        assert!(
            dry.stdout.contains(gate),
            "no `{gate}` in the dry run:\n{}",
            dry.stdout
        );
    }

    let mut run = vec!["--yes"];
    run.extend(args);
    support::apply(&fleet, &run).expect_code(0);
    let (before, ran, after) = journaled(&fleet);

    // The lock: taken before the first task, given back after the last.
    assert_eq!(
        lock_taken
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>(),
        [
            "(take the lock: Kured's annotation if Kured runs, else configmap \
          kube-system/fleetctl-lock)"
        ]
    );
    assert!(before.iter().any(|k| k == "lock-acquired"), "{before:?}");
    assert_eq!(lock_released.1, "(release the lock)");
    assert!(after.iter().any(|k| k == "lock-released"), "{after:?}");

    assert_eq!(
        ran.iter().map(|t| &t.title).collect::<Vec<_>>(),
        shown.iter().map(|t| &t.title).collect::<Vec<_>>(),
        "the run's tasks (left) are not the dry run's (right); the dry run:\n{}",
        dry.stdout
    );
    // Every line of each task, prose included, is one the run journaled
    // in that task, in the same order; every command shown verbatim ran
    // there, on that node.
    let (mut lines, mut checked) = (0, 0);
    for (task, ran) in shown.iter().zip(&ran) {
        let title = &task.title;
        let same = ran.lines.len() == task.lines.len()
            && ran
                .lines
                .iter()
                .zip(&task.lines)
                .all(|(r, s)| r.0 == s.0 && masked_is(&r.1, &s.1));
        assert!(
            same,
            "task `{title}`: the run journaled (left) not what the dry run shows (right):\n\
             {:#?}\n{:#?}",
            ran.lines, task.lines
        );
        lines += task.lines.len();
        let mut by_node: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (node, cmd) in &ran.commands {
            by_node.entry(node.as_str()).or_default().push(cmd.as_str());
        }
        for (node, text) in &task.lines {
            let Some(cmd) = verbatim(node, text) else {
                continue;
            };
            assert!(
                by_node.get(node.as_str()).is_some_and(|c| c.contains(&cmd)),
                "task `{title}`: the dry run shows `{cmd}` on {node}, but the run did not run it \
                 there; it ran:\n{:#?}",
                ran.commands
            );
            checked += 1;
        }
    }
    // Downloads, sha256 checks, kubeadm, pins, stages, drains, reboots,
    // waits, uncordons, clean-up: far more than a handful.
    assert!(checked > 40, "only {checked} commands compared");
    // And the prose: the waits, gates, holds and checks said in words.
    assert!(
        lines - checked > 20,
        "only {} prose lines compared",
        lines - checked
    );
}

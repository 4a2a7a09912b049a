//! The dry run and the run are one path: `apply --dry-run` prints the
//! script the run then carries out, task for task, and every command it
//! shows verbatim is one the run really ran, on that node, in that task
//! (the journal records both: `task` events and commands).

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

/// One task of the dry run: its heading and the commands it shows.
#[derive(Debug)]
struct Shown {
    title: String,
    /// `(node, command)` for every line that shows a command verbatim.
    commands: Vec<(String, String)>,
}

/// The dry run's tasks (`== i/n title`) with their verbatim command lines:
/// `[node] command` or `[node] (when) command`; a line that is only a
/// parenthesis or a `#` comment describes, and a command with an
/// `<angle-bracket>` placeholder is only known when it runs.
fn shown(stdout: &str) -> Vec<Shown> {
    let mut tasks: Vec<Shown> = Vec::new();
    for line in stdout.lines() {
        if let Some(title) = line.strip_prefix("== ") {
            let (_, title) = title.split_once(' ').expect("a numbered heading");
            tasks.push(Shown {
                title: title.to_string(),
                commands: Vec::new(),
            });
            continue;
        }
        let Some((node, text)) = line.strip_prefix('[').and_then(|l| l.split_once("] ")) else {
            continue;
        };
        let cmd = after_parenthesis(text);
        if cmd.is_empty() || cmd.starts_with('#') || cmd.contains('<') || node == "-" || node == "*"
        {
            continue;
        }
        if let Some(task) = tasks.last_mut() {
            task.commands.push((node.to_string(), cmd.to_string()));
        }
    }
    tasks
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

/// The run's tasks from the journal, each with the commands it ran.
fn journaled(fleet: &Fleet) -> Vec<(String, Vec<(String, String)>)> {
    let mut tasks: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for r in support::journal_records(fleet) {
        match r["kind"].as_str() {
            Some("task") => {
                let detail = r["detail"].as_str().unwrap_or_default();
                let (_, title) = detail.split_once(' ').expect("a numbered task");
                tasks.push((title.to_string(), Vec::new()));
            }
            Some("command") => {
                if let Some((_, commands)) = tasks.last_mut() {
                    commands.push((
                        r["node"].as_str().unwrap_or_default().to_string(),
                        r["cmd"].as_str().unwrap_or_default().to_string(),
                    ));
                }
            }
            _ => {}
        }
    }
    tasks
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
    let shown = shown(&dry.stdout);
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
    let ran = journaled(&fleet);

    let titles = |v: Vec<&String>| v.into_iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        titles(ran.iter().map(|(t, _)| t).collect()),
        titles(shown.iter().map(|t| &t.title).collect()),
        "the run's tasks (left) are not the dry run's (right); the dry run:\n{}",
        dry.stdout
    );
    let mut checked = 0;
    for (task, (title, commands)) in shown.iter().zip(&ran) {
        let mut ran: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (node, cmd) in commands {
            ran.entry(node.as_str()).or_default().push(cmd.as_str());
        }
        for (node, cmd) in &task.commands {
            assert!(
                ran.get(node.as_str())
                    .is_some_and(|c| c.contains(&cmd.as_str())),
                "task `{title}`: the dry run shows `{cmd}` on {node}, but the run did not run it \
                 there; it ran:\n{commands:#?}"
            );
            checked += 1;
        }
    }
    // Downloads, sha256 checks, kubeadm, pins, stages, drains, reboots,
    // waits, uncordons, clean-up: far more than a handful.
    assert!(checked > 40, "only {checked} commands compared");
}

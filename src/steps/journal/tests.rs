use super::*;
use std::sync::Arc;

fn at(rfc: &str) -> SystemTime {
    humantime::parse_rfc3339(rfc).unwrap()
}

fn events(j: &Journal) -> Vec<serde_json::Value> {
    std::fs::read_to_string(j.events_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn log(j: &Journal) -> String {
    std::fs::read_to_string(j.path()).unwrap()
}

fn ran<'a>(node: &'a str, label: &'a str, cmd: &'a str) -> Ran<'a> {
    Ran {
        node,
        label,
        cmd,
        root: true,
    }
}

#[test]
fn creates_both_files_named_by_utc_start_time_in_new_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join(".fleetctl");
    let j = Journal::create_at(&state, at("2026-11-29T19:30:12Z")).unwrap();
    assert_eq!(j.path(), state.join("journal/20261129T193012Z.log"));
    assert_eq!(
        j.events_path(),
        state.join("journal/20261129T193012Z.jsonl")
    );
    assert!(j.path().is_file() && j.events_path().is_file());
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(j.path()), 0o600);
    assert_eq!(mode(&state.join("journal")), 0o700);
}

#[test]
fn a_second_run_in_the_same_second_never_reuses_a_journal() {
    let dir = tempfile::tempdir().unwrap();
    let t = at("2026-11-29T19:30:12Z");
    let first = Journal::create_at(dir.path(), t).unwrap();
    first.event("apply-started", None, "first");
    let second = Journal::create_at(dir.path(), t).unwrap();
    assert_ne!(first.path(), second.path());
    assert!(second.path().ends_with("20261129T193012Z_02.log"));
    let mut names: Vec<_> = (3..=11)
        .map(|_| {
            Journal::create_at(dir.path(), t)
                .unwrap()
                .events_path()
                .to_path_buf()
        })
        .collect();
    names.insert(0, second.events_path().to_path_buf());
    names.insert(0, first.events_path().to_path_buf());
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, names, "file names sort in run order");
    assert_eq!(events(&first).len(), 1);
    assert!(events(&second).is_empty());
}

#[test]
fn a_command_is_written_through_with_output_exit_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    let out = Output {
        exit: Some(3),
        signal: None,
        stdout: "line one\nline two\n".into(),
        stderr: "oops\n".into(),
    };
    j.command(
        ran("cp-1", "lock: read daemonset", "kubectl get ds\n  -o json"),
        &Ok(out),
        Duration::from_millis(1412),
    );
    // Read while the journal is still open: nothing may sit in a buffer.
    let text = log(&j);
    assert!(text.contains(" cp-1: lock: read daemonset\n"), "{text}");
    assert!(
        text.contains("  # kubectl get ds\n      -o json\n"),
        "{text}"
    );
    assert!(
        text.contains("  out| line one\n  out| line two\n  err| oops\n"),
        "{text}"
    );
    assert!(text.contains("  exit 3 after 1s 412ms\n"), "{text}");

    let [record] = events(&j).try_into().unwrap();
    assert_eq!(record["kind"], "command");
    assert_eq!(record["node"], "cp-1");
    assert_eq!(record["detail"], "lock: read daemonset");
    assert_eq!(record["cmd"], "kubectl get ds\n  -o json");
    assert_eq!(record["root"], true);
    assert_eq!(record["exit"], 3);
    assert_eq!(record["signal"], serde_json::Value::Null);
    assert_eq!(record["stdout"], "line one\nline two\n");
    assert_eq!(record["stderr"], "oops\n");
    assert_eq!(record["elapsed_ms"], 1412);
    assert!(record.get("error").is_none());
    let t = record["t"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(t).is_ok(), "{t}");
}

#[test]
fn a_command_that_could_not_run_records_the_error_chain() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    let err = Err(anyhow::anyhow!("connection dropped").context("w-1: running `reboot`"));
    j.command(
        Ran {
            root: false,
            ..ran("w-1", "reboot w-1", "systemctl reboot")
        },
        &err,
        Duration::from_secs(2),
    );
    let text = log(&j);
    assert!(text.contains("  $ systemctl reboot\n"), "{text}");
    assert!(
        text.contains("  failed after 2s: w-1: running `reboot`: connection dropped\n"),
        "{text}"
    );
    let [record] = events(&j).try_into().unwrap();
    assert_eq!(record["exit"], serde_json::Value::Null);
    assert_eq!(record["root"], false);
    assert_eq!(record["error"], "w-1: running `reboot`: connection dropped");
}

#[test]
fn a_signal_is_recorded_instead_of_an_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    let out = Output {
        exit: None,
        signal: Some("KILL".into()),
        ..Output::default()
    };
    j.command(
        ran("w-2", "drain w-2", "kubectl drain w-2"),
        &Ok(out),
        Duration::ZERO,
    );
    assert!(log(&j).contains("  killed by signal KILL after 0s\n"));
    assert_eq!(events(&j)[0]["signal"], "KILL");
}

#[test]
fn events_have_the_documented_shape_with_or_without_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    j.event("apply-started", None, "plan v1.36 → v1.37");
    j.event("lock-acquired", Some("cp-1"), "Kured's lock\nsecond line");
    let text = log(&j);
    assert!(
        text.contains(" [apply-started]\n  plan v1.36 → v1.37\n"),
        "{text}"
    );
    assert!(
        text.contains(" cp-1: [lock-acquired]\n  Kured's lock\n  second line\n"),
        "{text}"
    );
    let records = events(&j);
    let keys: Vec<_> = records[0].as_object().unwrap().keys().cloned().collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, ["detail", "kind", "node", "t"]);
    assert_eq!(records[0]["node"], serde_json::Value::Null);
    assert_eq!(records[1]["node"], "cp-1");
    assert_eq!(records[1]["detail"], "Kured's lock\nsecond line");
    // The raw line keeps the documented field order.
    let raw = std::fs::read_to_string(j.events_path()).unwrap();
    assert!(raw.lines().all(|l| l.starts_with("{\"t\":\"")), "{raw}");
    assert!(
        raw.contains("\"kind\":\"apply-started\",\"node\":null,\"detail\":"),
        "{raw}"
    );
}

#[test]
fn concurrent_writers_never_interleave_records() {
    let dir = tempfile::tempdir().unwrap();
    let j = Arc::new(Journal::create(dir.path()).unwrap());
    let big = "x".repeat(64 * 1024);
    let threads: Vec<_> = (0..8)
        .map(|n| {
            let (j, big) = (j.clone(), big.clone());
            std::thread::spawn(move || {
                for i in 0..20 {
                    let out = Output {
                        exit: Some(0),
                        stdout: format!("{n}-{i}{big}"),
                        ..Output::default()
                    };
                    j.command(
                        ran(&format!("w-{n}"), "probe", "true"),
                        &Ok(out),
                        Duration::ZERO,
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let records = events(&j);
    assert_eq!(records.len(), 160);
    for r in &records {
        let node = r["node"].as_str().unwrap();
        let stdout = r["stdout"].as_str().unwrap();
        assert!(stdout.starts_with(&format!("{}-", &node[2..])), "{node}");
    }
    assert_eq!(log(&j).matches(": probe\n").count(), 160);
    j.check().unwrap();
}

#[test]
fn a_failed_write_is_reported_by_check_not_by_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("ro.log");
    let events_path = dir.path().join("ro.jsonl");
    std::fs::write(&log_path, "").unwrap();
    std::fs::write(&events_path, "").unwrap();
    // Opened read-only: every write fails, as on a full or vanished disk.
    let j = Journal::from_files(
        log_path.clone(),
        events_path,
        File::open(&log_path).unwrap(),
        File::open(dir.path().join("ro.jsonl")).unwrap(),
    );
    j.event("apply-started", None, "x");
    let err = j.check().unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "the journal {} is incomplete: writing",
            log_path.display()
        )),
        "{err}"
    );
}

#[test]
fn the_log_the_jsonl_and_the_echo_never_hold_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    let listing = "daemonset\tkured\tkured\ncontainer\tkured\tghcr.io/kubereboot/kured:1.23.0\t[\"/usr/bin/kured\"]\t[\"--notify-url=slack://T0/B0/xoxb-secret\"]\t[{\"name\":\"KURED_SLACK_HOOK_URL\",\"value\":\"https://hooks/xoxb-secret\"}]\t\n";
    let out = Output {
        exit: Some(0),
        stdout: listing.into(),
        stderr: "warning: --token=xoxb-secret is deprecated\n".into(),
        ..Output::default()
    };
    j.command(
        ran("cp-1", "lock: find Kured", "kured --notify-url xoxb-secret"),
        &Ok(out),
        Duration::ZERO,
    );
    j.command(
        ran("cp-1", "probe", "true"),
        &Err(anyhow::anyhow!("refused --password=xoxb-secret")),
        Duration::ZERO,
    );
    j.event(
        "lock-force-unlocked",
        Some("cp-1"),
        "removed --api-key=xoxb-secret",
    );
    let text = log(&j);
    let raw = std::fs::read_to_string(j.events_path()).unwrap();
    for file in [&text, &raw] {
        assert!(!file.contains("xoxb-secret"), "{file}");
    }
    assert!(text.contains("--notify-url=***"), "{text}");
    assert!(text.contains("# kured --notify-url ***"), "{text}");
    let records = events(&j);
    assert_eq!(records[0]["cmd"], "kured --notify-url ***");
    assert!(
        records[0]["stdout"]
            .as_str()
            .unwrap()
            .contains(r#"{"name":"KURED_SLACK_HOOK_URL","value":"***"}"#)
    );
    assert_eq!(records[1]["error"], "refused --password=***");
    assert_eq!(records[2]["detail"], "removed --api-key=***");
    // Not checked apart: the -v echo prints this very .log text.
}

/// Issue 38: the `.jsonl` wrote C1 controls and bidi overrides raw.
#[test]
fn the_jsonl_escapes_c1_controls_and_bidi_overrides_as_the_log_does() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    let hostile = "csi\u{9b}2J rtl\u{202e}gnp del\u{7f} esc\u{1b}]52;c;x\u{7}";
    let out = Output {
        exit: Some(0),
        signal: None,
        stdout: hostile.into(),
        stderr: String::new(),
    };
    j.command(ran("w-1", "read", "true"), &Ok(out), Duration::ZERO);
    j.event("note", Some("w-1"), hostile);
    let raw = std::fs::read_to_string(j.events_path()).unwrap();
    for c in ['\u{9b}', '\u{202e}', '\u{7f}', '\u{1b}', '\u{7}'] {
        assert!(!raw.contains(c), "{c:?} in {raw}");
        assert!(!log(&j).contains(c), "{c:?} in the log");
    }
    assert!(raw.contains("\\u009b") && raw.contains("\\u202e"), "{raw}");
    let [command, note] = events(&j).try_into().unwrap();
    assert_eq!(command["stdout"], hostile);
    assert_eq!(note["detail"], hostile);
}

fn out(stdout: String) -> anyhow::Result<Output> {
    Ok(Output {
        exit: Some(0),
        signal: None,
        stdout,
        stderr: String::new(),
    })
}

/// Issue 38: a node answering every poll with 32 MiB. Each record keeps
/// 64 KiB of each end, and the same answer again is counted, not copied.
#[test]
fn a_32_mib_answer_repeated_leaves_a_small_journal_with_its_count() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    let big = format!(
        "{}{}{}",
        "h".repeat(100),
        "x".repeat(32 << 20),
        "t".repeat(100)
    );
    // Four answers show the count as well as ten would, at 40% of the
    // debug build's hashing time.
    for _ in 0..4 {
        j.command(
            ran(
                "w-1",
                "wait: boot id",
                "cat /proc/sys/kernel/random/boot_id",
            ),
            &out(big.clone()),
            Duration::ZERO,
        );
    }
    j.command(
        ran(
            "w-1",
            "wait: boot id",
            "cat /proc/sys/kernel/random/boot_id",
        ),
        &out("new\n".into()),
        Duration::ZERO,
    );
    j.command(
        ran(
            "w-1",
            "wait: boot id",
            "cat /proc/sys/kernel/random/boot_id",
        ),
        &out("new\n".into()),
        Duration::ZERO,
    );
    let (log_path, events_path) = (j.path().to_path_buf(), j.events_path().to_path_buf());
    let records = events(&j);
    drop(j);
    let size = std::fs::metadata(&log_path).unwrap().len()
        + std::fs::metadata(&events_path).unwrap().len();
    assert!(size < 1 << 20, "{size} bytes");
    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(
        text.contains(&format!(
            "[fleetctl: {} bytes left out of the journal]",
            big.len() - 2 * (64 << 10)
        )),
        "head/tail"
    );
    assert!(
        text.contains("the same answer 3 more time(s), not copied"),
        "{}",
        &text[text.len() - 2000..]
    );
    j_events_after_a_task_are_new(dir.path());
    // The closing count: the last answer came once more.
    assert!(text.contains("the same answer 1 more time(s), not copied"));
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["command", "repeated", "command"]);
}

/// A journal past its cap fails, once, and says so to whoever stops the run.
#[test]
fn a_journal_past_its_cap_fails_and_tells_the_run_to_stop() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = Journal::create(dir.path()).unwrap();
    j.cap = 16 << 10;
    let told = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let t = told.clone();
    j.when_broken(move |why| t.lock().unwrap().push(why.to_string()));
    for n in 0..100 {
        j.command(
            ran("w-1", "read", "cat x"),
            &out(format!("{n}{}", "y".repeat(1000))),
            Duration::ZERO,
        );
    }
    assert!(j.check().is_err());
    let told = told.lock().unwrap();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("16 KiB"), "{told:?}");
    let size = std::fs::metadata(j.path()).unwrap().len()
        + std::fs::metadata(j.events_path()).unwrap().len();
    assert!(size <= 16 << 10, "{size}");
}

/// An event (a task starting) ends a run of repeats: the same answer after
/// it is recorded again, under its task.
fn j_events_after_a_task_are_new(state: &Path) {
    let j = Journal::create(&state.join("second")).unwrap();
    j.command(
        ran("w-1", "read", "cat x"),
        &out("same".into()),
        Duration::ZERO,
    );
    j.command(
        ran("w-1", "read", "cat x"),
        &out("same".into()),
        Duration::ZERO,
    );
    j.event("task", None, "2/9 next");
    j.command(
        ran("w-1", "read", "cat x"),
        &out("same".into()),
        Duration::ZERO,
    );
    let kinds: Vec<String> = events(&j)
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["command", "repeated", "task", "command"]);
}

/// Issue 38: masking a large output ran on the task that holds the lock,
/// starving the runtime's other tasks (the heartbeat) meanwhile. On one
/// worker thread, another task must keep running while 8 MiB is journaled.
#[test]
fn a_large_output_is_journaled_without_holding_up_the_runtime() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let j = Arc::new(Journal::create(dir.path()).unwrap());
        let ticks = Arc::new(AtomicUsize::new(0));
        let counted = ticks.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let big = "\"name\":\"token\",--password=x ".repeat((8 << 20) / 30);
        let journal = j.clone();
        let before = ticks.load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        tokio::spawn(async move {
            journal.command(ran("w-1", "read", "cat big"), &out(big), Duration::ZERO);
        })
        .await
        .unwrap();
        let took = started.elapsed();
        let during = ticks.load(Ordering::SeqCst) - before;
        ticker.abort();
        // Starved, the ticker runs once, after the journal is done; free,
        // about once a millisecond throughout.
        assert!(
            took < Duration::from_millis(50) || during >= 10,
            "another task ran {during} time(s) in the {took:?} the journal took"
        );
    });
}

/// A line of what a step does (`Journal::line`) is an event of kind `line`
/// under its node, masked, and bounded as an output is: a huge one keeps
/// its head and tail.
#[test]
fn a_dry_run_line_is_journaled_masked_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let j = Journal::create(dir.path()).unwrap();
    j.line("*", "(the facts script on every node) --token=abc");
    let huge = format!("(wait) {}", "x".repeat(4 * bound::KEEP));
    j.line("-", &huge);
    let e = events(&j);
    assert_eq!(e[0]["kind"], "line");
    assert_eq!(e[0]["node"], "*");
    assert_eq!(
        e[0]["detail"],
        "(the facts script on every node) --token=***"
    );
    let kept = e[1]["detail"].as_str().unwrap();
    assert!(kept.starts_with("(wait) x") && kept.contains("bytes left out"));
    assert!(kept.len() < 2 * bound::KEEP + 100, "{}", kept.len());
}

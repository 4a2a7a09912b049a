//! Issue 15 (hardening) against the real binary: inventory values never
//! reach the laptop's shell, secrets stay out of what fleetctl prints and
//! journals, a hung-up terminal costs output but never a panic, and
//! `fleetctl reboot` looks at the fleet again under the lock and reports
//! host keys accepted on the reconnect after a reboot. Issue 24: what an
//! impostor at a node's address sends before its SSH banner reaches the
//! terminal escaped.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use fleetsim::state::SnapshotDamage;

use super::support::{self, Fleet, Run, describe, is_reboot};

/// An inventory in a fresh directory, with `home/.ssh/config` holding
/// `ssh_config` (support::fleetctl keeps a config that is already there).
fn offline_inventory(text: &str, ssh_config: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ssh = dir.path().join("home/.ssh");
    fs::create_dir_all(&ssh).unwrap();
    fs::write(
        ssh.join("config"),
        format!("{ssh_config}Host *\n    GlobalKnownHostsFile /dev/null\n"),
    )
    .unwrap();
    let path = dir.path().join("inventory.yaml");
    fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn an_address_with_shell_syntax_never_runs_on_this_machine() {
    let marker = tempfile::tempdir().unwrap();
    let pwned = marker.path().join("pwned");
    let text = format!(
        "kubernetes_version: v1.34\n\
         nodes:\n  - {{name: cp-1, address: \"$(touch${{IFS}}{})\", role: control-plane}}\n",
        pwned.display()
    );
    let (_dir, inventory) = offline_inventory(&text, "Host *\n    ProxyCommand nc %h %p\n");
    let out = support::run(&inventory, &["status"]).expect_code(2);
    assert!(
        out.stderr
            .contains("inventory.yaml:3:27: node `cp-1`: address `$(touch${IFS}"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("contains '$'"), "{}", out.stderr);
    assert!(!pwned.exists(), "the address ran a command on the laptop");
}

#[test]
fn a_hub_url_with_credentials_is_refused_without_printing_them() {
    let text = "kubernetes_version: v1.34\n\
                sysupdate:\n  hub: https://alice:hunter2@mirror.example/extensions\n\
                nodes:\n  - {name: cp-1, address: 127.0.0.1, port: 1, role: control-plane}\n";
    let (_dir, inventory) = offline_inventory(text, "");
    let out = support::run(&inventory, &["status"]).expect_code(2);
    assert!(out.stderr.contains("carries credentials"), "{}", out.stderr);
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
    assert!(
        out.stderr.contains("https://alice:***@mirror.example"),
        "{}",
        out.stderr
    );
}

/// stderr is a pipe nobody reads any more: every write fails with EPIPE,
/// as on a terminal that hung up (EIO).
fn with_dead_stderr(inventory: &Path, args: &[&str]) -> Run {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = support::fleetctl(inventory, args)
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .unwrap();
    Run::of(out)
}

#[test]
fn an_error_printed_to_a_dead_stderr_is_an_exit_code_not_a_panic() {
    let (_dir, inventory) = offline_inventory("kubernetes_version: v1.34\nnodes: []\n", "");
    // A usage error (exit 2), not Rust's panic on a failed eprintln (exit 101).
    with_dead_stderr(&inventory, &["status"]).expect_code(2);
}

/// Rewrites the fleet's inventory.
fn set_inventory(fleet: &Fleet, edit: impl FnOnce(String) -> String) {
    let path = fleet.inventory();
    let text = fs::read_to_string(&path).unwrap();
    fs::write(&path, edit(text)).unwrap();
}

/// Every record of the `.jsonl` journals, and the raw text of every journal file.
fn journals(fleet: &Fleet) -> (Vec<serde_json::Value>, String) {
    let dir = fleet.dir().join(".fleetctl/journal");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let raw: String = files
        .iter()
        .map(|f| fs::read_to_string(f).unwrap())
        .collect();
    let records = files
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .flat_map(|f| {
            fs::read_to_string(f)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<serde_json::Value>>()
        })
        .collect();
    (records, raw)
}

#[test]
fn reboot_masks_health_check_output_survives_a_dead_terminal_and_looks_again_under_the_lock() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .with_node("w-1", |n| n.staged = Some("v1.34.3".into())),
    );
    let inventory = fleet.inventory();
    set_inventory(&fleet, |text| {
        text.replace(
            "nodes:\n",
            "health_checks:\n  - name: db\n    command: \"echo PGPASSWORD=hunter2 Authorization: Bearer abcdefgh12345\"\n    expect: healthy\nnodes:\n",
        )
    });

    // 1. stderr dead from the start: the run goes on, fails at the gate,
    //    and gives the lock back, without a panic.
    let start = fleet.events().unwrap().len();
    let dead = with_dead_stderr(&inventory, &["reboot", "--yes"]);
    assert_eq!(dead.code, Some(1), "{dead:?}");
    let events = fleet.events().unwrap();
    assert!(
        events[start..].iter().any(support::deletes_lock_configmap),
        "the lock was given back:\n{}",
        describe(&events[start..])
    );

    // 2. The failed health check's output, masked on stderr and in the journal.
    let start = fleet.events().unwrap().len();
    let out = support::run(&inventory, &["reboot", "--yes"]).expect_code(1);
    assert!(
        out.stderr.contains("health check `db` failed"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("PGPASSWORD=***"), "{}", out.stderr);
    // A failed reboot resumes with `fleetctl reboot`: the gate's message
    // and the closing report say so, and nothing sends the operator to
    // `fleetctl apply`, which would start an upgrade.
    assert!(
        out.stderr
            .contains("Fix these, then run `fleetctl reboot` again"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("next: fix the cause above, then run `fleetctl reboot` again"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("fleetctl apply"), "{}", out.stderr);
    let (_, raw) = journals(&fleet);
    for secret in ["hunter2", "abcdefgh12345"] {
        assert!(!out.stderr.contains(secret), "{}", out.stderr);
        assert!(!raw.contains(secret), "the journal holds {secret}:\n{raw}");
    }
    let log = &fleet.events().unwrap()[start..];
    assert!(!log.iter().any(is_reboot), "{}", describe(log));

    // 3. Host key checking off: every connection warns, which shows each
    //    one: the fleet is gathered again once the lock is held, and the
    //    reconnect after w-1's reboot is printed and journaled like the first.
    set_inventory(&fleet, |text| {
        let start = text.find("health_checks:").unwrap();
        let end = text.find("nodes:\n").unwrap();
        let mut text = format!("{}{}", &text[..start], &text[end..]);
        text = text.replace("host_key_checking: strict", "host_key_checking: off");
        let known = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("known_hosts: "))
            .unwrap()
            .to_string();
        text.replace(&known, &format!("{known}.empty"))
    });
    let start = fleet.events().unwrap().len();
    let out = support::run(&inventory, &["reboot", "--yes"]).expect_code(0);
    let warning = "w-1: WARNING: host key checking is OFF";
    let (before, after) = out
        .stderr
        .split_once("holding ")
        .expect("the lock was taken");
    assert!(before.contains(warning), "{}", out.stderr);
    assert!(
        after.matches(warning).count() >= 2,
        "gathering under the lock and the reconnect after the reboot:\n{}",
        out.stderr
    );
    let events = fleet.events().unwrap();
    assert!(
        events[start..]
            .iter()
            .any(|e| is_reboot(e) && e.node == "w-1"),
        "{}",
        describe(&events[start..])
    );
    let (records, _) = journals(&fleet);
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "ssh-warning" && r["node"] == "w-1"),
        "{records:#?}"
    );
}

/// What an impostor at a node's address says before any host key is
/// checked: OSC 52 (set the clipboard to `echo pwned`), a screen clear, a
/// lone carriage return and a C1 CSI (U+009B), then nothing: it closes.
const IMPOSTOR_SAYS: &[u8] =
    b"\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2Jimpostor\rwarning hidden \xc2\x9b2J\r\n";

/// A TCP listener on a free loopback port answering every connection with
/// [`IMPOSTOR_SAYS`]; its port.
fn impostor_sshd() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let _ = std::io::Write::write_all(&mut conn, IMPOSTOR_SAYS);
        }
    });
    port
}

#[test]
fn what_an_impostor_sends_before_its_banner_reaches_the_terminal_escaped() {
    let port = impostor_sshd();
    let text = format!(
        "kubernetes_version: v1.34\n\
         nodes:\n  - {{name: cp-1, address: 127.0.0.1, port: {port}, user: core, role: control-plane}}\n"
    );
    let (_dir, inventory) = offline_inventory(&text, "");
    let runs = [&["status"][..], &["status", "-o", "json"]]
        .map(|args| (args.to_vec(), support::run(&inventory, args)));

    // apply needs a saved plan: made against a fleet, then w-1's address
    // taken over by the impostor.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    set_inventory(&fleet, |text| {
        let w1 = text
            .lines()
            .find(|l| l.contains("name: w-1"))
            .expect("w-1 in the inventory")
            .to_string();
        text.replace(
            &w1,
            &format!("  - {{name: w-1, address: 127.0.0.1, port: {port}, role: worker}}"),
        )
    });
    let apply = &["-v", "apply", "--yes"][..];
    let runs = runs
        .into_iter()
        .chain([(apply.to_vec(), support::run(&fleet.inventory(), apply))]);
    for (args, out) in runs {
        assert_ne!(out.code, Some(0), "{args:?}: {}", out.stderr);
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !text.contains(['\x1b', '\x07', '\u{9b}', '\r']),
                "{args:?}: a control character reached {stream}: {text:?}"
            );
        }
        let both = format!("{}{}", out.stdout, out.stderr);
        assert!(
            both.contains(
                "\\033]52;c;ZWNobyBwd25lZA==\\007\\033[2Jimpostor\\015warning hidden \\302\\2332J"
            ) || both.contains(
                "\\u001b]52;c;ZWNobyBwd25lZA==\\u0007\\u001b[2Jimpostor\\rwarning hidden \\u009b2J"
            ),
            "{args:?}: the impostor's words are not shown escaped:\n{both}"
        );
    }
    if fleet.dir().join(".fleetctl/journal").exists() {
        let (_, raw) = journals(&fleet);
        assert!(!raw.contains(['\x1b', '\x07', '\u{9b}']), "{raw}");
    }
}

#[test]
fn a_10_gib_snapshot_is_not_copied_past_the_ceiling() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    fleet
        .faults(|f| f.damage_etcd_snapshot = Some(SnapshotDamage::Grow))
        .unwrap();
    let out = support::apply(&fleet, &["--yes"]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    support::assert_has(
        &out.stderr,
        &[
            "the etcd snapshot before upgrade apply to v1.35 failed, and nothing of the hop's \
             kubeadm step ran",
            "the snapshot is 10737418240 bytes, more than the 8589934592 bytes fleetctl copies \
             (--etcd-snapshot-max, FLEETCTL_ETCD_SNAPSHOT_MAX",
            "nothing was copied",
        ],
    );
    let events = fleet.events().unwrap();
    assert!(
        !events.iter().any(|e| matches!(
            support::kubeadm_upgrade(e),
            Some(support::KubeadmUpgrade::Apply(_))
        )),
        "{}",
        describe(&events)
    );
    let backups = fleet.dir().join(".fleetctl/backups");
    let kept: Vec<_> = fs::read_dir(&backups)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "nothing is copied: {kept:?}");
    let left = fleet
        .ssh_ok(
            "cp-1",
            "root",
            "ls /var/lib/etcd/ | grep -c fleetctl-etcd || true",
        )
        .unwrap();
    assert_eq!(left.trim(), "0", "the node's copy is removed");
}

/// A TCP listener at `ip` on a free port, counting the connections it gets.
fn counting_listener(ip: &str) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(conn);
        }
    });
    (addr, hits)
}

#[test]
fn a_decoy_kube_apiserver_pod_is_refused_and_never_asked_for_metrics() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2"),
    );
    // At a fleet node's address: the decoy's listener is on the simulated network.
    let w1_ip = fleet.cluster().unwrap().nodes["w-1"].address.clone();
    let (decoy_at, hits) = counting_listener(&w1_ip);
    let decoy = |namespace: &str, name: &str, node: &str| fleetsim::state::PodSpec {
        namespace: namespace.into(),
        name: name.into(),
        node: node.into(),
        labels: [("component".to_string(), "kube-apiserver".to_string())].into(),
        annotations: [(
            "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint".to_string(),
            decoy_at.clone(),
        )]
        .into(),
        owner: None,
        phase: "Running".into(),
        image: None,
    };
    // Pods anyone with the right to create them could make: in a user
    // namespace, and in kube-system on a worker and on the control plane.
    fleet
        .shared()
        .update_cluster(|c| {
            c.pods = vec![
                decoy("team-a", "kube-apiserver-cp-1", "cp-1"),
                decoy("kube-system", "kube-apiserver-decoy", "w-1"),
                decoy("kube-system", "kube-apiserver-cp-1-decoy", "cp-1"),
            ];
            Ok(())
        })
        .unwrap();
    let out = support::run(&fleet.inventory(), &["plan", "v1.35"]);
    let both = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a request went to the decoy's address {decoy_at}:\n{both}"
    );
    support::assert_has(
        &both,
        &[
            "pod kube-system/kube-apiserver-decoy: labelled component=kube-apiserver on w-1, which \
             is not a control plane of the inventory: not asked for /metrics",
            "pod kube-system/kube-apiserver-cp-1-decoy: labelled component=kube-apiserver, but not \
             the kube-system mirror pod of cp-1's static pod",
        ],
    );
}

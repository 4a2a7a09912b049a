//! Issue 11 against the simulated fleet: an etcd snapshot on the laptop
//! before every `kubeadm upgrade apply`, and the checks `plan` shows and
//! `apply` runs again before each hop (removed APIs still in use, kubelet
//! flags the target removes, budgets that hold drains, expiring
//! certificates).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fleetctl::checks::{CheckName, Verdict};
use fleetctl::plan::Plan;
use fleetsim::state::{DeprecatedApi, Event, PdbSpec, PodSpec};

use super::support::{self, Fleet};

use super::support::pair;

use super::support::run_on as run;

fn backups(fleet: &Fleet) -> PathBuf {
    fleet.dir().join(".fleetctl/backups")
}

fn plan_path(fleet: &Fleet) -> PathBuf {
    fleet.dir().join(".fleetctl/plan.yaml")
}

fn plan_json(fleet: &Fleet, args: &[&str]) -> Plan {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let out = run(fleet, &all).expect_code(0);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{}", out.stdout))
}

fn snapshot_saves(events: &[Event]) -> Vec<usize> {
    (0..events.len())
        .filter(|&i| {
            let a = &events[i].argv;
            a.iter().any(|w| w == "exec")
                && a.iter().any(|w| w == "etcdctl")
                && a.windows(2).any(|w| w == ["snapshot", "save"])
                && events[i].result == "ok"
        })
        .collect()
}

fn upgrade_applies(events: &[Event]) -> Vec<(usize, String)> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.argv
                .starts_with(&["kubeadm".into(), "upgrade".into(), "apply".into()])
        })
        .map(|(i, e)| (i, e.argv[3].clone()))
        .collect()
}

fn sha256sum(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum runs");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn journal(fleet: &Fleet) -> String {
    let dir = fleet.dir().join(".fleetctl/journal");
    let mut text = String::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            text.push_str(&fs::read_to_string(path).unwrap());
        }
    }
    text
}

#[test]
fn every_hop_starts_from_a_verified_etcd_snapshot_on_this_machine() {
    let fleet = support::start(pair());
    run(&fleet, &["plan", "v1.36"]).expect_code(0);
    let out = run(&fleet, &["apply", "--yes"]).expect_code(0);

    let events = fleet.events().unwrap();
    let saves = snapshot_saves(&events);
    let applies = upgrade_applies(&events);
    assert_eq!(applies.len(), 2, "{}", support::describe(&events));
    assert_eq!(saves.len(), 2, "{}", support::describe(&events));
    // Each hop's snapshot is taken before its own upgrade apply, and after
    // the previous hop's.
    assert!(saves[0] < applies[0].0, "{}", support::describe(&events));
    assert!(
        applies[0].0 < saves[1] && saves[1] < applies[1].0,
        "{}",
        support::describe(&events)
    );

    let dir = backups(&fleet);
    assert_eq!(
        fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700,
        "the backups hold every Secret: only the operator reads them"
    );
    let mut dbs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "db"))
        .collect();
    dbs.sort();
    assert_eq!(dbs.len(), 2, "{dbs:?}");
    for (db, minor) in dbs.iter().zip(["v1.35", "v1.36"]) {
        let name = db.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with(&format!("kubernetes-{minor}-")),
            "named with the cluster, the minor and the time: {name}"
        );
        assert_eq!(
            fs::metadata(db).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(fs::metadata(db).unwrap().len() > 0);
        let sums = fs::read_to_string(db.with_extension("db.sha256")).unwrap();
        assert_eq!(sums, format!("{}  {name}\n", sha256sum(db)));
        assert!(
            out.stderr
                .contains(&format!("etcd snapshot saved to {}", db.display())),
            "{}",
            out.stderr
        );
    }
    // The node's copies are gone.
    let left = fleet
        .ssh_ok(
            "cp-1",
            "root",
            "ls /var/lib/etcd/ | grep -c fleetctl-etcd || true",
        )
        .unwrap();
    assert_eq!(left.trim(), "0", "snapshot copies left on cp-1");
    assert!(journal(&fleet).contains("[etcd-snapshot]"));
}

#[test]
fn skip_etcd_snapshot_takes_none() {
    let fleet = support::start(pair());
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    run(&fleet, &["apply", "--yes", "--skip-etcd-snapshot"]).expect_code(0);
    let events = fleet.events().unwrap();
    assert_eq!(upgrade_applies(&events).len(), 1);
    assert!(
        snapshot_saves(&events).is_empty(),
        "{}",
        support::describe(&events)
    );
    assert!(!backups(&fleet).exists());
}

#[test]
fn an_external_etcd_is_not_snapshotted_and_says_so() {
    let mut scenario = pair();
    scenario.external_etcd = vec!["https://10.0.0.50:2379".into()];
    let fleet = support::start(scenario);
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let out = run(&fleet, &["apply", "--yes"]).expect_code(0);
    assert!(
        out.stderr
            .contains("etcd is external (https://10.0.0.50:2379): fleetctl did not snapshot it"),
        "{}",
        out.stderr
    );
    assert!(snapshot_saves(&fleet.events().unwrap()).is_empty());
    assert!(journal(&fleet).contains("[etcd-external]"));
}

#[test]
fn a_removed_api_in_use_blocks_plan_and_apply_until_ignored() {
    let fleet = support::start(pair());
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let saved = fs::read(plan_path(&fleet)).unwrap();

    // After the plan, a client starts calling an API version v1.35 removes.
    fleet
        .shared()
        .update_cluster(|c| {
            c.deprecated_apis.push(DeprecatedApi {
                group: "flowcontrol.apiserver.k8s.io".into(),
                version: "v1beta3".into(),
                resource: "flowschemas".into(),
                subresource: String::new(),
                removed_release: "1.35".into(),
                served_by: Vec::new(),
            });
            Ok(())
        })
        .unwrap();

    let blocked = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    for text in [
        "BLOCK   removed-apis",
        "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas",
        "--ignore-check removed-apis",
    ] {
        assert!(
            blocked.stdout.contains(text) || blocked.stderr.contains(text),
            "no `{text}` in\n{}\n{}",
            blocked.stdout,
            blocked.stderr
        );
    }
    assert_eq!(
        fs::read(plan_path(&fleet)).unwrap(),
        saved,
        "a blocked plan is not saved"
    );

    // The plan saved before does not carry an override: apply checks again.
    let before = fleet.events().unwrap().len();
    let refused = run(&fleet, &["apply", "--yes"]).expect_code(2);
    assert!(
        refused.stderr.contains("the checks block this plan"),
        "{}",
        refused.stderr
    );
    let after = fleet.events().unwrap();
    assert!(
        after[before..].iter().all(support::is_lock),
        "a blocked apply touches nothing but its lock:\n{}",
        support::describe(&after[before..])
    );

    let ignored = plan_json(&fleet, &["v1.35", "--ignore-check", "removed-apis"]);
    assert_eq!(ignored.ignored_checks, [CheckName::RemovedApis]);
    let check = ignored.hops[0]
        .checks
        .iter()
        .find(|c| c.name == CheckName::RemovedApis)
        .unwrap();
    assert_eq!(check.verdict, Verdict::Ignored);

    let done = run(&fleet, &["apply", "--yes"]).expect_code(0);
    assert!(
        done.stderr.contains("done: 2 nodes upgraded"),
        "{}",
        done.stderr
    );
    let journal = journal(&fleet);
    assert!(
        journal.contains("[check-ignored]") && journal.contains("removed-apis"),
        "the journal records the override:\n{journal}"
    );
}

#[test]
fn a_flag_the_target_removes_and_kubeadm_does_not_strip_blocks_naming_the_node() {
    let fleet = support::start(pair());
    fleet
        .ssh_ok(
            "w-1",
            "root",
            "mkdir -p /etc/sysconfig && echo 'KUBELET_EXTRA_ARGS=--pod-infra-container-image=registry.k8s.io/pause:3.10' > /etc/sysconfig/kubelet",
        )
        .unwrap();
    let blocked = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    assert!(
        blocked.stdout.contains(
            "w-1: --pod-infra-container-image in /etc/sysconfig/kubelet (KUBELET_EXTRA_ARGS), removed in v1.35"
        ),
        "{}",
        blocked.stdout
    );
    assert!(
        blocked.stderr.contains("kubelet-flags"),
        "{}",
        blocked.stderr
    );
    assert!(!plan_path(&fleet).exists());

    // The one kubeadm writes, and strips itself, is only a warning.
    fleet
        .ssh_ok("w-1", "root", "rm /etc/sysconfig/kubelet")
        .unwrap();
    let plan = plan_json(&fleet, &["v1.35"]);
    let flags = plan.hops[0]
        .checks
        .iter()
        .find(|c| c.name == CheckName::KubeletFlags)
        .unwrap();
    assert_eq!(flags.verdict, Verdict::Warn, "{flags:?}");
}

#[test]
fn budgets_that_hold_a_drain_and_expiring_certificates_are_warned_about() {
    let mut scenario = pair();
    scenario.pods = vec![PodSpec {
        namespace: "db".into(),
        name: "postgres-0".into(),
        node: "w-1".into(),
        labels: [("app".to_string(), "postgres".to_string())].into(),
        annotations: Default::default(),
        owner: Some("StatefulSet/postgres".into()),
        phase: "Running".into(),
        image: None,
    }];
    scenario.pdbs = vec![PdbSpec {
        namespace: "db".into(),
        name: "postgres".into(),
        max_unavailable: Some(serde_json::json!(0)),
        match_labels: [("app".to_string(), "postgres".to_string())].into(),
        ..Default::default()
    }];
    scenario.cert_expiry_days = 12.0;
    let fleet = support::start(scenario);

    let text = run(&fleet, &["plan", "v1.35"]).expect_code(0);
    for line in [
        "warn    pdb",
        "db/postgres allows no disruption and covers postgres-0 on w-1",
        "warn    certificates",
    ] {
        assert!(
            text.stdout.contains(line),
            "no `{line}` in\n{}",
            text.stdout
        );
    }
    let plan = plan_json(&fleet, &["v1.35"]);
    let names: Vec<CheckName> = plan.hops[0].checks.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        CheckName::ALL,
        "every check, in the documented order"
    );
    let verdict = |name| {
        plan.hops[0]
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .verdict
    };
    assert_eq!(verdict(CheckName::Pdb), Verdict::Warn);
    assert_eq!(verdict(CheckName::Certificates), Verdict::Warn);
    assert_eq!(verdict(CheckName::RemovedApis), Verdict::Pass);
    assert_eq!(verdict(CheckName::Hub), Verdict::Pass);
}

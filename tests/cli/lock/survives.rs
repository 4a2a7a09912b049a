//! What must survive around the lock: the SSH connection cut while
//! `kubeadm upgrade apply` works, and an image tampered with on the hub
//! after the plan.

use super::*;

// ---------------------------------------------------------------------------
// 6. The SSH connection cut while kubeadm upgrade apply works

#[test]
fn ssh_cut_during_upgrade_apply_does_not_stop_kubeadm_and_it_runs_once() {
    // The step is a real systemd-run unit.
    let fleet = pair(|s| s.faults(|f| f.drop_ssh_during_upgrade_apply = vec!["cp-1".into()]));
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let run = apply(&fleet, &["--yes"]);
    // The fault fired: consumed, and kubeadm (in its unit) says it cut
    // fleetctl's sessions, in the step's log on the node.
    assert!(
        fleet
            .shared()
            .faults()
            .unwrap()
            .drop_ssh_during_upgrade_apply
            .is_empty(),
        "kubeadm upgrade apply never ran with the fault armed"
    );
    let step_log = fleet
        .ssh_ok(
            "cp-1",
            "root",
            &format!("cat /var/lib/fleetctl/steps/kubeadm-upgrade-apply-{patch}.log"),
        )
        .unwrap();
    let cut: usize = step_log
        .lines()
        .find_map(|l| {
            l.strip_prefix("fleetsim: fault drop_ssh_during_upgrade_apply: cut ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no cut in the step's log:\n{step_log}"));
    assert!(cut > 0, "the fault cut no session:\n{step_log}");
    // fleetctl saw its connection go: a command on cp-1 failed with it.
    let dropped = journal_records(&fleet).into_iter().any(|r| {
        r["node"] == "cp-1"
            && r["error"]
                .as_str()
                .is_some_and(|e| e.contains("the SSH connection dropped"))
    });
    assert!(dropped, "fleetctl never noticed the cut:\n{}", run.stderr);

    let log_after_first = events(&fleet);
    let applies = |log: &[Event]| -> Vec<String> {
        log.iter()
            .filter(|e| e.node == "cp-1" && what(e) == format!("upgrade apply {patch}"))
            .map(|e| e.result.clone())
            .collect()
    };
    // kubeadm ran detached, so the cut did not kill it: it finished once.
    assert_eq!(
        applies(&log_after_first[start..]),
        ["ok"],
        "\n{}",
        describe(&log_after_first[start..])
    );
    // What really happens: apply reconnects, keeps polling the unit, and
    // finishes the run. Should it ever stop instead (the cut landing on
    // the unit's start), a rerun must finish without a second upgrade apply.
    if run.code != Some(0) {
        assert_eq!(run.code, Some(1), "{}", run.stderr);
        assert_has(&run.stderr, &["run `fleetctl apply` again"]);
        assert_consistent(&fleet, &PAIR, None);
        let second_start = events(&fleet).len();
        apply(&fleet, &["--yes"]).expect_code(0);
        assert!(
            applies(&events(&fleet)[second_start..]).is_empty(),
            "the rerun ran upgrade apply again:\n{}",
            describe(&events(&fleet)[second_start..])
        );
    } else {
        assert_has(&run.stderr, &["done: 2 nodes upgraded"]);
        assert!(!run.stderr.contains("could not release"), "{}", run.stderr);
    }
    let all = &events(&fleet)[start..];
    assert_eq!(applies(all), ["ok"], "\n{}", describe(all));
    done_once(all, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
    assert_eq!(
        fleet
            .ssh_ok("cp-1", "root", "cat /var/lib/fleetctl/kubeadm-step")
            .unwrap()
            .trim(),
        patch.to_string(),
        "the step's marker"
    );
}

// ---------------------------------------------------------------------------
// 7. An image tampered with on the hub after the plan

const IMAGES: &str = "/opt/extensions/kubernetes";

/// `ls -a` of the images directory on `node`.
fn images_on(fleet: &Fleet, node: &str) -> Vec<String> {
    fleet
        .ssh_ok(node, "root", &format!("ls -a {IMAGES}/"))
        .unwrap()
        .lines()
        .filter(|l| *l != "." && *l != "..")
        .map(String::from)
        .collect()
}

/// Replaces `path` by `bytes` through a rename, so a file shared by a hard
/// link (the image cache) could never be changed in place.
fn replace_file(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tampered.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// No kubeadm, no drain or cordon, no reboot, no unit, nothing staged in `log`.
fn assert_nothing_but_downloads(log: &[Event]) {
    let acted: Vec<String> = log
        .iter()
        .filter(|e| is_upgrade_action(e) && what(e) != "sysupdate")
        .map(|e| format!("{}: {}", e.node, what(e)))
        .collect();
    assert!(
        acted.is_empty(),
        "apply went past the downloads: {acted:?}\n{}",
        describe(log)
    );
}

#[test]
fn a_tampered_image_stops_apply_before_any_kubeadm_or_reboot_and_never_stays_on_a_node() {
    // The real systemd-pull's refusal.
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    let image = format!("kubernetes-{patch}-x86-64.raw");
    let on_hub = fleet.layout().hub().join("kubernetes").join(&image);
    let sums = fleet.layout().hub().join("kubernetes/SHA256SUMS");
    let sums_before = std::fs::read(&sums).unwrap();
    let good = std::fs::read(&on_hub).unwrap();
    let mut bad = good.clone();
    bad.extend_from_slice(b"\0tampered on the hub\n");
    replace_file(&on_hub, &bad);
    let before = snapshot(&fleet);

    // (a) The hub serves a file whose sum is not the one SHA256SUMS (and
    // the plan) give. systemd-sysupdate checks every download against
    // SHA256SUMS itself (systemd-pull --verify=<sum>) and refuses it, so it
    // never reaches the node, and apply stops at the downloads.
    let start = events(&fleet).len();
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "before any kubeadm step or reboot",
            "file did not check out, file has been tampered with",
            "the hub serves a corrupted or tampered file",
            "Nothing was staged or rebooted",
        ],
    );
    let log = &events(&fleet)[start..];
    assert_nothing_but_downloads(log);
    for n in PAIR {
        assert_eq!(count(log, n, "sysupdate"), 1, "{n}\n{}", describe(log));
        assert_eq!(count_ok(log, n, "sysupdate"), 0, "{n}\n{}", describe(log));
        let there = images_on(&fleet, n);
        assert!(
            !there.iter().any(|f| f.contains("v1.35")),
            "{n}: a v1.35 image (or part of one) is on the node: {there:?}"
        );
    }
    assert_consistent(&fleet, &PAIR, None);
    assert_eq!(
        snapshot(&fleet),
        before,
        "a refused download changed the fleet"
    );
    assert_eq!(
        std::fs::read(&sums).unwrap(),
        sums_before,
        "SHA256SUMS untouched"
    );

    // (b) The hub fixed, a plain rerun downloads the real image and
    // finishes: the refused download left nothing behind in the way.
    replace_file(&on_hub, &good);
    let rerun_start = events(&fleet).len();
    apply(&fleet, &["--yes"]).expect_code(0);
    let log = &events(&fleet)[rerun_start..];
    for n in PAIR {
        assert_eq!(count_ok(log, n, "sysupdate"), 1, "{n}\n{}", describe(log));
    }
    done_once(log, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

/// A worker that already holds a file under the hop's image name that is
/// not the image (corrupted on its disk, or put there by hand). The planner
/// trusts an image that is present ("already in /opt/extensions/kubernetes/
/// → no download", docs/upgrade-path.md), so the worker gets no download;
/// apply checks such files against the plan's sha256 when the hop starts,
/// before anything runs from the image anywhere, and removes a bad one so
/// that the rerun downloads it.
#[test]
fn a_corrupt_image_already_on_a_worker_is_caught_with_the_downloads_and_removed() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    let image = format!("kubernetes-{patch}-x86-64.raw");
    fleet
        .ssh_ok(
            "w-1",
            "root",
            &format!("printf 'not the image\\n' > {IMAGES}/{image}"),
        )
        .unwrap();
    let start = events(&fleet).len();
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    let log = &events(&fleet)[start..];
    assert_nothing_but_downloads(log);
    assert_has(
        &run.stderr,
        &[&format!(
            "w-1: the already downloaded kubernetes {patch} image has sha256 "
        )],
    );
    let there = images_on(&fleet, "w-1");
    assert!(
        !there.contains(&image),
        "w-1: the bad file is still there: {there:?}"
    );
}

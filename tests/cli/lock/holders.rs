//! Who else holds the lock: a second apply while one runs, a holder whose
//! heartbeat stopped, and SIGTERM mid-drain releasing it.

use super::*;

// ---------------------------------------------------------------------------
// 3. A second apply while one runs

#[test]
fn a_second_apply_is_refused_naming_the_live_holder_and_the_first_finishes() {
    // w-1 is held down after its reboot, so the first apply is surely
    // alive, mid-run, and cp-1 (where the lock lives) is up, while the
    // second one tries.
    let fleet = pair(|s| s.faults(|f| f.hang_on_reboot = vec!["w-1".into()]));
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let mut first = spawn_apply(&fleet, &["--yes"]);
    first.wait_for("w-1: rebooting");
    let held = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    let data = |k: &str| held.data.get(k).cloned().unwrap_or_default();
    assert_eq!(
        data("pid"),
        first.pid().to_string(),
        "the lock names the first apply: {:?}",
        held.data
    );
    let at_second = events(&fleet).len();

    let second = apply(&fleet, &["--yes"]).expect_code(1);
    // Who, where, which pid, since when, and how old its heartbeat is (the
    // heartbeat itself may have been refreshed since it was read here).
    let who = format!(
        "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by {} (pid {} on {}), \
         started {}, last heartbeat ",
        data("holder"),
        data("pid"),
        data("host"),
        data("started"),
    );
    let at = second
        .stderr
        .find(&who)
        .unwrap_or_else(|| panic!("no `{who}` in:\n{}", second.stderr));
    let beat = &second.stderr[at + who.len()..];
    let (when, age) = beat
        .split_once(" (")
        .and_then(|(when, rest)| Some((when, rest.split_once(" ago)")?.0)))
        .unwrap_or_else(|| panic!("no heartbeat and age after `{who}`:\n{}", second.stderr));
    assert!(
        humantime::parse_rfc3339(when).is_ok() && humantime::parse_duration(age).is_ok(),
        "heartbeat `{when}`, age `{age}`:\n{}",
        second.stderr
    );
    assert_has(
        &second.stderr,
        &[
            "That fleetctl (an apply or a reboot) is alive as far as it can tell (its last heartbeat is ",
            " old, and its lock stays valid for 23m without one, which a node it waits for may take): wait for it to finish.",
        ],
    );
    // Nor does --force-unlock alone remove a live holder's lock.
    let forced = apply(&fleet, &["--force-unlock"]).expect_code(1);
    assert_has(
        &forced.stderr,
        &[
            &format!("is held by {} (pid {} on ", data("holder"), data("pid")),
            "That fleetctl (an apply or a reboot) is alive",
            "--force-unlock alone does not remove a lock whose holder may be alive",
        ],
    );
    let now = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    assert_eq!(
        (
            &now.uid,
            &now.data["holder"],
            &now.data["pid"],
            &now.data["started"]
        ),
        (
            &held.uid,
            &held.data["holder"],
            &held.data["pid"],
            &held.data["started"]
        ),
        "the second apply must leave the first's lock alone"
    );
    // What the second apply did: one create, refused as AlreadyExists.
    let during = &events(&fleet)[at_second..];
    let creates: Vec<&Event> = during
        .iter()
        .filter(|e| creates_lock_configmap(e))
        .collect();
    assert!(
        !creates.is_empty() && creates.iter().all(|e| !is_ok(e)),
        "{}",
        describe(during)
    );
    assert!(
        !during.iter().any(deletes_lock_configmap),
        "{}",
        describe(during)
    );

    fleet.release("w-1").unwrap();
    let run = first.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 2 nodes upgraded"]);
    assert!(!run.stderr.contains("no longer held"), "{}", run.stderr);
    assert!(!run.stderr.contains("could not release"), "{}", run.stderr);
    let log = &events(&fleet)[start..];
    assert_configmap_lock_brackets_the_run(&fleet, log);
    done_once(log, &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// 4. A holder whose heartbeat stopped

#[test]
fn a_dead_holder_is_named_removed_by_force_unlock_alone_and_the_upgrade_completes() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    // Past the 23m TTL this run would give it (it recorded none of its own).
    let then = rfc3339_ago(Duration::from_secs(30 * 60));
    let bob = format!(
        "{KUBECTL} -n kube-system create configmap fleetctl-lock \
         --from-literal=holder=fleetctl/bob@ops-1 --from-literal=host=ops-1 --from-literal=pid=77 \
         --from-literal=started={then} --from-literal=heartbeat={then}"
    );
    fleet.ssh_ok("cp-1", "root", &bob).unwrap();
    let bobs = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    let before = snapshot(&fleet);
    let start = events(&fleet).len();

    // Refused, saying whose, since when, and that it looks dead.
    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert!(
        run.stderr.contains(&format!("last heartbeat {then} (30m"))
            || run.stderr.contains(&format!("last heartbeat {then} (31m")),
        "the heartbeat's age should be about 30 minutes:\n{}",
        run.stderr
    );
    assert_has(
        &run.stderr,
        &[
            &format!(
                "fleetctl's lock (configmap kube-system/fleetctl-lock) is held by fleetctl/bob@ops-1 \
                 (pid 77 on ops-1), started {then}, last heartbeat {then} (3"
            ),
            "That fleetctl looks dead: no heartbeat for over 23m, the time its lock stays valid without one",
            "Run fleetctl again with `--force-unlock` to remove its lock.",
        ],
    );
    assert_eq!(
        snapshot(&fleet),
        before,
        "a refused apply changed the fleet"
    );
    let refused = &events(&fleet)[start..];
    assert!(
        refused
            .iter()
            .all(|e| e.node == "cp-1" && !is_ok(e) && kubectl_words(e).is_some()),
        "a refused apply must change nothing:\n{}",
        describe(refused)
    );

    // `--force-unlock` alone (no --yes) removes a dead holder. Without a
    // terminal apply then cannot ask for confirmation and stops (exit 2)
    // before touching a node, giving back the lock it took.
    let at = events(&fleet).len();
    let run = apply(&fleet, &["--force-unlock"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "--force-unlock removed fleetctl's lock (configmap kube-system/fleetctl-lock) held by fleetctl/bob@ops-1 (pid 77 on ops-1)",
            "no terminal",
        ],
    );
    let log = &events(&fleet)[at..];
    let removed = log
        .iter()
        .position(|e| is_ok(e) && deletes_lock_configmap(e))
        .unwrap_or_else(|| panic!("bob's lock was not removed:\n{}", describe(log)));
    let mine = log
        .iter()
        .position(|e| is_ok(e) && creates_lock_configmap(e))
        .unwrap_or_else(|| panic!("apply never took the lock:\n{}", describe(log)));
    assert!(removed < mine, "{}", describe(log));
    assert!(
        !log.iter().any(is_upgrade_action),
        "nothing is done without confirmation:\n{}",
        describe(log)
    );
    assert!(
        !fleet
            .cluster()
            .unwrap()
            .configmaps
            .contains_key(LOCK_CONFIGMAP),
        "neither bob's lock nor this run's may be left"
    );

    // Bob's lock again, then `--force-unlock --yes`: removed by the
    // preconditioned delete before anything else, then the whole upgrade.
    fleet.ssh_ok("cp-1", "root", &bob).unwrap();
    let again = fleet.cluster().unwrap().configmaps[LOCK_CONFIGMAP].clone();
    assert_ne!(again.uid, bobs.uid, "a new object");
    let at = events(&fleet).len();
    let run = apply(&fleet, &["--force-unlock", "--yes"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "--force-unlock removed fleetctl's lock (configmap kube-system/fleetctl-lock) held by fleetctl/bob@ops-1 (pid 77 on ops-1)",
            "done: 2 nodes upgraded",
        ],
    );
    let log = &events(&fleet)[at..];
    let removed = log
        .iter()
        .position(|e| is_ok(e) && deletes_lock_configmap(e))
        .unwrap_or_else(|| panic!("bob's lock was not removed:\n{}", describe(log)));
    let (first, _) = upgrade_span(log);
    assert!(
        removed < first,
        "bob's lock must go (event {removed}) before any upgrade action ({first}):\n{}",
        describe(log)
    );
    assert!(
        log[..removed].iter().all(|e| !is_ok(e)),
        "nothing may be written before bob's lock is removed:\n{}",
        describe(log)
    );
    // What was deleted is bob's second configmap, by its uid, as the API's
    // answer to the DELETE (in the journal) says.
    assert_eq!(
        force_unlocked_uids(&fleet),
        [bobs.uid.clone(), again.uid.clone()],
        "--force-unlock must remove exactly bob's locks, once each"
    );
    assert_configmap_lock_brackets_the_run(&fleet, &log[removed + 1..]);
    done_once(&events(&fleet)[start..], &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// 5. SIGTERM mid-drain

#[test]
fn sigterm_during_a_drain_stops_at_a_safe_point_releases_the_lock_and_a_rerun_finishes() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();

    let mut running = spawn_apply(&fleet, &["--yes"]);
    running.wait_for("w-1: gates, then drain");
    let at = events(&fleet).len();
    running.signal("TERM");
    let run = running.finish();
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert_has(
        &run.stderr,
        &[
            "SIGTERM: finishing the step in progress, then stopping at a safe point",
            "stopped by SIGTERM at a safe point",
            "Run `fleetctl apply` again to continue",
        ],
    );
    assert!(!run.stderr.contains("fix the cause"), "{}", run.stderr);
    let first = events(&fleet);
    // Nothing but w-1 was touched once the signal came.
    let strays: Vec<&Event> = first[at..]
        .iter()
        .filter(|e| subject(e).is_some_and(|n| n != "w-1"))
        .collect();
    assert!(
        strays.is_empty(),
        "{strays:?}\n{}",
        describe(&first[start..])
    );

    // Consistent: w-1 cordoned only if the message says so (it must not
    // be: a drained node that did not reboot is uncordoned again), on the
    // new version if it rebooted, on the old one if not; the lock gone.
    let cordoned = run
        .stderr
        .contains("w-1 IS STILL CORDONED")
        .then_some("w-1");
    let c = assert_consistent(&fleet, &PAIR, cordoned);
    assert_eq!(cordoned, None, "{}", run.stderr);
    if count(&first[start..], "w-1", "reboot") > 0 {
        assert_eq!(c.nodes["w-1"].kubelet_version, patch.to_string());
    } else {
        assert_eq!(c.nodes["w-1"].kubelet_version, FROM);
        if count_ok(&first[start..], "w-1", "drain") > 0 {
            assert_has(
                &run.stderr,
                &["w-1 was drained but not rebooted, and was uncordoned again"],
            );
        }
    }
    assert_eq!(c.nodes["cp-1"].kubelet_version, patch.to_string());
    let released = first[start..]
        .iter()
        .rposition(|e| is_ok(e) && deletes_lock_configmap(e));
    assert!(
        released.is_some_and(|r| r + start >= at),
        "the lock must be given back after the signal:\n{}",
        describe(&first[start..])
    );

    // A plain rerun finishes without repeating what is done.
    let second_start = events(&fleet).len();
    let rerun = apply(&fleet, &["--yes"]).expect_code(0);
    assert_has(&rerun.stderr, &["done: 2 nodes upgraded"]);
    let second = &events(&fleet)[second_start..];
    for (node, step) in [
        ("cp-1", format!("upgrade apply {patch}")),
        ("cp-1", "reboot".to_string()),
        ("cp-1", "sysupdate".to_string()),
        ("w-1", "sysupdate".to_string()),
        ("w-1", "upgrade node".to_string()),
    ] {
        assert_eq!(
            count(second, node, &step),
            0,
            "{node}: `{step}` was done already\n{}",
            describe(second)
        );
    }
    assert_configmap_lock_brackets_the_run(&fleet, second);
    done_once(&events(&fleet)[start..], &patch);
    assert_on_target(&fleet, &PAIR, &patch);
}

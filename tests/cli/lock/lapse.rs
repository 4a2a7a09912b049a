//! A lock that cannot lapse: a holder whose process is gone, the heartbeat
//! through another control plane, the lock in the cluster's time, which
//! Kured counts, and `fleetctl reboot` under the same lock harness.

use super::*;

// ---------------------------------------------------------------------------
// A lock that cannot lapse (issue 15, item 2)

#[test]
fn a_holder_on_this_machine_whose_process_is_gone_is_dead_despite_a_fresh_heartbeat() {
    let fleet = pair(|s| s);
    let patch = plan(&fleet, "v1.35");
    // An apply that ran here and was killed: its pid no longer runs.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string();
    let now = rfc3339_ago(Duration::ZERO);
    let orphan = format!(
        "{KUBECTL} -n kube-system create configmap fleetctl-lock \
         --from-literal=holder=fleetctl/carol@{host} --from-literal=host={host} \
         --from-literal=pid={pid} --from-literal=process={boot}/1 \
         --from-literal=started={now} --from-literal=heartbeat={now} --from-literal=ttl=3600"
    );
    fleet.ssh_ok("cp-1", "root", &orphan).unwrap();

    let run = apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &run.stderr,
        &[
            &format!("held by fleetctl/carol@{host} (pid {pid} on {host})"),
            &format!(
                "That fleetctl looks dead: fleetctl/carol@{host} ran on this machine as pid {pid}, \
                 which no longer runs. Run fleetctl again with `--force-unlock` to remove its lock."
            ),
        ],
    );
    assert!(
        !events(&fleet).iter().any(is_upgrade_action),
        "nothing was done"
    );

    let run = apply(&fleet, &["--yes", "--force-unlock"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[&format!(
            "--force-unlock removed fleetctl's lock (configmap kube-system/fleetctl-lock) held by \
             fleetctl/carol@{host} (pid {pid} on {host})"
        )],
    );
    assert_on_target(&fleet, &PAIR, &patch);
}

#[test]
fn in_ha_the_heartbeat_goes_through_another_control_plane_while_cp_1_reboots() {
    let fleet = support::start(
        support::scenario()
            .control_planes(3)
            .workers(1)
            .kubernetes(FROM),
    );
    let patch = plan(&fleet, "v1.35");
    // cp-1 stays down for longer than two heartbeats.
    fleet
        .faults(|f| f.hang_on_reboot = vec!["cp-1".into()])
        .unwrap();
    // Heartbeats every 2 s (a test build's FLEETCTL_TEST_HEARTBEAT), so
    // that several fall due while cp-1 is down without waiting minutes.
    let mut cmd = support::fleetctl(
        &fleet.inventory(),
        &["apply", "--yes", "--node-timeout", "5m"],
    );
    cmd.env("FLEETCTL_TEST_HEARTBEAT", "2s");
    let mut running = Running::spawn_command(cmd);
    running.wait_for("cp-1: rebooting");
    std::thread::sleep(TEST_BEAT * 3 + Duration::from_secs(4));
    fleet.faults(|f| f.hang_on_reboot.clear()).unwrap();
    let run = running.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 4 nodes upgraded"]);
    assert_on_target(&fleet, &["cp-1", "cp-2", "cp-3", "w-1"], &patch);

    let log = events(&fleet);
    let down = log
        .iter()
        .position(|e| e.node == "cp-1" && support::is_shutdown(e))
        .unwrap_or_else(|| panic!("cp-1 never went down:\n{}", describe(&log)));
    let up = down
        + log[down..]
            .iter()
            .position(|e| e.node == "cp-1" && support::is_boot(e))
            .unwrap_or_else(|| panic!("cp-1 never came back:\n{}", describe(&log)));
    let beats: Vec<&Event> = log[down..up]
        .iter()
        .filter(|e| {
            is_ok(e)
                && kubectl_words(e)
                    .is_some_and(|w| w.starts_with(&["patch", "configmap", "fleetctl-lock"]))
        })
        .collect();
    assert!(
        !beats.is_empty() && beats.iter().all(|e| e.node != "cp-1"),
        "while cp-1 was down the heartbeat must land through cp-2 or cp-3:\n{}",
        describe(&log[down..up])
    );
}

/// How often apply refreshes its lock when a test sets
/// `FLEETCTL_TEST_HEARTBEAT=2s`.
const TEST_BEAT: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// The lock in the cluster's time (issue 24, item 2)

/// `fleetctl ARGS` with this machine's clock moved by `shift` (`-30m`) as
/// fleetctl reads it: a test build's `FLEETCTL_TEST_CLOCK_OFFSET`.
fn with_clock(fleet: &Fleet, shift: &str, args: &[&str]) -> std::process::Command {
    let mut cmd = support::fleetctl(&fleet.inventory(), args);
    cmd.env("FLEETCTL_TEST_CLOCK_OFFSET", shift);
    cmd
}

#[test]
fn a_laptop_clock_30_minutes_behind_the_fleet_is_refused_before_any_lock_is_written() {
    // Kured runs and w-1 wants a reboot: a lock whose `created` was 30
    // minutes old would be expired to Kured (23m TTL) the moment it is
    // written.
    let fleet = pair(|s| {
        s.kured_with(|k| {
            k.run = true;
            k.period = 0.2;
        })
    });
    plan(&fleet, "v1.35");
    let start = events(&fleet).len();
    let run = Run::of(
        with_clock(&fleet, "-30m", &["apply", "--yes"])
            .output()
            .unwrap(),
    )
    .expect_code(1);
    assert_has(
        &run.stderr,
        &[
            "this machine's clock is 30m behind cp-1's (measured over SSH, to within",
            "more than the 5m fleetctl accepts: Kured judges its reboot lock's TTL by the nodes' \
             clocks, and the maintenance window and the journal go by this machine's. Nothing was \
             changed. Set the clock that is wrong (`timedatectl`, NTP) and run again",
        ],
    );
    let log = &events(&fleet)[start..];
    assert!(
        !log.iter().any(|e| support::is_lock(e)
            || kubectl_words(e).is_some_and(|w| w.first() == Some(&"annotate"))),
        "no lock was written:\n{}",
        describe(log)
    );
    assert!(!log.iter().any(is_upgrade_action), "{}", describe(log));
    let kured = fleet.cluster().unwrap().kured.unwrap();
    assert!(
        !kured.annotations.contains_key(KURED_LOCK),
        "{:?}",
        kured.annotations
    );
}

#[test]
fn a_laptop_clock_minutes_behind_writes_the_lock_in_the_clusters_time_and_multi_owner_kured_waits()
{
    // Kured with --concurrency=2 (the multi-owner lock), its loop ticking
    // every 0.2 s; this machine's clock 4 minutes behind the fleet's.
    let fleet = pair(|s| {
        s.kured_with(|k| {
            k.run = true;
            k.period = 0.2;
            k.concurrency = 2;
        })
    });
    let patch = plan(&fleet, "v1.35");
    let start = events(&fleet).len();
    let mut running = Running::spawn_command(with_clock(&fleet, "-4m", &["apply", "--yes"]));
    running.wait_for("holding Kured's reboot lock");
    let at_touch = events(&fleet).len();
    for n in PAIR {
        fleet
            .ssh_ok(n, "root", "touch /run/reboot-required")
            .unwrap();
    }
    let run = running.finish().expect_code(0);
    assert_has(&run.stderr, &["done: 2 nodes upgraded"]);
    let log = &events(&fleet)[start..];

    // Every value fleetctl wrote (the take and each heartbeat) is the
    // multi-owner form with both slots taken, each `created` within
    // seconds of the fleet's clock when the API server took it, never
    // 4 minutes behind.
    let set = format!("{KURED_LOCK}=");
    let writes: Vec<(&Event, serde_json::Value)> = log
        .iter()
        .filter(|e| is_ok(e))
        .filter_map(|e| {
            let words = kubectl_words(e)?;
            if words.len() != 4 || words[..2] != ["annotate", "daemonset"] {
                return None;
            }
            let value = words[3].strip_prefix(&set)?;
            Some((e, serde_json::from_str(value).unwrap()))
        })
        .collect();
    assert!(!writes.is_empty(), "no lock written:\n{}", describe(log));
    for (e, value) in &writes {
        assert_eq!(value["maxOwners"], 2, "{value}");
        let locks = value["locks"].as_array().unwrap();
        assert_eq!(locks.len(), 2, "every slot taken: {value}");
        for entry in locks {
            let created = humantime::parse_rfc3339_weak(entry["created"].as_str().unwrap())
                .unwrap()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            assert!(
                (created - e.t).abs() < 10.0,
                "created {created} is {:.0} s from the fleet's clock at the write ({}): {value}",
                created - e.t,
                e.t
            );
        }
    }

    // Kured's pods tried and never got a slot, never cordoned or rebooted.
    for n in PAIR {
        assert!(
            log[at_touch - start..].iter().any(|e| e.node == n
                && e.argv == ["(kured)", "acquire"]
                && e.result.starts_with("held by fleetctl/")),
            "Kured on {n} never tried its lock while fleetctl held it:\n{}",
            describe(log)
        );
    }
    let kured_acted: Vec<&Event> = log
        .iter()
        .filter(|e| is_kured(e) && !(e.argv[1] == "acquire" && e.result.starts_with("held by")))
        .collect();
    assert!(kured_acted.is_empty(), "Kured acted: {kured_acted:?}");
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// Which Kured counts (issue 24, item 3)

#[test]
fn a_decoy_pod_with_a_kured_image_in_a_user_namespace_does_not_block_apply() {
    // No Kured; a user who may create Deployments in `dev` runs a pod whose
    // image is called kured. It cannot reboot a node (no hostPID, not
    // privileged).
    let fleet = pair(|mut s| {
        s.pods = vec![fleetsim::state::PodSpec {
            namespace: "dev".into(),
            name: "decoy-7c9d5b-x2kq4".into(),
            node: "w-1".into(),
            labels: Default::default(),
            annotations: Default::default(),
            owner: Some("ReplicaSet/decoy-7c9d5b".into()),
            phase: "Running".into(),
            image: Some("evil.example/kured:1".into()),
        }];
        s
    });
    let patch = plan(&fleet, "v1.35");
    let run = apply(&fleet, &["--yes"]).expect_code(0);
    assert_has(
        &run.stderr,
        &[
            "pod dev/decoy-7c9d5b-x2kq4 (owned by a ReplicaSet) runs Kured's program or image but \
             cannot reboot a node (Kured needs hostPID and a privileged container): not taken for \
             Kured",
            "holding fleetctl's lock (configmap kube-system/fleetctl-lock)",
            "done: 2 nodes upgraded",
        ],
    );
    assert_configmap_lock_brackets_the_run(&fleet, &events(&fleet));
    assert_on_target(&fleet, &PAIR, &patch);
}

// ---------------------------------------------------------------------------
// reboot under the same lock harness as apply (issue 24, item 9)

#[test]
fn reboot_stops_at_once_when_its_lease_is_about_to_lapse() {
    // cp-1 and two workers that want a reboot, Kured installed (its loop
    // off): `fleetctl reboot` holds Kured's lock, with a TTL of 130 s (a
    // test build's FLEETCTL_TEST_LOCK_TTL) refreshed every 2 s.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(2)
            .kubernetes(FROM)
            .kured(true),
    );
    for n in ["w-1", "w-2"] {
        fleet
            .ssh_ok(n, "root", "touch /run/reboot-required")
            .unwrap();
    }
    let start = events(&fleet).len();
    let mut cmd = support::fleetctl(
        &fleet.inventory(),
        &[
            "reboot",
            "--yes",
            "--soak",
            "10m",
            "--drain-timeout",
            "5s",
            // Drain and node together (50 s) fit the 70 s a fresh
            // heartbeat leaves with 20 s to spare: heartbeats that come
            // late on a loaded machine (every drain now also reads Ceph,
            // etcd and Kured's gates through kubectl) must not refuse the
            // first worker before the cut this test is about.
            "--node-timeout",
            "45s",
        ],
    );
    cmd.env("FLEETCTL_TEST_LOCK_TTL", "130s")
        .env("FLEETCTL_TEST_HEARTBEAT", "2s");
    let mut running = Running::spawn_command(cmd);
    // The first worker is back; the soak before the second begins. From
    // now on no heartbeat lands (the API server refuses the lock's writes).
    running.wait_for("soak (10m)");
    let cut = std::time::Instant::now();
    fleet.faults(|f| f.kured_lock_forbidden = true).unwrap();
    let run = running.finish().expect_code(1);
    // 130 s less the 60 s margin after the last heartbeat: not the 10
    // minutes of the soak.
    assert!(
        cut.elapsed() < Duration::from_secs(180),
        "reboot went on for {:?} after its heartbeats stopped",
        cut.elapsed()
    );
    // The lease's own verdict, at once, as apply ends on it: not a stop
    // "at a safe point" that the heartbeat asked for, as reboot used to.
    assert_has(
        &run.stderr,
        &[
            "fleetctl: error: stopped at once: Kured's reboot lock on daemonset kube-system/kured",
            "lapses 2m 10s after its last heartbeat, so fleetctl no longer relies on it",
        ],
    );
    assert!(
        !run.stderr.contains("stopped at a safe point"),
        "{}",
        run.stderr
    );
    let log = &events(&fleet)[start..];
    let rebooted = support::rebooted_nodes(log);
    assert_eq!(
        rebooted.len(),
        1,
        "one worker rebooted before the soak, the other never:\n{}",
        describe(log)
    );
}

//! Real-OS nodes (`os_layer: systemd`, docs/simulator.md "Real-OS nodes"): the
//! real systemd 257 as PID 1, the real systemd-sysext, systemd-sysupdate,
//! systemd-run, systemctl and journald. These are the behaviours only the
//! real tools make honest. The first test to start a fleet builds the
//! cached root (debootstrap, a few minutes; rootfs.sh) and the others wait
//! for it; the harness boots at most two real-OS fleets at a time.

use std::time::{Duration, Instant};

use fleetsim::scenario::Os;
use fleetsim::{Fleet, Scenario};

use super::common::{boot_id, node_events, run, small, start};

fn real(workers: usize) -> Scenario {
    small(workers).os_layer(Os::Systemd).kubelet_restart(1.0)
}

/// Runs `cmd` as root on `node`; returns (exit code, stdout, stderr).
fn sh(fleet: &Fleet, node: &str, cmd: &str) -> (i32, String, String) {
    let out = fleet.ssh(node, "root", cmd).expect("ssh");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Where `node`'s kubernetes extension link points: what its next boot merges.
fn staged_link(fleet: &Fleet, node: &str) -> String {
    run(
        fleet,
        node,
        "root",
        "readlink /etc/extensions/kubernetes.raw",
    )
}

fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out after {} s waiting for {what}", timeout.as_secs());
}

#[test]
fn boots_real_systemd_which_merges_the_sysext_and_runs_the_kubelet_unit() {
    let fleet = start(real(0));
    assert_eq!(
        run(&fleet, "cp-1", "root", "cat /proc/1/comm").trim(),
        "systemd"
    );
    let (code, state, _) = sh(&fleet, "cp-1", "systemctl is-system-running");
    assert_eq!((code, state.trim()), (0, "running"), "{state}");
    // The real systemd-sysext merged the bakery image at boot.
    let status = run(&fleet, "cp-1", "root", "systemd-sysext status --no-pager");
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("/usr") && l.contains("kubernetes")),
        "{status}"
    );
    assert_eq!(
        run(&fleet, "cp-1", "root", "kubelet --version").trim(),
        "Kubernetes v1.34.2"
    );
    // The kubelet is a real unit: the image's, with the kubeadm drop-in.
    let show = run(
        &fleet,
        "cp-1",
        "root",
        "systemctl show kubelet -p ActiveState -p FragmentPath -p DropInPaths",
    );
    assert!(show.contains("ActiveState=active"), "{show}");
    assert!(
        show.contains("FragmentPath=/usr/lib/systemd/system/kubelet.service"),
        "{show}"
    );
    assert!(show.contains("10-kubeadm.conf"), "{show}");
    // The supervisor read what was merged and recorded the boot.
    assert_eq!(fleet.boot("cp-1").unwrap().kubernetes, "v1.34.2");
    let boot = fleet
        .events()
        .unwrap()
        .into_iter()
        .find(|e| e.node == "cp-1" && e.argv == ["(boot)"])
        .expect("a (boot) event");
    assert_eq!(
        (boot.result.as_str(), boot.version.as_deref()),
        ("ok", Some("v1.34.2"))
    );
    fleet.wait_ready("cp-1").unwrap();
    // systemd's journal and the kernel's boot id are the supervisor's.
    let boots = run(
        &fleet,
        "cp-1",
        "root",
        "journalctl --list-boots --no-pager -q",
    );
    let id = boot_id(&fleet, "cp-1").replace('-', "");
    assert!(boots.contains(&id), "{boots}");
}

#[test]
fn systemctl_reboot_ends_the_namespace_and_the_node_boots_again() {
    let fleet = start(real(0));
    let before = boot_id(&fleet, "cp-1");
    // The real `systemctl reboot` returns before the manager goes down;
    // the SSH session may or may not see its exit.
    let _ = fleet.ssh("cp-1", "root", "systemctl reboot");
    let after = fleet.wait_rebooted("cp-1", &before).unwrap();
    assert_ne!(after.boot_id, before);
    assert_eq!(after.kubernetes, "v1.34.2");
    // The persistent journal has both boots; the kubelet is back.
    let boots = run(
        &fleet,
        "cp-1",
        "root",
        "journalctl --list-boots --no-pager -q",
    );
    assert_eq!(boots.lines().count(), 2, "{boots}");
    wait_until(
        "the kubelet after the reboot",
        Duration::from_secs(20),
        || sh(&fleet, "cp-1", "systemctl is-active kubelet").1.trim() == "active",
    );
    let events = node_events(&fleet, "cp-1");
    assert!(events.iter().any(|e| e == "(shutdown)"), "{events:?}");
    assert_eq!(
        events.iter().filter(|e| *e == "(boot)").count(),
        2,
        "{events:?}"
    );
}

#[test]
fn a_failed_transient_unit_blocks_its_name_until_reset_failed() {
    let fleet = start(real(0));
    let unit = "fleetctl-step";
    let (code, _, err) = sh(
        &fleet,
        "cp-1",
        &format!("systemd-run --unit={unit} /bin/false"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("Running as unit: {unit}.service")),
        "{err}"
    );
    wait_until("the unit to fail", Duration::from_secs(10), || {
        sh(&fleet, "cp-1", &format!("systemctl is-failed {unit}"))
            .1
            .trim()
            == "failed"
    });
    // A later run under the same name (fleetctl's next attempt) is refused.
    let (code, _, err) = sh(
        &fleet,
        "cp-1",
        &format!("systemd-run --unit={unit} /bin/true"),
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!(
            "Failed to start transient service unit: Unit {unit}.service was already loaded or has a fragment file."
        )),
        "{err}"
    );
    run(
        &fleet,
        "cp-1",
        "root",
        &format!("systemctl reset-failed {unit}"),
    );
    let (code, _, err) = sh(
        &fleet,
        "cp-1",
        &format!("systemd-run --unit={unit} /bin/true"),
    );
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_crash_looping_kubelet_is_seen_through_the_real_systemctl_and_journalctl() {
    let fleet = start(real(0));
    fleet.wait_ready("cp-1").unwrap();
    // Without its config file the kubelet exits 1 at every start.
    run(
        &fleet,
        "cp-1",
        "root",
        "mv /var/lib/kubelet/config.yaml /var/lib/kubelet/config.yaml.away && systemctl restart kubelet",
    );
    wait_until("three restarts", Duration::from_secs(30), || {
        let n = sh(
            &fleet,
            "cp-1",
            "systemctl show kubelet -p NRestarts --value",
        )
        .1;
        n.trim().parse::<u32>().is_ok_and(|n| n >= 3)
    });
    let (code, state, _) = sh(&fleet, "cp-1", "systemctl is-active kubelet");
    // Between two starts (RestartSec=1s here) or in the moment it runs.
    assert!(
        matches!(state.trim(), "activating" | "active" | "failed"),
        "{code} {state}"
    );
    let journal = run(
        &fleet,
        "cp-1",
        "root",
        "journalctl -u kubelet -b --no-pager -q",
    );
    assert!(journal.contains("\"command failed\""), "{journal}");
    assert!(
        journal.contains("kubelet.service: Main process exited, code=exited, status=1/FAILURE"),
        "{journal}"
    );
    assert!(
        journal.contains("kubelet.service: Scheduled restart job, restart counter is at 3."),
        "{journal}"
    );
    // Restart=always with the bakery's StartLimitInterval=0: it never gives up.
    run(
        &fleet,
        "cp-1",
        "root",
        "mv /var/lib/kubelet/config.yaml.away /var/lib/kubelet/config.yaml",
    );
    wait_until("the kubelet to run again", Duration::from_secs(20), || {
        sh(&fleet, "cp-1", "systemctl is-active kubelet").1.trim() == "active"
    });
}

#[test]
fn a_reboot_during_a_detached_step_leaves_only_its_journal() {
    let fleet = start(real(0));
    let unit = "fleetctl-upgrade";
    run(
        &fleet,
        "cp-1",
        "root",
        &format!("systemd-run --unit={unit} -- sh -c 'echo step started; sleep 300'"),
    );
    wait_until("the step's first line", Duration::from_secs(10), || {
        sh(
            &fleet,
            "cp-1",
            &format!("journalctl -u {unit} -q --no-pager"),
        )
        .1
        .contains("step started")
    });
    let before = boot_id(&fleet, "cp-1");
    let _ = fleet.ssh("cp-1", "root", "systemctl reboot");
    fleet.wait_rebooted("cp-1", &before).unwrap();
    // The transient unit is gone with the manager that held it…
    let (code, state, _) = sh(&fleet, "cp-1", &format!("systemctl is-active {unit}"));
    assert_eq!(
        (code, state.trim()),
        (4, "inactive"),
        "is-active after the reboot"
    );
    let (_, loaded, _) = sh(
        &fleet,
        "cp-1",
        &format!("systemctl show {unit} -p LoadState --value"),
    );
    assert_eq!(loaded.trim(), "not-found");
    // …and its name is free again, without reset-failed…
    let (code, _, err) = sh(
        &fleet,
        "cp-1",
        &format!("systemd-run --unit={unit} /bin/true"),
    );
    assert_eq!(code, 0, "{err}");
    // …while the previous boot's journal still tells what it did and how it ended.
    let journal = run(
        &fleet,
        "cp-1",
        "root",
        &format!("journalctl -b -1 -u {unit} -q --no-pager"),
    );
    assert!(journal.contains("step started"), "{journal}");
    assert!(
        journal.contains(&format!("Stopped {unit}.service")),
        "{journal}"
    );
}

#[test]
fn sysupdate_makes_room_by_deleting_the_image_the_node_runs() {
    // The node runs v1.34.0, the oldest of three local instances; the hub
    // serves v1.34.0-v1.34.3. The bakery config keeps InstancesMax=3.
    let fleet = start(real(0).kubernetes("v1.34.0").hub(|h| h.patches = 4));
    let hub = fleet.hub_url().to_string();
    run(
        &fleet,
        "cp-1",
        "root",
        &format!(
            "cd /opt/extensions/kubernetes && for v in 1 2; do curl -fsS -o kubernetes-v1.34.$v-x86-64.raw {hub}/kubernetes/kubernetes-v1.34.$v-x86-64.raw; done"
        ),
    );
    let (code, out, err) = sh(
        &fleet,
        "cp-1",
        "/usr/lib/systemd/systemd-sysupdate -C kubernetes update",
    );
    let text = format!("{out}{err}");
    assert_eq!(code, 0, "{text}");
    let making_room = text.find("Making room").expect(&text);
    let removing = text
        .find("kubernetes-v1.34.0-x86-64.raw")
        .expect("the running image named in the clean-up");
    assert!(making_room < removing, "{text}");
    assert!(text.contains("Removing old"), "{text}");
    let images = run(&fleet, "cp-1", "root", "ls /opt/extensions/kubernetes");
    assert!(!images.contains("v1.34.0"), "{images}");
    assert!(images.contains("kubernetes-v1.34.3-x86-64.raw"), "{images}");
    let link = staged_link(&fleet, "cp-1");
    assert!(link.contains("kubernetes-v1.34.3-x86-64.raw"), "{link}");
    // Staged is not running: the merged /usr still runs the deleted image.
    assert_eq!(
        run(&fleet, "cp-1", "root", "kubelet --version").trim(),
        "Kubernetes v1.34.0"
    );
}

#[test]
fn a_node_that_starts_with_an_image_staged_runs_the_old_one_until_it_reboots() {
    let fleet = start(real(1).with_node("w-1", |n| n.staged = Some("v1.34.3".into())));
    assert_eq!(
        run(&fleet, "w-1", "root", "kubelet --version").trim(),
        "Kubernetes v1.34.2"
    );
    let link = run(
        &fleet,
        "w-1",
        "root",
        "readlink /etc/extensions/kubernetes.raw",
    );
    assert!(link.contains("kubernetes-v1.34.3-x86-64.raw"), "{link}");
    let before = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "systemctl reboot");
    let after = fleet.wait_rebooted("w-1", &before).unwrap();
    assert_eq!(after.kubernetes, "v1.34.3");
    assert_eq!(
        run(&fleet, "w-1", "root", "kubelet --version").trim(),
        "Kubernetes v1.34.3"
    );
}

#[test]
fn a_power_cut_kills_systemd_and_the_node_boots_again() {
    let fleet = start(real(0));
    let before = boot_id(&fleet, "cp-1");
    fleet.power_cycle("cp-1").unwrap();
    let after = fleet.wait_rebooted("cp-1", &before).unwrap();
    assert_ne!(after.boot_id, before);
    let events = node_events(&fleet, "cp-1");
    assert!(events.iter().any(|e| e == "(shutdown)"), "{events:?}");
    // (What journald wrote survives here, in the shared page cache; a real
    // power loss may lose what it had not synced: docs/simulator.md.)
    assert_eq!(
        run(&fleet, "cp-1", "root", "cat /proc/1/comm").trim(),
        "systemd"
    );
}

#[test]
fn a_real_os_fleet_leaves_nothing_behind() {
    use fleetsim::harness::{
        fleet_loop_devices, fleet_processes, host_mounts_under, still_attached, still_running,
    };
    for kill in [false, true] {
        let mut fleet = start(real(1));
        let procs = fleet_processes(fleet.dir());
        let systemds = procs
            .iter()
            .filter(|p| p.cmdline == "/usr/lib/systemd/systemd")
            .count();
        assert_eq!(systemds, 2, "{procs:#?}");
        assert!(procs.iter().any(|p| p.cmdline.contains("systemd-journald")));
        // systemd-sysext's loop device for each node's merged image.
        let loops = fleet_loop_devices(fleet.dir()).unwrap();
        assert_eq!(loops.len(), 2, "{loops:#?}");
        let supervisor = fleet.supervisor_pid().unwrap();
        let cgroups = || {
            let base = fleetsim::realos::cgroup::hierarchy().unwrap();
            let mut found = Vec::new();
            let mut stack = vec![base];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                    if !e.file_type().is_ok_and(|t| t.is_dir()) {
                        continue;
                    }
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with(&format!("fleetsim-{supervisor}-")) {
                        found.push(e.path());
                    } else if !name.starts_with("fleetsim-") && d.components().count() < 8 {
                        stack.push(e.path());
                    }
                }
            }
            found
        };
        assert_eq!(cgroups().len(), 2, "one cgroup per node");
        let dir = fleet.dir().to_path_buf();
        if kill {
            fleet.kill_supervisor().unwrap();
        } else {
            drop(fleet);
        }
        wait_until(
            "every process of the fleet to go",
            Duration::from_secs(15),
            || still_running(&procs).is_empty(),
        );
        wait_until("the loop devices to detach", Duration::from_secs(5), || {
            still_attached(&loops).unwrap().is_empty()
        });
        assert_eq!(host_mounts_under(&dir), Vec::<String>::new());
        if kill {
            // A killed supervisor cannot remove them; the next real-OS
            // fleet sweeps them (NodeCgroup::create).
            start(real(0));
        }
        assert_eq!(cgroups(), Vec::<std::path::PathBuf>::new());
    }
}

#[test]
fn the_bakery_sysupdate_service_stages_a_patch_and_flags_a_reboot() {
    // Flatcar's timer would start it; the bakery's drop-in runs the
    // kubernetes component first and flags a reboot when the link moved.
    let fleet = start(real(0).kubernetes("v1.34.1").hub(|h| h.patches = 3));
    let (code, _, err) = sh(&fleet, "cp-1", "systemctl start systemd-sysupdate.service");
    assert_eq!(code, 0, "{err}");
    // journald writes what the unit printed on its own time: read until
    // the unit's last lines are there (boundedly). By identifier, not
    // `-u`: sysupdate logs over journald's native socket, whose datagrams
    // carry no unit, so journald looks the sender's cgroup up in /proc, and
    // a process that has exited by then is not found
    // (systemd/systemd#2913; seen under load). A service's stdout stream
    // names its unit when it connects, so the kubelet's lines, which
    // fleetctl reads with `-u`, keep theirs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let journal = loop {
        let journal = run(
            &fleet,
            "cp-1",
            "root",
            "journalctl -t systemd-sysupdate -b -q --no-pager",
        );
        let complete = journal.contains("Successfully installed update '2'.")
            && journal.contains("No update needed.");
        if complete || std::time::Instant::now() > deadline {
            break journal;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        journal.contains("Successfully installed update '2'."),
        "{journal}"
    );
    // Its main process, `systemd-sysupdate update`, reads the bakery's
    // noop.conf from /etc/sysupdate.d: a transfer that never matches.
    assert!(journal.contains("No update needed."), "{journal}");
    assert_eq!(
        sh(
            &fleet,
            "cp-1",
            "systemctl is-active systemd-sysupdate.service"
        )
        .1
        .trim(),
        "inactive"
    );
    let link = staged_link(&fleet, "cp-1");
    assert!(link.contains("kubernetes-v1.34.2-x86-64.raw"), "{link}");
    run(&fleet, "cp-1", "root", "test -e /run/reboot-required");
    // Nothing failed: without the noop.conf the main process would say
    // `No transfer definitions found.`, fail the unit and degrade the node.
    let (_, state, _) = sh(&fleet, "cp-1", "systemctl is-system-running");
    assert_eq!(state.trim(), "running");
    assert_eq!(
        run(&fleet, "cp-1", "root", "kubelet --version").trim(),
        "Kubernetes v1.34.1"
    );
}

#[test]
fn the_nodes_own_timer_stages_a_patch_and_flags_a_reboot_with_no_one_logged_in() {
    // The bakery's Butane enables systemd-sysupdate.timer (scenario
    // `sysupdate_timer`, on a test schedule): nobody runs sysupdate here.
    let fleet = start(
        real(0)
            .kubernetes("v1.34.1")
            .hub(|h| h.patches = 3)
            .with_node("cp-1", |n| n.sysupdate_timer = true),
    );
    wait_until(
        "the timer's run to flag a reboot",
        Duration::from_secs(90),
        || sh(&fleet, "cp-1", "test -e /run/reboot-required").0 == 0,
    );
    let link = staged_link(&fleet, "cp-1");
    assert!(link.contains("kubernetes-v1.34.2-x86-64.raw"), "{link}");
    let events = node_events(&fleet, "cp-1");
    assert!(
        events
            .iter()
            .any(|e| e == "systemd-sysupdate -C kubernetes update"),
        "the timer's run, recorded like any other: {events:?}"
    );
    assert_eq!(
        sh(
            &fleet,
            "cp-1",
            "systemctl is-active systemd-sysupdate.timer"
        )
        .1
        .trim(),
        "active"
    );
    // Staged is not running, until a reboot.
    assert_eq!(
        run(&fleet, "cp-1", "root", "kubelet --version").trim(),
        "Kubernetes v1.34.1"
    );
    let before = boot_id(&fleet, "cp-1");
    let _ = fleet.ssh("cp-1", "root", "systemctl reboot");
    let after = fleet.wait_rebooted("cp-1", &before).unwrap();
    assert_eq!(after.kubernetes, "v1.34.2");
}

#[test]
fn systemctl_poweroff_leaves_the_node_off_until_power_returns() {
    let fleet = start(real(0));
    let before = boot_id(&fleet, "cp-1");
    let _ = fleet.ssh("cp-1", "root", "systemctl poweroff");
    fleet.wait_down("cp-1").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(!fleet.cluster().unwrap().nodes["cp-1"].up, "still off");
    let answers = fleet
        .ssh("cp-1", "root", "true")
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(!answers, "a powered-off node answers SSH");
    fleet.power_cycle("cp-1").unwrap();
    let after = fleet.wait_rebooted("cp-1", &before).unwrap();
    assert_ne!(after.boot_id, before);
    assert_eq!(
        run(&fleet, "cp-1", "root", "cat /proc/1/comm").trim(),
        "systemd"
    );
}

#[test]
fn kureds_pod_is_a_unit_that_reboots_its_node_with_the_real_systemctl() {
    let fleet = start(real(1).kured_with(|k| {
        k.run = true;
        k.period = 0.2;
    }));
    // The pod is a unit of the node's systemd, started after the kubelet.
    wait_until("Kured's pod to run on w-1", Duration::from_secs(30), || {
        sh(&fleet, "w-1", "systemctl is-active fleetsim-kured.service")
            .1
            .trim()
            == "active"
    });
    let id = boot_id(&fleet, "w-1");
    run(&fleet, "w-1", "root", "touch /run/reboot-required");
    fleet.wait_rebooted("w-1", &id).unwrap();
    fleet
        .wait_for("Kured uncordoned w-1 and gave its lock back", |c| {
            let k = c.kured.as_ref().unwrap();
            !c.nodes["w-1"].unschedulable && k.annotations.is_empty()
        })
        .unwrap();
    let events: Vec<String> = node_events(&fleet, "w-1")
        .into_iter()
        .filter(|e| e.starts_with("(kured)") || e.starts_with("(reboot)") || e == "(shutdown)")
        .collect();
    // Kured's reboot is systemd's: the unit its reboot.target wants records
    // it as `(reboot)`, before systemd's reboot(2) ends the node's init.
    let from = events
        .iter()
        .position(|e| e == "(kured) acquire")
        .unwrap_or_else(|| panic!("Kured never took the lock: {events:?}"));
    assert_eq!(
        events[from..from + 6],
        [
            "(kured) acquire",
            "(kured) cordon",
            "(kured) drain",
            "(kured) reboot",
            "(reboot)",
            "(shutdown)"
        ],
        "{events:?}"
    );
    // The next boot's journal has the previous one's stop of the pod.
    let journal = run(
        &fleet,
        "w-1",
        "root",
        "journalctl -b -1 -u fleetsim-kured.service --no-pager",
    );
    assert!(journal.contains("kured w-1: reboot: ok"), "{journal}");
    // cp-1 has no sentinel: its pod runs and does nothing.
    assert!(
        !node_events(&fleet, "cp-1")
            .iter()
            .any(|e| e.starts_with("(kured) cordon")),
    );
}

//! Nothing outlives a fleet: no node-init, sshd or session process, no
//! mount on the host and no loop device, whether the fleet is dropped or its
//! supervisor is killed outright.

use std::thread;
use std::time::{Duration, Instant};

use fleetsim::harness::{
    LoopDevice, Proc, fleet_loop_devices, fleet_processes, host_mounts_under, still_attached,
    still_running,
};

use crate::common::{run, small, start};

fn processes_of_a_busy_fleet(fleet: &fleetsim::Fleet) -> Vec<Proc> {
    // Besides the boot's merged image, an image mounted by hand and left
    // mounted (as fleetctl mounts a staged one to run its kubeadm).
    run(
        fleet,
        "w-1",
        "root",
        "mkdir -p /run/by-hand && mount -o loop,ro /opt/extensions/kubernetes/kubernetes-v1.34.3-x86-64.raw /run/by-hand",
    );
    let procs = fleet_processes(fleet.dir());
    let count = |what: &str| procs.iter().filter(|p| p.cmdline.starts_with(what)).count();
    let init = format!("{} node-init", fleet.layout().binary().display());
    assert_eq!(count(&init), 2, "{procs:#?}");
    assert_eq!(count("/usr/bin/unshare"), 2, "{procs:#?}");
    assert!(count("sshd: /usr/sbin/sshd") >= 2, "{procs:#?}");
    assert_eq!(count(&fleet.layout().binary().display().to_string()), 2);
    procs
}

/// A fleet whose w-1 has an image staged, to mount by hand.
fn staged_fleet() -> fleetsim::Fleet {
    start(small(1).with_node("w-1", |n| n.staged = Some("v1.34.3".into())))
}

/// The loop devices of the fleet: one per node for its merged image, and
/// w-1's staged one mounted by hand.
fn loop_devices_of(fleet: &fleetsim::Fleet) -> Vec<LoopDevice> {
    let devices = fleet_loop_devices(fleet.dir()).unwrap();
    assert_eq!(devices.len(), 3, "{devices:#?}");
    devices
}

/// Auto-clearing loop devices are released when their last mount goes, a
/// moment after the node's mount namespace.
fn assert_detached(devices: &[LoopDevice], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = still_attached(devices).unwrap();
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "loop devices left: {left:#?}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn assert_gone(procs: &[Proc], within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = still_running(procs);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left behind: {left:#?}");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn dropping_a_fleet_leaves_nothing() {
    let fleet = staged_fleet();
    let procs = processes_of_a_busy_fleet(&fleet);
    let loops = loop_devices_of(&fleet);
    let dir = fleet.dir().to_path_buf();
    let mut idle = fleet
        .ssh_command("w-1", "root")
        .unwrap()
        .arg("sleep 600")
        .spawn()
        .unwrap();
    drop(fleet);
    // Drop returns after the supervisor has taken every node down.
    assert_gone(&procs, Duration::ZERO);
    assert_eq!(host_mounts_under(&dir), Vec::<String>::new());
    assert_detached(&loops, Duration::from_secs(5));
    assert!(!dir.exists(), "the state directory is removed");
    assert!(crate::common::wait_child(&mut idle, Duration::from_secs(20)).is_some());
}

#[test]
fn a_killed_supervisor_takes_its_nodes_with_it() {
    let mut fleet = staged_fleet();
    let procs = processes_of_a_busy_fleet(&fleet);
    let loops = loop_devices_of(&fleet);
    fleet.kill_supervisor().unwrap();
    assert_gone(&procs, Duration::from_secs(10));
    assert_eq!(host_mounts_under(fleet.dir()), Vec::<String>::new());
    assert_detached(&loops, Duration::from_secs(5));
}

#[test]
fn a_fleet_whose_parent_dies_tears_itself_down() {
    // The supervisor's parent is a shell we SIGKILL, as CI would kill a test binary.
    let dir = std::env::temp_dir().join(format!("fleetsim-orphan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("scenario.yaml");
    std::fs::write(&scenario, crate::common::small(0).to_yaml().unwrap()).unwrap();
    let mut shell = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#""$0" up --scenario "$1" --dir "$2" >"$2/log" 2>&1 & wait"#)
        .arg(env!("CARGO_BIN_EXE_fleetsim"))
        .arg(&scenario)
        .arg(&dir)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("ready").exists() {
        assert!(Instant::now() < deadline, "not ready");
        thread::sleep(Duration::from_millis(10));
    }
    let procs = fleet_processes(&dir);
    assert!(
        procs.iter().any(|p| p.cmdline.contains("node-init")),
        "{procs:#?}"
    );
    shell.kill().unwrap();
    shell.wait().unwrap();
    assert_gone(&procs, Duration::from_secs(10));
    let log = std::fs::read_to_string(dir.join("log")).unwrap();
    assert!(
        log.contains("the process that started the fleet is gone"),
        "{log}"
    );
    assert!(!dir.join("ready").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

//! Helpers shared by the test modules.

use std::path::Path;
use std::process::{Child, ExitStatus, Output};
use std::thread;
use std::time::{Duration, Instant};

use fleetsim::{Fleet, Scenario};

pub fn start(scenario: Scenario) -> Fleet {
    match scenario.start_with(Path::new(env!("CARGO_BIN_EXE_fleetsim"))) {
        Ok(f) => f,
        Err(e) => panic!("starting the fleet: {e:#}"),
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `cmd` and insists it succeeds; returns stdout.
pub fn run(fleet: &Fleet, node: &str, user: &str, cmd: &str) -> String {
    match fleet.ssh_ok(node, user, cmd) {
        Ok(s) => s,
        Err(e) => panic!("{e:#}"),
    }
}

pub fn boot_id(fleet: &Fleet, node: &str) -> String {
    run(fleet, node, "root", "cat /proc/sys/kernel/random/boot_id")
        .trim()
        .to_string()
}

/// Waits for a child process to exit, up to `timeout`.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// The argv of `node`'s events, in order.
pub fn node_events(fleet: &Fleet, node: &str) -> Vec<String> {
    fleet
        .events()
        .unwrap()
        .iter()
        .filter(|e| e.node == node)
        .map(|e| e.argv.join(" "))
        .collect()
}

/// A small fleet with short delays: one control plane, `workers` workers at
/// v1.34.2, and kubectl calls that cost a few milliseconds, not the
/// realistic default, so the suite stays fast.
pub fn small(workers: usize) -> Scenario {
    Scenario::new()
        .control_planes(1)
        .workers(workers)
        .kubernetes("v1.34.2")
        .api_latency(0.01)
}

//! What every integration test needs: a fleet, and a way to run the real
//! `fleetctl` against it and look at what came out.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use fleetsim::Scenario;
pub use fleetsim::harness::Fleet;

/// The fleetctl binary cargo built for these tests.
pub fn fleetctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fleetctl"))
}

/// A fleet from a scenario, once its API server answers and every kubelet
/// is Ready (the fleet's `ready` only means every sshd answers, and fleetctl
/// rightly refuses to plan against an API server still starting); panics
/// with the supervisor's log when it does not get there. A test that needs
/// the moment before calls `Scenario::start` itself.
pub fn start(scenario: Scenario) -> Fleet {
    let fleet = match scenario.start() {
        Ok(f) => f,
        Err(e) => panic!("the simulated fleet did not start: {e:#}"),
    };
    let healthy = fleet.wait_for("the API server answers and every node is Ready", |c| {
        let now = fleetsim::state::now();
        c.api_up(now) && c.nodes.keys().all(|n| c.node_ready(n, now))
    });
    if let Err(e) = healthy {
        panic!("{e:#}\n{}", fleet.log());
    }
    fleet
}

/// `fleetctl -i <fleet inventory> --no-color ARGS`, with HOME pointing at an
/// empty directory so the operator's own ~/.ssh/config cannot leak in, and no
/// ssh-agent.
pub fn fleetctl(inventory: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(fleetctl_bin());
    cmd.arg("-i").arg(inventory).arg("--no-color").args(args);
    let home = inventory.parent().unwrap_or(Path::new("/")).join("home");
    let _ = std::fs::create_dir_all(&home);
    cmd.env("HOME", home)
        .env_remove("SSH_AUTH_SOCK")
        .env_remove("FLEETCTL_INVENTORY");
    cmd.env("NO_COLOR", "1").stdin(Stdio::null());
    cmd
}

/// What a run of fleetctl produced, decoded.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics with both streams unless the exit code is `code`.
    pub fn expect_code(self, code: i32) -> Run {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout,
            self.stderr
        );
        self
    }
}

pub fn run(inventory: &Path, args: &[&str]) -> Run {
    Run::of(
        fleetctl(inventory, args)
            .output()
            .expect("running fleetctl"),
    )
}

//! The long steps (a kubeadm upgrade, a drain) run on the node as transient
//! systemd units, not as children of the SSH session: a dropped connection
//! or a fleetctl killed on the laptop cannot stop them halfway (kubeadm
//! dying mid-`upgrade apply` is the worst place to be interrupted). fleetctl
//! starts the unit, then polls its result file, reconnecting if the
//! connection drops; a later run that finds the step still running waits
//! for it instead of starting another.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::POLL;

/// How long one poll waits on the node for the step to end, in tenths of a
/// second: long enough to make polls rare, short enough that a deadline or
/// a Ctrl-C is noticed quickly.
pub const WAIT_TENTHS: u32 = 50;
use super::runner::{Remote, succeeded};
use crate::remote::upgrade;
use crate::ssh::{self, Output};

/// A step's unit ended, or where it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Running(String),
    Finished {
        exit: u32,
        output: String,
    },
    /// Neither running nor a result: never started, or its result was removed.
    Absent,
}

pub fn parse_state(stdout: &str) -> State {
    let (first, rest) = stdout.split_once('\n').unwrap_or((stdout, ""));
    let first = first.trim();
    if let Some(code) = first.strip_prefix("exit ") {
        return match code.trim().parse() {
            Ok(exit) => State::Finished {
                exit,
                output: rest.to_string(),
            },
            // A result file that is not a number: the step did not end cleanly.
            Err(_) => State::Finished {
                exit: u32::MAX,
                output: rest.to_string(),
            },
        };
    }
    match first.strip_prefix("running ") {
        Some(state) => State::Running(state.to_string()),
        None => State::Absent,
    }
}

/// Reconnects to a node whose connection dropped while a step ran.
pub struct Reconnect<'a> {
    pub target: &'a ssh::Target,
    pub opts: &'a ssh::Options,
}

/// Runs `script` on `r`'s node as the detached step `id` and waits for it
/// (at most `timeout`), returning its output like a command run over SSH.
/// A step still running from an earlier run is waited for, not started again.
/// Starting it and the first wait are one command: a step that ends
/// within [`WAIT_TENTHS`] costs one round trip.
pub async fn run(
    r: &mut Remote,
    reconnect: Option<&Reconnect<'_>>,
    id: &str,
    what: &str,
    script: &str,
    timeout: Duration,
) -> anyhow::Result<Output> {
    let deadline = Instant::now() + timeout;
    let mut first = start(r, reconnect, id, what, script).await?;
    // Each poll waits on the node for up to this long while the step runs.
    let poll = upgrade::poll_detached(id, WAIT_TENTHS);
    loop {
        // Whether this round's poll already waited on the node.
        let mut waited = false;
        let answer = match first.take() {
            Some(stdout) => Ok(stdout),
            None => r
                .run_root(&format!("{what}: result"), &poll, None)
                .await
                .map(|o| o.stdout),
        };
        match answer {
            Ok(stdout) => match parse_state(&stdout) {
                State::Finished { exit, output } => {
                    return Ok(Output {
                        exit: Some(exit),
                        signal: None,
                        stdout: output,
                        stderr: String::new(),
                    });
                }
                State::Running(_) => waited = true,
                State::Absent => bail!(
                    "{}: {what} ended without leaving a result in {} (was the node rebooted?)",
                    r.node(),
                    upgrade::STEPS_DIR
                ),
            },
            Err(e) if ssh::is_disconnected(&e) => {
                let Some(again) = reconnect else {
                    return Err(e);
                };
                // The step goes on without us; a new connection picks it up.
                if let Ok(s) = ssh::connect(again.target, again.opts).await {
                    *r = r.with_session(std::sync::Arc::new(s));
                }
            }
            Err(e) => return Err(e),
        }
        if Instant::now() >= deadline {
            bail!(
                "{}: {what} did not finish within {}; it may still be running on the node (unit {}). \
                 Run `fleetctl apply` again: it waits for it",
                r.node(),
                humantime::format_duration(timeout),
                upgrade::step_unit(id)
            );
        }
        if !waited {
            tokio::time::sleep(POLL).await;
        }
    }
}

/// The first answer of the command that starts a step and waits for it:
/// what follows its first line (`started`, or `resumed`, which the journal
/// is told: the step was already running).
fn started(r: &Remote, what: &str, stdout: &str) -> String {
    let (first, rest) = stdout.split_once('\n').unwrap_or((stdout, ""));
    if first.trim() == "resumed" {
        r.journal().event(
            "step-resumed",
            Some(r.node()),
            &format!("{what} is still running from an earlier run; waiting for it"),
        );
    }
    rest.to_string()
}

/// Starts the step's unit, unless it runs already, and waits for it the
/// first time, returning that answer. A connection that drops while the
/// start command runs leaves it unknown whether the unit started:
/// reconnect and ask, and start it only if it is not there (never a
/// second kubeadm beside one); then there is no first answer (`None`).
async fn start(
    r: &mut Remote,
    reconnect: Option<&Reconnect<'_>>,
    id: &str,
    what: &str,
    script: &str,
) -> anyhow::Result<Option<String>> {
    let command = upgrade::start_detached(id, what, script, WAIT_TENTHS);
    for attempt in 0..2 {
        match r.run_root(what, &command, None).await {
            Ok(out) => {
                let out = succeeded(r.node(), what, out)?;
                return Ok(Some(started(r, what, &out.stdout)));
            }
            Err(e) if attempt == 0 && ssh::is_disconnected(&e) && reconnect.is_some() => {
                let Some(again) = reconnect else {
                    return Err(e);
                };
                let s = ssh::connect(again.target, again.opts).await.map_err(|c| {
                    c.context(format!(
                        "{}: the connection dropped while {what} was being started, and \
                         reconnecting failed: it may be running on the node (unit {}); run \
                         `fleetctl apply` again, it waits for it",
                        r.node(),
                        upgrade::step_unit(id)
                    ))
                })?;
                *r = r.with_session(std::sync::Arc::new(s));
                let state = r
                    .run_root(
                        &format!("{what}: did it start?"),
                        &upgrade::poll_detached(id, 0),
                        None,
                    )
                    .await?;
                if parse_state(&state.stdout) != State::Absent {
                    return Ok(None);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_reads_running_finished_or_absent() {
        assert_eq!(
            parse_state("running active\n"),
            State::Running("active".into())
        );
        assert_eq!(
            parse_state("exit 0\n[upgrade] SUCCESS!\n"),
            State::Finished {
                exit: 0,
                output: "[upgrade] SUCCESS!\n".into()
            }
        );
        assert_eq!(
            parse_state("exit 1\n"),
            State::Finished {
                exit: 1,
                output: String::new()
            }
        );
        assert_eq!(parse_state("none\n"), State::Absent);
        assert_eq!(parse_state(""), State::Absent);
    }

    /// The wrapper the unit runs keeps the script's output and status in
    /// the result files, whatever the script does; the same command then
    /// answers with the result. A unit still running is not started again.
    #[test]
    fn the_detached_wrapper_records_output_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("bin");
        std::fs::create_dir(&fake).unwrap();
        let steps = dir.path().join("steps");
        let script = |unit_state: &str| {
            // systemd-run: run the command in the foreground, as the unit would.
            executable(
                &fake.join("systemd-run"),
                "#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n",
            );
            executable(
                &fake.join("systemctl"),
                &format!("#!/bin/sh\necho {unit_state}\n"),
            );
            let cmd = upgrade::start_detached("t", "a test", "echo out; echo err >&2; exit 3", 0)
                .replace(upgrade::STEPS_DIR, steps.to_str().unwrap());
            let out = std::process::Command::new("sh")
                .args(["-c", &cmd])
                .env(
                    "PATH",
                    format!("{}:{}", fake.display(), std::env::var("PATH").unwrap()),
                )
                .output()
                .unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(script("inactive"), "started\nexit 3\nout\nerr\n");
        assert_eq!(
            std::fs::read_to_string(steps.join("t.exit")).unwrap(),
            "3\n"
        );
        assert_eq!(
            std::fs::read_to_string(steps.join("t.log")).unwrap(),
            "out\nerr\n"
        );
        // Running from an earlier run: left alone, its results too.
        std::fs::remove_file(steps.join("t.exit")).unwrap();
        assert_eq!(script("active"), "resumed\nrunning active\n");
        assert!(!steps.join("t.exit").exists(), "not started again");
    }

    fn executable(path: &std::path::Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

//! node-init as systemd for the one service the sim runs: `kubelet.service`.
//! At boot it loads the unit from the merged `/usr` (no sysext, no unit:
//! nothing starts, and the node has no kubelet), builds the environment and
//! the command line afresh at every start (so a later `kubeadm upgrade`
//! that fixes `kubeadm-flags.env` is what the next start reads), spawns
//! `/usr/bin/kubelet`, and when the main process exits, waits
//! `kubelet_restart` seconds and starts it again (`Restart=always`,
//! `StartLimitInterval=0`). Every step is logged to the journal in
//! systemd's words and mirrored in the unit's state file for `systemctl`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::journal::{self, Entry};
use crate::provision::SYSUPDATE_DIR;
use crate::state::{Event, Shared};
use crate::tools::kubelet::{UNIT, UNIT_ENV};
use crate::unit::{self, Unit, UnitState};

/// systemd's PATH for services.
const SERVICE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin";

pub struct Kubelet {
    node: String,
    boot_id: String,
    restart_after: Duration,
    unit: Option<Unit>,
    main_pid: Option<i32>,
    restart_at: Option<Instant>,
    restarts: u32,
    command: Vec<String>,
    /// A light node: the kubelet's start runs inside node-init, no process.
    light: bool,
}

impl Kubelet {
    /// Loads the unit and starts it, as `multi-user.target` (which the
    /// sysext's drop-in makes uphold it) would at boot.
    pub fn boot(node: &str, boot_id: &str, restart_after: Duration, light: bool) -> Kubelet {
        let unit = match unit::load(Path::new("/"), UNIT) {
            Ok(u) => u,
            Err(e) => {
                eprintln!("node-init {node}: loading {UNIT}: {e:#}");
                None
            }
        };
        let mut k = Kubelet {
            node: node.to_string(),
            boot_id: boot_id.to_string(),
            restart_after,
            unit,
            main_pid: None,
            restart_at: None,
            restarts: 0,
            command: Vec::new(),
            light,
        };
        if k.unit.is_none() {
            // No kubelet on this node at all: on record, since a node left
            // without one is what an upgrade must never do.
            k.event("failed: Unit kubelet.service not found.");
            return k;
        }
        k.start();
        k
    }

    /// How long until a pending restart is due.
    pub fn next_timeout(&self) -> Option<Duration> {
        self.restart_at
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Restarts the service if its restart is due.
    pub fn tick(&mut self) {
        if self.restart_at.is_some_and(|at| Instant::now() >= at) {
            self.restart_at = None;
            self.restarts += 1;
            let n = self.restarts;
            self.journal(&[
                &format!("{UNIT}: Scheduled restart job, restart counter is at {n}."),
                &format!("Stopped {}.", self.title()),
            ]);
            self.start();
        }
    }

    /// A light node's kubelet: its start (flags, config, events, the status
    /// it posts) done by node-init itself, with the merged image's version,
    /// and no process left running. A failed start is restarted as usual.
    fn start_in_process(&mut self, args: &[String]) {
        let version = std::fs::read(crate::state::NODE_FILE)
            .ok()
            .and_then(|b| serde_json::from_slice::<crate::state::NodeBoot>(&b).ok())
            .map(|b| b.kubernetes)
            .filter(|v| !v.is_empty());
        let mut input = std::io::empty();
        let mut input = std::io::BufReader::new(&mut input);
        let (mut out, mut err) = (std::io::stderr(), std::io::stderr());
        let mut env = crate::tools::Env {
            root: "/".into(),
            input: &mut input,
            out: &mut out,
            err: &mut err,
            utf8: false,
            tool_version: version,
            unit: Some(UNIT.into()),
            daemon: false,
        };
        let code = crate::tools::kubelet::run(&mut env, args).unwrap_or(1);
        if code == 0 {
            self.write_state(UnitState {
                active: "active".into(),
                sub: "running".into(),
                since: crate::state::now(),
                main_pid: 1,
                command: self.command.clone(),
                exit: None,
                result: None,
                restarts: self.restarts,
                description: None,
            });
        } else {
            self.journal(&[
                &format!("{UNIT}: Main process exited, code=exited, status=1/FAILURE"),
                &format!("{UNIT}: Failed with result 'exit-code'."),
            ]);
            self.schedule_restart(Some("1/FAILURE".into()), "exit-code");
        }
    }

    /// A child of node-init exited; true if it was the service's main process.
    pub fn reaped(&mut self, pid: i32, wait_status: i32) -> bool {
        if self.main_pid != Some(pid) {
            return false;
        }
        self.main_pid = None;
        let (code, status) = describe(wait_status);
        let result = result_of(code, &status);
        if result == "success" {
            self.journal(&[&format!("{UNIT}: Deactivated successfully.")]);
        } else {
            self.journal(&[
                &format!("{UNIT}: Main process exited, code={code}, status={status}"),
                &format!("{UNIT}: Failed with result '{result}'."),
            ]);
        }
        self.stopped_running(&format!(
            "main process exited, code={code}, status={status}"
        ));
        // Restart=always: a clean exit is restarted too.
        self.schedule_restart(Some(status), result);
        true
    }

    fn title(&self) -> String {
        match self.unit.as_ref().map(|u| u.description.as_str()) {
            Some(d) if !d.is_empty() => format!("{UNIT} - {d}"),
            _ => UNIT.to_string(),
        }
    }

    fn start(&mut self) {
        let Some(unit) = self.unit.clone() else {
            return;
        };
        let env = match unit::environment(&unit, Path::new("/")) {
            Ok(env) => env,
            Err(msg) => {
                self.journal(&[
                    &format!("{UNIT}: {msg}"),
                    &format!("{UNIT}: Failed with result 'resources'."),
                    &format!("Failed to start {}.", self.title()),
                ]);
                self.event(&format!("failed: {msg}"));
                self.schedule_restart(None, "resources");
                return;
            }
        };
        let exec = unit.exec_start.clone().unwrap_or_default();
        let argv = unit::command_line(&exec, &env);
        let unset = unit::unset_references(&exec, &env);
        self.command = argv.clone();
        let Some((program, args)) = argv.split_first() else {
            self.event("failed: kubelet.service has no ExecStart=");
            return;
        };
        // Logged before the fork, so it comes before the kubelet's own lines.
        self.journal(&[&format!("Started {}.", self.title())]);
        if self.light {
            self.start_in_process(args);
            return;
        }
        let forked_at = crate::state::now();
        let spawned = Command::new(program)
            .args(args)
            .env_clear()
            .envs(env)
            .env("PATH", SERVICE_PATH)
            .env(UNIT_ENV, UNIT)
            .stdin(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => {
                // Reaped by node-init's waitpid(-1), like every child of init.
                let pid = child.id() as i32;
                self.main_pid = Some(pid);
                // What systemd's forked child logs before exec, under the
                // executable's name in parentheses.
                let entries: Vec<Entry> = unset
                    .iter()
                    .map(|name| Entry {
                        t: forked_at,
                        boot: self.boot_id.clone(),
                        unit: UNIT.into(),
                        ident: "(kubelet)".into(),
                        pid,
                        message: format!(
                            "{UNIT}: Referenced but unset environment variable evaluates to an empty string: {name}"
                        ),
                    })
                    .collect();
                if let Err(e) = journal::append(Path::new(journal::JOURNAL_FILE), &entries) {
                    eprintln!("node-init {}: writing the journal: {e:#}", self.node);
                }
                self.write_state(UnitState {
                    active: "active".into(),
                    sub: "running".into(),
                    since: crate::state::now(),
                    main_pid: pid,
                    command: self.command.clone(),
                    exit: None,
                    result: None,
                    restarts: self.restarts,
                    description: None,
                });
            }
            Err(e) => {
                let why = match e.kind() {
                    std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
                    _ => e.to_string(),
                };
                self.journal(&[
                    &format!("{UNIT}: Failed to locate executable {program}: {why}"),
                    &format!("{UNIT}: Failed at step EXEC spawning {program}: {why}"),
                    &format!("{UNIT}: Main process exited, code=exited, status=203/EXEC"),
                    &format!("{UNIT}: Failed with result 'exit-code'."),
                ]);
                self.event(&format!("failed: {program}: {why}"));
                self.schedule_restart(Some("203/EXEC".into()), "exit-code");
            }
        }
    }

    fn schedule_restart(&mut self, exit: Option<String>, result: &str) {
        self.restart_at = Some(Instant::now() + self.restart_after);
        self.write_state(UnitState {
            active: "activating".into(),
            sub: "auto-restart".into(),
            since: crate::state::now(),
            main_pid: self.main_pid.unwrap_or(0),
            command: self.command.clone(),
            exit,
            result: Some(result.to_string()),
            restarts: self.restarts,
            description: None,
        });
    }

    /// A kubelet that had started and posted status is gone: the API stops
    /// seeing it (a kubelet that failed its start said so itself).
    fn stopped_running(&self, why: &str) {
        let shared = Shared::in_node();
        let this_boot = |n: &crate::state::ClusterNode| {
            n.kubelet
                .as_ref()
                .is_some_and(|k| k.boot_id == self.boot_id)
        };
        let running = match shared.cluster() {
            Ok(c) => c
                .nodes
                .get(&self.node)
                .filter(|n| this_boot(n))
                .map(|n| n.kubelet_version.clone()),
            Err(e) => {
                eprintln!("node-init {}: reading the cluster: {e:#}", self.node);
                None
            }
        };
        let Some(version) = running else {
            return;
        };
        // On the record before the Node changes, as for a start, so whoever
        // waits for the change finds the event already in the log. Only this
        // node-init changes this boot's kubelet, so nothing moves in between.
        self.event_with(&format!("failed: {why}"), Some(version));
        let stopped = shared.update_cluster(|c| {
            if let Some(n) = c.nodes.get_mut(&self.node)
                && this_boot(n)
            {
                n.kubelet = None;
                c.resource_version += 1;
            }
            Ok(())
        });
        if let Err(e) = stopped {
            eprintln!("node-init {}: updating the cluster: {e:#}", self.node);
        }
    }

    fn write_state(&self, state: UnitState) {
        if let Err(e) = unit::write_state(Path::new("/"), UNIT, &state) {
            eprintln!("node-init {}: {e:#}", self.node);
        }
    }

    fn journal(&self, lines: &[&str]) {
        let now = crate::state::now();
        let entries: Vec<Entry> = lines
            .iter()
            .map(|l| Entry {
                t: now,
                boot: self.boot_id.clone(),
                unit: UNIT.into(),
                ident: "systemd".into(),
                pid: 1,
                message: l.to_string(),
            })
            .collect();
        if let Err(e) = journal::append(Path::new(journal::JOURNAL_FILE), &entries) {
            eprintln!("node-init {}: writing the journal: {e:#}", self.node);
        }
    }

    fn event(&self, result: &str) {
        self.event_with(result, None);
    }

    fn event_with(&self, result: &str, version: Option<String>) {
        let event = Event {
            t: crate::state::now(),
            node: self.node.clone(),
            argv: vec!["(kubelet)".into()],
            result: result.to_string(),
            pins: crate::pins::kubernetes_pins(Path::new(SYSUPDATE_DIR)),
            version,
            ..Default::default()
        };
        if let Err(e) = Shared::in_node().record(&event) {
            eprintln!("node-init {}: recording (kubelet): {e:#}", self.node);
        }
    }
}

/// systemd's `code=` and `status=` for a wait status.
fn describe(wait_status: i32) -> (&'static str, String) {
    if libc::WIFEXITED(wait_status) {
        let code = libc::WEXITSTATUS(wait_status);
        let name = if code == 0 { "SUCCESS" } else { "FAILURE" };
        ("exited", format!("{code}/{name}"))
    } else {
        let sig = libc::WTERMSIG(wait_status);
        let name = match sig {
            libc::SIGKILL => "KILL",
            libc::SIGTERM => "TERM",
            libc::SIGSEGV => "SEGV",
            libc::SIGABRT => "ABRT",
            _ => "SIGNAL",
        };
        ("killed", format!("{sig}/{name}"))
    }
}

/// systemd's `Result=` for how the main process ended.
fn result_of(code: &str, status: &str) -> &'static str {
    match code {
        "exited" if status.starts_with("0/") => "success",
        "exited" => "exit-code",
        _ => "signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_read_as_systemd_prints_them() {
        assert_eq!(describe(1 << 8), ("exited", "1/FAILURE".to_string()));
        assert_eq!(describe(0), ("exited", "0/SUCCESS".to_string()));
        assert_eq!(describe(libc::SIGKILL), ("killed", "9/KILL".to_string()));
        assert_eq!(result_of("exited", "1/FAILURE"), "exit-code");
        assert_eq!(result_of("exited", "0/SUCCESS"), "success");
        assert_eq!(result_of("killed", "9/KILL"), "signal");
    }
}

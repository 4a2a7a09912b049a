//! `systemd-run --unit=NAME [--description=TEXT] [--collect] [--quiet] -- CMD…`:
//! a transient service, as systemd ≥ 252 runs one for these options.
//!
//! - It returns as soon as the unit has started (the default `Type=simple`:
//!   the start job is done once the process is forked), 0, printing
//!   `Running as unit: NAME; invocation ID: …` on stderr unless `--quiet`.
//! - The process is the manager's, not the caller's: here a small unit
//!   manager (this binary as `fleetsim-unit`) in its own session, reparented
//!   to the node's PID 1 once `systemd-run` exits, runs the command with
//!   systemd's service environment (`PATH` only, `/` as working directory,
//!   stdin `/dev/null`, default signal dispositions) and sends its stdout
//!   and stderr to the journal. Cutting the SSH session that started it
//!   does not touch it; a reboot does.
//! - The unit stays loaded while it runs; `systemctl is-active` says
//!   `active`. When the main process ends, a success is unloaded (garbage
//!   collected); a failure stays loaded as `failed` unless `--collect`
//!   (`CollectMode=inactive-or-failed`) unloads it too. Starting a name
//!   that is still loaded fails with systemd's `Failed to start transient
//!   service unit: Unit NAME was already loaded or has a fragment file.`
//! - Without root (and no polkit agent) it fails with `Failed to start
//!   transient service unit: Interactive authentication required.`
//!
//! Every other option is refused as unsupported.

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::util::hex_of;
use super::{Env, complain};
use crate::journal::{self, Entry};
use crate::unit::{self, UnitState};

const NAME: &str = "systemd-run";
/// The argv[0] the unit manager runs under (dispatched in main.rs).
pub const MANAGER: &str = "fleetsim-unit";
/// systemd's PATH for services.
const SERVICE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin";

struct Cli {
    unit: String,
    description: Option<String>,
    collect: bool,
    quiet: bool,
    command: Vec<String>,
}

fn parse(args: &[String]) -> Option<Cli> {
    let mut unit = None;
    let mut description = None;
    let (mut collect, mut quiet) = (false, false);
    let mut it = args.iter();
    let mut command = Vec::new();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--unit=") {
            unit = Some(v.to_string());
        } else if a == "--unit" || a == "-u" {
            unit = Some(it.next()?.clone());
        } else if let Some(v) = a.strip_prefix("--description=") {
            description = Some(v.to_string());
        } else if a == "--description" {
            description = Some(it.next()?.clone());
        } else if a == "--collect" || a == "-G" {
            collect = true;
        } else if a == "--quiet" || a == "-q" {
            quiet = true;
        } else if a == "--" {
            command.extend(it.by_ref().cloned());
        } else if a.starts_with('-') {
            return None;
        } else {
            command.push(a.clone());
            command.extend(it.by_ref().cloned());
        }
    }
    let mut unit = unit?;
    if command.is_empty() || !valid_unit(&unit) {
        return None;
    }
    // systemd-run mangles the name with unit_name_mangle_with_suffix(…,
    // ".service"): a name without a known unit type after its last dot
    // (none, or `v1.35.3`'s `3`) gets `.service` appended.
    if !has_unit_type(&unit) {
        unit.push_str(".service");
    }
    unit.ends_with(".service").then_some(Cli {
        unit,
        description,
        collect,
        quiet,
        command,
    })
}

/// The unit types systemd knows (`unit_type_table`).
fn has_unit_type(name: &str) -> bool {
    const TYPES: [&str; 11] = [
        "service",
        "socket",
        "target",
        "device",
        "mount",
        "automount",
        "swap",
        "timer",
        "path",
        "slice",
        "scope",
    ];
    name.rsplit_once('.')
        .is_some_and(|(_, suffix)| TYPES.contains(&suffix))
}

fn valid_unit(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 256
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c))
}

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let Some(cli) = parse(args) else {
        return Ok(env.unsupported(NAME, args));
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let msg = "Failed to start transient service unit: Interactive authentication required.";
        complain!(env, "{msg}");
        return Ok(1);
    }
    let path = unit::state_path(&env.root, &cli.unit);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Claimed atomically, so two callers cannot both start the name.
    if OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .is_err()
    {
        let msg = format!(
            "Failed to start transient service unit: Unit {} was already loaded or has a fragment file.",
            cli.unit
        );
        complain!(env, "{msg}");
        env.record(NAME, args, &msg);
        return Ok(1);
    }
    let starting = UnitState {
        active: "activating".into(),
        sub: "start".into(),
        since: crate::state::now(),
        main_pid: 0,
        command: cli.command.clone(),
        exit: None,
        result: None,
        restarts: 0,
        description: cli.description.clone(),
    };
    unit::write_state(&env.root, &cli.unit, &starting)?;
    if env.daemon {
        spawn_manager(&cli)?;
        wait_started(&env.root, &cli.unit);
    }
    if !cli.quiet {
        let invocation = hex_of(&format!("{} {}", cli.unit, crate::state::now()), 32);
        complain!(
            env,
            "Running as unit: {}; invocation ID: {invocation}",
            cli.unit
        );
    }
    env.record(NAME, args, "ok");
    Ok(0)
}

fn spawn_manager(cli: &Cli) -> Result<()> {
    let mut cmd = Command::new("/proc/self/exe");
    cmd.arg0(MANAGER)
        .arg(&cli.unit)
        .arg(if cli.collect { "collect" } else { "keep" })
        .arg(cli.description.clone().unwrap_or_default())
        .arg("--")
        .args(&cli.command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // Out of the caller's session: no terminal, no SIGHUP from it.
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn().context("starting the unit's manager")?;
    Ok(())
}

/// Until the main process is forked (`Type=simple`'s start), at most 5 s.
fn wait_started(root: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match unit::read_state(root, name) {
            Ok(Some(s)) if s.main_pid != 0 || s.active != "activating" => return,
            Ok(None) => return,
            _ => std::thread::sleep(Duration::from_millis(2)),
        }
    }
}

/// The unit manager: `fleetsim-unit NAME collect|keep DESCRIPTION -- CMD…`.
/// Runs the command as the service's main process, logs its output to the
/// journal, and settles the unit's state when it ends.
pub fn manage(args: &[String]) -> i32 {
    let [name, collect, description, dashes, command @ ..] = args else {
        return 2;
    };
    if dashes != "--" || command.is_empty() {
        return 2;
    }
    let collect = collect == "collect";
    let root = Path::new("/");
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let log = |ident: &str, pid: i32, message: String| {
        let entry = Entry {
            t: crate::state::now(),
            boot: boot.clone(),
            unit: name.clone(),
            ident: ident.to_string(),
            pid,
            message,
        };
        let _ = journal::append(Path::new(journal::JOURNAL_FILE), &[entry]);
    };
    let title = if description.is_empty() {
        name.clone()
    } else {
        format!("{name} - {description}")
    };
    let (reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(_) => return 1,
    };
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .env_clear()
        .env("PATH", SERVICE_PATH)
        .current_dir("/")
        .stdin(Stdio::null());
    match writer.try_clone() {
        Ok(w) => {
            cmd.stdout(w).stderr(writer);
        }
        Err(_) => return 1,
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // systemd resets every signal for the processes it starts.
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            for sig in [libc::SIGPIPE, libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    let state =
        |active: &str, sub: &str, pid: i32, exit: Option<String>, result: Option<String>| {
            UnitState {
                active: active.into(),
                sub: sub.into(),
                since: crate::state::now(),
                main_pid: pid,
                command: command.to_vec(),
                exit,
                result,
                restarts: 0,
                description: (!description.is_empty()).then(|| description.clone()),
            }
        };
    log("systemd", 1, format!("Started {title}."));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let why = if e.kind() == std::io::ErrorKind::NotFound {
                "No such file or directory".to_string()
            } else {
                e.to_string()
            };
            log(
                "systemd",
                1,
                format!("{name}: Failed to locate executable {}: {why}", command[0]),
            );
            log(
                "systemd",
                1,
                format!("{name}: Main process exited, code=exited, status=203/EXEC"),
            );
            log(
                "systemd",
                1,
                format!("{name}: Failed with result 'exit-code'."),
            );
            settle(
                root,
                name,
                collect,
                state(
                    "failed",
                    "failed",
                    0,
                    Some("203/EXEC".into()),
                    Some("exit-code".into()),
                ),
            );
            return 0;
        }
    };
    drop(cmd);
    let pid = child.id() as i32;
    let _ = unit::write_state(root, name, &state("active", "running", pid, None, None));
    let ident = Path::new(&command[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for line in BufReader::new(reader).lines().map_while(|l| l.ok()) {
        log(&ident, pid, line);
    }
    let status = child.wait();
    let (code, text) = match status {
        Ok(s) if s.code() == Some(0) => {
            log("systemd", 1, format!("{name}: Deactivated successfully."));
            let _ = fs::remove_file(unit::state_path(root, name));
            return 0;
        }
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => ("exited", format!("{c}/{}", exit_name(c))),
            (None, Some(sig)) => ("killed", format!("{sig}/{}", signal_name(sig))),
            _ => ("exited", "1/FAILURE".to_string()),
        },
        Err(_) => ("exited", "1/FAILURE".to_string()),
    };
    let result = if code == "killed" {
        "signal"
    } else {
        "exit-code"
    };
    log(
        "systemd",
        1,
        format!("{name}: Main process exited, code={code}, status={text}"),
    );
    log(
        "systemd",
        1,
        format!("{name}: Failed with result '{result}'."),
    );
    settle(
        root,
        name,
        collect,
        state("failed", "failed", pid, Some(text), Some(result.into())),
    );
    0
}

/// A failed unit stays loaded unless collected.
fn settle(root: &Path, name: &str, collect: bool, failed: UnitState) {
    if collect {
        let _ = fs::remove_file(unit::state_path(root, name));
    } else {
        let _ = unit::write_state(root, name, &failed);
    }
}

/// systemd's names of the LSB exit codes in `status=1/FAILURE`.
fn exit_name(code: i32) -> &'static str {
    match code {
        1 => "FAILURE",
        2 => "INVALIDARGUMENT",
        3 => "NOTIMPLEMENTED",
        4 => "NOPERMISSION",
        5 => "NOTINSTALLED",
        6 => "NOTCONFIGURED",
        7 => "NOTRUNNING",
        _ => "n/a",
    }
}

/// systemd's short signal names in `status=15/TERM`.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "HUP",
        libc::SIGINT => "INT",
        libc::SIGKILL => "KILL",
        libc::SIGPIPE => "PIPE",
        libc::SIGTERM => "TERM",
        libc::SIGSEGV => "SEGV",
        libc::SIGABRT => "ABRT",
        _ => "n/a",
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;

    #[test]
    fn a_name_without_a_unit_type_gets_service_as_systemd_mangles_it() {
        let cli = |unit: &str| {
            super::parse(&[format!("--unit={unit}"), "--".into(), "true".into()]).map(|c| c.unit)
        };
        assert_eq!(cli("a-v1.35.3").as_deref(), Some("a-v1.35.3.service"));
        assert_eq!(
            cli("a-v1.35.3.service").as_deref(),
            Some("a-v1.35.3.service")
        );
        assert_eq!(cli("plain").as_deref(), Some("plain.service"));
        assert_eq!(cli("x.timer"), None, "only services are supported");
    }

    #[test]
    fn a_name_still_loaded_is_refused_as_systemd_does() {
        let node = Node::worker("w1", "v1.35.3");
        let args = [
            "--unit=fleetctl-abc",
            "--description=fleetctl: kubeadm upgrade node",
            "--collect",
            "--quiet",
            "--",
            "sh",
            "-c",
            "true",
        ];
        let r = node.run("systemd-run", &args);
        assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (0, "", ""));
        let r = node.run("systemd-run", &args);
        assert_eq!(r.code, 1);
        assert_eq!(
            r.stderr,
            "Failed to start transient service unit: Unit fleetctl-abc.service was already loaded or has a fragment file.\n"
        );
        let r = node.run("systemd-run", &["--scope", "--unit=x", "true"]);
        assert!(
            r.stderr
                .starts_with("fleetsim: unsupported: systemd-run --scope")
        );
        let r = node.run("systemd-run", &["--unit=y", "true"]);
        assert!(
            r.stderr
                .starts_with("Running as unit: y.service; invocation ID: "),
            "{}",
            r.stderr
        );
    }
}

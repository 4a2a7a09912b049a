//! `systemctl`, for the verbs a Flatcar operator (and fleetctl) uses on a
//! node: `start systemd-sysupdate`, `reboot`, `is-active`, and `status
//! update-engine|kubelet`. The kubelet's state is the one node-init keeps
//! for `kubelet.service` (`crate::service`): `active`, `activating` while
//! waiting to restart after a failure, or no such unit without a sysext. Starting systemd-sysupdate runs the component updates
//! the way sysext-bakery's drop-in does — canonicalize the extension
//! symlink, update, compare — and touches /run/reboot-required only when a
//! symlink actually moved, so a node is never marked for a pointless reboot.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use super::util::{glog_prefix, systemd_ago, systemd_timestamp};
use super::{Env, OS_UPDATE_FILE, complain, conf_files, say, sysupdate};
use crate::{journal, unit};

const NAME: &str = "systemctl";
const KUBELET: &str = super::kubelet::UNIT;

/// Units that run on every simulated node (what `is-active` calls active);
/// the kubelet is not among them: it runs only when it could start.
const ACTIVE_UNITS: &[&str] = &[
    "containerd.service",
    "sshd.service",
    "systemd-networkd.service",
    "systemd-resolved.service",
    "systemd-sysupdate.timer",
    "systemd-timesyncd.service",
    "update-engine.service",
];

/// update-engine's main PID in `status` output: stable, since nothing else knows it.
const UPDATE_ENGINE_PID: u32 = 797;

struct Cli<'a> {
    quiet: bool,
    verb: &'a str,
    units: Vec<&'a str>,
    /// `-p`/`--property` names, in the order given.
    properties: Vec<String>,
    /// `--value`.
    value: bool,
}

fn parse_args(args: &[String]) -> Option<Cli<'_>> {
    let mut quiet = false;
    let mut value = false;
    let mut properties = Vec::new();
    let mut words = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--no-pager" | "-l" | "--full" | "--no-ask-password" => {}
            "-q" | "--quiet" => quiet = true,
            "--value" => value = true,
            "-p" | "--property" => properties.extend(it.next()?.split(',').map(String::from)),
            s if s.starts_with("--property=") => {
                properties.extend(s["--property=".len()..].split(',').map(String::from))
            }
            s if s.starts_with("-p") => properties.extend(s[2..].split(',').map(String::from)),
            s if s.starts_with('-') => return None,
            s => words.push(s),
        }
    }
    let (verb, units) = words.split_first()?;
    Some(Cli {
        quiet,
        verb,
        units: units.to_vec(),
        properties,
        value,
    })
}

/// `foo` → `foo.service`; names with a unit suffix stay as they are.
fn unit_name(u: &str) -> String {
    if u.contains('.') {
        u.to_string()
    } else {
        format!("{u}.service")
    }
}

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let Some(cli) = parse_args(args) else {
        return Ok(env.unsupported(NAME, args));
    };
    let units: Vec<String> = cli.units.iter().map(|u| unit_name(u)).collect();
    if (!cli.properties.is_empty() || cli.value) && cli.verb != "show" {
        return Ok(env.unsupported(NAME, args));
    }
    match (cli.verb, units.as_slice()) {
        ("show", [u]) if !cli.properties.is_empty() => show(env, args, u, &cli),
        ("start", [u]) if u == "systemd-sysupdate.service" => Ok(start_sysupdate(env, args)),
        ("reboot", []) => Ok(reboot(env, args)),
        ("is-active", [_, ..]) => is_active(env, &units, cli.quiet),
        ("status", [u]) if u == "update-engine.service" => status_update_engine(env),
        ("status", [u]) if u == KUBELET => status_kubelet(env),
        _ => Ok(env.unsupported(NAME, args)),
    }
}

/// The resolved target of an extension symlink (`readlink --canonicalize`).
fn canonical(env: &Env, link: &str) -> Option<PathBuf> {
    fs::canonicalize(env.path(link)).ok()
}

/// What `systemd-sysupdate.service` with sysext-bakery's drop-ins runs:
/// each component's update (kubernetes, and containerd when configured),
/// the default update when /etc/sysupdate.d has definitions, then the
/// reboot marker if a symlink moved. Output goes to the journal, not here.
fn start_sysupdate(env: &mut Env, args: &[String]) -> i32 {
    let mut components = vec!["kubernetes"];
    if env.path("/etc/sysupdate.containerd.d").is_dir() {
        components.push("containerd");
    }
    let links: Vec<String> = components
        .iter()
        .map(|c| format!("/etc/extensions/{c}.raw"))
        .collect();
    let before: Vec<Option<PathBuf>> = links.iter().map(|l| canonical(env, l)).collect();
    let mut runs: Vec<Option<&str>> = components.iter().map(|c| Some(*c)).collect();
    if !conf_files(&env.path("/etc/sysupdate.d")).is_empty() {
        runs.push(None);
    }
    for component in runs {
        let source = sysupdate::Source::Component(component.map(str::to_string));
        let report = sysupdate::update(env, &source);
        if let Some(error) = report.error {
            return unit_failed(env, args, &error, report.unsupported);
        }
    }
    let moved = links
        .iter()
        .zip(&before)
        .any(|(l, b)| canonical(env, l) != *b);
    if moved && let Err(e) = touch(env, "/run/reboot-required") {
        let msg = format!("touching /run/reboot-required: {e}");
        return unit_failed(env, args, &msg, false);
    }
    env.record(NAME, args, "ok");
    0
}

fn touch(env: &Env, abs: &str) -> std::io::Result<()> {
    let path = env.path(abs);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
}

fn unit_failed(env: &mut Env, args: &[String], error: &str, unsupported: bool) -> i32 {
    if unsupported {
        // Not something the real node would do: make it loud, not just journaled.
        complain!(env, "{error}");
    }
    complain!(
        env,
        "Job for systemd-sysupdate.service failed because the control process exited with error code.\n\
         See \"systemctl status systemd-sysupdate.service\" and \"journalctl -xeu systemd-sysupdate.service\" for details."
    );
    env.record(
        NAME,
        args,
        &format!("systemd-sysupdate.service failed: {error}"),
    );
    1
}

/// `systemctl reboot` hands over to the node's `/usr/sbin/reboot`, which the
/// supervisor provides; that tool records the reboot, so nothing is logged here
/// unless handing over fails.
fn reboot(env: &mut Env, args: &[String]) -> i32 {
    let path = env.path("/usr/sbin/reboot");
    let _ = env.out.flush();
    let _ = env.err.flush();
    let error = Command::new(&path).arg0("reboot").exec();
    let msg = format!(
        "fleetsim: systemctl reboot: cannot run {}: {error}",
        path.display()
    );
    complain!(env, "{msg}");
    env.record(NAME, args, &msg);
    1
}

/// One line per unit; exit 0 when at least one is active, as the man page
/// says, else 3 (also for units that do not exist).
/// Units a Flatcar node has unit files for that are not running: they are
/// loaded (`inactive`, exit 3), where a name with no unit file is
/// `not-found` (`inactive`, exit 4 since systemd 253).
const INACTIVE_UNITS: &[&str] = &["locksmithd.service", "systemd-sysupdate.service"];

/// `is-active`: each unit's state; exit 0 if any is active, else 4 when
/// none of them has a unit file (systemd ≥ 253, systemd/systemd#25689:
/// LSB's "status unknown"), else 3.
fn is_active(env: &mut Env, units: &[String], quiet: bool) -> Result<i32> {
    let mut any = false;
    let mut all_not_found = true;
    for u in units {
        let (state, found) = if let Some(s) = unit::read_state(&env.root, u)? {
            (s.active, true)
        } else if ACTIVE_UNITS.contains(&u.as_str()) {
            ("active".to_string(), true)
        } else if u == KUBELET {
            (
                "inactive".to_string(),
                unit::load(&env.root, KUBELET)?.is_some(),
            )
        } else {
            ("inactive".to_string(), INACTIVE_UNITS.contains(&u.as_str()))
        };
        any |= state == "active";
        all_not_found &= !found;
        if !quiet {
            say!(env, "{state}");
        }
    }
    Ok(if any {
        0
    } else if all_not_found {
        4
    } else {
        3
    })
}

/// The properties `show` emulates, in the order systemd prints them: the
/// order of its D-Bus reply, the service's own interface first, then the
/// unit's — not the order of `-p` (systemd/systemd#4907, #28205).
const SHOWN: &[&str] = &[
    "Type",
    "MainPID",
    "Result",
    "ExecMainCode",
    "ExecMainStatus",
    // How often systemd restarted the unit in this boot (systemd ≥ 235).
    "NRestarts",
    "Id",
    "Description",
    "LoadState",
    "ActiveState",
    "SubState",
];

/// `systemctl show -p P… [--value] UNIT`: a unit that is not loaded (never
/// started, or garbage-collected after it ended) shows systemd's defaults,
/// `LoadState=not-found`, `ActiveState=inactive`, `SubState=dead`,
/// `Result=success`, and `show` still exits 0.
fn show(env: &mut Env, args: &[String], u: &str, cli: &Cli) -> Result<i32> {
    if cli.properties.iter().any(|p| !SHOWN.contains(&p.as_str())) {
        return Ok(env.unsupported(NAME, args));
    }
    let state = unit::read_state(&env.root, u)?;
    let always = ACTIVE_UNITS.contains(&u);
    let (load, active, sub) = match &state {
        Some(s) => ("loaded", s.active.clone(), s.sub.clone()),
        None if always => ("loaded", "active".into(), "running".into()),
        None => ("not-found", "inactive".into(), "dead".into()),
    };
    let exit = state.as_ref().and_then(|s| s.exit.clone());
    // `status=15/TERM` is a signal (code 2, CLD_KILLED), else an exit (1).
    let (code, status) = match exit.as_deref().and_then(|e| e.split_once('/')) {
        Some((n, name)) if name.chars().all(|c| c.is_ascii_uppercase()) && signal_like(name) => {
            ("2", n.to_string())
        }
        Some((n, _)) => ("1", n.to_string()),
        None => ("0", "0".to_string()),
    };
    let description = state
        .as_ref()
        .and_then(|s| s.description.clone())
        .unwrap_or_else(|| u.to_string());
    let main_pid = match &state {
        Some(s) if s.active == "active" => s.main_pid.to_string(),
        _ => "0".into(),
    };
    for p in SHOWN
        .iter()
        .filter(|p| cli.properties.iter().any(|q| q == *p))
    {
        let v = match *p {
            "Type" => "simple".to_string(),
            "MainPID" => main_pid.clone(),
            "Result" => state
                .as_ref()
                .and_then(|s| s.result.clone())
                .unwrap_or_else(|| "success".into()),
            "ExecMainCode" => code.to_string(),
            "ExecMainStatus" => status.clone(),
            "NRestarts" => state.as_ref().map_or(0, |s| s.restarts).to_string(),
            "Id" => u.to_string(),
            "Description" => description.clone(),
            "LoadState" => load.to_string(),
            "ActiveState" => active.clone(),
            _ => sub.clone(),
        };
        if cli.value {
            say!(env, "{v}");
        } else {
            say!(env, "{p}={v}");
        }
    }
    Ok(0)
}

fn signal_like(name: &str) -> bool {
    matches!(
        name,
        "HUP" | "INT" | "KILL" | "PIPE" | "TERM" | "SEGV" | "ABRT"
    )
}

/// `systemctl status kubelet`: systemd's header for the unit, then its
/// last journal lines of this boot. Exit 0 running, 3 not, 4 no such unit.
fn status_kubelet(env: &mut Env) -> Result<i32> {
    let Some(u) = unit::load(&env.root, KUBELET)? else {
        complain!(env, "Unit {KUBELET} could not be found.");
        return Ok(4);
    };
    let boot = env.boot()?;
    let state = unit::read_state(&env.root, KUBELET)?;
    let now = crate::state::now();
    let (dot, branch) = if env.utf8 {
        ("●", "└─")
    } else {
        ("*", "`-")
    };
    say!(env, "{dot} {KUBELET} - {}", u.description);
    say!(
        env,
        "     Loaded: loaded ({}; enabled; preset: enabled)",
        u.fragment
    );
    if let Some((first, rest)) = u.drop_ins.split_first() {
        say!(env, "    Drop-In: {}.d", u.fragment);
        say!(env, "             {branch}{first}");
        for d in rest {
            say!(env, "               {d}");
        }
    }
    let running = match &state {
        Some(s) if s.active == "active" => {
            say!(
                env,
                "     Active: active (running) since {}; {}",
                systemd_timestamp(s.since),
                systemd_ago(now - s.since)
            );
            true
        }
        Some(s) => {
            let result = s.result.as_deref().unwrap_or("exit-code");
            say!(
                env,
                "     Active: {} ({}) (Result: {result}) since {}; {}",
                s.active,
                s.sub,
                systemd_timestamp(s.since),
                systemd_ago(now - s.since)
            );
            false
        }
        None => {
            say!(env, "     Active: inactive (dead)");
            false
        }
    };
    if !u.documentation.is_empty() {
        say!(env, "       Docs: {}", u.documentation.join(" "));
    }
    if let Some(s) = &state {
        if running {
            say!(env, "   Main PID: {} (kubelet)", s.main_pid);
            say!(env, "     CGroup: /system.slice/{KUBELET}");
            say!(
                env,
                "             {branch}{} {}",
                s.main_pid,
                s.command.join(" ")
            );
        } else if let Some(exit) = &s.exit {
            let exec = u.exec_start.as_deref().unwrap_or("");
            say!(
                env,
                "    Process: {} ExecStart={exec} (code=exited, status={exit})",
                s.main_pid
            );
            say!(
                env,
                "   Main PID: {} (code=exited, status={exit})",
                s.main_pid
            );
        }
    }
    let lines: Vec<String> = journal::read(&env.path(journal::JOURNAL_FILE))?
        .into_iter()
        .filter(|e| e.unit == KUBELET && e.boot == boot.boot_id)
        .map(|e| journal::short_line(&e, &boot.name))
        .collect();
    if !lines.is_empty() {
        say!(env, "");
        for l in &lines[lines.len().saturating_sub(10)..] {
            say!(env, "{l}");
        }
    }
    Ok(if running { 0 } else { 3 })
}

/// The few lines of `systemctl status update-engine` an operator reads: is it
/// running, and what did it last log (idle, or an update applied).
fn status_update_engine(env: &mut Env) -> Result<i32> {
    let boot = env.boot()?;
    let staged = read_os_update(env)?;
    let now = crate::state::now();
    let pid = UPDATE_ENGINE_PID;
    say!(env, "● update-engine.service - Update Engine");
    say!(
        env,
        "     Loaded: loaded (/usr/lib/systemd/system/update-engine.service; static)"
    );
    say!(
        env,
        "     Active: active (running) since {}; {}",
        systemd_timestamp(boot.booted_at),
        systemd_ago(now - boot.booted_at)
    );
    say!(env, "   Main PID: {pid} (update_engine)");
    say!(env, "     CGroup: /system.slice/update-engine.service");
    say!(
        env,
        "             └─{pid} /usr/sbin/update_engine -foreground -logtostderr"
    );
    say!(env, "");
    let at = boot.booted_at + 30.0;
    let stamp = journal::short_time(at);
    let prefix = format!("{stamp} {} update_engine[{pid}]:", boot.name);
    match staged {
        Some(v) => {
            say!(
                env,
                "{prefix} {} {pid} omaha_request_action.cc:614] Update to version {v} is available",
                glog_prefix('I', at)
            );
            say!(
                env,
                "{prefix} {} {pid} update_attempter.cc:497] Updating boot flags...",
                glog_prefix('I', at)
            );
            say!(
                env,
                "{prefix} {} {pid} update_attempter.cc:509] Update successfully applied, waiting to reboot.",
                glog_prefix('I', at)
            );
        }
        None => say!(
            env,
            "{prefix} {} {pid} update_check_scheduler.cc:74] Next update check in 41m25s",
            glog_prefix('I', at)
        ),
    }
    Ok(0)
}

/// The staged Flatcar version, if the scenario staged one.
pub(super) fn read_os_update(env: &Env) -> Result<Option<String>> {
    #[derive(serde::Deserialize)]
    struct OsUpdate {
        new_version: String,
    }
    use anyhow::Context;
    let path = env.path(OS_UPDATE_FILE);
    match fs::read(&path) {
        Ok(bytes) => {
            let u: OsUpdate = serde_json::from_slice(&bytes).with_context(|| {
                format!(
                    "parsing {} (expected {{\"new_version\": \"4081.3.0\"}})",
                    path.display()
                )
            })?;
            Ok(Some(u.new_version))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

#[cfg(test)]
mod tests;

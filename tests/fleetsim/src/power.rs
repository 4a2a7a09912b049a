//! `reboot` and `shutdown -r now` inside a node. A reboot is a SIGTERM to
//! the node's PID 1 (node-init), which exits; the kernel then kills the
//! whole PID namespace, sshd and every session included, exactly as a real
//! reboot drops SSH connections. The supervisor notices, waits the boot
//! delay and boots the node again. `systemctl reboot` (the tools' side)
//! execs `/usr/sbin/reboot`, so all three paths end here and are recorded
//! once.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::provision::SYSUPDATE_DIR;
use crate::state::{Event, NODE_FILE, NodeBoot, Shared, now};

/// What was asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    Reboot,
    /// Anything we do not emulate (poweroff, scheduled reboots, unknown flags).
    Unsupported,
}

/// Runs `reboot` or `shutdown` (argv[0]'s basename) and returns the exit
/// code; on success it does not return, because the node dies around it.
pub fn main(tool: &str, args: &[String]) -> i32 {
    let mut argv = vec![tool.to_string()];
    argv.extend(args.iter().cloned());
    if parse(tool, args) == Request::Unsupported {
        eprintln!("fleetsim: unsupported: {}", argv.join(" "));
        record(&argv, "unsupported");
        return 1;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // What systemd prints when polkit says no to an unprivileged user.
        eprintln!("Failed to set wall message, ignoring: Interactive authentication required.");
        eprintln!("Call to Reboot failed: Interactive authentication required.");
        return 1;
    }
    if !inside_a_node() {
        eprintln!(
            "{tool}: PID 1 is not fleetsim's node-init, so this is not a simulated node: refusing to signal it"
        );
        return 1;
    }
    record(&argv, "ok");
    // SAFETY: signalling our namespace's init; it has a handler installed.
    if unsafe { libc::kill(1, libc::SIGTERM) } != 0 {
        eprintln!(
            "{tool}: cannot signal PID 1: {} (is this a fleetsim node?)",
            std::io::Error::last_os_error()
        );
        return 1;
    }
    // Wait to be killed with the rest of the namespace.
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

pub fn parse(tool: &str, args: &[String]) -> Request {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ok = match tool {
        "reboot" => args
            .iter()
            .all(|a| matches!(*a, "-f" | "--force" | "--no-wall" | "-ff")),
        "shutdown" => shutdown_is_reboot_now(&args),
        _ => false,
    };
    if ok {
        Request::Reboot
    } else {
        Request::Unsupported
    }
}

/// `shutdown -r now` / `shutdown --reboot +0 [wall message…]`.
fn shutdown_is_reboot_now(args: &[&str]) -> bool {
    let mut reboot = false;
    let mut when = None;
    for a in args {
        match *a {
            "-r" | "--reboot" => reboot = true,
            "--no-wall" => {}
            "now" | "+0" if when.is_none() => when = Some(*a),
            _ if when.is_some() && !a.starts_with('-') => {} // wall message
            _ => return false,
        }
    }
    reboot && when.is_some()
}

/// The host's PID 1 must never get our SIGTERM (someone running a node's
/// `reboot` link on the host as root would stop the machine).
pub fn inside_a_node() -> bool {
    fs::read("/proc/1/cmdline")
        .map(|raw| is_node_init(&raw))
        .unwrap_or(false)
}

/// A real-OS node (`crate::realos`): PID 1 is systemd and the node's boot
/// record is bound where realos-init binds it, which no host has.
pub fn inside_a_real_os_node() -> bool {
    let systemd = fs::read_to_string("/proc/1/comm").is_ok_and(|c| c.trim() == "systemd");
    systemd && Path::new(NODE_FILE).is_file()
}

fn is_node_init(cmdline: &[u8]) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    args.get(1) == Some(&&b"node-init"[..])
        && args
            .first()
            .is_some_and(|a0| a0.ends_with(b"/fleetsim") || *a0 == b"fleetsim")
}

fn node_name() -> String {
    let from_boot = fs::read(NODE_FILE)
        .ok()
        .and_then(|b| serde_json::from_slice::<NodeBoot>(&b).ok())
        .map(|b| b.name);
    from_boot.unwrap_or_else(|| {
        fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".into())
    })
}

/// Best effort: a reboot must not fail because the event log is unwritable.
fn record(argv: &[String], result: &str) {
    let event = Event {
        t: now(),
        node: node_name(),
        argv: argv.to_vec(),
        result: result.into(),
        pins: crate::pins::kubernetes_pins(Path::new(SYSUPDATE_DIR)),
        ..Default::default()
    };
    if let Err(e) = Shared::in_node().record(&event) {
        eprintln!("fleetsim: could not record {}: {e:#}", argv.join(" "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn accepts_the_reboot_spellings() {
        assert_eq!(parse("reboot", &[]), Request::Reboot);
        assert_eq!(parse("reboot", &args("--force")), Request::Reboot);
        assert_eq!(parse("shutdown", &args("-r now")), Request::Reboot);
        assert_eq!(
            parse("shutdown", &args("--reboot +0 kernel update")),
            Request::Reboot
        );
    }

    #[test]
    fn only_signals_fleetsims_node_init() {
        assert!(is_node_init(
            b"/tmp/f/bin/fleetsim\0node-init\0--dir\0/tmp/f\0"
        ));
        assert!(!is_node_init(b"/sbin/init\0"));
        assert!(!is_node_init(
            b"/usr/bin/unshare\0--pid\0/tmp/f/bin/fleetsim\0node-init\0"
        ));
        assert!(!is_node_init(b""));
    }

    #[test]
    fn refuses_what_it_does_not_emulate() {
        for (tool, a) in [
            ("shutdown", "-h now"),
            ("shutdown", "now"),
            ("shutdown", "-r"),
            ("shutdown", "-r +5"),
            ("shutdown", "-P now"),
            ("reboot", "--halt"),
            ("poweroff", ""),
        ] {
            assert_eq!(parse(tool, &args(a)), Request::Unsupported, "{tool} {a}");
        }
    }
}

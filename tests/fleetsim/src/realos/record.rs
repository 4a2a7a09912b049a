//! The event log's record of a real tool's run on a real-OS node. An
//! emulated tool writes its own event (`tools::Env::record`); a real one
//! writes none, and tests judge fleetctl by that log (one sysupdate per
//! node and hop, say). So on a real-OS node the tool's path holds fleetsim,
//! which runs the real binary (moved to [`REAL_DIR`] at provisioning) with
//! the caller's arguments, standard streams and environment, waits for it,
//! writes the event the emulated tool would have written (`update` runs
//! only, as the emulated sysupdate does) and exits with its status. Nothing
//! the caller sees changes, except one more process in the tree (see
//! docs/simulator.md, "Real-OS nodes").

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::Command;

use crate::provision::SYSUPDATE_DIR;
use crate::state::{Event, NODE_FILE, NodeBoot, Shared, now};

/// Where a real-OS node keeps the real binaries of recorded tools.
pub const REAL_DIR: &str = "/usr/lib/fleetsim/real";

/// The recorded real tools: the file name fleetsim is called by, and its
/// path in the node.
pub const RECORDED: [(&str, &str); 1] =
    [("systemd-sysupdate", "/usr/lib/systemd/systemd-sysupdate")];

/// The event of a real-OS node's reboot, and the unit that writes it.
/// On an emulated node the reboot tool records the reboot when asked; on a
/// real-OS node the reboot is systemd's own, so a unit that `reboot.target`
/// wants ([`REBOOT_UNIT`], `DefaultDependencies=no`: it starts with the
/// reboot's transaction, before any service stops) records it, whoever
/// asked (`systemctl reboot`, `reboot`, Kured). A `reboot --force`, which
/// skips units, is not recorded.
pub const REBOOT_EVENT: &str = "(reboot)";
pub const REBOOT_UNIT: &str = "fleetsim-reboot-record.service";
/// The name fleetsim answers to as that unit's command.
pub const REBOOT_RECORDER: &str = "fleetsim-reboot-record";

/// Runs the real tool when `name` is a recorded one and this is a real-OS
/// node, or records the reboot as [`REBOOT_UNIT`]; `None` otherwise (the
/// emulated tool runs).
pub fn intercept(argv0: &str, name: &str, args: &[String]) -> Option<i32> {
    if name == REBOOT_RECORDER && crate::power::inside_a_real_os_node() {
        record(REBOOT_EVENT, &[], "ok");
        return Some(0);
    }
    RECORDED.iter().find(|(n, _)| *n == name)?;
    if !crate::power::inside_a_real_os_node() {
        return None;
    }
    let real = Path::new(REAL_DIR).join(name);
    let status = Command::new(&real).arg0(argv0).args(args).status();
    let (code, result) = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(0), _) => (0, "ok".to_string()),
            (Some(c), _) => (c, format!("failed: exit status {c}")),
            (None, Some(sig)) => (128 + sig, format!("failed: killed by signal {sig}")),
            (None, None) => (1, "failed".to_string()),
        },
        Err(e) => {
            let msg = format!("fleetsim: running the real {}: {e}", real.display());
            eprintln!("{msg}");
            (1, msg)
        }
    };
    if args.iter().any(|a| a == "update") {
        record(name, args, &result);
    }
    Some(code)
}

/// Best effort, as the emulated tools: a run must not fail because the
/// event log is unwritable.
fn record(name: &str, args: &[String], result: &str) {
    let node = std::fs::read(NODE_FILE)
        .ok()
        .and_then(|b| serde_json::from_slice::<NodeBoot>(&b).ok())
        .map(|b| b.name)
        .unwrap_or_default();
    let mut argv = vec![name.to_string()];
    argv.extend(args.iter().cloned());
    let event = Event {
        t: now(),
        node,
        argv,
        result: result.to_string(),
        pins: crate::pins::kubernetes_pins(Path::new(SYSUPDATE_DIR)),
        ..Default::default()
    };
    if let Err(e) = Shared::in_node().record(&event) {
        eprintln!("fleetsim: warning: could not append to the event log: {e:#}");
    }
}

//! `update_engine_client -status`: how fleetctl (and Flatcar's reboot
//! sentinel) learns that an OS update is staged. The format is the real
//! client's printf — five KEY=VALUE lines on stdout, a glog line on stderr.
//! The staged update comes from the scenario's os-update.json.

use anyhow::Result;

use super::systemctl::read_os_update;
use super::util::glog_prefix;
use super::{Env, complain, say};

const NAME: &str = "update_engine_client";
/// The size the real client reports for a Flatcar update payload, roughly.
const PAYLOAD_SIZE: u64 = 465_881_871;

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    match args {
        [a] if a == "-status" || a == "--status" => status(env),
        _ => Ok(env.unsupported(NAME, args)),
    }
}

fn status(env: &mut Env) -> Result<i32> {
    let boot = env.boot()?;
    let staged = read_os_update(env)?;
    let now = crate::state::now();
    complain!(
        env,
        "{} {:>5} update_engine_client.cc:251] Querying Update Engine status...",
        glog_prefix('I', now),
        std::process::id()
    );
    // update_engine checks a few seconds after boot, then every ~45 minutes.
    let checked = (boot.booted_at + 30.0).min(now).max(0.0) as i64;
    let (op, version, size) = match &staged {
        Some(v) => (
            "UPDATE_STATUS_UPDATED_NEED_REBOOT",
            v.as_str(),
            PAYLOAD_SIZE,
        ),
        None => ("UPDATE_STATUS_IDLE", "0.0.0", 0),
    };
    say!(env, "LAST_CHECKED_TIME={checked}");
    say!(env, "PROGRESS={:.6}", 0.0);
    say!(env, "CURRENT_OP={op}");
    say!(env, "NEW_VERSION={version}");
    say!(env, "NEW_SIZE={size}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;

    #[test]
    fn idle_then_staged() {
        let node = Node::worker("w1", "v1.34.2");
        let r = node.run("update_engine_client", &["-status"]);
        assert_eq!(r.code, 0);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].starts_with("LAST_CHECKED_TIME="));
        assert!(
            lines[0]["LAST_CHECKED_TIME=".len()..]
                .parse::<i64>()
                .is_ok()
        );
        assert_eq!(
            &lines[1..],
            [
                "PROGRESS=0.000000",
                "CURRENT_OP=UPDATE_STATUS_IDLE",
                "NEW_VERSION=0.0.0",
                "NEW_SIZE=0"
            ]
        );
        assert!(
            r.stderr
                .contains("update_engine_client.cc:251] Querying Update Engine status...")
        );
        assert!(r.stderr.starts_with('I'));

        node.write(
            super::super::OS_UPDATE_FILE,
            r#"{"new_version": "4081.3.0"}"#,
        );
        let r = node.run("update_engine_client", &["-status"]);
        assert!(
            r.stdout
                .contains("CURRENT_OP=UPDATE_STATUS_UPDATED_NEED_REBOOT\nNEW_VERSION=4081.3.0\n")
        );
        assert!(!r.stdout.contains("NEW_SIZE=0\n"));
    }

    #[test]
    fn a_broken_os_update_file_is_an_error_naming_it() {
        let node = Node::worker("w1", "v1.34.2");
        node.write(super::super::OS_UPDATE_FILE, "{");
        let r = node.run("update_engine_client", &["-status"]);
        assert_eq!(r.code, 1);
        assert!(r.stderr.contains("os-update.json"), "{}", r.stderr);
    }

    #[test]
    fn other_flags_are_unsupported() {
        let node = Node::worker("w1", "v1.34.2");
        assert_eq!(
            node.run("update_engine_client", &["-check_for_update"])
                .code,
            1
        );
    }
}

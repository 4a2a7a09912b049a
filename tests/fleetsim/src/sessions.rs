//! Cutting a node's SSH connections, as a network drop that makes sshd
//! give up on them: every sshd process of the node except its listener is
//! killed (the per-connection `sshd: user@notty` processes, or
//! `sshd-session` in OpenSSH 9.8 and later). The client sees its connection
//! close. What then happens to the commands of those sessions is the
//! kernel's doing, as on a real node: their pipes lose their reader (the
//! next write to stdout or stderr raises SIGPIPE, stdin reads EOF), and a
//! session with a terminal gets SIGHUP when its pty master closes. A
//! process started detached (`systemd-run`) has neither and carries on.

use std::fs;
use std::path::Path;

/// Kills the SSH sessions among the processes `proc_dir` shows: those
/// whose command is `sshd…`, whose parent is not `init` (the listener is
/// init's child), and, when `ns` is given, that live in that PID namespace
/// (`/proc/PID/ns/pid`'s link). Returns how many were killed.
pub fn cut(proc_dir: &Path, init: i32, ns: Option<&Path>) -> usize {
    let Ok(entries) = fs::read_dir(proc_dir) else {
        return 0;
    };
    let mut killed = 0;
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let dir = e.path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with("sshd") {
            continue;
        }
        if ns.is_some_and(|ns| fs::read_link(dir.join("ns/pid")).ok().as_deref() != Some(ns)) {
            continue;
        }
        if parent(&dir) == Some(init) || pid == init {
            continue;
        }
        // SAFETY: kill(2) of a process of this node's sshd.
        if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
            killed += 1;
        }
    }
    killed
}

/// The parent pid from `/proc/PID/stat` (the field after the command).
fn parent(dir: &Path) -> Option<i32> {
    let stat = fs::read_to_string(dir.join("stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parent_after_a_command_with_spaces() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("stat"),
            "42 (sshd: root@no tty) S 7 42 42 0 -1",
        )
        .unwrap();
        assert_eq!(parent(dir.path()), Some(7));
    }
}

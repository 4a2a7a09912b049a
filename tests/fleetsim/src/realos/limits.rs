//! The one kernel limit real-OS nodes share that real machines never do:
//! inotify instances per user.
//!
//! Every node's systemd runs as the host's root, so all of them, in every
//! fleet on the machine, draw on root's `fs.inotify.max_user_instances`
//! (the kernel counts instances per user, in the user namespace and every
//! namespace above it: `inotify_new_group()` in
//! fs/notify/inotify/inotify_user.c returns EMFILE past the limit). A booted
//! node's systemd holds three (the manager's cgroup watch among them). The
//! default is 128, so about forty nodes at once exhaust it: the test suites
//! running several fleets side by side did, a few boots in a thousand. A
//! systemd that finds none left when it starts exits 255 at once, writing
//! nothing anywhere (measured: `strace` shows `inotify_init1` = EMFILE, an
//! open of /dev/console, then `exit_group(255)`); one that finds a few boots
//! "degraded", its path units failed. Real nodes are separate machines with
//! a limit each, so the sim raises the shared one to a floor no fleet here
//! reaches, as podman does for the machines it runs containers in (it sets
//! 524288: containers/podman#19849), and says so.

use std::fs;
use std::path::Path;

const SYSCTL: &str = "/proc/sys/fs/inotify/max_user_instances";

/// Enough for about 2,700 real-OS nodes at once.
pub const FLOOR: u64 = 8192;

/// Raises root's inotify instance limit to [`FLOOR`] if it is lower. Only
/// warns when it cannot (a read-only /proc/sys in a container): the fleet
/// may still fit, and a node that does not boot names the limit.
pub fn ensure_inotify_instances() {
    let path = Path::new(SYSCTL);
    let current = match fs::read_to_string(path) {
        Ok(text) => text.trim().parse::<u64>().ok(),
        Err(_) => None,
    };
    let Some(from) = raise_to(current) else {
        return;
    };
    match fs::write(path, FLOOR.to_string()) {
        Ok(()) => eprintln!(
            "fleetsim: raised fs.inotify.max_user_instances from {from} to {FLOOR}: \
             every real-OS node's systemd holds three of root's, and one that finds \
             none left exits at boot"
        ),
        Err(e) => eprintln!(
            "fleetsim: fs.inotify.max_user_instances is {from} and could not be raised \
             ({e}); a real-OS node's systemd needs three, and exits at boot without them"
        ),
    }
}

/// The current limit when it is below the floor (and can be read).
fn raise_to(current: Option<u64>) -> Option<u64> {
    current.filter(|&c| c < FLOOR)
}

/// A hint for a real-OS node whose init exited before sshd listened.
pub fn boot_failure_hint(status: &std::process::ExitStatus) -> Option<String> {
    if status.code() != Some(255) {
        return None;
    }
    let limit = fs::read_to_string(SYSCTL).unwrap_or_default();
    Some(format!(
        "systemd exits 255 when it cannot start at all, and says nothing when that is for \
         want of an inotify instance: root's fs.inotify.max_user_instances is {} now \
         (all real-OS nodes on this machine share it)",
        limit.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn only_a_limit_below_the_floor_is_raised() {
        assert_eq!(raise_to(Some(128)), Some(128));
        assert_eq!(raise_to(Some(FLOOR - 1)), Some(FLOOR - 1));
        assert_eq!(raise_to(Some(FLOOR)), None);
        assert_eq!(raise_to(Some(524_288)), None);
        // An unreadable limit is left alone: nothing to compare.
        assert_eq!(raise_to(None), None);
    }

    #[test]
    fn the_hint_is_for_systemds_exit_255_only() {
        // wait(2) statuses: exit code in the high byte.
        assert!(boot_failure_hint(&ExitStatusExt::from_raw(255 << 8)).is_some());
        assert!(boot_failure_hint(&ExitStatusExt::from_raw(1 << 8)).is_none());
        assert!(boot_failure_hint(&ExitStatusExt::from_raw(libc::SIGKILL)).is_none());
    }
}

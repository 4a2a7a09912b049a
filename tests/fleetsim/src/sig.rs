//! Synchronous signal handling for the two long-lived processes we own: the
//! supervisor and node-init. Signals are blocked and then collected with
//! `sigtimedwait`, so there is no async-signal-safety to get wrong. node-init
//! also installs a no-op handler: the kernel drops a signal sent to a PID
//! namespace's init from inside the namespace unless init has a handler,
//! and `reboot` inside a node signals PID 1.

use std::time::Duration;

use anyhow::{Result, bail};

/// The signals that ask us to stop (SIGTERM, SIGINT, SIGHUP), plus SIGCHLD
/// when `with_child` (node-init reaps orphans as PID 1).
pub fn block(with_child: bool) -> Result<()> {
    let set = signal_set(with_child);
    // SAFETY: installs a handler that does nothing, then changes this
    // thread's mask; threads created afterwards inherit the mask.
    unsafe {
        for sig in signals(with_child) {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = noop as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            action.sa_flags = libc::SA_RESTART;
            if libc::sigaction(sig, &action, std::ptr::null_mut()) != 0 {
                bail!("sigaction({sig}): {}", std::io::Error::last_os_error());
            }
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            bail!("pthread_sigmask: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

extern "C" fn noop(_: libc::c_int) {}

fn signals(with_child: bool) -> Vec<libc::c_int> {
    let mut v = vec![libc::SIGTERM, libc::SIGINT, libc::SIGHUP];
    if with_child {
        v.push(libc::SIGCHLD);
    }
    v
}

fn signal_set(with_child: bool) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in signals(with_child) {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

/// Waits up to `timeout` for one of the blocked signals; `None` on timeout.
pub fn wait(with_child: bool, timeout: Duration) -> Option<libc::c_int> {
    let set = signal_set(with_child);
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timespec; the siginfo pointer may be null.
    let sig = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    (sig > 0).then_some(sig)
}

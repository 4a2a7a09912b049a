//! The signals a Go program dies of, caught only long enough to put the
//! death on the record.

use std::time::Duration;

const CAUGHT: [i32; 3] = [libc::SIGHUP, libc::SIGTERM, libc::SIGINT];

pub struct Watch {
    on: bool,
}

impl Watch {
    /// Blocks the signals so `wait` can collect them (only in a real process).
    pub fn start(on: bool) -> Watch {
        if on {
            // SAFETY: changes this thread's signal mask only.
            unsafe {
                let set = set();
                libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            }
        }
        Watch { on }
    }

    /// Sleeps up to `d`; the signal if one came.
    pub fn wait(&self, d: Duration) -> Option<i32> {
        if !self.on {
            std::thread::sleep(d);
            return None;
        }
        let ts = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a valid set and timespec; siginfo may be null.
        let sig = unsafe { libc::sigtimedwait(&set(), std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }
}

fn set() -> libc::sigset_t {
    // SAFETY: plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in CAUGHT {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Default disposition, unblocked, raised: the process ends killed by it.
pub fn die_of(sig: i32) -> ! {
    // SAFETY: resetting and raising a signal in our own process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut one: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}

//! The open-file limit. fleetctl keeps one SSH connection per node open for
//! the whole run (plan and apply reuse them): a socket per node, two through
//! a jump host, three pipes with a ProxyCommand. The usual soft limit is
//! 1,024 on Linux and 256 on macOS, while the hard limit is far higher, so a
//! fleet of a thousand nodes would run out of descriptors half-way and fail
//! its last nodes with "Too many open files". Raising the soft limit up to
//! the hard one needs no privilege — it is what the soft limit is for — and
//! is what Go programs do at startup.

/// The ceiling a soft limit may be raised to when the hard limit is
/// unlimited (or higher than the kernel allows): macOS refuses more than
/// OPEN_MAX, and Linux more than `fs.nr_open` (1,048,576 by default).
#[cfg(target_os = "macos")]
const CEILING: u64 = 10_240;
#[cfg(not(target_os = "macos"))]
const CEILING: u64 = 1 << 20;

/// The soft and hard limits on open files, if they can be read.
// rlim_t is u64 here but 32 bits wide on some 32-bit targets.
#[allow(clippy::unnecessary_cast)]
pub fn open_files() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    Some((limit.rlim_cur as u64, limit.rlim_max as u64))
}

/// Raises the soft limit on open files as far as the hard limit allows.
/// Returns the new soft limit when it changed. Failing is not an error: the
/// run goes on with the old limit, and a connection that then runs out of
/// descriptors says what to do.
#[allow(clippy::unnecessary_cast)]
pub fn raise_open_files() -> Option<u64> {
    let (soft, hard) = open_files()?;
    let raised = raised_soft_limit(soft, hard, CEILING)?;
    let limit = libc::rlimit {
        rlim_cur: raised as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: setrlimit reads one rlimit through a valid pointer.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return None;
    }
    Some(raised)
}

/// The soft limit to set: the hard limit, capped at `ceiling` (the hard
/// limit may be "unlimited", which no kernel grants as a soft limit); `None`
/// when that would not raise it.
fn raised_soft_limit(soft: u64, hard: u64, ceiling: u64) -> Option<u64> {
    let wanted = hard.min(ceiling);
    (wanted > soft).then_some(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_goes_up_to_the_hard_one() {
        // Linux's usual 1024 soft, 524288 hard (systemd).
        assert_eq!(raised_soft_limit(1024, 524_288, 1 << 20), Some(524_288));
        // An unlimited hard limit: as far as the kernel goes.
        assert_eq!(raised_soft_limit(256, u64::MAX, 10_240), Some(10_240));
        assert_eq!(
            raised_soft_limit(1024, libc::RLIM_INFINITY, 1 << 20),
            Some(1 << 20)
        );
    }

    #[test]
    fn a_limit_is_never_lowered() {
        assert_eq!(raised_soft_limit(4096, 4096, 1 << 20), None);
        assert_eq!(raised_soft_limit(20_000, 524_288, 10_240), None);
        assert_eq!(raised_soft_limit(u64::MAX, u64::MAX, 1 << 20), None);
    }

    #[test]
    fn the_limits_can_be_read() {
        let (soft, hard) = open_files().unwrap();
        assert!(soft <= hard);
    }
}

//! The pause between two attempts to reconnect to a rebooting node. Each
//! attempt that reaches sshd authenticates, and with a key file that is a
//! fresh signature by the operator's private key; with an RSA key that is
//! the operation RUSTSEC-2023-0071 (the `rsa` crate's non-constant-time
//! private-key operations) lets a patient observer time. At a fixed 100 ms
//! a node slow to come back would see up to 6,000 signatures over a
//! 10-minute `--node-timeout`; doubling from 100 ms to [`MAX`] keeps the
//! first attempts quick (a node usually answers within seconds) and the
//! total to a few hundred. Only attempts that authenticated count: one
//! that failed before (a node still booting refuses TCP) signed nothing
//! and is tried again after the node poll (`after_reboot::wait_rebooted`).

use std::time::Duration;

/// The longest pause between two attempts.
pub const MAX: Duration = Duration::from_secs(2);

/// The pause after `previous`: twice as long, at most [`MAX`].
pub fn next(previous: Duration) -> Duration {
    previous.saturating_mul(2).min(MAX)
}

/// After a failed attempt: how long to wait, and the back-off to keep. An
/// attempt that `authenticated` waits `backoff`, which doubles; one that
/// did not (nothing signed) waits `poll` and leaves the back-off as it is.
pub fn after(authenticated: bool, backoff: Duration, poll: Duration) -> (Duration, Duration) {
    match authenticated {
        true => (backoff, next(backoff)),
        false => (poll, backoff),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pause_doubles_to_two_seconds_and_bounds_the_attempts() {
        let mut pause = Duration::from_millis(100);
        let mut seq = Vec::new();
        for _ in 0..7 {
            seq.push(pause.as_millis());
            pause = next(pause);
        }
        assert_eq!(seq, [100, 200, 400, 800, 1600, 2000, 2000]);
        // Attempts over a 10-minute node timeout: a few hundred, not 6,000.
        let (mut t, mut n, mut p) = (Duration::ZERO, 0, Duration::from_millis(100));
        while t < Duration::from_secs(600) {
            t += p;
            p = next(p);
            n += 1;
        }
        assert!(n < 310, "{n}");
    }

    #[test]
    fn only_an_attempt_that_authenticated_backs_off() {
        let poll = Duration::from_millis(100);
        let mut backoff = Duration::from_millis(400);
        let (wait, kept) = after(false, backoff, poll);
        assert_eq!((wait, kept), (poll, backoff));
        (_, backoff) = after(true, kept, poll);
        assert_eq!(backoff, Duration::from_millis(800));
        // Refused attempts between two signed ones leave the back-off grown.
        for _ in 0..50 {
            assert_eq!(after(false, backoff, poll), (poll, backoff));
        }
        assert_eq!(after(true, backoff, poll).0, Duration::from_millis(800));
    }
}

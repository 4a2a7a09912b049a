//! Pacing SSH handshakes so a fleet-wide fan-out gets through sshd's
//! `MaxStartups`.
//!
//! sshd counts a connection against `MaxStartups` from accept until it has
//! authenticated. With OpenSSH's default `10:30:100`, once 10 such
//! connections are pending it drops new ones at random (30 %, rising to
//! 100 % at 100): it writes `Exceeded MaxStartups` and closes the socket
//! before sending its own banner. The limit is per sshd, so with one
//! connection per node it is out of reach — except on a shared sshd: a jump
//! host carries one connection per node of the run. Two things keep that
//! invisible to the operator:
//!
//! - [`Handshakes`]: at most [`PER_SSHD`] handshakes in flight to the same
//!   `host:port`, below the point where sshd starts dropping;
//! - a connection that sshd accepted and then closed or reset *before its
//!   banner* ([`dropped_before_banner`]) is tried again after a short,
//!   jittered pause ([`backoff`]), up to [`ATTEMPTS`] times: something else
//!   (another operator, a scanner) may be holding the slots. Nothing has
//!   been said to the server by then, so a new attempt is always safe.
//!   Anything later in the handshake — a refused host key, failed
//!   authentication, a timeout, a refused TCP connection — is not retried.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Handshakes in flight to one sshd: below `MaxStartups`' default start
/// (10), leaving room for someone else's login at the same time.
pub const PER_SSHD: usize = 8;

/// Attempts of a connection that sshd drops before its banner.
pub const ATTEMPTS: u32 = 5;

/// Pre-banner text kept for the error message (sshd says a line at most).
const PRE_BANNER_KEEP: usize = 512;

/// One semaphore per `host:port`, shared by every connection of a run
/// (clones share it).
#[derive(Clone, Default)]
pub struct Handshakes(Arc<Mutex<HashMap<Endpoint, Arc<Semaphore>>>>);

/// `host:port` of an sshd, the host lower-cased.
type Endpoint = (String, u16);

impl std::fmt::Debug for Handshakes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handshakes")
    }
}

impl Handshakes {
    /// Waits for a handshake slot on `host:port`; hold it until authenticated.
    pub async fn acquire(&self, host: &str, port: u16) -> Slot {
        let semaphore = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((host.to_ascii_lowercase(), port))
            .or_insert_with(|| Arc::new(Semaphore::new(PER_SSHD)))
            .clone();
        // Never closed; were it, connecting without a slot is still correct.
        let permit = semaphore.clone().acquire_owned().await.ok();
        Slot { semaphore, permit }
    }
}

/// One handshake in flight to an sshd; given back when dropped.
pub struct Slot {
    semaphore: Arc<Semaphore>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Slot {
    /// Other handshakes to the same sshd are in flight (or waiting).
    ///
    /// sshd stops counting a connection against MaxStartups only when its
    /// post-authentication process takes over, a moment after it sent
    /// "authentication succeeded". When others are queued for this sshd,
    /// the caller hands the slot on only after one more round trip, which
    /// that process answers; alone, it need not wait.
    pub fn contended(&self) -> bool {
        self.permit.is_some() && self.semaphore.available_permits() + 1 < PER_SSHD
    }
}

/// What the server sent before its `SSH-` identification line, and whether
/// that line came at all. Shared between [`Watched`] (inside russh's
/// session task) and the code deciding about a failed handshake.
#[derive(Debug, Default)]
pub struct Banner {
    seen: AtomicBool,
    before: Mutex<Vec<u8>>,
}

impl Banner {
    pub fn seen(&self) -> bool {
        self.seen.load(Ordering::Acquire)
    }

    /// The lines the server sent before its banner (`Exceeded MaxStartups`),
    /// trimmed; empty when it sent nothing.
    pub fn said(&self) -> String {
        let before = self.before.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&before).trim().to_string()
    }

    fn saw(&self, data: &[u8]) {
        let mut before = self.before.lock().unwrap_or_else(|p| p.into_inner());
        let start = before.len();
        before.extend_from_slice(data);
        // A line starting with `SSH-` is the banner (RFC 4253 4.2: other
        // lines may precede it). Look from the start of the line the new
        // bytes continue.
        let from = before[..start]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let banner_at = before[from..]
            .split(|&b| b == b'\n')
            .scan(from, |at, line| {
                let here = *at;
                *at += line.len() + 1;
                Some((here, line))
            })
            .find(|(_, line)| line.starts_with(b"SSH-"))
            .map(|(at, _)| at);
        match banner_at {
            Some(at) => {
                before.truncate(at);
                self.seen.store(true, Ordering::Release);
            }
            None if before.len() > PRE_BANNER_KEEP => {
                // Not sshd's few words: let russh judge it, never retry it.
                before.truncate(PRE_BANNER_KEEP);
                self.seen.store(true, Ordering::Release);
            }
            None => {}
        }
    }
}

/// A transport that reports into a [`Banner`] until the server's banner
/// has gone by, then only passes bytes through.
pub struct Watched<S> {
    inner: S,
    banner: Arc<Banner>,
}

impl<S> Watched<S> {
    pub fn new(inner: S) -> (Watched<S>, Arc<Banner>) {
        let banner = Arc::new(Banner::default());
        let watched = Watched {
            inner,
            banner: banner.clone(),
        };
        (watched, banner)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let filled = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if !self.banner.seen()
            && let Poll::Ready(Ok(())) = &polled
        {
            let new = &buf.filled()[filled..];
            if !new.is_empty() {
                self.banner.saw(new);
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// True when a failed handshake is sshd turning the connection away before
/// it said anything (no banner yet) by closing or resetting it — what
/// `MaxStartups` does. Only then is a new attempt safe and useful.
pub fn dropped_before_banner(err: &anyhow::Error, banner_seen: bool) -> bool {
    if banner_seen {
        return false;
    }
    err.chain().any(|cause| {
        if let Some(e) = cause.downcast_ref::<russh::Error>() {
            return match e {
                // EOF while reading the identification line.
                russh::Error::Disconnect => true,
                russh::Error::IO(io) => is_drop(io),
                _ => false,
            };
        }
        cause.downcast_ref::<io::Error>().is_some_and(is_drop)
    })
}

fn is_drop(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

/// The pause before attempt `attempt + 1` (after `attempt` failed, from 1):
/// 250 ms doubling, each between half and all of it, at random, so that the
/// connections dropped together do not all come back together.
pub fn backoff(attempt: u32) -> Duration {
    let full = 250u64 << attempt.saturating_sub(1).min(4);
    // std's per-instance random hash keys: randomness without another crate.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    Duration::from_millis(full / 2 + random % (full / 2 + 1))
}

/// Too many open files: one connection per node is held open for the run,
/// so a big fleet needs a bigger `ulimit -n` than fleetctl could raise to.
pub fn out_of_files(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let io = match cause.downcast_ref::<russh::Error>() {
            Some(russh::Error::IO(io)) => Some(io),
            _ => cause.downcast_ref::<io::Error>(),
        };
        io.and_then(io::Error::raw_os_error) == Some(libc::EMFILE)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn russh_err(e: russh::Error) -> anyhow::Error {
        anyhow::Error::from(e).context("w-1: cannot connect to 10.0.0.1:22 over SSH")
    }

    #[test]
    fn drops_before_the_banner_are_retried() {
        let reset = || russh::Error::IO(io::Error::from(io::ErrorKind::ConnectionReset));
        assert!(dropped_before_banner(
            &russh_err(russh::Error::Disconnect),
            false
        ));
        assert!(dropped_before_banner(&russh_err(reset()), false));
        let pipe = russh::Error::IO(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(dropped_before_banner(&russh_err(pipe), false));
        // The same after the banner: the server had its say, not a drop.
        assert!(!dropped_before_banner(
            &russh_err(russh::Error::Disconnect),
            true
        ));
        assert!(!dropped_before_banner(&russh_err(reset()), true));
    }

    #[test]
    fn other_failures_are_not_retried() {
        for e in [
            russh::Error::IO(io::Error::from(io::ErrorKind::ConnectionRefused)),
            russh::Error::IO(io::Error::from_raw_os_error(libc::EMFILE)),
            russh::Error::Version,
            russh::Error::NoCommonAlgo {
                kind: russh::AlgorithmKind::Kex,
                ours: vec![],
                theirs: vec![],
            },
            russh::Error::ConnectionTimeout,
        ] {
            let label = format!("{e:?}");
            assert!(!dropped_before_banner(&russh_err(e), false), "{label}");
        }
        assert!(!dropped_before_banner(
            &anyhow::anyhow!("w-1: no SSH handshake within 10s"),
            false
        ));
    }

    #[test]
    fn running_out_of_file_descriptors_is_recognised() {
        let emfile = russh::Error::IO(io::Error::from_raw_os_error(libc::EMFILE));
        assert!(out_of_files(&russh_err(emfile)));
        assert!(out_of_files(
            &anyhow::Error::from(io::Error::from_raw_os_error(libc::EMFILE)).context("x")
        ));
        assert!(!out_of_files(&russh_err(russh::Error::Disconnect)));
    }

    #[test]
    fn backoff_grows_and_stays_jittered_within_bounds() {
        for attempt in 1..=6 {
            let full = 250u64 << (attempt - 1).min(4);
            for _ in 0..20 {
                let pause = backoff(attempt).as_millis() as u64;
                assert!(pause >= full / 2 && pause <= full, "{attempt}: {pause}");
            }
        }
    }

    #[test]
    fn the_banner_is_found_after_pre_banner_lines_even_split_across_reads() {
        let b = Banner::default();
        b.saw(b"Exceeded Max");
        assert!(!b.seen());
        b.saw(b"Startups\r\n");
        assert!(!b.seen());
        assert_eq!(b.said(), "Exceeded MaxStartups");

        let b = Banner::default();
        b.saw(b"hello\r\nSS");
        assert!(!b.seen());
        b.saw(b"H-2.0-OpenSSH_9.2\r\n\0\0\0");
        assert!(b.seen());
        assert_eq!(b.said(), "hello");

        let b = Banner::default();
        b.saw(b"SSH-2.0-OpenSSH_9.2\r\n");
        assert!(b.seen());
        assert_eq!(b.said(), "");

        // Not an sshd: too much text without a banner is not retried.
        let b = Banner::default();
        b.saw(&[b'x'; PRE_BANNER_KEEP + 1]);
        assert!(b.seen());
    }

    #[tokio::test]
    async fn the_watched_stream_passes_bytes_through_both_ways() {
        let (client, mut server) = tokio::io::duplex(64);
        let (mut watched, banner) = Watched::new(client);
        server.write_all(b"Exceeded MaxStartups\r\n").await.unwrap();
        drop(server);
        let mut got = String::new();
        watched.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "Exceeded MaxStartups\r\n");
        assert!(!banner.seen());
        assert_eq!(banner.said(), "Exceeded MaxStartups");

        let (client, mut server) = tokio::io::duplex(64);
        let (mut watched, banner) = Watched::new(client);
        watched.write_all(b"SSH-2.0-fleetctl\r\n").await.unwrap();
        let mut hello = [0u8; 18];
        server.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello, b"SSH-2.0-fleetctl\r\n");
        server.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").await.unwrap();
        let mut line = [0u8; 21];
        watched.read_exact(&mut line).await.unwrap();
        assert!(banner.seen());
    }

    #[tokio::test]
    async fn one_sshd_gets_at_most_per_sshd_handshakes_at_once() {
        let h = Handshakes::default();
        let mut held = Vec::new();
        let alone = h.acquire("bastion", 22).await;
        assert!(!alone.contended());
        held.push(alone);
        for _ in 1..PER_SSHD {
            held.push(h.acquire("bastion", 22).await);
        }
        assert!(held.iter().all(Slot::contended));
        // Another sshd is not held up by the first one's slots...
        let other = tokio::time::timeout(Duration::from_secs(30), h.acquire("w-1", 22)).await;
        assert!(!other.unwrap().contended());
        // ...but one more on the same sshd waits until a slot is given back.
        let clone = h.clone();
        let waiting = tokio::spawn(async move { clone.acquire("BASTION", 22).await });
        // The current-thread test runtime runs the spawned task while this
        // one yields: were there a free slot, it would have finished.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished());
        held.pop();
        assert!(waiting.await.unwrap().permit.is_some());
    }
}

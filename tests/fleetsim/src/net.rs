//! Loopback addresses for a fleet. Every node listens on its own address,
//! `127.A.B.(10+i)`, so the inventory looks like a real one (distinct hosts,
//! one port) and several fleets can run at once (tests run in parallel).
//! A /24 holds 245 nodes (`.10` to `.254`); a bigger fleet takes several
//! /24s, `127.A.B`, `127.A.B+1`, … A fleet owns each /24 through an flock
//! on `/tmp/fleetsim-net/127.A.B.lock`, held for the supervisor's lifetime
//! and released by the kernel when it dies, so a crashed fleet never
//! strands its addresses.

use std::fs::{self, File, OpenOptions};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{Context, Result, bail};

const LOCK_DIR: &str = "/tmp/fleetsim-net";
/// Second octets tried; 127.0.x and low ones are left to everything else.
const FIRST_A: u32 = 100;
const LAST_A: u32 = 254;

/// Nodes per /24: `.10` to `.254`.
pub const PER_BLOCK: usize = 245;

/// Consecutive /24s on loopback, `127.a.b` onwards, owned by this process
/// while the value lives.
#[derive(Debug)]
pub struct Subnet {
    pub a: u8,
    pub b: u8,
    /// How many /24s.
    pub blocks: u8,
    _locks: Vec<File>,
}

impl Subnet {
    /// The address of node number `i` (from 0).
    pub fn address(&self, i: usize) -> Ipv4Addr {
        let block = (i / PER_BLOCK).min(usize::from(self.blocks.max(1) - 1));
        let host = 10 + (i % PER_BLOCK);
        Ipv4Addr::new(127, self.a, self.b + block as u8, host.min(254) as u8)
    }

    /// `127.A.B.0/24`, or `127.A.B.0/24 to 127.A.(B+k-1).0/24`.
    pub fn describe(&self) -> String {
        if self.blocks <= 1 {
            format!("127.{}.{}.0/24", self.a, self.b)
        } else {
            format!(
                "127.{}.{}.0/24 to 127.{}.{}.0/24",
                self.a,
                self.b,
                self.a,
                u16::from(self.b) + u16::from(self.blocks) - 1
            )
        }
    }
}

/// Subnets tried before giving up; each leaves a small lock file behind.
const ATTEMPTS: u32 = 512;

/// Finds a /24 no other fleet holds where every node address can bind `port`.
pub fn allocate(nodes: usize, port: u16) -> Result<Subnet> {
    let wildcard = fs::read_to_string("/proc/net/tcp")
        .map(|t| listeners(&t).contains(&(Ipv4Addr::UNSPECIFIED, port)))
        .unwrap_or(false);
    if wildcard {
        bail!(
            "something on this machine listens on 0.0.0.0:{port} (the host's own sshd?), so no node can use that port: set another `port:` in the scenario"
        );
    }
    fs::create_dir_all(LOCK_DIR).with_context(|| format!("creating {LOCK_DIR}"))?;
    let blocks = nodes.div_ceil(PER_BLOCK).max(1) as u32;
    let count = (LAST_A - FIRST_A + 1) * 256;
    let start = std::process::id().wrapping_mul(7919) % count;
    'next: for k in 0..ATTEMPTS {
        let n = (start + k) % count;
        let (a, b) = (FIRST_A + n / 256, n % 256);
        if b + blocks > 256 {
            continue;
        }
        let mut locks = Vec::new();
        for j in 0..blocks {
            match try_lock(Path::new(LOCK_DIR), a as u8, (b + j) as u8)? {
                Some(lock) => locks.push(lock),
                None => continue 'next,
            }
        }
        let subnet = Subnet {
            a: a as u8,
            b: b as u8,
            blocks: blocks as u8,
            _locks: locks,
        };
        if (0..nodes).all(|i| can_bind(subnet.address(i), port)) {
            return Ok(subnet);
        }
    }
    bail!(
        "no free 127.A.B.0/24 on loopback for {nodes} nodes on port {port}: are hundreds of fleets running?"
    )
}

fn try_lock(dir: &Path, a: u8, b: u8) -> Result<Option<File>> {
    let path = dir.join(format!("127.{a}.{b}.lock"));
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor we own; released when the File closes.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    Ok((rc == 0).then_some(f))
}

fn can_bind(addr: Ipv4Addr, port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(addr, port)).is_ok()
}

/// Whether something listens on `addr:port`, read from /proc/net/tcp rather
/// than by connecting: a probe connection would show up in sshd's log as a
/// failed login and cost a fork per poll.
pub fn listening(addr: Ipv4Addr, port: u16) -> Result<bool> {
    let text = fs::read_to_string("/proc/net/tcp").context("reading /proc/net/tcp")?;
    Ok(listeners(&text).contains(&(addr, port)))
}

/// The `(address, port)` of every LISTEN socket in /proc/net/tcp's format.
pub fn listeners(proc_net_tcp: &str) -> Vec<(Ipv4Addr, u16)> {
    proc_net_tcp
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let local = f.nth(1)?;
            let state = f.nth(1)?;
            if state != "0A" {
                return None;
            }
            let (ip, port) = local.split_once(':')?;
            let ip = u32::from_str_radix(ip, 16).ok()?;
            let port = u16::from_str_radix(port, 16).ok()?;
            // The kernel prints the network-order word as a host-order integer.
            Some((Ipv4Addr::from(ip.to_ne_bytes()), port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listen_sockets_only() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0A0B7F7F:08AE 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";
        if cfg!(target_endian = "little") {
            assert_eq!(listeners(text), [(Ipv4Addr::new(127, 127, 11, 10), 2222)]);
        }
    }

    #[test]
    fn two_fleets_never_share_a_subnet() {
        let one = allocate(3, 2222).unwrap();
        let two = allocate(3, 2222).unwrap();
        assert_ne!((one.a, one.b), (two.a, two.b));
        assert_eq!(one.address(2).octets()[3], 12);
    }

    #[test]
    fn a_thousand_nodes_take_five_consecutive_blocks() {
        let big = allocate(1000, 2222).unwrap();
        assert_eq!(big.blocks, 5);
        let first = big.address(0).octets();
        assert_eq!(first[3], 10);
        assert_eq!(big.address(244).octets()[3], 254);
        assert_eq!(big.address(245).octets(), [127, first[1], first[2] + 1, 10]);
        assert_eq!(big.address(999).octets()[2], first[2] + 4);
        let all: std::collections::BTreeSet<_> = (0..1000).map(|i| big.address(i)).collect();
        assert_eq!(all.len(), 1000);
        let other = allocate(3, 2222).unwrap();
        assert!(
            other.a != big.a || !(big.b..big.b + 5).contains(&other.b),
            "a parallel fleet never takes one of its blocks"
        );
    }

    #[test]
    fn sees_a_real_listener() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(listening(Ipv4Addr::LOCALHOST, port).unwrap());
        // Another address on the same port: a freed port could be taken
        // again at once by another test's listener, this address is not.
        assert!(!listening(Ipv4Addr::new(127, 0, 0, 2), port).unwrap());
    }
}

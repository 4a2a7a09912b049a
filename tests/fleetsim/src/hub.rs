//! The extension hub: a tiny HTTP/1.1 server on loopback standing in for
//! extensions.flatcar.org. It serves `kubernetes/SHA256SUMS` and the
//! `kubernetes-vX.Y.Z-x86-64.raw` squashfs images (`crate::image`) straight
//! from `DIR/hub`, so
//! `fleetsim ctl publish` (another process) only has to write files. No
//! framework: GET and HEAD of static files is all sysupdate needs, and a
//! hand-written server makes "the hub is down" a one-line fault.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::image::{self, Cache};
use crate::state::Shared;
use crate::version::Version;

/// The longest request head the hub reads before giving up on a client.
const MAX_HEAD: usize = 16 * 1024;

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn component_dir(root: &Path) -> PathBuf {
    root.join("kubernetes")
}

/// Serializes writers of one hub (the supervisor at start, `ctl publish`).
struct HubLock(#[allow(dead_code)] File);

impl HubLock {
    fn take(root: &Path) -> Result<HubLock> {
        let path = root.join(".lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor we own; released when the File closes.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            bail!(
                "locking {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(HubLock(f))
    }
}

/// Writes every image of `versions` (from `cache`) and a matching SHA256SUMS.
pub fn populate(root: &Path, cache: &Cache, versions: &[Version]) -> Result<()> {
    let dir = component_dir(root);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let built = cache.images(versions)?;
    let _lock = HubLock::take(root)?;
    for (v, cached) in versions.iter().zip(&built) {
        image::copy_to(cached, &dir.join(v.image_name()))?;
    }
    write_sums(&dir)
}

/// Writes the containerd images of `versions` under `containerd/` with
/// their SHA256SUMS (the bakery's names: no `v`).
pub fn populate_containerd(root: &Path, cache: &Cache, versions: &[String]) -> Result<()> {
    let dir = root.join(crate::containerd::NAME);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = HubLock::take(root)?;
    for v in versions {
        let cached = cache.containerd(v)?;
        image::copy_to(&cached, &dir.join(crate::containerd::image_name(v)))?;
    }
    write_sums(&dir)
}

/// Adds one containerd image mid-run; false when the hub already had it.
pub fn publish_containerd(root: &Path, cache: &Cache, version: &str) -> Result<bool> {
    let dir = root.join(crate::containerd::NAME);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let cached = cache.containerd(version)?;
    let _lock = HubLock::take(root)?;
    let name = crate::containerd::image_name(version);
    let path = dir.join(&name);
    if path.exists() {
        return Ok(false);
    }
    let tmp = dir.join(format!(".{name}.tmp"));
    image::copy_to(&cached, &tmp)?;
    fs::rename(&tmp, &path).with_context(|| format!("renaming into {}", path.display()))?;
    write_sums(&dir)?;
    Ok(true)
}

/// Adds one image mid-run; returns false when the hub already had it.
pub fn publish(root: &Path, cache: &Cache, version: &Version) -> Result<bool> {
    let dir = component_dir(root);
    if !dir.is_dir() {
        bail!(
            "{} does not exist: is this a fleetsim state directory (fleetsim up --dir)?",
            dir.display()
        );
    }
    let cached = cache.image(version)?;
    let _lock = HubLock::take(root)?;
    let path = dir.join(version.image_name());
    if path.exists() {
        return Ok(false);
    }
    // Under a hidden name first: the hub never serves half an image.
    let tmp = dir.join(format!(".{}.tmp", version.image_name()));
    image::copy_to(&cached, &tmp)?;
    fs::rename(&tmp, &path).with_context(|| format!("renaming into {}", path.display()))?;
    write_sums(&dir)?;
    Ok(true)
}

/// `<sha256>  <file>` per image, sorted by file name as `sha256sum *` would.
fn write_sums(dir: &Path) -> Result<()> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".raw") && !n.starts_with('.'))
        .collect();
    names.sort();
    let mut text = String::new();
    for n in &names {
        let path = dir.join(n);
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        text.push_str(&format!("{}  {n}\n", sha256_hex(&bytes)));
    }
    let tmp = dir.join(".SHA256SUMS.tmp");
    fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, dir.join("SHA256SUMS")).context("replacing SHA256SUMS")
}

/// A running hub; it lives as long as the supervisor process.
#[derive(Debug, Clone)]
pub struct Hub {
    pub addr: SocketAddr,
    /// The same files over TLS, when the scenario asks (`hub.https`,
    /// `crate::hub_tls`).
    pub tls: Option<SocketAddr>,
}

impl Hub {
    /// The plain-HTTP hub.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The hub the fleet is given (inventory, sysupdate configs): the
    /// https one when there is one.
    pub fn fleet_url(&self) -> String {
        match self.tls {
            Some(tls) => format!("https://{tls}"),
            None => self.url(),
        }
    }
}

/// Binds 127.0.0.1 on a free port and serves `root` from a background thread.
/// `shared` is read on every request for the `hub_down` fault.
pub fn serve(root: PathBuf, shared: Shared) -> Result<Hub> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding the hub on 127.0.0.1")?;
    let addr = listener.local_addr().context("reading the hub's address")?;
    thread::Builder::new()
        .name("hub".into())
        .spawn(move || accept_loop(listener, root, shared))
        .context("starting the hub thread")?;
    Ok(Hub { addr, tls: None })
}

fn accept_loop(listener: TcpListener, root: PathBuf, shared: Shared) {
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        let root = root.clone();
        let shared = shared.clone();
        let spawned = thread::Builder::new()
            .name("hub-conn".into())
            .spawn(move || {
                if let Err(e) = handle(stream, &root, &shared) {
                    eprintln!("fleetsim hub: {e:#}");
                }
            });
        if let Err(e) = spawned {
            eprintln!("fleetsim hub: cannot start a connection thread: {e}");
        }
    }
}

/// A parsed request line; headers are read and ignored.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
}

pub fn parse_request_line(line: &str) -> Option<Request> {
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?;
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") || parts.next().is_some() {
        return None;
    }
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    Some(Request { method, path })
}

/// The file under `root` a request path names, refusing anything that could
/// leave `root` (`..`, backslashes, NULs).
pub fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let rel = path.strip_prefix('/')?;
    let mut out = root.to_path_buf();
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        if seg == ".." || seg == "." || seg.starts_with('.') || seg.contains(['\\', '\0']) {
            return None;
        }
        out.push(seg);
    }
    Some(out)
}

fn handle(stream: TcpStream, root: &Path, shared: &Shared) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
    stream.set_write_timeout(Some(Duration::from_secs(5))).ok();
    serve_one(stream, root, shared, None)
}

/// Answers one request on `stream` (plain or TLS, `crate::hub_tls`).
/// `plain` is the plain-HTTP hub's address when this is the https one:
/// under the `redirect_to_http` fault every GET and HEAD is sent there.
pub(crate) fn serve_one<S: Read + Write>(
    stream: S,
    root: &Path,
    shared: &Shared,
    plain: Option<SocketAddr>,
) -> Result<()> {
    let mut reader = BufReader::new(stream);
    let Some(first) = read_head(&mut reader)? else {
        return Ok(());
    };
    let out = reader.get_mut();
    let Some(req) = parse_request_line(&first) else {
        return respond(out, 400, "text/plain", b"bad request\n", true);
    };
    let head_only = req.method == "HEAD";
    if req.method != "GET" && !head_only {
        return respond(out, 405, "text/plain", b"only GET and HEAD\n", false);
    }
    let faults = shared.faults().unwrap_or_default();
    if faults.hub_down {
        let body = b"extension hub unavailable (fleetsim fault hub_down)\n";
        return respond(out, 503, "text/plain", body, head_only);
    }
    if let Some(plain) = plain.filter(|_| faults.redirect_to_http) {
        // What a misconfigured or hostile https server does: the same path,
        // on plain HTTP, where anyone on the path can answer instead.
        let location = format!("http://{plain}{}", req.path);
        let body = format!("moved to {location}\n");
        let extra = format!("Location: {location}\r\n");
        return respond_with(out, 302, "text/plain", body.as_bytes(), head_only, &extra);
    }
    let file = resolve(root, &req.path).filter(|p| p.is_file());
    match file.map(|p| fs::read(&p).map(|b| (p, b))) {
        Some(Ok((p, body))) => {
            let kind = if p.ends_with("SHA256SUMS") {
                "text/plain"
            } else {
                "application/octet-stream"
            };
            respond(out, 200, kind, &body, head_only)
        }
        _ => respond(out, 404, "text/plain", b"not found\n", head_only),
    }
}

/// Reads the request line and the headers; `None` if the client sent nothing.
pub(crate) fn read_head(reader: &mut impl BufRead) -> Result<Option<String>> {
    let mut first = String::new();
    let mut total = 0;
    loop {
        let mut line = String::new();
        let n = reader
            .by_ref()
            .take((MAX_HEAD - total) as u64 + 1)
            .read_line(&mut line)
            .context("reading the request")?;
        if n == 0 {
            return Ok(if first.is_empty() { None } else { Some(first) });
        }
        total += n;
        if total > MAX_HEAD {
            bail!("request head larger than {MAX_HEAD} bytes");
        }
        if first.is_empty() {
            first = line.trim_end().to_string();
            if first.is_empty() {
                continue;
            }
        } else if line.trim_end().is_empty() {
            return Ok(Some(first));
        }
    }
}

pub(crate) fn respond(
    out: &mut impl Write,
    status: u16,
    kind: &str,
    body: &[u8],
    head_only: bool,
) -> Result<()> {
    respond_with(out, status, kind, body, head_only, "")
}

/// [`respond`] with `extra` header lines (each ending in CRLF).
fn respond_with(
    out: &mut impl Write,
    status: u16,
    kind: &str,
    body: &[u8],
    head_only: bool,
    extra: &str,
) -> Result<()> {
    let reason = match status {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{extra}Connection: close\r\nServer: fleetsim-hub\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())
        .context("writing the response")?;
    if !head_only {
        out.write_all(body).context("writing the response body")?;
    }
    out.flush().context("flushing the response")
}

/// A minimal HTTP GET for tests and the harness: status and body.
pub fn get(url: &str) -> Result<(u16, Vec<u8>)> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url}: only http:// URLs"))?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = TcpStream::connect(host).with_context(|| format!("connecting to {host}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .with_context(|| format!("sending GET {url}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .with_context(|| format!("reading the answer to GET {url}"))?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .with_context(|| format!("GET {url}: no header end in the answer"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("GET {url}: bad status line `{head}`"))?;
    Ok((status, raw[split + 4..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line("GET /kubernetes/SHA256SUMS?x=1 HTTP/1.1"),
            Some(Request {
                method: "GET".into(),
                path: "/kubernetes/SHA256SUMS".into()
            })
        );
        assert_eq!(parse_request_line("GET /"), None);
        assert_eq!(parse_request_line("GET / SPDY/3"), None);
    }

    #[test]
    fn paths_cannot_escape_the_root() {
        let root = Path::new("/srv/hub");
        assert_eq!(
            resolve(root, "/kubernetes/SHA256SUMS"),
            Some(PathBuf::from("/srv/hub/kubernetes/SHA256SUMS"))
        );
        assert_eq!(resolve(root, "/kubernetes/../../etc/shadow"), None);
        assert_eq!(resolve(root, "/.lock"), None);
        assert_eq!(resolve(root, "kubernetes"), None);
    }

    #[test]
    fn images_carry_their_version_and_sums_match() {
        let dir = std::env::temp_dir().join(format!("fleetsim-hub-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(cache_dir.path()).unwrap();
        let v = Version::parse("v1.35.1").unwrap();
        populate(&dir, &cache, &[v]).unwrap();
        let path = dir.join("kubernetes/kubernetes-v1.35.1-x86-64.raw");
        assert_eq!(image::version_of(&path).unwrap(), v);
        let image = fs::read(&path).unwrap();
        let sums = fs::read_to_string(dir.join("kubernetes/SHA256SUMS")).unwrap();
        assert_eq!(
            sums,
            format!("{}  kubernetes-v1.35.1-x86-64.raw\n", sha256_hex(&image))
        );

        let newer = Version::parse("v1.35.10").unwrap();
        assert!(publish(&dir, &cache, &newer).unwrap());
        assert!(
            !publish(&dir, &cache, &newer).unwrap(),
            "publishing twice is a no-op"
        );
        let sums = fs::read_to_string(dir.join("kubernetes/SHA256SUMS")).unwrap();
        let names: Vec<&str> = sums.lines().filter_map(|l| l.split("  ").nth(1)).collect();
        assert_eq!(
            names,
            [
                "kubernetes-v1.35.1-x86-64.raw",
                "kubernetes-v1.35.10-x86-64.raw"
            ]
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

//! A minimal HTTP/1.1 GET client over `std::net::TcpStream`, enough to talk
//! to the simulated extensions hub on loopback. A real HTTP crate would
//! bring an async runtime or TLS into a binary that must start fast on 50+
//! nodes; the hub speaks plain HTTP, so a hundred lines do.
//!
//! Failures carry the words curl would use, since systemd-pull reports
//! curl's errors ("Transfer failed: Couldn't connect to server").

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Why a GET did not produce a 2xx body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The URL is not `http://host[:port]/path`.
    BadUrl(String),
    /// Connecting, sending or receiving failed (curl's wording).
    Transfer(String),
    /// The server answered with a non-2xx status.
    Status(u16),
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::BadUrl(u) => write!(f, "not a plain http:// URL: {u}"),
            HttpError::Transfer(m) => write!(f, "{m}"),
            HttpError::Status(s) => write!(f, "HTTP status {s}"),
        }
    }
}

struct Url<'a> {
    host: &'a str,
    port: u16,
    path: &'a str,
}

fn parse_url(url: &str) -> Result<Url<'_>, HttpError> {
    let bad = || HttpError::BadUrl(url.to_string());
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().map_err(|_| bad())?),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok(Url { host, port, path })
}

/// GETs `url` and returns the body of a 2xx answer. `timeout` bounds the
/// connect and each read, so a hung hub fails the tool instead of hanging it.
pub fn get(url: &str, timeout: Duration) -> Result<Vec<u8>, HttpError> {
    let u = parse_url(url)?;
    let addrs = (u.host, u.port)
        .to_socket_addrs()
        .map_err(|_| HttpError::Transfer(format!("Could not resolve host: {}", u.host)))?;
    let mut last = HttpError::Transfer("Couldn't connect to server".to_string());
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return exchange(stream, &u, timeout),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                last = HttpError::Transfer("Timeout was reached".to_string());
            }
            Err(_) => {}
        }
    }
    Err(last)
}

fn exchange(mut stream: TcpStream, u: &Url, timeout: Duration) -> Result<Vec<u8>, HttpError> {
    let io_err = |e: std::io::Error| {
        HttpError::Transfer(
            if e.kind() == std::io::ErrorKind::WouldBlock
                || e.kind() == std::io::ErrorKind::TimedOut
            {
                "Timeout was reached".to_string()
            } else {
                format!("Failure when receiving data from the peer ({e})")
            },
        )
    };
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    stream.set_write_timeout(Some(timeout)).map_err(io_err)?;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: systemd-pull\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        u.path, u.host, u.port
    );
    stream.write_all(request.as_bytes()).map_err(io_err)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(io_err)?;
    parse_response(&raw)
}

fn parse_response(raw: &[u8]) -> Result<Vec<u8>, HttpError> {
    let truncated = || HttpError::Transfer("Download truncated.".to_string());
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| HttpError::Transfer("Weird server reply".to_string()))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let body = &raw[end + 4..];
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| HttpError::Transfer("Weird server reply".to_string()))?;
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                length = v.parse::<usize>().ok();
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    if !(200..300).contains(&status) {
        return Err(HttpError::Status(status));
    }
    if chunked {
        return dechunk(body).ok_or_else(truncated);
    }
    match length {
        Some(n) if body.len() < n => Err(truncated()),
        Some(n) => Ok(body[..n].to_vec()),
        None => Ok(body.to_vec()),
    }
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..eol]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Hub;
    use super::*;

    #[test]
    fn gets_a_body_and_reports_statuses() {
        let hub = Hub::start();
        hub.put("kubernetes/SHA256SUMS", b"hello".to_vec());
        let body = get(
            &format!("{}kubernetes/SHA256SUMS", hub.url()),
            Duration::from_secs(2),
        );
        assert_eq!(body, Ok(b"hello".to_vec()));
        let missing = get(
            &format!("{}kubernetes/nope", hub.url()),
            Duration::from_secs(2),
        );
        assert_eq!(missing, Err(HttpError::Status(404)));
    }

    #[test]
    fn a_closed_port_is_a_connect_failure() {
        let closed = super::super::testutil::closed_port();
        let r = get(
            &format!("http://127.0.0.1:{}/x", closed.port),
            Duration::from_secs(2),
        );
        assert_eq!(
            r,
            Err(HttpError::Transfer(
                "Couldn't connect to server".to_string()
            ))
        );
    }

    #[test]
    fn urls_must_be_plain_http() {
        assert!(matches!(
            get("https://127.0.0.1/x", Duration::from_secs(1)),
            Err(HttpError::BadUrl(_))
        ));
    }

    #[test]
    fn chunked_and_truncated_bodies() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw), Ok(b"abcde".to_vec()));
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        assert_eq!(
            parse_response(short),
            Err(HttpError::Transfer("Download truncated.".to_string()))
        );
    }
}

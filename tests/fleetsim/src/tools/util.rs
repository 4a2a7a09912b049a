//! Small formats the emulated tools share: Kubernetes versions, systemd's
//! version ordering, Go durations, the timestamps and ages the real tools
//! print, and column tables. No crate for dates here: the tools only ever
//! print UTC, and keeping the binary small keeps 50-node fleets cheap.

use std::cmp::Ordering;
use std::fmt;

use sha2::{Digest, Sha256};

/// A released Kubernetes version, `vMAJOR.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl KubeVersion {
    /// Parses `v1.35.2` or `1.35.2` (kubeadm accepts both).
    pub fn parse(s: &str) -> Option<KubeVersion> {
        let s = s.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts = s.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(KubeVersion {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Orders version strings the way systemd-sysupdate does, closely enough for
/// image names: runs of digits compare as numbers, everything else as text,
/// so `v1.37.10` > `v1.37.9` and `kubernetes-v1.38.0…` > `kubernetes-v1.37.9…`.
pub fn vercmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        match (a.first(), b.first()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let (ta, ra) = split_token(a, x.is_ascii_digit());
                let (tb, rb) = split_token(b, y.is_ascii_digit());
                let ord = match (x.is_ascii_digit(), y.is_ascii_digit()) {
                    (true, true) => cmp_numeric(ta, tb),
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    (false, false) => ta.cmp(tb),
                };
                if ord != Ordering::Equal {
                    return ord;
                }
                a = ra;
                b = rb;
            }
        }
    }
}

fn split_token(s: &[u8], digits: bool) -> (&[u8], &[u8]) {
    let n = s
        .iter()
        .position(|c| c.is_ascii_digit() != digits)
        .unwrap_or(s.len());
    s.split_at(n)
}

fn cmp_numeric(a: &[u8], b: &[u8]) -> Ordering {
    let strip = |s: &[u8]| -> usize { s.iter().take_while(|c| **c == b'0').count() };
    let (a, b) = (&a[strip(a)..], &b[strip(b)..]);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// The `version.Info` every Kubernetes binary reports for `version -o json`.
pub fn version_info(v: KubeVersion) -> serde_json::Value {
    serde_json::json!({
        "major": v.major.to_string(),
        "minor": v.minor.to_string(),
        "gitVersion": v.to_string(),
        "gitCommit": hex_of(&format!("kubernetes {v}"), 40),
        "gitTreeState": "clean",
        "buildDate": format!("2025-{:02}-{:02}T12:00:00Z", 1 + v.minor % 12, 1 + v.patch % 28),
        "goVersion": "go1.24.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// `host:port` of the first `server:` in a kubeconfig, as kubectl names it in errors.
pub fn server_address(kubeconfig: &str) -> Option<String> {
    let url = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))?
        .trim()
        .trim_matches(|c| c == '"' || c == '\'');
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let addr = rest.split('/').next()?.to_string();
    (!addr.is_empty()).then_some(addr)
}

/// A calendar date and time in UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub micros: u32,
    /// 0 = Sunday.
    pub weekday: u32,
}

/// Converts seconds since the epoch to UTC (Howard Hinnant's civil-from-days).
pub fn civil(ts: f64) -> Civil {
    let ts = if ts.is_finite() && ts > 0.0 { ts } else { 0.0 };
    let secs = ts.floor() as i64;
    let micros = ((ts - ts.floor()) * 1_000_000.0) as u32;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: (rem / 3600) as u32,
        minute: (rem % 3600 / 60) as u32,
        second: (rem % 60) as u32,
        micros,
        weekday: (days + 4).rem_euclid(7) as u32,
    }
}

/// `2024-07-28T08:55:01Z`, as in Kubernetes object timestamps.
pub fn rfc3339(ts: f64) -> String {
    let c = civil(ts);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// `I0728 09:05:20.123456`, the head of a glog line (level, date, time).
pub fn glog_prefix(level: char, ts: f64) -> String {
    let c = civil(ts);
    format!(
        "{level}{:02}{:02} {:02}:{:02}:{:02}.{:06}",
        c.month, c.day, c.hour, c.minute, c.second, c.micros
    )
}

/// `Fri 2023-07-28 08:55:01 UTC`, as systemd prints timestamps.
pub fn systemd_timestamp(ts: f64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    let c = civil(ts);
    format!(
        "{} {:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        DAYS[c.weekday as usize % 7],
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second
    )
}

/// `10min ago`, as `systemctl status` prints the time since a unit started.
pub fn systemd_ago(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s ago"),
        60..3600 => format!("{}min ago", s / 60),
        _ => format!("{}h {}min ago", s / 3600, s % 3600 / 60),
    }
}

/// kubectl's AGE column (`HumanDuration` in apimachinery).
pub fn human_age(secs: f64) -> String {
    if secs < -1.0 {
        return "<invalid>".to_string();
    }
    let seconds = secs.max(0.0) as u64;
    let minutes = seconds / 60;
    let hours = seconds / 3600;
    let days = hours / 24;
    let pair = |big: u64, bu: &str, small: u64, su: &str| {
        if small == 0 {
            format!("{big}{bu}")
        } else {
            format!("{big}{bu}{small}{su}")
        }
    };
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        pair(minutes, "m", seconds % 60, "s")
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        pair(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        pair(days, "d", hours % 24, "h")
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        pair(days / 365, "y", days % 365, "d")
    } else {
        format!("{}y", days / 365)
    }
}

/// Parses a Go duration (`300s`, `5m`, `1m30s`, `500ms`, `0`) into seconds.
pub fn parse_go_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "0" {
        return Some(0.0);
    }
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[u..];
    }
    Some(if neg { -total } else { total })
}

/// Formats seconds as Go's `time.Duration.String()` does (`2s`, `5m0s`, `1h0m0s`, `500ms`).
pub fn go_duration(secs: f64) -> String {
    if secs == 0.0 {
        return "0s".to_string();
    }
    if secs.abs() < 1.0 {
        let ms = secs * 1000.0;
        return if ms.fract() == 0.0 {
            format!("{}ms", ms as i64)
        } else {
            format!("{ms}ms")
        };
    }
    let sign = if secs < 0.0 { "-" } else { "" };
    let secs = secs.abs();
    let whole = secs.trunc() as u64;
    let frac = secs.fract();
    let s_part = if frac == 0.0 {
        format!("{}s", whole % 60)
    } else {
        let v = (whole % 60) as f64 + frac;
        format!("{}s", format!("{v:.9}").trim_end_matches('0'))
    };
    let (h, m) = (whole / 3600, whole % 3600 / 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s_part}")
    } else if m > 0 {
        format!("{sign}{m}m{s_part}")
    } else {
        format!("{sign}{s_part}")
    }
}

/// A stable hex digest of `seed`, for fake git commits, uids and pod suffixes.
pub fn hex_of(seed: &str, len: usize) -> String {
    let digest = Sha256::digest(seed.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    hex.chars().cycle().take(len).collect()
}

/// A stable UUID-shaped id for `seed` (object uids, machine ids).
pub fn uid_of(seed: &str) -> String {
    let h = hex_of(seed, 32);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A pod-name suffix in Kubernetes' alphabet (no vowels, no look-alikes).
pub fn pod_suffix(seed: &str, len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    Sha256::digest(seed.as_bytes())
        .iter()
        .take(len)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Renders rows as left-aligned columns separated by `gap` spaces, the last
/// column unpadded (kubectl uses 3, systemd 1).
pub fn table(rows: &[Vec<String>], gap: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + gap;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Joins argv for messages, quoting words a shell would split.
pub fn shell_join(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_versions_parse_with_or_without_v() {
        let v = KubeVersion::parse("1.35.2").unwrap();
        assert_eq!(v.to_string(), "v1.35.2");
        assert_eq!(KubeVersion::parse("v1.35.2"), Some(v));
        assert_eq!(KubeVersion::parse("v1.35"), None);
        assert_eq!(KubeVersion::parse("v1.35.2.1"), None);
        assert_eq!(KubeVersion::parse("stable"), None);
    }

    #[test]
    fn vercmp_orders_numbers_numerically() {
        assert_eq!(vercmp("v1.37.10", "v1.37.9"), Ordering::Greater);
        assert_eq!(vercmp("2", "10"), Ordering::Less);
        assert_eq!(
            vercmp(
                "kubernetes-v1.38.0-x86-64.raw",
                "kubernetes-v1.37.9-x86-64.raw"
            ),
            Ordering::Greater
        );
        assert_eq!(vercmp("v1.35.2", "v1.35.2"), Ordering::Equal);
        assert_eq!(vercmp("v1.35", "v1.35.0"), Ordering::Less);
    }

    #[test]
    fn civil_dates_match_known_instants() {
        assert_eq!(rfc3339(0.0), "1970-01-01T00:00:00Z");
        // 2023-07-28 08:55:01 UTC was a Friday.
        assert_eq!(
            systemd_timestamp(1_690_534_501.0),
            "Fri 2023-07-28 08:55:01 UTC"
        );
        assert_eq!(rfc3339(951_782_400.0), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn ages_follow_kubectl() {
        assert_eq!(human_age(45.0), "45s");
        assert_eq!(human_age(150.0), "2m30s");
        assert_eq!(human_age(600.0), "10m");
        assert_eq!(human_age(4.0 * 3600.0 + 60.0), "4h1m");
        assert_eq!(human_age(30.0 * 3600.0), "30h");
        assert_eq!(human_age(3.0 * 86400.0), "3d");
    }

    #[test]
    fn go_durations_round_trip() {
        assert_eq!(parse_go_duration("300s"), Some(300.0));
        assert_eq!(parse_go_duration("1m30s"), Some(90.0));
        assert_eq!(parse_go_duration("500ms"), Some(0.5));
        assert_eq!(parse_go_duration("2h"), Some(7200.0));
        assert_eq!(parse_go_duration("0"), Some(0.0));
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration("abc"), None);
        assert_eq!(go_duration(2.0), "2s");
        assert_eq!(go_duration(300.0), "5m0s");
        assert_eq!(go_duration(90.0), "1m30s");
        assert_eq!(go_duration(3600.0), "1h0m0s");
        assert_eq!(go_duration(0.5), "500ms");
    }

    #[test]
    fn tables_pad_all_but_the_last_column() {
        let rows = vec![
            vec!["NAME".to_string(), "STATUS".to_string(), "X".to_string()],
            vec!["cp1".to_string(), "Ready".to_string(), "long".to_string()],
        ];
        assert_eq!(table(&rows, 3), "NAME   STATUS   X\ncp1    Ready    long\n");
    }

    #[test]
    fn server_addresses_come_from_kubeconfigs() {
        let conf = "clusters:\n- cluster:\n    server: https://cp1:6443\n  name: k\n";
        assert_eq!(server_address(conf), Some("cp1:6443".to_string()));
        assert_eq!(server_address("apiVersion: v1\n"), None);
    }

    #[test]
    fn shell_join_quotes_only_when_needed() {
        let argv = vec!["kubectl".to_string(), "a b".to_string(), "x=y".to_string()];
        assert_eq!(shell_join(&argv), "kubectl 'a b' x=y");
    }
}

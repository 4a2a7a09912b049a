//! kubeadm's certificates, from `kubeadm certs check-expiration` on the first
//! control plane.
//!
//! The text is kubeadm's own printer (`certTextPrinter` in
//! `cmd/kubeadm/app/cmd/certs.go`): two tables written through a tabwriter
//! (min width 10, padding 3), `CERTIFICATE | EXPIRES | RESIDUAL TIME |
//! CERTIFICATE AUTHORITY | EXTERNALLY MANAGED` then, after a blank line,
//! `CERTIFICATE AUTHORITY | EXPIRES | RESIDUAL TIME | EXTERNALLY MANAGED`. A
//! missing certificate is a row `!MISSING! <name>` with empty cells. The
//! residual time is apimachinery's `duration.ShortHumanDuration`: `<invalid>`
//! once expired (more than a second in the past), else `Ns`, `Nm`, `Nh`, `Nd`
//! or `Ny`. Older kubeadm printed fewer columns (no CERTIFICATE AUTHORITY, as
//! pasted in vmware-archive/container-service-extension#974), and cells can
//! be empty (`admin.conf` had no CA before v1.19), so rows are cut at the
//! header's column offsets rather than split on spaces.

use anyhow::{Result, bail};

use super::verdicts::{Check, CheckName, Verdict};

/// Expiring within this many days warns.
const WARN_DAYS: u64 = 30;

const DAY: u64 = 24 * 3600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertKind {
    Certificate,
    Authority,
}

/// What `RESIDUAL TIME` says, in seconds (years and days as kubeadm counts
/// them: 365 and 24 hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Residual {
    Left(u64),
    /// `<invalid>`: expired.
    Expired,
}

impl Residual {
    fn parse(s: &str) -> Option<Residual> {
        if s == "<invalid>" {
            return Some(Residual::Expired);
        }
        let unit = s.chars().last()?;
        let n: u64 = s[..s.len() - unit.len_utf8()].parse().ok()?;
        let scale = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => DAY,
            'y' => 365 * DAY,
            _ => return None,
        };
        Some(Residual::Left(n.checked_mul(scale)?))
    }

    fn within_days(self, days: u64) -> bool {
        match self {
            Residual::Expired => true,
            Residual::Left(secs) => secs < days * DAY,
        }
    }
}

/// One row of either table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertExpiration {
    pub name: String,
    pub kind: CertKind,
    /// As printed: `Apr 09, 2024 09:17 UTC`; empty when missing.
    pub expires: String,
    /// `None` when missing.
    pub residual: Option<Residual>,
    /// The signing CA (`ca`, `etcd-ca`, `front-proxy-ca`); `None` for a CA
    /// or when the column is absent or empty.
    pub authority: Option<String>,
    pub externally_managed: bool,
    /// kubeadm printed it as `!MISSING!`.
    pub missing: bool,
}

/// Every row of both tables of `kubeadm certs check-expiration`.
pub fn parse_check_expiration(output: &str) -> Result<Vec<CertExpiration>> {
    let mut certs = Vec::new();
    let mut table: Option<(CertKind, Columns)> = None;
    let mut tables = 0;
    for line in output.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            table = None;
            continue;
        }
        if let Some(header) = Columns::header(line) {
            table = Some(header);
            tables += 1;
            continue;
        }
        let Some((kind, columns)) = &table else {
            continue; // kubeadm's "[check-expiration] …" lines
        };
        certs.push(columns.row(*kind, line)?);
    }
    if tables == 0 {
        bail!(
            "`kubeadm certs check-expiration` printed no certificate table; it said: {}",
            output.trim().lines().last().unwrap_or("(nothing)")
        );
    }
    Ok(certs)
}

/// The verdict: block on an expired certificate or CA (the control plane, or
/// fleetctl's own kubectl through admin.conf, already fails); warn on one that
/// expires within 30 days or that kubeadm reports missing; pass otherwise.
pub fn check_certificates(certs: &[CertExpiration]) -> Check {
    let mut expired = Vec::new();
    let mut soon = Vec::new();
    for cert in certs {
        let what = match cert.kind {
            CertKind::Certificate => format!("certificate {}", cert.name),
            CertKind::Authority => format!("certificate authority {}", cert.name),
        };
        match cert.residual {
            None => soon.push(format!(
                "{what} is missing (expected with an external CA or external etcd; otherwise \
                 `kubeadm init phase certs` recreates it)"
            )),
            Some(Residual::Expired) => expired.push(format!("{what} expired on {}", cert.expires)),
            Some(r) if r.within_days(WARN_DAYS) => {
                let who = if cert.externally_managed {
                    "it is externally managed: renew it with your CA"
                } else if cert.kind == CertKind::Authority {
                    "kubeadm never renews a CA: plan its rotation"
                } else {
                    "this hop's kubeadm upgrade renews it on the control plane it runs on"
                };
                soon.push(format!("{what} expires on {}; {who}", cert.expires));
            }
            Some(_) => {}
        }
    }
    if !expired.is_empty() {
        let mut details = expired;
        details.extend(soon);
        return Check {
            name: CheckName::Certificates,
            verdict: Verdict::Block,
            summary: "a kubeadm certificate has expired".to_string(),
            details,
            remedy: Some(
                "renew on every control-plane node with `kubeadm certs renew all`, then restart \
                 the control-plane static pods (the kubeadm certificate-management docs) and \
                 plan again"
                    .to_string(),
            ),
        };
    }
    if !soon.is_empty() {
        return Check {
            name: CheckName::Certificates,
            verdict: Verdict::Warn,
            summary: format!("kubeadm certificates expire within {WARN_DAYS} days, or are missing"),
            details: soon,
            remedy: Some(
                "finish the upgrade before they expire, or renew now with \
                 `kubeadm certs renew` on each control-plane node"
                    .to_string(),
            ),
        };
    }
    Check::pass(
        CheckName::Certificates,
        format!("no kubeadm certificate expires within {WARN_DAYS} days"),
    )
}

/// Where each column of a table starts, from its header line.
struct Columns {
    expires: usize,
    residual: usize,
    authority: Option<usize>,
    external: Option<usize>,
}

impl Columns {
    fn header(line: &str) -> Option<(CertKind, Columns)> {
        let kind = if line.starts_with("CERTIFICATE AUTHORITY") {
            CertKind::Authority
        } else if line.starts_with("CERTIFICATE") {
            CertKind::Certificate
        } else {
            return None;
        };
        let after_first = "CERTIFICATE".len();
        let columns = Columns {
            expires: line.find("EXPIRES")?,
            residual: line.find("RESIDUAL TIME")?,
            authority: match kind {
                CertKind::Certificate => line[after_first..]
                    .find("CERTIFICATE AUTHORITY")
                    .map(|i| i + after_first),
                CertKind::Authority => None,
            },
            external: line.find("EXTERNALLY MANAGED"),
        };
        Some((kind, columns))
    }

    fn row(&self, kind: CertKind, line: &str) -> Result<CertExpiration> {
        let cell = |start: usize, end: Option<usize>| -> &str {
            let end = end.unwrap_or(line.len()).min(line.len());
            line.get(start.min(end)..end).unwrap_or("").trim()
        };
        let ends: Vec<usize> = {
            let mut starts = vec![self.expires, self.residual];
            starts.extend(self.authority);
            starts.extend(self.external);
            starts.sort();
            starts
        };
        let end_of = |start: usize| ends.iter().copied().find(|e| *e > start);
        // Read before cutting cells: the name can be wider than the column.
        if let Some(missing) = line.trim_start().strip_prefix("!MISSING!") {
            return Ok(CertExpiration {
                name: missing.trim().to_string(),
                kind,
                expires: String::new(),
                residual: None,
                authority: None,
                externally_managed: false,
                missing: true,
            });
        }
        let name = cell(0, Some(self.expires));
        let residual_text = cell(self.residual, end_of(self.residual));
        let Some(residual) = Residual::parse(residual_text) else {
            bail!("`{residual_text}` is not a residual time like 364d or <invalid>, in: {line}");
        };
        Ok(CertExpiration {
            name: name.to_string(),
            kind,
            expires: cell(self.expires, end_of(self.expires)).to_string(),
            residual: Some(residual),
            authority: self
                .authority
                .map(|a| cell(a, end_of(a)).to_string())
                .filter(|a| !a.is_empty()),
            externally_managed: self.external.is_some_and(|e| cell(e, None) == "yes"),
            missing: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
        std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
    }

    #[test]
    fn residual_times_as_short_human_duration_prints_them() {
        assert_eq!(Residual::parse("364d"), Some(Residual::Left(364 * DAY)));
        assert_eq!(Residual::parse("10h"), Some(Residual::Left(36_000)));
        assert_eq!(Residual::parse("59m"), Some(Residual::Left(3540)));
        assert_eq!(Residual::parse("0s"), Some(Residual::Left(0)));
        assert_eq!(Residual::parse("9y"), Some(Residual::Left(9 * 365 * DAY)));
        assert_eq!(Residual::parse("<invalid>"), Some(Residual::Expired));
        for bad in ["", "d", "12", "3w", "-1d", "99999999999999999999y"] {
            assert_eq!(Residual::parse(bad), None, "{bad}");
        }
        assert!(Residual::Left(29 * DAY).within_days(30));
        assert!(!Residual::Left(30 * DAY).within_days(30));
    }

    #[test]
    fn reads_both_tables_of_real_output() {
        let certs = parse_check_expiration(&fixture("kubeadm-certs-check-expiration.txt")).unwrap();
        assert_eq!(certs.len(), 8);
        assert_eq!(
            certs[4],
            CertExpiration {
                name: "front-proxy-client".into(),
                kind: CertKind::Certificate,
                expires: "Apr 09, 2024 09:16 UTC".into(),
                residual: Some(Residual::Left(348 * DAY)),
                authority: Some("front-proxy-ca".into()),
                externally_managed: false,
                missing: false,
            }
        );
        assert_eq!(
            certs[6],
            CertExpiration {
                name: "ca".into(),
                kind: CertKind::Authority,
                expires: "Nov 03, 2029 14:13 UTC".into(),
                residual: Some(Residual::Left(6 * 365 * DAY)),
                authority: None,
                externally_managed: false,
                missing: false,
            }
        );
        assert_eq!(check_certificates(&certs).verdict, Verdict::Pass);
    }

    #[test]
    fn empty_cells_older_columns_and_missing_rows() {
        // v1.19-era rows (sealerio/sealer#753): no CA for the .conf files.
        let old = "\
CERTIFICATE                EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY   EXTERNALLY MANAGED
admin.conf                 Apr 02, 2119 08:22 UTC   98y                                     no      
etcd-server                Apr 01, 2120 08:22 UTC   99y             etcd-ca                 yes     
!MISSING! front-proxy-client                                                                
";
        let certs = parse_check_expiration(old).unwrap();
        assert_eq!(certs[0].authority, None);
        assert_eq!(certs[0].residual, Some(Residual::Left(98 * 365 * DAY)));
        assert_eq!(certs[1].authority.as_deref(), Some("etcd-ca"));
        assert!(certs[1].externally_managed);
        assert!(certs[2].missing);
        assert_eq!(certs[2].name, "front-proxy-client");
        // Before CAs were listed (vmware-archive/container-service-extension#974).
        let older = "\
CERTIFICATE                EXPIRES                  RESIDUAL TIME   EXTERNALLY MANAGED
apiserver                  Aug 14, 2021 11:45 UTC   140d            no
";
        let certs = parse_check_expiration(older).unwrap();
        assert_eq!(certs[0].residual, Some(Residual::Left(140 * DAY)));
        assert_eq!(certs[0].authority, None);
    }

    #[test]
    fn no_table_or_a_garbled_residual_is_an_error() {
        let failed = "error execution phase: failed to load configuration: …\n";
        assert!(parse_check_expiration(failed).is_err());
        let garbled = "CERTIFICATE   EXPIRES   RESIDUAL TIME\napiserver     soon      whenever\n";
        assert!(parse_check_expiration(garbled).is_err());
    }

    #[test]
    fn warns_within_thirty_days_and_says_who_renews() {
        let text = fixture("kubeadm-certs-check-expiration.txt")
            .replace(
                "apiserver                  Apr 09, 2024 09:16 UTC   348d ",
                "apiserver                  Apr 09, 2024 09:16 UTC   29d  ",
            )
            .replace(
                "front-proxy-ca          Nov 03, 2029 14:13 UTC   6y ",
                "front-proxy-ca          Nov 03, 2029 14:13 UTC   10h",
            );
        let check = check_certificates(&parse_check_expiration(&text).unwrap());
        assert_eq!(check.verdict, Verdict::Warn);
        assert_eq!(
            check.details,
            [
                "certificate apiserver expires on Apr 09, 2024 09:16 UTC; this hop's kubeadm \
                 upgrade renews it on the control plane it runs on",
                "certificate authority front-proxy-ca expires on Nov 03, 2029 14:13 UTC; kubeadm \
                 never renews a CA: plan its rotation",
            ]
        );
    }

    #[test]
    fn an_expired_certificate_blocks() {
        let text = fixture("kubeadm-certs-check-expiration.txt").replace(
            "admin.conf                 Apr 09, 2024 09:17 UTC   348d     ",
            "admin.conf                 Apr 09, 2024 09:17 UTC   <invalid>",
        );
        let check = check_certificates(&parse_check_expiration(&text).unwrap());
        assert_eq!(check.verdict, Verdict::Block);
        assert_eq!(
            check.details,
            ["certificate admin.conf expired on Apr 09, 2024 09:17 UTC"]
        );
        assert!(check.remedy.unwrap().contains("kubeadm certs renew all"));
    }
}

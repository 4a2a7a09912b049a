//! `Match` blocks in `~/.ssh/config`, evaluated for one host as OpenSSH's
//! client evaluates them (openssh-portable `readconf.c`, `match_cfg_line`),
//! then handed to the parser (ssh2-config, which has no `Match`) as `Host`
//! blocks that do or do not apply:
//! - `all` matches; `canonical` and `final` match only in the final pass,
//!   which `Match final` asks for (fleetctl never canonicalises host names,
//!   so that is the only reason for one); options set in the first pass
//!   keep their values, as everywhere in ssh_config (first obtained wins);
//! - `host` compares with the host name as configured so far (`HostName`,
//!   `%h` expanded) and `originalhost` with the name as given, each a
//!   comma-separated pattern list with `!` negation, case-insensitive
//!   (`match_hostname`); `user` the remote user as configured so far, else
//!   the local user, and `localuser` the local user (`match_pattern_list`,
//!   case-sensitive);
//! - every criterion of a line must match; a `!` negates one;
//! - `exec` is never run: it is refused naming the line, so that nothing
//!   runs on the laptop from a config line fleetctl does not own; so is any
//!   criterion fleetctl does not evaluate (`address`, `tagged`, …).
//!
//! `Match` in a file `Include`d from the config is not rewritten: the
//! parser reports it as before (config.rs refuses one that would apply).

use std::path::Path;

use anyhow::bail;
use ssh2_config::{HostParams, SshConfig};

/// At most this many `Match` lines: each costs a parse of the lines above it.
const MAX_MATCHES: usize = 64;
/// The name a `Host` line gets for a `Match` that does not apply: `.invalid`
/// is reserved (RFC 2606), so no node is ever called that.
const NEVER: &str = "Host fleetctl-match-does-not-apply.invalid";

/// The config's text and home directory; parsed per host when it has
/// `Match` lines, once otherwise.
#[derive(Debug)]
pub struct ConfigText {
    text: String,
    home: std::path::PathBuf,
    plain: Option<SshConfig>,
}

impl ConfigText {
    pub fn new(text: String, home: &Path) -> anyhow::Result<ConfigText> {
        let matches = match_lines(&text).count();
        if matches > MAX_MATCHES {
            bail!("{matches} Match lines; fleetctl evaluates at most {MAX_MATCHES}");
        }
        let plain = match matches {
            0 => Some(super::parse_ssh_config(&mut text.as_bytes(), home)?),
            _ => None,
        };
        Ok(ConfigText {
            text,
            home: home.to_path_buf(),
            plain,
        })
    }

    /// The options for `host`, `Match` blocks evaluated. `given_user` is the
    /// login the inventory names (as `ssh user@host` gives one before the
    /// config is read, so `Match user` sees it); `local_user` the
    /// operator's (`localuser`, and `user` when nothing sets one).
    pub fn query(
        &self,
        host: &str,
        given_user: Option<&str>,
        local_user: Option<&str>,
    ) -> anyhow::Result<HostParams> {
        let who = Who {
            given: given_user,
            local: local_user,
        };
        if let Some(plain) = &self.plain {
            return Ok(plain.query(host));
        }
        let first = self.pass(host, &who, false)?;
        if !match_lines(&self.text)
            .any(|(_, words)| words.iter().any(|w| w.eq_ignore_ascii_case("final")))
        {
            return Ok(first.query(host));
        }
        let mut params = first.query(host);
        let second = self.pass(host, &who, true)?;
        params.overwrite_if_none(&second.query(host));
        Ok(params)
    }

    /// The config with every `Match` line replaced by a `Host` line that
    /// applies to `host` or to nothing.
    fn pass(&self, host: &str, who: &Who, final_pass: bool) -> anyhow::Result<SshConfig> {
        let mut lines: Vec<String> = self.text.lines().map(str::to_string).collect();
        let at: Vec<(usize, Vec<String>)> = match_lines(&self.text).collect();
        for (index, words) in at {
            let above = lines[..index].join("\n");
            let so_far = super::parse_ssh_config(&mut above.as_bytes(), &self.home)?.query(host);
            let applies = evaluate(&words, host, who, &so_far, final_pass).map_err(|e| {
                anyhow::anyhow!("line {}: Match {}: {e}", index + 1, words.join(" "))
            })?;
            lines[index] = if applies {
                "Host *".into()
            } else {
                NEVER.into()
            };
        }
        super::parse_ssh_config(&mut lines.join("\n").as_bytes(), &self.home)
    }
}

/// The `Match` lines: their index and criteria words.
fn match_lines(text: &str) -> impl Iterator<Item = (usize, Vec<String>)> + '_ {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.trim();
        let (key, rest) = line
            .split_once(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or((line, ""));
        key.eq_ignore_ascii_case("match").then(|| {
            let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '=');
            let words = rest
                .split_whitespace()
                .take_while(|w| !w.starts_with('#'))
                .map(|w| w.trim_matches('"').to_string())
                .collect();
            (i, words)
        })
    })
}

/// The users a `Match` line can ask about.
struct Who<'a> {
    given: Option<&'a str>,
    local: Option<&'a str>,
}

/// One `Match` line's verdict for `host`.
fn evaluate(
    words: &[String],
    host: &str,
    who: &Who,
    so_far: &HostParams,
    final_pass: bool,
) -> Result<bool, String> {
    if words.is_empty() {
        return Err("no criteria".into());
    }
    let target = so_far
        .host_name
        .as_deref()
        .map_or_else(|| host.to_string(), |h| h.replace("%h", host))
        .to_ascii_lowercase();
    let user = who
        .given
        .or(so_far.user.as_deref())
        .or(who.local)
        .unwrap_or("");
    let local = who.local.unwrap_or("");
    let mut result = true;
    let mut it = words.iter();
    let mut attributes = 0;
    while let Some(word) = it.next() {
        let (negate, attr) = match word.strip_prefix('!') {
            Some(a) => (true, a),
            None => (false, word.as_str()),
        };
        let attr = attr.to_ascii_lowercase();
        if attr == "all" {
            if attributes > 1 || it.next().is_some() {
                return Err("'all' cannot be combined with other Match attributes".into());
            }
            return Ok(result && !negate);
        }
        attributes += 1;
        if attr == "canonical" || attr == "final" {
            if final_pass == negate {
                result = false;
            }
            continue;
        }
        let arg = it
            .next()
            .ok_or_else(|| format!("missing criteria for {attr}"))?;
        let matched = match attr.as_str() {
            "host" => list(&arg.to_ascii_lowercase(), &target),
            "originalhost" => list(&arg.to_ascii_lowercase(), &host.to_ascii_lowercase()),
            "user" => list(arg, user),
            "localuser" => list(arg, local),
            "exec" => {
                return Err("fleetctl never runs `Match exec` commands: rewrite the block as Match host/user, \
                     or as a Host block"
                    .into());
            }
            other => {
                return Err(format!(
                    "fleetctl does not evaluate `{other}`: it evaluates all, host, originalhost, user, \
                     localuser, canonical and final"
                ));
            }
        };
        if matched == negate {
            result = false;
        }
    }
    Ok(result)
}

/// OpenSSH's `match_pattern_list`: a comma-separated list of patterns; a
/// `!pattern` that matches makes the whole list fail.
fn list(patterns: &str, name: &str) -> bool {
    let mut matched = false;
    for p in patterns.split(',') {
        match p.strip_prefix('!') {
            Some(negated) if crate::ssh::known_hosts::glob(negated, name) => return false,
            Some(_) => {}
            None => matched |= crate::ssh::known_hosts::glob(p, name),
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(text: &str, host: &str) -> anyhow::Result<HostParams> {
        ConfigText::new(text.into(), Path::new("/home/op"))?.query(host, None, Some("op"))
    }

    #[test]
    fn match_host_applies_to_its_hosts_only() {
        let text =
            "Match host 10.0.0.*,!10.0.0.9\n  User core\n  Port 2200\nHost *\n  User fallback\n";
        let p = params(text, "10.0.0.5").unwrap();
        assert_eq!((p.user.as_deref(), p.port), (Some("core"), Some(2200)));
        let p = params(text, "10.0.0.9").unwrap();
        assert_eq!((p.user.as_deref(), p.port), (Some("fallback"), None));
    }

    #[test]
    fn host_is_the_hostname_so_far_and_originalhost_the_name_given() {
        let text = "Host cp1\n  HostName 10.1.1.1\nMatch host 10.1.1.*\n  Port 2201\nMatch originalhost cp1\n  User ops\n";
        let p = params(text, "cp1").unwrap();
        assert_eq!(p.port, Some(2201));
        assert_eq!(p.user.as_deref(), Some("ops"));
        let p = params(text, "10.1.1.1").unwrap();
        assert_eq!((p.port, p.user.as_deref()), (Some(2201), None));
    }

    #[test]
    fn user_is_the_user_so_far_else_the_local_one() {
        let text = "Match user op\n  Port 1\nHost x\n  User core\nMatch user core\n  IdentityFile ~/.ssh/core\n";
        let p = params(text, "x").unwrap();
        assert_eq!(p.port, Some(1));
        assert!(p.identity_file.unwrap()[0].ends_with(".ssh/core"));
        let p = params("Match localuser op !user root\n  Port 7\n", "y").unwrap();
        assert_eq!(p.port, Some(7));
    }

    #[test]
    fn final_applies_in_the_final_pass_without_overriding_the_first() {
        let text = "Match final\n  User late\n  Port 9\nHost z\n  Port 10\n";
        let p = params(text, "z").unwrap();
        assert_eq!((p.user.as_deref(), p.port), (Some("late"), Some(10)));
        let p = params("Match canonical\n  User never\n", "z").unwrap();
        assert_eq!(p.user, None);
        let p = params("Match all\n  User all\n", "z").unwrap();
        assert_eq!(p.user.as_deref(), Some("all"));
    }

    #[test]
    fn exec_and_unknown_criteria_are_refused_naming_the_line() {
        let e = params("Host a\n  Port 1\nMatch exec \"true\"\n  User x\n", "a").unwrap_err();
        let e = format!("{e:#}");
        assert!(
            e.contains("line 3") && e.contains("never runs `Match exec`"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            params("Match address 10.0.0.0/8\n  User x\n", "a").unwrap_err()
        );
        assert!(e.contains("does not evaluate `address`"), "{e}");
        assert!(params("Match host\n", "a").is_err());
    }
}

//! `journalctl -u kubelet [-b] [-n N] [--no-pager]`: the kubelet's journal
//! (`crate::journal`) in journald's short format, one boot after another
//! with `-- Boot <id> --` between them, or only this boot with `-b`. It is
//! where an operator reads why a kubelet did not start. The sim's journal
//! holds only `kubelet.service`, so a query without `-u` is refused rather
//! than answered with a journal that looks nearly empty.

use anyhow::Result;

use super::{Env, say};
use crate::journal;

const NAME: &str = "journalctl";

#[derive(Debug, Default, PartialEq)]
struct Cli {
    units: Vec<String>,
    /// `Some(0)` this boot, `Some(-1)` the one before, …
    boot: Option<i64>,
    lines: Option<usize>,
    quiet: bool,
}

fn unit_name(u: &str) -> String {
    if u.contains('.') {
        u.to_string()
    } else {
        format!("{u}.service")
    }
}

/// journalctl's options as far as the sim answers them; `None` otherwise.
fn parse(args: &[String]) -> Option<Cli> {
    let mut cli = Cli::default();
    let mut i = 0;
    let boot_offset = |s: &str| s.parse::<i64>().ok().filter(|n| *n <= 0);
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).map(String::as_str);
        match a {
            "--no-pager" | "-l" | "--full" => {}
            "-q" | "--quiet" => cli.quiet = true,
            "-u" | "--unit" => {
                cli.units.push(unit_name(next?));
                i += 1;
            }
            "-b" | "--boot" => {
                // The offset is optional and, as in journalctl, only taken
                // when it looks like one.
                match next.and_then(boot_offset) {
                    Some(n) => {
                        cli.boot = Some(n);
                        i += 1;
                    }
                    None => cli.boot = Some(0),
                }
            }
            "-n" | "--lines" => match next.and_then(|n| n.parse().ok()) {
                Some(n) => {
                    cli.lines = Some(n);
                    i += 1;
                }
                None => cli.lines = Some(10),
            },
            "-o" | "--output" if next == Some("short") => i += 1,
            "--output=short" | "-oshort" => {}
            _ => {
                if let Some(u) = a.strip_prefix("--unit=").or_else(|| a.strip_prefix("-u")) {
                    cli.units.push(unit_name(u));
                } else if let Some(b) = a.strip_prefix("--boot=").or_else(|| a.strip_prefix("-b")) {
                    cli.boot = Some(boot_offset(b)?);
                } else if let Some(n) = a.strip_prefix("--lines=").or_else(|| a.strip_prefix("-n"))
                {
                    cli.lines = Some(n.parse().ok()?);
                } else {
                    return None;
                }
            }
        }
        i += 1;
    }
    (!cli.units.is_empty()).then_some(cli)
}

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let Some(cli) = parse(args) else {
        return Ok(env.unsupported(NAME, args));
    };
    let boot = env.boot()?;
    let mut entries: Vec<journal::Entry> = journal::read(&env.path(journal::JOURNAL_FILE))?
        .into_iter()
        .filter(|e| cli.units.contains(&e.unit))
        .collect();
    if let Some(offset) = cli.boot {
        // Boots in the order they first appear; 0 is this one.
        let mut boots: Vec<String> = Vec::new();
        for e in &entries {
            if !boots.contains(&e.boot) {
                boots.push(e.boot.clone());
            }
        }
        if !boots.contains(&boot.boot_id) {
            boots.push(boot.boot_id.clone());
        }
        let current = boots.iter().position(|b| *b == boot.boot_id).unwrap_or(0) as i64;
        let Some(wanted) = usize::try_from(current + offset)
            .ok()
            .and_then(|i| boots.get(i).cloned())
        else {
            super::complain!(
                env,
                "Data from the specified boot ({offset:+}) is not available: No such boot ID in journal"
            );
            return Ok(1);
        };
        entries.retain(|e| e.boot == wanted);
    }
    if let Some(n) = cli.lines {
        entries.drain(..entries.len().saturating_sub(n));
    }
    if entries.is_empty() {
        if !cli.quiet {
            say!(env, "-- No entries --");
        }
        return Ok(0);
    }
    let mut last_boot: Option<&str> = None;
    for e in &entries {
        if last_boot.is_some_and(|b| b != e.boot) {
            say!(env, "-- Boot {} --", e.boot.replace('-', ""));
        }
        last_boot = Some(&e.boot);
        say!(env, "{}", journal::short_line(e, &boot.name));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;
    use super::*;
    use crate::journal::{Entry, JOURNAL_FILE};

    fn entry(t: f64, boot: &str, ident: &str, msg: &str) -> Entry {
        Entry {
            t,
            boot: boot.into(),
            unit: "kubelet.service".into(),
            ident: ident.into(),
            pid: if ident == "systemd" { 1 } else { 4 },
            message: msg.into(),
        }
    }

    fn node_with_two_boots() -> Node {
        let node = Node::worker("w1", "v1.35.0");
        // 2025-12-01 15:04:05 UTC and ten seconds later; this boot is boot-w1.
        let t0 = 1_764_601_445.0;
        let lines = [
            entry(
                t0,
                "1111-old",
                "systemd",
                "Started kubelet.service - kubelet: The Kubernetes Node Agent.",
            ),
            entry(
                t0 + 100.0,
                "boot-w1",
                "kubelet",
                "E1201 15:05:45.000000       4 run.go:72] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image\"",
            ),
            entry(
                t0 + 100.0,
                "boot-w1",
                "systemd",
                "kubelet.service: Main process exited, code=exited, status=1/FAILURE",
            ),
        ];
        journal::append(&node.path(JOURNAL_FILE), &lines).unwrap();
        node
    }

    #[test]
    fn the_whole_journal_with_boot_separators() {
        let node = node_with_two_boots();
        let r = node.run("journalctl", &["-u", "kubelet", "--no-pager"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            r.stdout,
            "Dec 01 15:04:05 w1 systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent.\n\
             -- Boot bootw1 --\n\
             Dec 01 15:05:45 w1 kubelet[4]: E1201 15:05:45.000000       4 run.go:72] \"command failed\" err=\"failed to parse kubelet flag: unknown flag: --pod-infra-container-image\"\n\
             Dec 01 15:05:45 w1 systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE\n"
        );
    }

    #[test]
    fn this_boot_and_the_last_lines() {
        let node = node_with_two_boots();
        let r = node.run("journalctl", &["-u", "kubelet.service", "-b", "-n", "1"]);
        assert_eq!(
            r.stdout,
            "Dec 01 15:05:45 w1 systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE\n"
        );
        let r = node.run("journalctl", &["--unit=kubelet", "-b", "-1"]);
        assert!(r.stdout.contains("Started kubelet.service"), "{}", r.stdout);
        assert_eq!(r.stdout.lines().count(), 1);
        let r = node.run("journalctl", &["-u", "kubelet", "-b", "-2"]);
        assert_eq!(r.code, 1);
    }

    #[test]
    fn no_entries_and_unsupported_queries() {
        let node = Node::worker("w1", "v1.35.0");
        let r = node.run("journalctl", &["-u", "kubelet", "-b"]);
        assert_eq!((r.code, r.stdout.as_str()), (0, "-- No entries --\n"));
        for bad in [
            &["-b"][..],
            &["-u", "kubelet", "-f"],
            &["-u", "kubelet", "-o", "json"],
        ] {
            let r = node.run("journalctl", bad);
            assert_eq!(r.code, 1, "{bad:?}");
            assert!(
                r.stderr.starts_with("fleetsim: unsupported: journalctl"),
                "{bad:?}"
            );
        }
    }
}

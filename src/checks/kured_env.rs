//! Kured's gates from its container's `KURED_*` environment as well as its
//! command line, combined as the Kured release its image names does.
//!
//! Kured binds each flag to `KURED_` + the flag's name upper-cased with `-`
//! turned to `_` (`--blocking-pod-selector` is `KURED_BLOCKING_POD_SELECTOR`):
//!
//! - before 1.9.0: no environment variables;
//! - 1.9.0 to 1.16.1 (viper, `bindFlags` in `cmd/kured/main.go`): a
//!   variable fills in a flag **not given** on the command line
//!   (`!f.Changed && v.IsSet`), through `Flags().Set`, so a list flag reads
//!   it as one more occurrence; the flag wins;
//! - from 1.16.2 (`LoadFromEnv`, commit a8132a2 "Remove viper/cobra deps",
//!   called after `flag.Parse`): a variable wins over a single-value flag
//!   (`flag.Set` again); for a `stringSlice` flag (`--reboot-days`, the
//!   label flags) pflag's `Set` appends to what the command line gave, or
//!   replaces the default; a `stringArray` flag (`--blocking-pod-selector`)
//!   is an "Unsupported flag type" there and its variable is ignored; a
//!   bool that `strconv.ParseBool` refuses makes Kured exit.
//!
//! An image whose tag names no release: a variable that agrees with the
//! flag, or a flag or variable alone, reads the same under both rules
//! (`KURED_BLOCKING_POD_SELECTOR` alone is taken, holding more); a
//! variable and a flag that disagree are refused, as fleetctl cannot know
//! which one Kured uses.
//!
//! A variable set from a ConfigMap or Secret (`valueFrom`) that the rule
//! says Kured uses is refused: fleetctl cannot read it, and a gate it
//! cannot read could hold any node (a selector, a Prometheus URL) or narrow
//! the window, so apply stops right after the lock (given back), before any
//! node, rather than guess. The same as the lock's own settings
//! (`crate::steps::lock`'s discovery).

use anyhow::{Result, bail};

use super::kured_flags::{KuredGates, parse_kured_gates};

/// One variable of Kured's container's `env`: its name and literal value
/// (`None`: set from a ConfigMap or Secret, `valueFrom`).
pub type KuredEnvVar = (String, Option<String>);

/// How a Kured release combines `KURED_*` with its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvPrecedence {
    /// Before 1.9.0.
    Ignored,
    /// 1.9.0 to 1.16.1.
    FlagFirst,
    /// 1.16.2 and later.
    EnvFirst,
    /// The image tag names no release.
    Unknown,
}

/// From the image tag: `ghcr.io/kubereboot/kured:1.17.1` (a `v` allowed).
pub fn env_precedence(image: &str) -> EnvPrecedence {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    let Some((_, tag)) = last.split_once(':') else {
        return EnvPrecedence::Unknown;
    };
    let mut parts = tag.trim_start_matches('v').splitn(3, '.');
    let mut number = || parts.next().and_then(|p| p.parse::<u64>().ok());
    match (number(), number(), number()) {
        (Some(major), Some(minor), Some(patch)) => match (major, minor, patch) {
            (1, 0..=8, _) | (0, _, _) => EnvPrecedence::Ignored,
            (1, 9..=15, _) | (1, 16, 0..=1) => EnvPrecedence::FlagFirst,
            _ => EnvPrecedence::EnvFirst,
        },
        _ => EnvPrecedence::Unknown,
    }
}

/// The gate flags Kured reads, and whether each is a list (`stringSlice`,
/// `stringArray`) rather than a single value.
const GATE_FLAGS: &[(&str, FlagShape)] = &[
    ("blocking-pod-selector", FlagShape::Array),
    ("prometheus-url", FlagShape::Single),
    ("alert-filter-regexp", FlagShape::Single),
    ("alert-filter-match-only", FlagShape::Single),
    ("alert-firing-only", FlagShape::Single),
    ("pre-reboot-node-labels", FlagShape::Slice),
    ("post-reboot-node-labels", FlagShape::Slice),
    ("reboot-days", FlagShape::Slice),
    ("start-time", FlagShape::Single),
    ("end-time", FlagShape::Single),
    ("time-zone", FlagShape::Single),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlagShape {
    Single,
    Slice,
    Array,
}

/// The values `--flag` has on `argv` (none when not given), flags ending at `--`.
fn given(argv: &[String], flag: &str) -> Vec<String> {
    let (bare, eq) = (format!("--{flag}"), format!("--{flag}="));
    let mut found = Vec::new();
    let mut words = argv.iter().skip(1);
    while let Some(w) = words.next() {
        if w == "--" {
            break;
        }
        if let Some(v) = w.strip_prefix(&eq) {
            found.push(v.to_string());
        } else if *w == bare {
            // A bool takes no next word; the others do.
            match flag {
                "alert-filter-match-only" | "alert-firing-only" => found.push("true".into()),
                _ => found.extend(words.next().cloned()),
            }
        }
    }
    found
}

/// Kured's gates from `argv` and `env` (a literal value, or `None` for a
/// `valueFrom`) under `rule`. `daemonset` names it in errors.
pub fn parse_kured_settings(
    daemonset: &str,
    argv: &[String],
    env: &[KuredEnvVar],
    rule: EnvPrecedence,
) -> Result<KuredGates> {
    let mut effective = argv.to_vec();
    // Flags after `--` are not flags: put the variables before it.
    let end = effective
        .iter()
        .position(|w| w == "--")
        .unwrap_or(effective.len());
    let mut added = Vec::new();
    for (flag, kind) in GATE_FLAGS {
        let var = format!("KURED_{}", flag.to_uppercase().replace('-', "_"));
        let Some((_, value)) = env.iter().rev().find(|(name, _)| *name == var) else {
            continue;
        };
        let on_line = given(argv, flag);
        let used = match (rule, kind) {
            (EnvPrecedence::Ignored, _) => false,
            (EnvPrecedence::FlagFirst, _) => on_line.is_empty(),
            (EnvPrecedence::EnvFirst, FlagShape::Array) => false,
            (EnvPrecedence::EnvFirst, _) => true,
            (EnvPrecedence::Unknown, _) => true,
        };
        if !used {
            continue;
        }
        let Some(value) = value else {
            bail!(
                "Kured's daemonset {daemonset} sets {var} from a ConfigMap or Secret (valueFrom), \
                 which fleetctl cannot read, and Kured uses it for --{flag}: fleetctl will not \
                 guess a gate. Set it as a literal value or pass --{flag} on Kured's command \
                 line (or run with --no-kured-gates)"
            );
        };
        if rule == EnvPrecedence::Unknown && !on_line.is_empty() && on_line != [value.clone()] {
            bail!(
                "Kured's daemonset {daemonset} sets --{flag}={} and {var}={value}; Kured 1.9 to \
                 1.16.1 uses the flag, 1.16.2 and later the variable{}, and its image does not \
                 say which release this is. Make them agree",
                on_line.join(","),
                match kind {
                    FlagShape::Slice => " as well",
                    _ => "",
                }
            );
        }
        if rule == EnvPrecedence::Unknown && !on_line.is_empty() {
            continue;
        }
        if matches!(flag, &"alert-filter-match-only" | &"alert-firing-only")
            && !matches!(
                value.as_str(),
                "1" | "t"
                    | "T"
                    | "true"
                    | "TRUE"
                    | "True"
                    | "0"
                    | "f"
                    | "F"
                    | "false"
                    | "FALSE"
                    | "False"
            )
        {
            bail!(
                "Kured's daemonset {daemonset} sets {var}={value:?}, not a boolean: Kured exits on it"
            );
        }
        added.push(format!("--{flag}={value}"));
    }
    effective.splice(end..end, added);
    parse_kured_gates(&effective)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn env(vars: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        vars.iter()
            .map(|(n, v)| (n.to_string(), v.map(String::from)))
            .collect()
    }

    #[test]
    fn the_release_decides_the_precedence() {
        assert_eq!(
            env_precedence("ghcr.io/kubereboot/kured:1.8.2"),
            EnvPrecedence::Ignored
        );
        assert_eq!(env_precedence("kured:1.9.0"), EnvPrecedence::FlagFirst);
        assert_eq!(env_precedence("kured:v1.16.1"), EnvPrecedence::FlagFirst);
        assert_eq!(env_precedence("kured:1.16.2"), EnvPrecedence::EnvFirst);
        assert_eq!(
            env_precedence("kured:1.17.1@sha256:ab"),
            EnvPrecedence::EnvFirst
        );
        assert_eq!(env_precedence("kured:latest"), EnvPrecedence::Unknown);
        assert_eq!(env_precedence("kured"), EnvPrecedence::Unknown);
    }

    #[test]
    fn variables_combine_with_flags_as_each_release_does() {
        let argv = words(&[
            "/usr/bin/kured",
            "--prometheus-url=http://flag:9090",
            "--reboot-days=mon",
        ]);
        let vars = env(&[
            ("KURED_PROMETHEUS_URL", Some("http://env:9090")),
            ("KURED_REBOOT_DAYS", Some("sat,sun")),
            ("KURED_BLOCKING_POD_SELECTOR", Some("app=backup")),
            ("KURED_ALERT_FIRING_ONLY", Some("true")),
            ("KURED_NODE_ID", None),
        ]);
        // 1.16.2+: the variable wins, a slice appends, the array is ignored.
        let g = parse_kured_settings("ks/kured", &argv, &vars, EnvPrecedence::EnvFirst).unwrap();
        assert_eq!(g.prometheus_url.as_deref(), Some("http://env:9090"));
        assert_eq!(g.reboot_days, ["mon", "sat", "sun"]);
        assert!(g.pod_selectors.is_empty());
        assert!(g.alert_firing_only);
        // 1.9 to 1.16.1: the flag wins; a variable fills what no flag gave.
        let g = parse_kured_settings("ks/kured", &argv, &vars, EnvPrecedence::FlagFirst).unwrap();
        assert_eq!(g.prometheus_url.as_deref(), Some("http://flag:9090"));
        assert_eq!(g.reboot_days, ["mon"]);
        assert_eq!(g.pod_selectors, ["app=backup"]);
        // Before 1.9: no variables.
        let g = parse_kured_settings("ks/kured", &argv, &vars, EnvPrecedence::Ignored).unwrap();
        assert!(g.pod_selectors.is_empty() && !g.alert_firing_only);
        // No release known: disagreement is refused, agreement or one alone read.
        assert!(parse_kured_settings("ks/kured", &argv, &vars, EnvPrecedence::Unknown).is_err());
        let alone = env(&[("KURED_BLOCKING_POD_SELECTOR", Some("app=backup"))]);
        let g = parse_kured_settings("ks/kured", &argv, &alone, EnvPrecedence::Unknown).unwrap();
        assert_eq!(g.pod_selectors, ["app=backup"]);
        // Variables go before `--`, where flags end.
        let dashed = words(&["kured", "--", "x"]);
        let g =
            parse_kured_settings("ks/kured", &dashed, &alone, EnvPrecedence::FlagFirst).unwrap();
        assert_eq!(g.pod_selectors, ["app=backup"]);
    }

    #[test]
    fn an_unreadable_or_bad_variable_kured_uses_is_refused() {
        let argv = words(&["/usr/bin/kured", "--prometheus-url=http://flag:9090"]);
        let secret = env(&[("KURED_PROMETHEUS_URL", None)]);
        let e = parse_kured_settings("ks/kured", &argv, &secret, EnvPrecedence::EnvFirst)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("KURED_PROMETHEUS_URL from a ConfigMap or Secret"),
            "{e}"
        );
        // ... but not when that release ignores it.
        assert!(parse_kured_settings("ks/kured", &argv, &secret, EnvPrecedence::FlagFirst).is_ok());
        let selector = env(&[("KURED_BLOCKING_POD_SELECTOR", None)]);
        assert!(
            parse_kured_settings("ks/kured", &argv, &selector, EnvPrecedence::EnvFirst).is_ok()
        );
        let bad = env(&[("KURED_ALERT_FIRING_ONLY", Some("yes"))]);
        assert!(parse_kured_settings("ks/kured", &argv, &bad, EnvPrecedence::EnvFirst).is_err());
        let label = env(&[("KURED_PRE_REBOOT_NODE_LABELS", Some("bad key=x"))]);
        assert!(parse_kured_settings("ks/kured", &argv, &label, EnvPrecedence::EnvFirst).is_err());
    }
}

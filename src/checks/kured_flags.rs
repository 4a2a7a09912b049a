//! Kured's own gates, read from its container's command line: while
//! fleetctl holds Kured's lock, Kured checks nothing, so fleetctl checks
//! before each reboot what Kured would have.
//!
//! What Kured checks before it reboots a node (kubereboot/kured
//! `cmd/kured/main.go`, its flags and `rebootAsRequired`; `pkg/blockers/`):
//!
//! - `--blocking-pod-selector` (repeatable, one label selector each,
//!   pflag's StringArray): `KubernetesBlockingChecker.IsBlocked`
//!   (`pkg/blockers/kubernetespod.go`) lists the pods of every namespace
//!   with that label selector and the field selector
//!   `spec.nodeName=<node>,status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown`;
//!   any pod holds that node's reboot, and a list that fails holds too;
//! - `--prometheus-url` with `--alert-filter-regexp`,
//!   `--alert-filter-match-only` and `--alert-firing-only`
//!   (`pkg/blockers/prometheus.go`): the alerts of the `ALERTS` query hold
//!   every node (`crate::pacing::alert_gate`);
//! - `--pre-reboot-node-labels` / `--post-reboot-node-labels` (comma
//!   separated `key=value`, pflag's StringSlice): labels Kured sets on the
//!   node before it cordons and drains it (`drain`) and after it uncordons
//!   it once back (`uncordon`), each with a strategic merge patch of
//!   `metadata.labels` (`updateNodeLabels`); read and checked by
//!   `super::node_labels`;
//! - `--reboot-days`, `--start-time`, `--end-time`, `--time-zone`: Kured's
//!   reboot window.
//!
//! Flags are read as pflag reads them: `--flag=value` or `--flag value`
//! for a value, `--flag` or `--flag=true|false` for a boolean (a bool
//! flag never takes the next word), the last one wins for a single value,
//! every one counts for a list; flags end at `--`. Bounded: a command line
//! is at most [`MAX_ARGS`] words of [`MAX_VALUE`] bytes each as far as
//! these flags go; anything past that is refused, not guessed.

use anyhow::{Result, bail};

use super::node_labels::{NodeLabel, parse_node_labels};

/// The most words of Kured's command line read.
pub const MAX_ARGS: usize = 512;
/// The longest value of one flag read.
pub const MAX_VALUE: usize = 4096;
/// The most blocking pod selectors taken over.
const MAX_SELECTORS: usize = 32;

/// Kured's gates, as its command line sets them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KuredGates {
    pub pod_selectors: Vec<String>,
    pub prometheus_url: Option<String>,
    pub alert_filter_regexp: Option<String>,
    pub alert_filter_match_only: bool,
    pub alert_firing_only: bool,
    pub pre_reboot_node_labels: Vec<NodeLabel>,
    pub post_reboot_node_labels: Vec<NodeLabel>,
    pub reboot_days: Vec<String>,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    pub time_zone: Option<String>,
}

/// Kured's value flags this reads, and its bool flags.
const VALUE_FLAGS: &[&str] = &[
    "blocking-pod-selector",
    "prometheus-url",
    "alert-filter-regexp",
    "pre-reboot-node-labels",
    "post-reboot-node-labels",
    "reboot-days",
    "start-time",
    "end-time",
    "time-zone",
];
const BOOL_FLAGS: &[&str] = &["alert-filter-match-only", "alert-firing-only"];

/// Every (flag, value) of `argv` among the flags above, in order.
fn flags(argv: &[String]) -> Result<Vec<(&'static str, String)>> {
    if argv.len() > MAX_ARGS {
        bail!(
            "Kured's command line has {} words; fleetctl reads at most {MAX_ARGS}",
            argv.len()
        );
    }
    let mut found = Vec::new();
    let mut words = argv.iter().skip(1);
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        let Some(flag) = word.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        if let Some(&known) = VALUE_FLAGS.iter().find(|f| **f == name) {
            let value = match inline {
                Some(v) => v,
                None => match words.next() {
                    Some(v) => v.clone(),
                    None => bail!("Kured's --{name} has no value"),
                },
            };
            if value.len() > MAX_VALUE {
                bail!(
                    "Kured's --{name} is {} bytes long; fleetctl reads at most {MAX_VALUE}",
                    value.len()
                );
            }
            found.push((known, value));
        } else if let Some(&known) = BOOL_FLAGS.iter().find(|f| **f == name) {
            let value = inline.unwrap_or_else(|| "true".to_string());
            found.push((known, value));
        }
    }
    Ok(found)
}

/// pflag's bool syntax (strconv.ParseBool).
fn parse_bool(flag: &str, v: &str) -> Result<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => bail!("Kured's --{flag}={v} is not a boolean"),
    }
}

/// A label selector as the API server parses one, in the characters it
/// allows: it becomes one argument of kubectl.
fn selector_ok(s: &str) -> bool {
    !s.trim().is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=!,() ".contains(c))
}

/// pflag's StringSlice: comma separated (CSV, no quoting handled here).
fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// Kured's gates from its container's `command` then `args`.
pub fn parse_kured_gates(argv: &[String]) -> Result<KuredGates> {
    let mut g = KuredGates::default();
    let (mut pre, mut post) = (Vec::new(), Vec::new());
    for (flag, value) in flags(argv)? {
        match flag {
            "blocking-pod-selector" => {
                if !selector_ok(&value) {
                    bail!(
                        "Kured's --blocking-pod-selector={value:?} is not a label selector fleetctl \
                         can pass on (letters, digits, `-_./=!,()` and spaces)"
                    );
                }
                if g.pod_selectors.len() == MAX_SELECTORS {
                    bail!("Kured sets more than {MAX_SELECTORS} --blocking-pod-selector flags");
                }
                g.pod_selectors.push(value);
            }
            "prometheus-url" => g.prometheus_url = Some(value).filter(|v| !v.is_empty()),
            "alert-filter-regexp" => g.alert_filter_regexp = Some(value).filter(|v| !v.is_empty()),
            "alert-filter-match-only" => g.alert_filter_match_only = parse_bool(flag, &value)?,
            "alert-firing-only" => g.alert_firing_only = parse_bool(flag, &value)?,
            "pre-reboot-node-labels" => pre.extend(split_list(&value)),
            "post-reboot-node-labels" => post.extend(split_list(&value)),
            "reboot-days" => g.reboot_days.extend(split_list(&value)),
            "start-time" => g.start_time = Some(value),
            "end-time" => g.end_time = Some(value),
            "time-zone" => g.time_zone = Some(value),
            _ => {}
        }
    }
    g.pre_reboot_node_labels = parse_node_labels("pre-reboot-node-labels", &pre)?;
    g.post_reboot_node_labels = parse_node_labels("post-reboot-node-labels", &post)?;
    Ok(g)
}

impl KuredGates {
    /// Kured's `--prometheus-url` and its filters as an alert gate (Kured's
    /// `PrometheusBlockingChecker`, `pkg/blockers/prometheus.go`), held for
    /// at most `timeout`; `None` without a URL. `daemonset` names it in
    /// errors.
    pub fn alert_gate(
        &self,
        daemonset: &str,
        timeout: std::time::Duration,
    ) -> Result<Option<crate::pacing::AlertGate>> {
        let Some(url) = &self.prometheus_url else {
            return Ok(None);
        };
        let exclude = match &self.alert_filter_regexp {
            None => None,
            Some(re) => Some(regex_lite::Regex::new(re).map_err(|e| {
                anyhow::anyhow!(
                    "Kured's --alert-filter-regexp {re:?} in daemonset {daemonset} is not a \
                     regular expression fleetctl can read: {e}"
                )
            })?),
        };
        let filter = crate::pacing::Filter {
            exclude,
            firing_only: self.alert_firing_only,
            match_only: self.alert_filter_match_only,
        };
        crate::pacing::AlertGate::new(url, filter, timeout)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("Kured's --prometheus-url in daemonset {daemonset}: {e}"))
    }

    /// Kured's reboot window in `crate::pacing::Window`'s grammar, `DAYS
    /// START-END ZONE`, with Kured's defaults for what it does not set
    /// (`--reboot-days` every day, `--start-time=0:00`,
    /// `--end-time=23:59:59`, `--time-zone=UTC`: kured `cmd/kured/main.go`).
    pub fn window_text(&self) -> String {
        let days = match self.reboot_days.is_empty() {
            true => "*".to_string(),
            false => self.reboot_days.join(","),
        };
        format!(
            "{days} {}-{} {}",
            self.start_time.as_deref().unwrap_or("0:00"),
            self.end_time.as_deref().unwrap_or("23:59:59"),
            self.time_zone.as_deref().unwrap_or("UTC")
        )
    }

    /// What fleetctl takes over, one line each, for the operator; empty
    /// when Kured sets none of its gates.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for s in &self.pod_selectors {
            lines.push(format!(
                "--blocking-pod-selector={s}: a running pod matching it on a node holds that node"
            ));
        }
        if let Some(url) = &self.prometheus_url {
            // Not `--prometheus-url=URL`: what names a URL flag is masked
            // as a secret on output (`crate::redact`).
            let mut what = format!(
                "Prometheus at {url} (Kured's --prometheus-url): its firing alerts hold every drain"
            );
            if let Some(re) = &self.alert_filter_regexp {
                what.push_str(&match self.alert_filter_match_only {
                    true => format!(", only alerts matching {re}"),
                    false => format!(", but not alerts matching {re}"),
                });
            }
            if !self.alert_firing_only {
                what.push_str(", pending ones too");
            }
            lines.push(what);
        }
        for (flag, labels) in [
            ("pre-reboot-node-labels", &self.pre_reboot_node_labels),
            ("post-reboot-node-labels", &self.post_reboot_node_labels),
        ] {
            if !labels.is_empty() {
                let when = match flag {
                    "pre-reboot-node-labels" => "set on each node before its drain",
                    _ => "set on each node once it is back and uncordoned",
                };
                let text: Vec<String> = labels.iter().map(ToString::to_string).collect();
                lines.push(format!(
                    "--{flag}={}: {when}, as Kured does",
                    text.join(",")
                ));
            }
        }
        let window = [
            (
                "reboot-days",
                (!self.reboot_days.is_empty()).then(|| self.reboot_days.join(",")),
            ),
            ("start-time", self.start_time.clone()),
            ("end-time", self.end_time.clone()),
            ("time-zone", self.time_zone.clone()),
        ];
        let set: Vec<String> = window
            .iter()
            .filter_map(|(f, v)| v.as_ref().map(|v| format!("--{f}={v}")))
            .collect();
        if !set.is_empty() {
            lines.push(format!(
                "Kured's reboot window {} (shown; `--window kured` holds fleetctl to it)",
                set.join(" ")
            ));
        }
        lines
    }
}

/// The pods that hold a node under a `--blocking-pod-selector`, from what
/// `crate::remote::kured_pods::blocking_pods` printed (`pod/NAME` lines):
/// their names, the first ten, enough to name in a message. Read by
/// `status` (the blockers now) and by apply before each drain.
pub fn blocking_pod_names(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pod/"))
        .take(10)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_pods_are_the_first_ten_pod_lines() {
        assert!(blocking_pod_names("").is_empty());
        assert_eq!(
            blocking_pod_names("pod/backup-1\n  pod/batch-7  \nNo resources found\n"),
            ["backup-1", "batch-7"]
        );
        let many: String = (0..12).map(|i| format!("pod/p{i}\n")).collect();
        let names = blocking_pod_names(&many);
        assert_eq!(names.len(), 10);
        assert_eq!(names.last(), Some(&"p9"));
    }

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn reads_both_forms_of_every_flag_as_pflag_does() {
        let g = parse_kured_gates(&argv(&[
            "/usr/bin/kured",
            "--blocking-pod-selector=app=backup",
            "--blocking-pod-selector",
            "runtime in (long,batch)",
            "--prometheus-url",
            "http://prometheus.monitoring:9090",
            "--alert-filter-regexp=^(Watchdog|InfoInhibitor)$",
            "--alert-firing-only",
            "--alert-filter-match-only=false",
            "--pre-reboot-node-labels=kured=rebooting,zone=x",
            "--reboot-days",
            "mon,tue",
            "--start-time=2am",
            "--end-time",
            "5am",
            "--time-zone=Europe/Berlin",
            "--period=1h",
        ]))
        .unwrap();
        assert_eq!(g.pod_selectors, ["app=backup", "runtime in (long,batch)"]);
        assert_eq!(
            g.prometheus_url.as_deref(),
            Some("http://prometheus.monitoring:9090")
        );
        assert_eq!(
            g.alert_filter_regexp.as_deref(),
            Some("^(Watchdog|InfoInhibitor)$")
        );
        assert!(g.alert_firing_only && !g.alert_filter_match_only);
        let pre: Vec<String> = g
            .pre_reboot_node_labels
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(pre, ["kured=rebooting", "zone=x"]);
        assert_eq!(g.reboot_days, ["mon", "tue"]);
        assert_eq!(g.start_time.as_deref(), Some("2am"));
        assert_eq!(g.end_time.as_deref(), Some("5am"));
        assert_eq!(g.time_zone.as_deref(), Some("Europe/Berlin"));
        assert_eq!(g.window_text(), "mon,tue 2am-5am Europe/Berlin");
        assert_eq!(KuredGates::default().window_text(), "* 0:00-23:59:59 UTC");
        // What `--window kured` hands to the maintenance window's parser.
        let mut hm = g.clone();
        hm.start_time = Some("02:00".into());
        hm.end_time = Some("05:30".into());
        hm.time_zone = Some("UTC".into());
        assert!(crate::pacing::Window::parse(&hm.window_text()).is_ok());
        assert!(crate::pacing::Window::parse(&KuredGates::default().window_text()).is_ok());
        let said = g.describe().join("\n");
        assert!(
            said.contains("--blocking-pod-selector=app=backup"),
            "{said}"
        );
        assert!(
            said.contains("but not alerts matching ^(Watchdog"),
            "{said}"
        );
    }

    #[test]
    fn the_last_single_value_wins_and_flags_end_at_double_dash() {
        let g = parse_kured_gates(&argv(&[
            "kured",
            "--prometheus-url=http://a:9090",
            "--prometheus-url=http://b:9090",
            "--",
            "--blocking-pod-selector=app=x",
        ]))
        .unwrap();
        assert_eq!(g.prometheus_url.as_deref(), Some("http://b:9090"));
        assert!(g.pod_selectors.is_empty());
        // A bool flag never takes the next word.
        let g = parse_kured_gates(&argv(&["kured", "--alert-firing-only", "false"])).unwrap();
        assert!(g.alert_firing_only);
        // Kured's defaults: nothing set, nothing taken over.
        let g = parse_kured_gates(&argv(&[
            "/usr/bin/kured",
            "--reboot-sentinel=/sentinel/reboot-required",
        ]))
        .unwrap();
        assert_eq!(g, KuredGates::default());
        assert!(g.describe().is_empty());
    }

    #[test]
    fn hostile_input_is_refused_not_guessed() {
        for bad in [
            vec!["kured", "--blocking-pod-selector=$(reboot)"],
            vec!["kured", "--blocking-pod-selector=a;b"],
            vec!["kured", "--blocking-pod-selector"],
            vec!["kured", "--alert-firing-only=maybe"],
            vec!["kured", "--pre-reboot-node-labels=kured"],
            vec!["kured", "--post-reboot-node-labels=bad key=x"],
        ] {
            assert!(parse_kured_gates(&argv(&bad)).is_err(), "{bad:?}");
        }
        let long = format!("--prometheus-url=http://{}", "a".repeat(MAX_VALUE));
        assert!(parse_kured_gates(&argv(&["kured", &long])).is_err());
        let many: Vec<String> = std::iter::repeat_n("--x".to_string(), MAX_ARGS + 1).collect();
        assert!(parse_kured_gates(&many).is_err());
        let selectors: Vec<String> = std::iter::once("kured".to_string())
            .chain(std::iter::repeat_n(
                "--blocking-pod-selector=a=b".to_string(),
                MAX_SELECTORS + 1,
            ))
            .collect();
        assert!(parse_kured_gates(&selectors).is_err());
    }
}

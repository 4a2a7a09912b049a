//! What fleetctl takes over from the Kured whose lock it holds: its gates
//! as its command line sets them (`crate::checks::parse_kured_gates`), and
//! its `--prometheus-url` as an alert gate. Kept apart from the waiting
//! (`super::kured_gates`), which works on the run's context.

use std::time::Duration;

use crate::checks::{KuredGates, parse_kured_gates};
use crate::pacing::{AlertGate, Filter};

/// What fleetctl took over from the Kured whose lock it holds.
#[derive(Debug, Clone, Default)]
pub struct KuredTakeover {
    /// `namespace/name` of Kured's DaemonSet.
    pub daemonset: String,
    pub gates: KuredGates,
    /// Kured's `--prometheus-url` as an alert gate.
    pub alert_gate: Option<AlertGate>,
    /// With `--kured-window`: Kured's reboot window, held to before each
    /// node as `--window` is (`crate::steps::hold`).
    pub window: Option<crate::pacing::Window>,
}

impl KuredTakeover {
    /// From Kured's command line (`crate::steps::lock::Lock::kured_argv`).
    /// `alert_timeout`: how long its alerts may hold a drain (the
    /// `--alert-gate-timeout`, 30 min by default).
    pub fn from_argv(
        daemonset: &str,
        argv: &[String],
        alert_timeout: Duration,
    ) -> anyhow::Result<KuredTakeover> {
        let gates = parse_kured_gates(argv).map_err(|e| {
            anyhow::anyhow!("reading Kured's flags in daemonset {daemonset}: {e:#}")
        })?;
        let alert_gate = match &gates.prometheus_url {
            None => None,
            Some(url) => {
                let exclude = match &gates.alert_filter_regexp {
                    None => None,
                    Some(re) => Some(regex_lite::Regex::new(re).map_err(|e| {
                        anyhow::anyhow!(
                            "Kured's --alert-filter-regexp {re:?} in daemonset {daemonset} is not \
                             a regular expression fleetctl can read: {e}"
                        )
                    })?),
                };
                let filter = Filter {
                    exclude,
                    firing_only: gates.alert_firing_only,
                    match_only: gates.alert_filter_match_only,
                };
                Some(AlertGate::new(url, filter, alert_timeout).map_err(|e| {
                    anyhow::anyhow!("Kured's --prometheus-url in daemonset {daemonset}: {e}")
                })?)
            }
        };
        Ok(KuredTakeover {
            daemonset: daemonset.to_string(),
            gates,
            alert_gate,
            window: None,
        })
    }

    /// What the operator reads before the first change.
    pub fn describe(&self) -> Vec<String> {
        self.gates.describe()
    }
}

/// Kured's gates when the lock is Kured's and Kured sets any; `None` else.
/// `daemonset` and `argv` are the lock's (`Lock::kured_daemonset`,
/// `Lock::kured_argv`), passed as plain values: the lock's keeper works
/// with the run's context, which holds this takeover, so this module does
/// not import the lock back.
pub fn takeover(
    daemonset: Option<String>,
    argv: Option<&[String]>,
    alert_timeout: Duration,
) -> anyhow::Result<Option<KuredTakeover>> {
    let (Some(argv), Some(ds)) = (argv, daemonset) else {
        return Ok(None);
    };
    let taken = KuredTakeover::from_argv(&ds, argv, alert_timeout)?;
    Ok((!taken.describe().is_empty()).then_some(taken))
}

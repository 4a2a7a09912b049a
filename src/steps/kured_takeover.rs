//! What fleetctl takes over from the Kured whose lock it holds: its gates
//! as its command line sets them (`crate::checks::parse_kured_gates`), and
//! its `--prometheus-url` as an alert gate. Kept apart from the waiting
//! (`super::kured_gates`), which works on the run's context.

use std::time::Duration;

use crate::checks::{EnvPrecedence, KuredGates, env_precedence, parse_kured_settings};
use crate::pacing::AlertGate;

/// What fleetctl took over from the Kured whose lock it holds.
#[derive(Debug, Clone, Default)]
pub struct KuredTakeover {
    /// `namespace/name` of Kured's DaemonSet.
    pub daemonset: String,
    pub gates: KuredGates,
    /// Kured's `--prometheus-url` as an alert gate.
    pub alert_gate: Option<AlertGate>,
    /// With `--window kured`: Kured's reboot window, held to before each
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
        Self::from_settings(daemonset, argv, &[], EnvPrecedence::Ignored, alert_timeout)
    }

    /// From Kured's command line and `KURED_*` environment, combined as its
    /// release does (`crate::checks::parse_kured_settings`).
    pub fn from_settings(
        daemonset: &str,
        argv: &[String],
        env: &[(String, Option<String>)],
        rule: EnvPrecedence,
        alert_timeout: Duration,
    ) -> anyhow::Result<KuredTakeover> {
        let gates = parse_kured_settings(daemonset, argv, env, rule).map_err(|e| {
            anyhow::anyhow!("reading Kured's flags in daemonset {daemonset}: {e:#}")
        })?;
        let alert_gate = gates.alert_gate(daemonset, alert_timeout)?;
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
/// `daemonset`, `argv` and `env` are the lock's (`Lock::kured_daemonset`,
/// `Lock::kured_argv`, `Lock::kured_env`), passed as plain values: the lock's keeper works
/// with the run's context, which holds this takeover, so this module does
/// not import the lock back.
pub fn takeover(
    daemonset: Option<String>,
    argv: Option<&[String]>,
    env: Option<(&[crate::checks::KuredEnvVar], &str)>,
    alert_timeout: Duration,
) -> anyhow::Result<Option<KuredTakeover>> {
    let (Some(argv), Some(ds)) = (argv, daemonset) else {
        return Ok(None);
    };
    let (env, image) = env.unwrap_or((&[], ""));
    let taken = KuredTakeover::from_settings(&ds, argv, env, env_precedence(image), alert_timeout)?;
    Ok((!taken.describe().is_empty()).then_some(taken))
}

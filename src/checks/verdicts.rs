//! What a check says about a hop. `plan --output json` carries a list of
//! these per hop and the journal records them, so every name here is a
//! stable machine format (docs/checks.md): kebab-case, never renamed.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use serde::{Deserialize, Serialize};

/// Which check; the name `--ignore-check` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckName {
    /// Clients still call an API version the hop removes.
    RemovedApis,
    /// A node passes the kubelet a flag the new kubelet no longer knows.
    KubeletFlags,
    /// A PodDisruptionBudget would hold a drain of the hop forever.
    Pdb,
    /// kubeadm's certificates expire soon, or have.
    Certificates,
    /// The hub lacks an image the hop needs.
    Hub,
    /// A node runs cgroup v1, where the new kubelet refuses to start and
    /// kubeadm's SystemVerification preflight refuses the upgrade.
    Cgroup,
    /// kubeadm's upgrade would rewrite a node's kubelet configuration
    /// without a setting only that node has, or would fail on its files.
    KubeletConfig,
    /// The kubelet or a control-plane component is given a feature gate the
    /// new minor removed.
    FeatureGates,
}

impl CheckName {
    pub const ALL: [CheckName; 8] = [
        CheckName::RemovedApis,
        CheckName::KubeletFlags,
        CheckName::Pdb,
        CheckName::Certificates,
        CheckName::Hub,
        CheckName::Cgroup,
        CheckName::KubeletConfig,
        CheckName::FeatureGates,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::RemovedApis => "removed-apis",
            CheckName::KubeletFlags => "kubelet-flags",
            CheckName::Pdb => "pdb",
            CheckName::Certificates => "certificates",
            CheckName::Hub => "hub",
            CheckName::Cgroup => "cgroup",
            CheckName::KubeletConfig => "kubelet-config",
            CheckName::FeatureGates => "feature-gates",
        }
    }
}

impl fmt::Display for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CheckName {
    type Err = anyhow::Error;

    /// The names `--ignore-check` accepts; a typo lists them, so an operator
    /// who meant to go past a block does not silently ignore nothing.
    fn from_str(s: &str) -> anyhow::Result<Self> {
        match CheckName::ALL.iter().find(|n| n.as_str() == s) {
            Some(name) => Ok(*name),
            None => bail!(
                "`{s}` is not a check; the checks are {}",
                CheckName::ALL.map(CheckName::as_str).join(", ")
            ),
        }
    }
}

/// A check's outcome, from harmless to stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    /// Worth reading before the hop; the hop goes ahead.
    Warn,
    /// A block the operator went past with `--ignore-check`: kept apart from
    /// `Pass` so the plan and the journal still show what was overridden.
    Ignored,
    /// The hop does not start until this is fixed or ignored.
    Block,
}

/// One check's verdict on one hop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Check {
    pub name: CheckName,
    pub verdict: Verdict,
    /// One line: what was found.
    pub summary: String,
    /// The offending items, one per line (an API, a node and its flag, a PDB).
    #[serde(default)]
    pub details: Vec<String>,
    /// What the operator does about it; `None` when there is nothing to do.
    #[serde(default)]
    pub remedy: Option<String>,
}

impl Check {
    pub fn pass(name: CheckName, summary: impl Into<String>) -> Check {
        Check {
            name,
            verdict: Verdict::Pass,
            summary: summary.into(),
            details: Vec::new(),
            remedy: None,
        }
    }

    /// The hop may start: nothing blocks (an ignored block does not).
    pub fn allows_hop(&self) -> bool {
        self.verdict != Verdict::Block
    }
}

/// Turns the blocks of the checks the operator named into `Ignored`. Only a
/// block changes: ignoring a check that warns or passes changes nothing, so
/// the record never claims an override that did not happen.
pub fn apply_ignores(checks: &mut [Check], ignored: &[CheckName]) {
    for check in checks {
        if check.verdict == Verdict::Block && ignored.contains(&check.name) {
            check.verdict = Verdict::Ignored;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: CheckName, verdict: Verdict) -> Check {
        Check {
            name,
            verdict,
            summary: "s".into(),
            details: vec![],
            remedy: None,
        }
    }

    #[test]
    fn names_round_trip_and_a_typo_lists_the_real_ones() {
        for name in CheckName::ALL {
            assert_eq!(name.as_str().parse::<CheckName>().unwrap(), name);
            assert_eq!(
                serde_json::to_string(&name).unwrap(),
                format!("\"{}\"", name.as_str())
            );
        }
        let err = "removed-api".parse::<CheckName>().unwrap_err().to_string();
        assert!(
            err.contains("removed-apis, kubelet-flags, pdb, certificates, hub"),
            "{err}"
        );
    }

    #[test]
    fn only_a_named_block_becomes_ignored() {
        let mut checks = vec![
            check(CheckName::RemovedApis, Verdict::Block),
            check(CheckName::KubeletFlags, Verdict::Block),
            check(CheckName::Pdb, Verdict::Warn),
        ];
        apply_ignores(&mut checks, &[CheckName::RemovedApis, CheckName::Pdb]);
        let verdicts: Vec<Verdict> = checks.iter().map(|c| c.verdict).collect();
        assert_eq!(
            verdicts,
            [Verdict::Ignored, Verdict::Block, Verdict::Warn],
            "the flag block stays, the warning is not relabelled"
        );
        assert!(checks[0].allows_hop());
        assert!(!checks[1].allows_hop());
    }

    #[test]
    fn the_json_shape_is_the_documented_one() {
        let c = Check {
            name: CheckName::KubeletFlags,
            verdict: Verdict::Ignored,
            summary: "one flag".into(),
            details: vec!["w-1: --pod-infra-container-image".into()],
            remedy: Some("remove it".into()),
        };
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "name": "kubelet-flags",
                "verdict": "ignored",
                "summary": "one flag",
                "details": ["w-1: --pod-infra-container-image"],
                "remedy": "remove it",
            })
        );
        let back: Check = serde_json::from_value(
            serde_json::json!({"name": "hub", "verdict": "pass", "summary": "ok"}),
        )
        .unwrap();
        assert_eq!(back, Check::pass(CheckName::Hub, "ok"));
    }

    #[test]
    fn verdicts_order_from_harmless_to_stopping() {
        assert!(Verdict::Pass < Verdict::Warn);
        assert!(Verdict::Warn < Verdict::Ignored);
        assert!(Verdict::Ignored < Verdict::Block);
    }
}

//! The minor that added a feature gate: a kubelet older than that does not
//! know it and refuses to start with it (`unrecognized feature gate`, as
//! for a removed one), which matters when a node goes back to an older
//! kubelet with the configuration the newer one ran (`fleetctl rollback`,
//! `apply --on-failure rollback`).
//!
//! Only what could be cited: the gates whose page in kubernetes/website
//! (feature-gates/<Gate>.md) shows a single stage, so its `fromVersion` is
//! the minor that added it (the same pages as `super::gate_table`), and
//! `tests/tools/feature_gates_from_source.py`'s `added` lines for the next
//! ones. A gate missing here is not checked.

use crate::version::Minor;

/// A gate and the first minor that knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddedGate {
    pub gate: &'static str,
    pub added_in: Minor,
    pub source: &'static str,
}

const fn added(gate: &'static str, minor: u64, source: &'static str) -> AddedGate {
    AddedGate {
        gate,
        added_in: Minor::new(1, minor),
        source,
    }
}

pub const ADDED_FEATURE_GATES: &[AddedGate] = &[
    added(
        "InTreePluginAWSUnregister",
        21,
        "website feature-gates/InTreePluginAWSUnregister.md: alpha 1.21–1.30",
    ),
    added(
        "InTreePluginGCEUnregister",
        21,
        "website feature-gates/InTreePluginGCEUnregister.md: alpha 1.21–1.30",
    ),
    added(
        "InTreePluginPortworxUnregister",
        23,
        "website feature-gates/InTreePluginPortworxUnregister.md: alpha 1.23–1.35",
    ),
    added(
        "DRAControlPlaneController",
        26,
        "website feature-gates/DRAControlPlaneController.md: alpha 1.26–1.31",
    ),
    added(
        "UserNamespacesPodSecurityStandards",
        29,
        "website feature-gates/UserNamespacesPodSecurityStandards.md: alpha 1.29–1.34",
    ),
    added(
        "GangScheduling",
        35,
        "website feature-gates/GangScheduling.md: alpha 1.35–1.36",
    ),
    added(
        "WorkloadAwarePreemption",
        36,
        "website feature-gates/WorkloadAwarePreemption.md: alpha 1.36",
    ),
];

/// When `gate` was added, if after `minor`: a `minor` kubelet does not know it.
pub fn added_after(gate: &str, minor: Minor) -> Option<&'static AddedGate> {
    ADDED_FEATURE_GATES
        .iter()
        .find(|a| a.gate == gate && a.added_in > minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gate_is_unknown_before_the_minor_that_added_it() {
        let v = |m| Minor::new(1, m);
        assert_eq!(
            added_after("WorkloadAwarePreemption", v(35)).map(|a| a.added_in),
            Some(v(36))
        );
        assert_eq!(added_after("WorkloadAwarePreemption", v(36)), None);
        assert_eq!(added_after("NoSuchGate", v(30)), None);
    }
}

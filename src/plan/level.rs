//! How far a node or the cluster has got, as far as the plan can know it:
//! shared by the planner and its rules, so neither imports the other.

use crate::version::{Minor, Version};

/// A version as far as the plan can know it: the minor always, the patch
/// only when the hub's list was readable (or the facts said so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Level {
    pub minor: Minor,
    pub version: Option<Version>,
}

impl Level {
    pub fn exact(v: &Version) -> Level {
        Level {
            minor: v.minor(),
            version: Some(v.clone()),
        }
    }

    /// A node at `self` needs nothing more to be at `want`: same minor, and
    /// at least the wanted patch when both are known.
    pub(super) fn reaches(&self, want: &Level) -> bool {
        self.minor == want.minor
            && match (&self.version, &want.version) {
                (_, None) => true,
                (Some(have), Some(wanted)) => have >= wanted,
                (None, Some(_)) => false,
            }
    }

    /// Same minor, known to be a newer patch: staged but not yet booted.
    pub(super) fn newer_patch_than(&self, other: &Level) -> bool {
        self.minor == other.minor
            && matches!((&self.version, &other.version), (Some(a), Some(b)) if a > b)
    }
}

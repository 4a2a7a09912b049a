//! `fleetctl plan`: the one-minor-at-a-time path from what the fleet really
//! runs to the target, decided without touching anything.
//!
//! kubeadm upgrades a cluster exactly one minor per `upgrade apply`, and the
//! skew policy forbids a kubelet newer than the API server, so the order of
//! every pin, stage, reboot and kubeadm call matters. This module turns
//! gathered facts into that order (`planner`, pure), renders the pinned
//! sysupdate configs the nodes receive (`config`), reads the hub's list of
//! published images (`crate::hub`), fingerprints the fleet so `apply` can refuse a
//! stale plan (`fingerprint`; `recheck` decides what a saved plan still
//! holds against the live fleet), saves and loads the plan (`file`, the only I/O
//! here) and prints it for a human (`show`). docs/upgrade-path.md explains the
//! rules.

mod batches;
mod diff;
mod file;
mod fingerprint;
mod fixed;
mod hop_checks;
mod image;
mod level;
mod model;
mod planner;
mod reboot;
mod recheck;
mod rollback;
mod rollback_containerd;
mod rollback_gates;
mod rollback_skew;
mod rules;
mod show;
mod state;
mod sysupdate;
mod workers;

#[cfg(test)]
mod planner_proptests;
#[cfg(test)]
pub(crate) mod testkit;
#[cfg(test)]
mod tests;

pub use crate::hub::{HubVersions, is_sha256, parse_sha256sums, sha256sums_url};
pub use batches::{MaxUnavailable, batches};
pub use file::{default_path, load, save};
pub use fingerprint::{Fingerprint, NodeFingerprint};
pub use fixed::fixed_plan;
pub use hop_checks::{Inputs, blocking, drained, evaluate, evaluate_all};
pub use image::Image;
pub use model::{
    Action, Component, Hop, HopKind, KUBEADM_SKIP_PHASES, Phase, PhaseKind, Plan, PlannedNode,
    Refusal, Step, Warning,
};
pub use planner::{images_to_remove, plan, plan_with};
pub use reboot::{Reboot, RebootRefusal, reboot_batches, reboots};
pub use recheck::{
    ignored_checks, keep_saved_patches, refuse_bad_digests, refuse_blocked, refuse_insecure_hub,
    refuse_stale, refuse_unverifiable, uses_image, worker_strategy,
};
pub use rollback::{KUBELET_SKEW, Rollback, rollback_hop, rollbacks};
pub use rollback_containerd::ContainerdBack;
pub use show::{render, summary};
pub use state::{FleetNode, FleetState};
pub use sysupdate::{render_config, render_download_config};
pub use workers::{WorkerPlan, WorkerStop, WorkerStrategy};

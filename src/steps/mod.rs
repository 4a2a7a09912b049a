//! The layer of apply that acts on the cluster.
//!
//! [`script`] is the one description of a run: the list of its tasks, a
//! hop's phases in kubeadm's order with the waits, holds and last looks
//! between them. [`execute`] is the one interpreter of it: the run over
//! SSH, `--dry-run` over a world that records what would run, so the two
//! cannot part. Each kind of step has one home with
//! what it runs and how it is undone when it fails: [`download`] (the next minor's
//! image, not staged), [`kubeadm`] (the downloaded image's kubeadm, before
//! any reboot; undo: unstage), [`stage`] (pin the sysupdate config, point
//! the symlink), [`roll`] (gates, drain, reboot, wait, uncordon; undo:
//! uncordon), [`verify`] (the hop's end state, then old images removed).
//! [`context::Apply`] carries what they share: the sessions, the journal, the
//! saved plan's in-progress bookkeeping, Ctrl-C. [`lock`] keeps Kured and a
//! second apply away; [`runner`] and [`journal`] run and record every
//! command.

pub mod context;
mod detached;
mod download;
pub mod etcd;
mod etcd_gate;
pub mod execute;
#[cfg(test)]
mod fake_holds;
#[cfg(test)]
mod gate_hold_tests;
mod gates;
pub mod hold;
#[cfg(test)]
mod hold_tests;
mod hold_world;
pub mod journal;
mod kept_images;
mod kubeadm;
pub mod kured_gates;
mod kured_labels;
#[cfg(test)]
mod kured_labels_tests;
mod kured_takeover;
mod last_look;
pub mod lock;
pub mod on_failure;
mod preflight;
mod roll;
pub mod runner;
mod safe_point;
pub mod script;
mod stage;
#[cfg(test)]
mod stop_reports;
mod storage_gate;
mod verify;

pub use context::{Apply, Interrupted, Lease, Ledger, OnFailure, Rerun, Settings, Stop};
pub use kubeadm::TIMEOUT as KUBEADM_TIMEOUT;

use std::time::Duration;

/// Between polls while a node boots or an API server starts: kubeadm's
/// own interval between API calls while it waits
/// (`KubernetesAPICallRetryInterval`, 500 ms, cmd/kubeadm/app/constants).
/// Each poll is a kubectl on a control plane; a static pod takes seconds
/// to come back, so a shorter interval only costs the node CPU.
const POLL: Duration = Duration::from_millis(500);

/// Between polls of a rebooting node itself (a connection attempt, the
/// kubelet unit): each costs the node almost nothing, and the sooner the
/// new boot is seen, the sooner the next node can go.
const NODE_POLL: Duration = Duration::from_millis(100);

//! fleetctl: upgrade the Kubernetes version of a Flatcar fleet over SSH, one
//! minor at a time, without ever letting a kubelet run ahead of the API server.
//!
//! Read top-down: `cli` (what the operator types) → `commands` (one file per
//! subcommand, thin) → the pure modules that decide (`inventory`, `node`,
//! `plan`, `status`) → the layer with side effects (`ssh`, `remote`, `gather`,
//! `planning`, `steps`) → `ui`.

pub mod checks;
pub mod cli;
pub mod commands;
pub mod error;
#[cfg(test)]
pub mod fuzzkit;
pub mod gather;
pub mod hub;
pub mod inventory;
pub mod limits;
pub mod local_fs;
pub mod node;
pub mod pacing;
pub mod plan;
pub mod planning;
pub mod redact;
pub mod remote;
pub mod shell;
pub mod ssh;
pub mod status;
pub mod steps;
pub mod ui;
pub mod untrusted_yaml;
pub mod version;

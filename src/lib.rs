//! fleetctl: upgrade the Kubernetes version of a Flatcar fleet over SSH, one
//! minor at a time, without ever letting a kubelet run ahead of the API server.
//!
//! Read top-down: `cli` (what the operator types) → `commands` (one file per
//! subcommand, thin) → the pure modules that decide (`inventory`, `node`,
//! `plan`) → the layer with side effects (`ssh`, `remote`, `steps`) → `ui`.

pub mod error;
pub mod inventory;
pub mod node;
pub mod plan;
pub mod version;

//! The seam between the roll's order (`super::flow`, written once) and the
//! world it acts on: every effect the roll has and every read it makes goes
//! through [`RollWorld`]. Three worlds answer it, as k0sctl's phases run
//! either wet or print their `DryMsg` (k0sctl `phase/manager.go`), and as
//! the lock's `trait Kubectl` has its in-memory testkit here:
//!
//! - `super::ssh_world::SshRoll`, the real one: each method delegates to
//!   the step functions that already did it over SSH (`hold::before_node`,
//!   `gates::before_drain`, `super::drain`, `super::before_reboot`,
//!   `super::send_reboot`, the waits of `super::after_reboot`);
//! - `super::dry_world::DryRoll`, for `--dry-run`: records each command and
//!   wait with its words, and answers as the plan expects (the gates pass,
//!   each node comes back on the version it staged);
//! - `super::fake_fleet` (tests only): an in-memory fleet with faults to
//!   inject, on which the rules of the roll are tested in milliseconds.
//!
//! The methods are the roll's steps, not SSH commands: a world decides how
//! it carries one out (the real one runs a batch's drains at once), the
//! flow decides in which order they come and what a failure undoes.

use std::time::Duration;

use super::{BeforeReboot, DrainFailed};
use crate::steps::kured_labels::When;
use crate::version::{Minor, Version};

/// What the roll does to the world, one method per step.
pub(super) trait RollWorld {
    /// `--drain-timeout` and `--node-timeout`: what each stretch must fit
    /// in (the lease) and what a batch may take (the window).
    fn drain_timeout(&self) -> Duration;
    fn node_timeout(&self) -> Duration;

    /// Whether a stop (Ctrl-C, the lock lost, the lease lapsing) was asked.
    fn stop_requested(&self) -> bool;
    /// Between steps: an `Interrupted` error when a stop was asked.
    /// `drained`: the batch drained but not rebooted, uncordoned again.
    fn check_stop(&self, drained: Option<&str>) -> anyhow::Result<()>;
    /// Whether a stretch bounded by `bound` still fits in the lock's lease.
    fn ensure_lease(&self, step: &str, bound: Duration) -> anyhow::Result<()>;

    /// A progress line on the terminal.
    fn say(&mut self, text: &str);
    /// The ledger's stage of `names` (for the report of a stop).
    fn begin(&mut self, names: &str, what: &str);
    /// The saved plan marks `node` in progress before it is changed.
    fn mark(&mut self, node: &str) -> anyhow::Result<()>;
    /// The ledger's record of the nodes fleetctl cordoned.
    fn note_cordoned(&mut self, nodes: &[String], cordoned: bool);
    /// The nodes of `batch` the ledger still has cordoned.
    fn still_cordoned(&self, batch: &[String]) -> Vec<String>;

    /// The holds before a batch: soak, window, alert gate, Kured's blocking
    /// pods (`crate::steps::hold`).
    async fn hold(&mut self, batch: &[String]) -> anyhow::Result<()>;
    /// The gates before the drain (`crate::steps::gates`): true when Ceph's
    /// recovery is to be waited for once the batch is back.
    async fn gates(&mut self, batch: &[String], rollback: bool) -> anyhow::Result<bool>;
    /// Kured's pre- or post-reboot node labels (`crate::steps::kured_labels`).
    async fn kured_labels(&mut self, nodes: &[String], when: When) -> anyhow::Result<()>;
    /// Cordons and drains each node of `batch`, each result by node.
    async fn drain(&mut self, batch: &[String]) -> Vec<(String, Result<(), DrainFailed>)>;
    async fn uncordon(&mut self, node: &str) -> anyhow::Result<()>;
    /// Right before the reboot: what `node` is about to boot, and from which boot.
    async fn before_reboot(
        &mut self,
        node: &str,
        minor: Minor,
        expect: Option<&Version>,
    ) -> anyhow::Result<BeforeReboot>;
    /// Reboots each node (journaled with the boot id it leaves).
    async fn reboot(&mut self, befores: &[(String, BeforeReboot)]) -> anyhow::Result<()>;
    /// Waits for each rebooted node: its new boot, its kubelet, its static
    /// pods, Ready, uncordoned, its facts recorded. Returns the nodes back
    /// (in the order they came) and the failures of the others; an error
    /// only when what came back could not be recorded. `offline`: the API
    /// is down, a lone control plane's own answers once it is back.
    async fn wait_back(
        &mut self,
        befores: Vec<(String, BeforeReboot)>,
        minor: Minor,
        rollback: bool,
        offline: bool,
    ) -> anyhow::Result<(Vec<String>, Vec<anyhow::Error>)>;
    /// Ceph's recovery once the batch is back (`crate::steps::storage_gate`).
    async fn ceph_after(&mut self, batch: &[String]) -> anyhow::Result<()>;
    /// The batch is back: the soak counts from now.
    fn came_back(&mut self);
}

//! The seam between the script's interpreter (`super::one`, written once)
//! and the world a task acts on, as `crate::steps::roll`'s `RollWorld` is
//! for the roll itself and k0sctl's phases run wet or print their `DryMsg`
//! (k0sctl `phase/manager.go`). Two worlds answer it:
//!
//! - `super::ssh_script::SshScript`, the real run: each method delegates to
//!   the step function that already carried it out over SSH (`preflight`,
//!   `download`, `etcd::snapshot`, `kubeadm` through `Job`, `last_look`,
//!   `roll::roll`, `verify`, `hold::after_hop`, `kept_images`), none rewritten;
//! - `super::dry_script::DryScript`, `--dry-run`: records the commands and
//!   waits each would run, with their words, and answers as the plan
//!   expects (every check passes, every step succeeds).
//!
//! The methods are the script's steps, not SSH commands; `super::one`
//! decides what a task does in which order (the stop before a step, the
//! mark before a change, the record after a node's last step).

use std::time::Duration;

use crate::plan::{Action, Hop, Plan};
use crate::steps::context::OnFailure;
use crate::steps::on_failure::{NotUp, Prepared};
use crate::version::{Minor, Version};

/// What a task of the script does to the world.
pub(super) trait ScriptWorld {
    fn plan(&self) -> &Plan;

    /// Between tasks and steps: an `Interrupted` error when a stop was asked.
    fn check_stop(&self) -> anyhow::Result<()>;
    /// Task `n` of `total` starts: the run journals it, the dry run heads it.
    fn task_starts(&mut self, n: usize, total: usize, title: &str, node: Option<&str>);
    /// A line of the run's progress, and a step's.
    fn say(&mut self, text: &str);
    fn say_step(&mut self, text: &str);
    /// One step more done, on the progress bar.
    fn advance(&mut self);
    /// An event of the journal.
    fn journal(&mut self, kind: &str, node: Option<&str>, what: &str);
    /// The ledger's stage of `names` (for the report of a stop).
    fn begin(&mut self, names: &str, what: &str);
    /// The saved plan marks `node` in progress before it is changed.
    fn mark(&mut self, node: &str) -> anyhow::Result<()>;

    /// `--window`: hop `h` starts only if its first node could still be done.
    fn in_window(&mut self, h: usize) -> anyhow::Result<()>;
    /// The checks again before hop `h` (`crate::steps::preflight`).
    async fn checks(&mut self, h: usize, hop: &Hop) -> anyhow::Result<()>;
    /// The hop's image on the nodes that had it before this run.
    async fn present_images(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()>;
    /// Before a control plane's kubeadm step, the first change of a hop:
    /// the Ceph gate (`crate::steps::storage_gate::before_upgrade`).
    async fn ceph_before_upgrade(&mut self, node: &str) -> anyhow::Result<()>;
    /// Before a kubeadm step on a control plane: every control plane Ready.
    async fn control_planes_ready(&mut self, node: &str) -> anyhow::Result<()>;
    /// The etcd snapshot before `upgrade apply` (`crate::steps::etcd`).
    async fn etcd_snapshot(&mut self, node: &str, minor: Minor) -> anyhow::Result<()>;
    /// One step of the plan that runs alone (never a roll).
    async fn action(&mut self, hop: &Hop, node: &str, action: &Action) -> anyhow::Result<()>;
    /// A phase whose steps run across nodes at once.
    async fn parallel(&mut self, hop: &Hop, phase: usize) -> anyhow::Result<()>;
    /// Each node's kubelet files before its reboot (`crate::steps::last_look`).
    async fn last_look(&mut self, hop: &Hop, nodes: &[String]) -> anyhow::Result<()>;
    /// A roll (`crate::steps::roll`, itself over its own seam).
    async fn roll(
        &mut self,
        nodes: &[String],
        minor: Minor,
        expect: Option<&Version>,
        rollback: bool,
    ) -> anyhow::Result<()>;
    /// `node` is through with the hop: its new state recorded, said.
    async fn finish_node(&mut self, node: &str) -> anyhow::Result<()>;
    /// The hop's end state, read from the cluster (`crate::steps::verify`).
    async fn verify(&mut self, hop: &Hop) -> anyhow::Result<()>;
    /// The soak after hop `h`, then the gates.
    async fn soak(&mut self, h: usize) -> anyhow::Result<()>;
    /// The kept images a rollback goes back to, against the hub.
    async fn kept_images(&mut self, hop: &Hop, node: &str) -> anyhow::Result<()>;
}

/// What `--on-failure rollback` (`super::after_failed_roll`) needs of a
/// world beyond the script's steps: the rollback decided on facts read
/// now, the plan's hops set aside while it runs (its tasks name its own),
/// the roll offline when the lone control plane's API is down, the plan
/// saved, the ledger told. The real run's world and the fake's answer it;
/// the dry run never fails, so never gets there.
pub(super) trait OnFailureWorld: ScriptWorld {
    fn on_failure(&self) -> OnFailure;
    /// `--node-timeout`, which the outcome may name.
    fn node_timeout(&self) -> Duration;
    /// `crate::steps::on_failure::prepare`: `Err` is why not, nothing changed.
    async fn prepare_rollback(&mut self, failed: Vec<NotUp>) -> anyhow::Result<Prepared>;
    /// The plan's hops replaced by `hops`; the ones replaced.
    fn swap_hops(&mut self, hops: Vec<Hop>) -> Vec<Hop>;
    /// Whether a roll is the offline one from now on; what it was.
    fn set_offline(&mut self, offline: bool) -> bool;
    /// The saved plan written.
    fn save_plan(&mut self) -> anyhow::Result<()>;
    /// `names` rolled back: not done, and the report says so.
    fn rolled_back(&mut self, names: &[String]);
}

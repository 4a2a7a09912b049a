//! What the operator types. One clap definition feeds parsing, `--help`,
//! shell completions and the man page, so they never disagree.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::version::TargetVersion;

/// Exit codes, also listed in `--help` and the README.
pub const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  runtime failure (a node failed or did not answer; nothing further was touched)
  2  usage, inventory or plan error (nothing was changed on any node)
 75  stopped, or not started, because the maintenance window (--window) leaves no
     time for the next node; the fleet is consistent, run again in the next window";

#[derive(Debug, Parser)]
#[command(
    name = "fleetctl",
    version,
    about = "Upgrade the Kubernetes version of a Flatcar fleet over SSH, one minor at a time",
    long_about = "fleetctl shows what every node really runs (versus what it has merely staged), \
plans the one-minor-at-a-time path to a target Kubernetes version, and carries it out: \
pin the sysupdate config, stage the sysext, drain, reboot, kubeadm upgrade, uncordon, \
one node at a time.",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// The inventory file [default: ./inventory.yaml]
    #[arg(
        short,
        long,
        global = true,
        env = "FLEETCTL_INVENTORY",
        value_name = "PATH"
    )]
    pub inventory: Option<PathBuf>,

    /// Never colour the output (NO_COLOR and a non-terminal do the same)
    #[arg(long, global = true)]
    pub no_color: bool,

    /// apply: also print every remote command and its output as it completes
    /// (the journal in .fleetctl/journal/ always has them)
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// How many nodes to talk to at once (connecting and gathering facts only;
    /// reboots are always one node at a time)
    #[arg(long, global = true, default_value_t = 16, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel: u16,

    /// Give up on a node that does not accept the SSH connection within this time
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub connect_timeout: Duration,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what every node runs, has staged, and tracks
    Status(StatusArgs),
    /// Compute the safe, one-minor-at-a-time path to a target version and save it
    Plan(PlanArgs),
    /// Carry out a saved plan: a rolling, resumable upgrade
    Apply(ApplyArgs),
    /// Reboot the nodes that need it (or those named), one control plane at a
    /// time and workers in batches, with apply's gates and lock
    Reboot(RebootArgs),
    /// Take nodes back to the kubernetes image they kept (the previous
    /// minor, or an older patch), one at a time, with apply's gates and lock
    Rollback(RollbackArgs),
    /// Print a shell completion script
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout, or write all of them to a directory
    Man {
        /// Write fleetctl.1 and one fleetctl-COMMAND.1 per command into DIR
        /// (e.g. /usr/local/share/man/man1) instead of printing fleetctl.1
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusFormat {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Output format; json is documented in docs/status.md
    #[arg(short, long, value_enum, default_value_t = StatusFormat::Table)]
    pub output: StatusFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Target: a minor series (v1.37, 1.37) or an exact version (v1.37.2)
    /// [default: the inventory's kubernetes_version]
    pub target: Option<TargetVersion>,

    /// Where to save the plan [default: .fleetctl/plan.yaml beside the inventory]
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    #[arg(short, long, value_enum, default_value_t = PlanFormat::Text)]
    pub output: PlanFormat,

    #[command(flatten)]
    pub checks: CheckArgs,

    /// How workers take a plan of several minors: `jump` keeps their kubelet
    /// (within the skew policy) while the control planes take each minor, then
    /// upgrades and reboots each worker once, onto the target; `every-hop`
    /// reboots every node once per minor
    #[arg(long, value_enum, value_name = "STRATEGY", default_value_t = crate::plan::WorkerStrategy::Jump)]
    pub workers: crate::plan::WorkerStrategy,
}

/// The checks before every hop (docs/checks.md).
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Go past a blocking check on purpose (removed-apis, kubelet-flags,
    /// pdb, certificates, hub); repeatable. The plan and the journal record it
    #[arg(long, value_name = "NAME")]
    pub ignore_check: Vec<crate::checks::CheckName>,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The saved plan [default: .fleetctl/plan.yaml beside the inventory]
    pub plan: Option<PathBuf>,

    #[command(flatten)]
    pub roll: RollArgs,

    #[command(flatten)]
    pub checks: CheckArgs,

    /// Do not snapshot etcd before `kubeadm upgrade apply` (by default each
    /// hop's snapshot is copied to .fleetctl/backups/ beside the inventory)
    #[arg(long)]
    pub skip_etcd_snapshot: bool,

    /// The largest etcd snapshot apply copies to this machine (bytes, or
    /// with KiB, MiB, GiB, TiB). Bigger, the hop stops before upgrade apply.
    /// The default is etcd's largest suggested quota (its default is 2 GiB)
    #[arg(long, env = "FLEETCTL_ETCD_SNAPSHOT_MAX", default_value = "8GiB",
          value_parser = parse_size, value_name = "SIZE")]
    pub etcd_snapshot_max: u64,

    /// Apply from an http:// hub. Its images and the SHA256SUMS that vouches
    /// for them travel unprotected, so anyone on the path chooses what the
    /// nodes run: only for a network between nodes and hub that is yours
    #[arg(long, env = "FLEETCTL_ALLOW_INSECURE_HUB")]
    pub allow_insecure_hub: bool,

    /// How workers take the hops (jump, every-hop) [default: the saved plan's]
    #[arg(long, value_enum, value_name = "STRATEGY")]
    pub workers: Option<crate::plan::WorkerStrategy>,

    /// What to do when a node comes back from its reboot but not up on its
    /// new kubelet (crash-looping, or not Ready within --node-timeout):
    /// stop, leaving it cordoned; or rollback that node to the image it
    /// kept, as `fleetctl rollback` does, then stop
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = crate::steps::OnFailure::Stop)]
    pub on_failure: crate::steps::OnFailure,
}

#[derive(Debug, Args)]
pub struct RebootArgs {
    /// The nodes to reboot [default: every node with a reboot pending: a
    /// staged Flatcar update or sysext patch, or /run/reboot-required]
    #[arg(value_name = "NODE")]
    pub nodes: Vec<String>,

    #[command(flatten)]
    pub roll: RollArgs,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The nodes to take back to their previous kubernetes image
    #[arg(value_name = "NODE", required = true)]
    pub nodes: Vec<String>,

    #[command(flatten)]
    pub roll: RollArgs,
}

/// What `apply` and `reboot` share: how nodes are taken down.
#[derive(Debug, Args)]
pub struct RollArgs {
    /// Do not ask for confirmation
    #[arg(short, long)]
    pub yes: bool,

    /// Print every command that would run on every node, in order; touch nothing
    #[arg(long)]
    pub dry_run: bool,

    /// How long a rebooting node may take to come back with the new kubelet Ready
    #[arg(long, default_value = "15m", value_parser = parse_duration, value_name = "DURATION")]
    pub node_timeout: Duration,

    /// How long a drain may take before apply stops
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub drain_timeout: Duration,

    /// Remove a lock left behind by a dead fleetctl, then proceed; with
    /// --yes also a holder that may still be alive
    #[arg(long)]
    pub force_unlock: bool,

    /// Kured's DaemonSet, when fleetctl should not look for it
    /// [default: the inventory's `kured:`, else the DaemonSet running kured
    /// in any namespace]
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub kured: Option<crate::inventory::KuredRef>,

    /// Do not keep Kured's own gates (--blocking-pod-selector,
    /// --prometheus-url) while fleetctl holds Kured's lock
    #[arg(long)]
    pub no_kured_gates: bool,

    /// Kept for scripts written before `--window kured`, which it means
    #[arg(long, hide = true, conflicts_with = "no_kured_gates")]
    pub kured_window: bool,

    /// How many workers may be down at once: a count (2) or a percentage of
    /// the workers (10%); a batch never spans two zones. Control planes are
    /// always taken down one at a time
    #[arg(long, default_value = "1", value_name = "N|P%")]
    pub max_unavailable: crate::plan::MaxUnavailable,

    #[command(flatten)]
    pub pace: PaceArgs,
}

/// What holds the next node back (docs/apply.md, "Pacing").
#[derive(Debug, Args)]
pub struct PaceArgs {
    /// After each node or batch is back, and after each hop, watch the
    /// fleet this long, then judge the gates again before going on
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub soak: Duration,

    /// Start a node or batch only inside this weekly window, and only if it
    /// can finish (drain and node timeouts) before the window closes:
    /// 'DAYS START-END [ZONE]', e.g. 'Sat,Sun 01:00-05:00' (UTC unless a
    /// time zone such as Europe/Berlin is given); or `kured`: the reboot
    /// window of the Kured whose lock is held (its --reboot-days,
    /// --start-time, --end-time, --time-zone) [default: the inventory's
    /// `window:`]
    #[arg(long, value_name = "WINDOW", value_parser = parse_window)]
    pub window: Option<WindowArg>,

    /// Hold each drain while alerts fire: a Prometheus URL (its ALERTS, as
    /// Kured's --prometheus-url) or an Alertmanager URL ending in
    /// /api/v2/alerts, reachable from the first control plane
    #[arg(long, value_name = "URL")]
    pub alert_gate: Option<String>,

    /// Alerts whose name matches this regular expression do not hold a
    /// drain (Kured's --alert-filter-regexp), e.g. '^(Watchdog|InfoInhibitor)$'
    #[arg(long, value_name = "REGEX", requires = "alert_gate", value_parser = parse_regex)]
    pub alert_filter: Option<regex_lite::Regex>,

    /// Only firing alerts hold a drain, not pending ones (Kured's
    /// --alert-firing-only)
    #[arg(long, requires = "alert_gate")]
    pub alert_firing_only: bool,

    /// How long a drain may be held by alerts before apply fails, naming them
    #[arg(long, default_value = "30m", value_parser = parse_duration, value_name = "DURATION",
          requires = "alert_gate")]
    pub alert_gate_timeout: Duration,

    /// How often a held drain reads the alerts again
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION",
          requires = "alert_gate")]
    pub alert_gate_interval: Duration,

    #[command(flatten)]
    pub ceph: CephArgs,
}

/// The Ceph gate (docs/apply.md, "Ceph"): on whenever the cluster has a
/// CephCluster.
#[derive(Debug, Args)]
pub struct CephArgs {
    /// Take nodes down whatever Ceph says (the gate is on by default on a
    /// cluster with a CephCluster; this warns loudly)
    #[arg(long)]
    pub no_ceph_gate: bool,

    /// A Ceph health code that holds a drain besides the built-in ones
    /// (docs/checks.md, "Ceph"), e.g. SLOW_OPS; repeatable
    #[arg(long, value_name = "CODE", value_parser = parse_ceph_code,
          conflicts_with = "no_ceph_gate")]
    pub ceph_hold_on: Vec<String>,

    /// How long Ceph may hold a drain before the run stops, naming it
    #[arg(long, default_value = "30m", value_parser = parse_duration, value_name = "DURATION")]
    pub ceph_timeout: Duration,

    /// How long Ceph may take, after a node returns, until every placement
    /// group is active+clean again, before the run stops
    #[arg(long, default_value = "30m", value_parser = parse_duration, value_name = "DURATION")]
    pub ceph_recovery_timeout: Duration,
}

fn parse_ceph_code(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a Ceph health code (such as PG_DEGRADED)"
        ))
    }
}

/// What `--window` names: a window, or Kured's own.
#[derive(Debug, Clone)]
pub enum WindowArg {
    Given(crate::pacing::Window),
    /// `--window kured`: the reboot window of the Kured whose lock is held.
    Kured,
}

/// `--workers`: the planner's own type, kept free of clap (tests/layers.rs);
/// each value's help is what `--help` and the man page list.
impl ValueEnum for crate::plan::WorkerStrategy {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::Jump, Self::EveryHop]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Self::Jump => PossibleValue::new("jump").help(
                "Control planes take every hop; each worker runs the target's \
                 `kubeadm upgrade node` and reboots once, after the last control plane",
            ),
            Self::EveryHop => PossibleValue::new("every-hop")
                .help("Every node takes every hop: one reboot per minor"),
        })
    }
}

/// `--on-failure`: the steps' own type, kept free of clap (tests/layers.rs).
impl ValueEnum for crate::steps::OnFailure {
    fn value_variants<'a>() -> &'a [Self] {
        &[Self::Stop, Self::Rollback]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Self::Stop => {
                PossibleValue::new("stop").help("Stop, leaving the node cordoned as it is")
            }
            Self::Rollback => PossibleValue::new("rollback")
                .help("Roll that node back to the image it kept, then stop"),
        })
    }
}

fn parse_window(s: &str) -> Result<WindowArg, String> {
    if s.trim().eq_ignore_ascii_case("kured") {
        return Ok(WindowArg::Kured);
    }
    crate::pacing::Window::parse(s).map(WindowArg::Given)
}

fn parse_regex(s: &str) -> Result<regex_lite::Regex, String> {
    regex_lite::Regex::new(s).map_err(|e| e.to_string())
}

/// `1048576`, `512MiB`, `8GiB` (binary units; `K`, `M`, `G`, `T` and a
/// `B` alone are read the same way).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let text = s.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => return Err(format!("`{s}` is not a size: use e.g. 512MiB, 8GiB")),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("`{s}` is not a size above zero that fits: use e.g. 512MiB, 8GiB"))
}

/// `90s`, `15m`, `1h`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("`{s}` is not a duration ({e}): use e.g. 90s, 15m, 1h"))
}

#[cfg(test)]
mod tests;

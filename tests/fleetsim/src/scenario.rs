//! What a fleet looks like before it boots: read from a YAML file
//! (`fleetsim up --scenario FILE`) or built in a test with the same fields
//! (`Scenario::new().control_planes(1).workers(3).kubernetes("v1.34.2")`).
//! Everything is validated here (`validate`), before any directory is
//! written, so a typo in a scenario is an error naming the field, not a node
//! that misbehaves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

pub use crate::kured::{Kured, KuredSpec};
use crate::state::{DeprecatedApi, Faults, PdbSpec, PodSpec, Role};
use crate::version::{Minor, Version};

mod validate;

/// The minors the default hub serves: v1.30 to v1.38.
pub const HUB_MINORS: std::ops::RangeInclusive<u32> = 30..=38;
/// The most nodes a fleet may have (each its own loopback address and sshd).
pub const MAX_NODES: usize = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Scenario {
    /// The cluster's version (kubeadm-config's `kubernetesVersion`) and the
    /// running version of every node that does not name its own. When unset,
    /// the cluster's version is the first control-plane node's.
    pub kubernetes: Option<String>,
    /// The Flatcar version every node runs unless it names its own.
    pub os_version: String,
    /// The containerd sysext every node runs (`2.1.4`, the bakery's naming)
    /// unless it names its own; unset: the OS's own containerd, no sysext.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containerd: Option<String>,
    /// Seconds between a node going down and sshd answering again.
    pub boot_delay: f64,
    /// Seconds after a boot before the node's kubelet reports Ready.
    pub kubelet_delay: f64,
    /// Seconds after a control plane's kubelet starts before its API server
    /// (a static pod) answers.
    pub api_delay: f64,
    /// Seconds between a failed kubelet start and the next one (the unit's
    /// `RestartSec=10`; tests lower it).
    pub kubelet_restart: f64,
    /// Seconds each request to the API server takes (default 0.15).
    pub api_latency: f64,
    /// Seconds `kubeadm upgrade apply|node` works before it is done
    /// (default 0.3; a real one takes minutes).
    pub kubeadm_duration: f64,
    /// The SSH port every node listens on (on its own loopback address).
    pub port: u16,
    /// A light fleet: workers merge their sysext from an unpacked tree (no
    /// loop device) and start their kubelet inside node-init (no process);
    /// for benchmarks of hundreds of nodes (docs/simulator.md).
    pub light: bool,
    /// What a node's OS layer is: `emulated` (default: node-init and the
    /// emulated systemd tools) or `systemd` (real systemd 257 as PID 1,
    /// real systemd-sysext/sysupdate/run/journald; docs/simulator.md,
    /// "Real-OS nodes").
    pub os_layer: Os,
    /// What a node's `kubectl` is: `real`, the only one (the machine
    /// image's kubectl against the sim's API server, `crate::clients`).
    /// The key stays readable for scenarios that still name it;
    /// `emulated` is refused by name ([`KubectlKind`]).
    pub kubectl: KubectlKind,
    /// Kured: `true` installs its upstream manifest in kube-system, or a
    /// mapping says how (`helm: NAMESPACE/RELEASE`, `run: true`, …; see
    /// [`KuredSpec`]).
    pub kured: Kured,
    pub hub: HubSpec,
    /// Workload pods besides the sim's own (see `state::PodSpec`).
    pub pods: Vec<PodSpec>,
    /// PodDisruptionBudgets (see `state::PdbSpec`).
    pub pdbs: Vec<PdbSpec>,
    /// Deprecated APIs clients use (the API server's metrics say so).
    pub deprecated_apis: Vec<DeprecatedApi>,
    /// Days until the control planes' kubeadm certificates expire (default
    /// 300; kubeadm issues them for a year and renews them on upgrade).
    pub cert_expiry_days: f64,
    /// An external etcd's endpoints (kubeadm-config `etcd.external`, no
    /// etcd static pods); empty: stacked etcd.
    pub external_etcd: Vec<String>,
    /// ClusterConfiguration `extraArgs` of the control plane (kubeadm-config),
    /// keyed `apiServer`, `controllerManager` or `scheduler`, then flag →
    /// value, e.g. `{apiServer: {feature-gates: "LoadBalancerIPMode=true"}}`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub control_plane_args: BTreeMap<String, BTreeMap<String, String>>,
    /// The etcd image tag (`3.6.4-0`) every control plane's etcd static pod
    /// runs at the start, when not the one kubeadm deploys for the
    /// cluster's version (a cluster set up by an older kubeadm patch); a
    /// kubeadm upgrade replaces it with its own when that is newer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
    /// Lines added to the cluster's kubelet-config ConfigMap (and so to
    /// every config.yaml kubeadm writes), e.g. `failCgroupV1: false\n`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet_config: Option<String>,
    /// Rook-Ceph: a CephCluster, its OSDs on the workers and the toolbox
    /// (`crate::ceph`); unset: no Ceph at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceph: Option<crate::ceph::CephSpec>,
    pub nodes: Vec<NodeSpec>,
    /// Faults switched on from the start (see `fleetsim ctl` to flip them later).
    pub faults: Faults,
}

/// Which images the extension hub serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HubSpec {
    /// Patches per minor: `v1.X.0` up to `v1.X.(patches-1)`.
    pub patches: u32,
    /// Per-minor overrides of `patches`, keyed `v1.35`.
    pub patches_for: BTreeMap<String, u32>,
    /// Minors the hub does not serve at all, e.g. `v1.36`.
    pub missing: Vec<String>,
    /// Further full versions served from the start, e.g. `v1.38.7`.
    pub extra: Vec<String>,
    /// containerd versions served under `containerd/` besides those the
    /// nodes run (`2.1.5`).
    pub containerd: Vec<String>,
    /// Also serve the hub over TLS (`crate::hub_tls`) and give the fleet
    /// that one: the inventory's `hub:` and the nodes' sysupdate configs
    /// name `https://127.0.0.1:PORT`, and every node trusts the hub's CA.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub https: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// The node's hostname and Kubernetes node name.
    pub name: String,
    pub role: Role,
    /// The user fleetctl logs in as (`root` or `core`); written to the
    /// inventory only when it is not the default `root`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The kubernetes sysext merged at first boot; default: the scenario's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// A newer image already downloaded and pointed at by the symlink, i.e.
    /// staged and waiting for a reboot (`/run/reboot-required` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<String>,
    /// Further kubernetes images already in /opt/extensions/kubernetes/
    /// (downloaded by earlier updates), neither running nor staged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
    #[serde(default)]
    pub pin: Pin,
    /// Further sysupdate configs, one pinned `kubernetes-vX.Y.conf` per minor.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_configs: Vec<String>,
    /// The Flatcar version this node runs; default: the scenario's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// A downloaded Flatcar update waiting for a reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_update: Option<String>,
    /// The node presents a different host key than known_hosts records.
    #[serde(default)]
    pub wrong_host_key: bool,
    /// The node boots on cgroup v1 (`systemd.unified_cgroup_hierarchy=0`);
    /// every other node is on cgroup v2, whatever the host (`src/cgroup.rs`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cgroup_v1: bool,
    /// A real-OS node whose own `systemd-sysupdate.timer` is enabled, as the
    /// bakery's Butane enables it, on a test schedule (`realos::timer`):
    /// it stages patches of its pinned minor by itself, with no one logged in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sysupdate_timer: bool,
    /// This node's containerd sysext (default: the scenario's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containerd: Option<String>,
    /// `containerd.conf`'s MatchPattern: `pinned` (default,
    /// `containerd-2.1.@v-%a.raw`) or `floating` (the bakery's own
    /// `containerd-@v-%a.raw`).
    #[serde(default)]
    pub containerd_pin: Pin,
    /// Seconds this node's clock is off (ahead when positive): its `date`
    /// reads that far from the host's (`provision::write_clock`). Only
    /// `date` is shifted, which is all fleetctl reads of a node's clock; a
    /// node cannot have a realtime clock of its own (time namespaces move
    /// only the monotonic and boot-time clocks, time_namespaces(7)).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_offset: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// A node's OS layer (`Scenario::os`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Os {
    /// node-init as PID 1, the emulated systemd tools.
    #[default]
    Emulated,
    /// The real systemd as PID 1 in a cached Debian 13 root (`crate::realos`).
    Systemd,
}

/// A node's kubectl (`Scenario::kubectl`): the real one. fleetsim's own
/// emulation of kubectl is gone (one implementation per tool), so a
/// scenario asking for it is refused with the reason, not read as `real`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum KubectlKind {
    /// The real kubectl (`crate::clients`).
    #[default]
    Real,
}

impl TryFrom<String> for KubectlKind {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        match value.as_str() {
            "real" => Ok(KubectlKind::Real),
            "emulated" => Err(
                "`kubectl: emulated`: fleetsim's emulated kubectl was removed; \
                 every node runs the real kubectl (remove the key, or write `kubectl: real`)"
                    .into(),
            ),
            other => Err(format!("`kubectl: {other}`: the only kubectl is `real`")),
        }
    }
}

/// The MatchPattern of the node's `kubernetes.conf`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pin {
    /// `kubernetes-v1.34.@v-%a.raw`: patch updates only (what fleetctl writes).
    #[default]
    Pinned,
    /// `kubernetes-@v-%a.raw`: whatever the hub has newest, any minor.
    Floating,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            kubernetes: None,
            os_version: "4081.2.0".into(),
            containerd: None,
            boot_delay: 0.3,
            kubelet_delay: 0.3,
            api_delay: 0.2,
            kubelet_restart: 10.0,
            api_latency: 0.15,
            kubeadm_duration: 0.3,
            port: 2222,
            light: false,
            os_layer: Os::Emulated,
            kubectl: KubectlKind::Real,
            kured: Kured::Installed(false),
            hub: HubSpec::default(),
            pods: Vec::new(),
            pdbs: Vec::new(),
            deprecated_apis: Vec::new(),
            cert_expiry_days: 300.0,
            external_etcd: Vec::new(),
            control_plane_args: BTreeMap::new(),
            etcd: None,
            kubelet_config: None,
            ceph: None,
            nodes: Vec::new(),
            faults: Faults::default(),
        }
    }
}

impl Default for HubSpec {
    fn default() -> Self {
        HubSpec {
            patches: 4,
            patches_for: BTreeMap::new(),
            missing: Vec::new(),
            extra: Vec::new(),
            containerd: Vec::new(),
            https: false,
        }
    }
}

impl NodeSpec {
    pub fn new(name: &str, role: Role) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            role,
            user: None,
            running: None,
            staged: None,
            images: Vec::new(),
            pin: Pin::Pinned,
            extra_configs: Vec::new(),
            os: None,
            os_update: None,
            wrong_host_key: false,
            cgroup_v1: false,
            sysupdate_timer: false,
            containerd: None,
            containerd_pin: Pin::Pinned,
            clock_offset: 0,
        }
    }
}

/// Builder: every method consumes and returns the scenario, so a test reads
/// as one expression.
impl Scenario {
    pub fn new() -> Scenario {
        Scenario::default()
    }

    /// Adds `n` control-plane nodes named `cp-1`, `cp-2`, … (continuing the count).
    pub fn control_planes(self, n: usize) -> Scenario {
        self.add_numbered("cp", Role::ControlPlane, n)
    }

    /// Adds `n` workers named `w-1`, `w-2`, … (continuing the count).
    pub fn workers(self, n: usize) -> Scenario {
        self.add_numbered("w", Role::Worker, n)
    }

    fn add_numbered(mut self, prefix: &str, role: Role, n: usize) -> Scenario {
        let existing = self.nodes.iter().filter(|s| s.role == role).count();
        for i in 1..=n {
            let name = format!("{prefix}-{}", existing + i);
            self.nodes.push(NodeSpec::new(&name, role));
        }
        self
    }

    pub fn node(mut self, spec: NodeSpec) -> Scenario {
        self.nodes.push(spec);
        self
    }

    /// Changes the node called `name`; adds it as a worker first if absent.
    pub fn with_node(mut self, name: &str, f: impl FnOnce(&mut NodeSpec)) -> Scenario {
        if !self.nodes.iter().any(|n| n.name == name) {
            self.nodes.push(NodeSpec::new(name, Role::Worker));
        }
        if let Some(n) = self.nodes.iter_mut().find(|n| n.name == name) {
            f(n);
        }
        self
    }

    pub fn kubernetes(mut self, version: &str) -> Scenario {
        self.kubernetes = Some(version.into());
        self
    }

    pub fn os_version(mut self, version: &str) -> Scenario {
        self.os_version = version.into();
        self
    }

    pub fn boot_delay(mut self, seconds: f64) -> Scenario {
        self.boot_delay = seconds;
        self
    }

    pub fn kubelet_delay(mut self, seconds: f64) -> Scenario {
        self.kubelet_delay = seconds;
        self
    }

    pub fn api_delay(mut self, seconds: f64) -> Scenario {
        self.api_delay = seconds;
        self
    }

    pub fn kubelet_restart(mut self, seconds: f64) -> Scenario {
        self.kubelet_restart = seconds;
        self
    }

    pub fn api_latency(mut self, seconds: f64) -> Scenario {
        self.api_latency = seconds;
        self
    }

    /// No effect: the emulated kubectl whose start this priced is gone, and
    /// the real kubectl's start costs what it costs. Kept only because
    /// fleetctl's tests (`tests/cli/support.rs`) still call it; remove it
    /// with that call.
    pub fn kubectl_start(self, _seconds: f64) -> Scenario {
        self
    }

    pub fn kubeadm_duration(mut self, seconds: f64) -> Scenario {
        self.kubeadm_duration = seconds;
        self
    }

    pub fn light(mut self, on: bool) -> Scenario {
        self.light = on;
        self
    }

    pub fn os_layer(mut self, os: Os) -> Scenario {
        self.os_layer = os;
        self
    }

    pub fn port(mut self, port: u16) -> Scenario {
        self.port = port;
        self
    }

    /// Installs Kured's upstream manifest in kube-system (its pods idle).
    pub fn kured(mut self, on: bool) -> Scenario {
        self.kured = Kured::Installed(on);
        self
    }

    /// Installs Kured as `f` says (starting from the upstream manifest).
    pub fn kured_with(mut self, f: impl FnOnce(&mut KuredSpec)) -> Scenario {
        let mut spec = self.kured.spec().unwrap_or_default();
        f(&mut spec);
        self.kured = Kured::Spec(spec);
        self
    }

    /// Installs Rook-Ceph as `f` says (`crate::ceph::CephSpec`).
    pub fn ceph(mut self, f: impl FnOnce(&mut crate::ceph::CephSpec)) -> Scenario {
        let mut spec = self.ceph.take().unwrap_or_default();
        f(&mut spec);
        self.ceph = Some(spec);
        self
    }

    pub fn hub(mut self, f: impl FnOnce(&mut HubSpec)) -> Scenario {
        f(&mut self.hub);
        self
    }

    pub fn faults(mut self, f: impl FnOnce(&mut Faults)) -> Scenario {
        f(&mut self.faults);
        self
    }
}

/// Reading, writing and checking.
impl Scenario {
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading scenario {}", path.display()))?;
        Scenario::from_yaml(&text).with_context(|| format!("in scenario {}", path.display()))
    }

    pub fn from_yaml(text: &str) -> Result<Scenario> {
        let s: Scenario = serde_saphyr::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?;
        s.validate()?;
        Ok(s)
    }

    pub fn to_yaml(&self) -> Result<String> {
        serde_saphyr::to_string(self).context("serializing the scenario to YAML")
    }

    /// The version a node runs at its first boot.
    pub fn running(&self, node: &NodeSpec) -> Result<Version> {
        let text = node.running.as_deref().or(self.kubernetes.as_deref());
        let Some(text) = text else {
            bail!(
                "node {}: no running version: set `running:` on the node or `kubernetes:` on the scenario",
                node.name
            );
        };
        Version::parse(text).with_context(|| format!("node {}: running", node.name))
    }

    pub fn staged(&self, node: &NodeSpec) -> Result<Option<Version>> {
        node.staged
            .as_deref()
            .map(|s| Version::parse(s).with_context(|| format!("node {}: staged", node.name)))
            .transpose()
    }

    /// The node's further images (`images`).
    pub fn images(&self, node: &NodeSpec) -> Result<Vec<Version>> {
        node.images
            .iter()
            .map(|s| Version::parse(s).with_context(|| format!("node {}: images", node.name)))
            .collect()
    }

    /// The cluster's version: the scenario's, else the first control plane's.
    pub fn cluster_version(&self) -> Result<Version> {
        if let Some(v) = &self.kubernetes {
            return Version::parse(v).context("scenario `kubernetes`");
        }
        let cp = self
            .nodes
            .iter()
            .find(|n| n.role == Role::ControlPlane)
            .context("the scenario has no control-plane node")?;
        self.running(cp)
    }

    /// The containerd sysext a node runs at its first boot, if any.
    pub fn containerd(&self, node: &NodeSpec) -> Option<String> {
        node.containerd.clone().or_else(|| self.containerd.clone())
    }

    /// Every containerd version the hub serves from the start.
    pub fn containerd_versions(&self) -> Vec<String> {
        let mut v: BTreeSet<String> = self
            .nodes
            .iter()
            .filter_map(|n| self.containerd(n))
            .collect();
        v.extend(self.hub.containerd.iter().cloned());
        let mut v: Vec<String> = v.into_iter().collect();
        v.sort_by(|a, b| crate::tools::vercmp(a, b));
        v
    }

    pub fn os(&self, node: &NodeSpec) -> String {
        node.os.clone().unwrap_or_else(|| self.os_version.clone())
    }
}

impl HubSpec {
    /// Every version the hub serves from the start, oldest first.
    pub fn versions(&self) -> Result<Vec<Version>> {
        let missing: BTreeSet<Minor> = self
            .missing
            .iter()
            .map(|m| Minor::parse(m).context("`missing`"))
            .collect::<Result<_>>()?;
        let mut patches = BTreeMap::new();
        for (m, n) in &self.patches_for {
            patches.insert(Minor::parse(m).context("`patches_for`")?, *n);
        }
        let mut out = BTreeSet::new();
        for minor in HUB_MINORS {
            let m = Minor { major: 1, minor };
            if missing.contains(&m) {
                continue;
            }
            let count = patches.get(&m).copied().unwrap_or(self.patches);
            out.extend((0..count).map(|p| m.with_patch(p)));
        }
        for e in &self.extra {
            out.insert(Version::parse(e).context("`extra`")?);
        }
        Ok(out.into_iter().collect())
    }
}

#[cfg(test)]
mod tests;

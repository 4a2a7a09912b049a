//! What a fleet looks like before it boots: read from a YAML file
//! (`fleetsim up --scenario FILE`) or built in a test with the same fields
//! (`Scenario::new().control_planes(1).workers(3).kubernetes("v1.34.2")`).
//! Everything is validated here, before any directory is written, so a typo
//! in a scenario is an error naming the field, not a node that misbehaves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

pub use crate::kured::{Kured, KuredSpec};
use crate::state::{DeprecatedApi, Faults, PdbSpec, PodSpec, Role};
use crate::version::{Minor, Version};

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
    /// Seconds each API request of kubectl takes (default 0.15).
    pub api_latency: f64,
    /// Seconds a kubectl process costs before its first request (default
    /// 0.1, what kubectl 1.32 and 1.33 took for `version --client` on the
    /// development machine, 0.04 s of it CPU).
    pub kubectl_start: f64,
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
    /// What a node's `kubectl` is: `real` (default: the machine image's
    /// kubectl against the sim's API server, `crate::clients`) or
    /// `emulated` (fleetsim's own, `tools/kubectl/`; never used by CI).
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
    /// The etcd image tag (`3.6.4-0`) every control plane's etcd static pod
    /// runs at the start, when not the one kubeadm deploys for the
    /// cluster's version (a cluster set up by an older kubeadm patch); a
    /// kubeadm upgrade replaces it with its own when that is newer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etcd: Option<String>,
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

/// A node's kubectl (`Scenario::kubectl`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KubectlKind {
    /// The real kubectl (`crate::clients`).
    #[default]
    Real,
    /// fleetsim's emulation (`tools/kubectl/`).
    Emulated,
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
            kubectl_start: 0.1,
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
            etcd: None,
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

    pub fn kubectl_start(mut self, seconds: f64) -> Scenario {
        self.kubectl_start = seconds;
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

    pub fn kubectl(mut self, kind: KubectlKind) -> Scenario {
        self.kubectl = kind;
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

    pub fn validate(&self) -> Result<()> {
        self.validate_nodes()?;
        self.validate_timing()?;
        self.hub.versions().context("scenario `hub`")?;
        for c in &self.hub.containerd {
            crate::containerd::check_version(c).context("scenario `hub.containerd`")?;
        }
        self.validate_faults()?;
        self.validate_workloads()?;
        if let Some(k) = self.kured.spec() {
            k.validate().context("scenario `kured`")?;
        }
        self.cluster_version()?;
        if let Some(tag) = &self.etcd {
            if crate::tools::etcd_tag(tag).is_none() {
                bail!("scenario `etcd`: `{tag}` is not an etcd image tag like 3.6.4-0");
            }
            if !self.external_etcd.is_empty() {
                bail!("scenario `etcd` names the stacked etcd's image; `external_etcd` has none");
            }
        }
        if self.os_layer == Os::Systemd && self.light {
            bail!(
                "scenario `os_layer: systemd` and `light: true` exclude each other (light nodes have no processes to run under systemd)"
            );
        }
        if self.os_layer == Os::Systemd
            && let Some(n) = self.nodes.iter().find(|n| n.cgroup_v1)
        {
            bail!(
                "node {}: `cgroup_v1` needs `os_layer: emulated` (a real-OS node's init mounts the cgroup2 hierarchy only)",
                n.name
            );
        }
        if self.os_layer != Os::Systemd
            && let Some(n) = self.nodes.iter().find(|n| n.sysupdate_timer)
        {
            bail!(
                "node {}: `sysupdate_timer` needs `os_layer: systemd` (the emulated layer has no timers)",
                n.name
            );
        }
        Ok(())
    }

    fn validate_nodes(&self) -> Result<()> {
        if self.nodes.is_empty() {
            bail!("the scenario has no nodes");
        }
        if self.nodes.len() > MAX_NODES {
            bail!(
                "the scenario has {} nodes; a fleet has at most {MAX_NODES}",
                self.nodes.len()
            );
        }
        if !self.nodes.iter().any(|n| n.role == Role::ControlPlane) {
            bail!("the scenario has no control-plane node (set `role: control-plane` on one)");
        }
        let mut seen = BTreeSet::new();
        for n in &self.nodes {
            if !seen.insert(n.name.as_str()) {
                bail!("node name {} appears twice", n.name);
            }
            self.validate_node(n)?;
        }
        Ok(())
    }

    fn validate_node(&self, n: &NodeSpec) -> Result<()> {
        check_hostname(&n.name)?;
        if let Some(u) = &n.user
            && u != "root"
            && u != "core"
        {
            bail!(
                "node {}: user `{u}` does not exist on Flatcar nodes here (root or core)",
                n.name
            );
        }
        self.running(n)?;
        self.staged(n)?;
        self.images(n)?;
        for m in &n.extra_configs {
            Minor::parse(m).with_context(|| format!("node {}: extra_configs", n.name))?;
        }
        check_os_version(&self.os(n)).with_context(|| format!("node {}: os", n.name))?;
        if let Some(c) = self.containerd(n) {
            crate::containerd::check_version(&c)
                .with_context(|| format!("node {}: containerd", n.name))?;
        }
        if let Some(u) = &n.os_update {
            check_os_version(u).with_context(|| format!("node {}: os_update", n.name))?;
        }
        Ok(())
    }

    fn validate_timing(&self) -> Result<()> {
        for (what, v) in [
            ("boot_delay", self.boot_delay),
            ("kubelet_delay", self.kubelet_delay),
            ("api_delay", self.api_delay),
            ("api_latency", self.api_latency),
            ("kubectl_start", self.kubectl_start),
            ("kubeadm_duration", self.kubeadm_duration),
        ] {
            if !v.is_finite() || v < 0.0 {
                bail!("scenario `{what}` must be a number of seconds ≥ 0, not {v}");
            }
        }
        // Restart=always with no delay would be a node spinning on a crash.
        if !self.kubelet_restart.is_finite() || self.kubelet_restart < 0.05 {
            bail!(
                "scenario `kubelet_restart` must be at least 0.05 seconds, not {}",
                self.kubelet_restart
            );
        }
        if self.port == 0 {
            bail!("scenario `port` must not be 0");
        }
        Ok(())
    }

    fn validate_workloads(&self) -> Result<()> {
        for d in &self.deprecated_apis {
            for n in &d.served_by {
                if !self
                    .nodes
                    .iter()
                    .any(|s| &s.name == n && s.role == Role::ControlPlane)
                {
                    bail!(
                        "scenario `deprecated_apis`: {}/{} {} is served_by {n}, which is not a \
                         control plane of the scenario",
                        d.group,
                        d.version,
                        d.resource
                    );
                }
            }
        }
        for p in &self.pods {
            if !self.nodes.iter().any(|n| n.name == p.node) {
                bail!(
                    "scenario `pods`: {}/{} is on node {}, which the scenario does not have",
                    p.namespace,
                    p.name,
                    p.node
                );
            }
            if !["Running", "Succeeded", "Failed", "Pending"].contains(&p.phase.as_str()) {
                bail!(
                    "scenario `pods`: {}/{} has phase `{}` (Running, Succeeded, Failed or Pending)",
                    p.namespace,
                    p.name,
                    p.phase
                );
            }
            if let Some(o) = &p.owner
                && !o
                    .split_once('/')
                    .is_some_and(|(k, n)| !k.is_empty() && !n.is_empty())
            {
                bail!(
                    "scenario `pods`: {}/{} has owner `{o}`, not KIND/NAME",
                    p.namespace,
                    p.name
                );
            }
        }
        for b in &self.pdbs {
            let what = format!("scenario `pdbs`: {}/{}", b.namespace, b.name);
            match (&b.min_available, &b.max_unavailable) {
                (Some(v), None) | (None, Some(v)) => {
                    if crate::tools::int_or_percent(v).is_none() {
                        bail!("{what}: `{v}` is neither an integer nor a percentage");
                    }
                }
                _ => bail!("{what} needs exactly one of min_available and max_unavailable"),
            }
            for r in &b.match_expressions {
                if !["In", "NotIn", "Exists", "DoesNotExist"].contains(&r.operator.as_str()) {
                    bail!(
                        "{what}: operator `{}` (In, NotIn, Exists or DoesNotExist)",
                        r.operator
                    );
                }
            }
        }
        if !(self.cert_expiry_days.is_finite()) {
            bail!("scenario `cert_expiry_days` must be a number of days");
        }
        Ok(())
    }

    fn validate_faults(&self) -> Result<()> {
        let f = &self.faults;
        let named = f
            .hang_on_reboot
            .iter()
            .chain(&f.pdb_block)
            .chain(&f.fail_upgrade_node)
            .chain(&f.drop_ssh_during_upgrade_apply)
            .chain(f.slow_boot.keys());
        for name in named {
            if !self.nodes.iter().any(|n| &n.name == name) {
                bail!("scenario `faults` names node {name}, which the scenario does not have");
            }
        }
        if let Some((n, s)) = f
            .slow_boot
            .iter()
            .find(|(_, s)| !s.is_finite() || **s < 0.0)
        {
            bail!("scenario `faults.slow_boot` for {n} must be seconds ≥ 0, not {s}");
        }
        Ok(())
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

fn check_hostname(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        bail!(
            "node name `{name}` is not a valid hostname (lowercase letters, digits and `-`, at most 63)"
        );
    }
    Ok(())
}

fn check_os_version(v: &str) -> Result<()> {
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        bail!("`{v}` is not a Flatcar version (expected e.g. 4081.2.0)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_names_nodes_and_defaults_versions() {
        let s = Scenario::new()
            .control_planes(1)
            .workers(3)
            .kubernetes("v1.34.2");
        let names: Vec<_> = s.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["cp-1", "w-1", "w-2", "w-3"]);
        s.validate().unwrap();
        assert_eq!(s.running(&s.nodes[2]).unwrap().to_string(), "v1.34.2");
        assert_eq!(s.cluster_version().unwrap().to_string(), "v1.34.2");
    }

    #[test]
    fn etcd_image_and_cgroup_v1_from_yaml_and_a_bad_tag_refused() {
        let s = Scenario::from_yaml(
            "kubernetes: v1.34.2\netcd: 3.6.4-0\nnodes:\n  - {name: cp-1, role: control-plane}\n  - {name: w-1, role: worker, cgroup_v1: true}\n",
        )
        .unwrap();
        s.validate().unwrap();
        assert_eq!(s.etcd.as_deref(), Some("3.6.4-0"));
        assert!(s.nodes[1].cgroup_v1 && !s.nodes[0].cgroup_v1);
        let mut bad = s.clone();
        bad.etcd = Some("v3.6.4".into());
        assert!(bad.validate().is_err());
        let mut external = s;
        external.external_etcd = vec!["https://10.0.0.5:2379".into()];
        assert!(
            external.validate().is_err(),
            "an external etcd has no image here"
        );
    }

    #[test]
    fn with_node_changes_one_node() {
        let s = Scenario::new()
            .control_planes(1)
            .workers(2)
            .kubernetes("v1.34.2")
            .with_node("w-2", |n| {
                n.user = Some("core".into());
                n.staged = Some("v1.34.3".into());
            });
        assert_eq!(s.nodes[2].user.as_deref(), Some("core"));
        assert_eq!(
            s.staged(&s.nodes[2]).unwrap().unwrap().to_string(),
            "v1.34.3"
        );
        assert_eq!(s.nodes[1].staged, None);
    }

    #[test]
    fn yaml_with_every_field() {
        let text = r#"
kubernetes: v1.34.2
os_version: 4081.2.0
boot_delay: 1.5
kubelet_restart: 2
port: 2200
kured: true
hub:
  patches: 2
  patches_for: {v1.35: 5}
  missing: [v1.36]
  extra: [v1.38.9]
nodes:
  - {name: cp-1, role: control-plane}
  - name: w-1
    role: worker
    user: core
    running: v1.33.1
    staged: v1.34.0
    pin: floating
    extra_configs: [v1.32]
    os_update: 4081.3.0
    wrong_host_key: true
faults:
  hang_on_reboot: [w-1]
"#;
        let s = Scenario::from_yaml(text).unwrap();
        assert_eq!(s.boot_delay, 1.5);
        assert_eq!(s.kubelet_restart, 2.0);
        assert_eq!(s.kubelet_delay, 0.3, "unset fields keep their defaults");
        assert_eq!(s.nodes[1].pin, Pin::Floating);
        assert!(s.nodes[1].wrong_host_key);
        assert_eq!(s.faults.hang_on_reboot, ["w-1"]);
        let versions: Vec<String> = s
            .hub
            .versions()
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert!(versions.contains(&"v1.35.4".to_string()));
        assert!(!versions.contains(&"v1.34.2".to_string()));
        assert!(!versions.iter().any(|v| v.starts_with("v1.36.")));
        assert!(versions.contains(&"v1.38.9".to_string()));
    }

    #[test]
    fn builder_round_trips_through_yaml() {
        let s = Scenario::new()
            .control_planes(2)
            .workers(1)
            .kubernetes("v1.35.1")
            .with_node("w-1", |n| n.pin = Pin::Floating)
            .faults(|f| f.hub_down = true);
        let back = Scenario::from_yaml(&s.to_yaml().unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn kured_as_a_switch_or_a_mapping() {
        let on = Scenario::from_yaml(
            "kubernetes: v1.34.2\nkured: true\nnodes: [{name: cp-1, role: control-plane}]",
        )
        .unwrap();
        assert_eq!(on.kured.spec().unwrap().daemonset().name, "kured");
        let helm = Scenario::from_yaml(
            "kubernetes: v1.34.2\nkured: {helm: ops/reboots, run: true, period: 0.5, lock_ttl: 30}\n\
             nodes: [{name: cp-1, role: control-plane}]",
        )
        .unwrap();
        let ds = helm.kured.spec().unwrap().daemonset();
        assert_eq!(
            (ds.namespace.as_str(), ds.name.as_str()),
            ("ops", "reboots-kured")
        );
        assert!(ds.active);
        assert!(ds.args.contains(&"--lock-ttl=30s".to_string()));
        let back = Scenario::from_yaml(&helm.to_yaml().unwrap()).unwrap();
        assert_eq!(back, helm);
        for bad in ["{helm: kured}", "{period: 0}", "{colour: red}"] {
            let yaml = format!(
                "kubernetes: v1.34.2\nkured: {bad}\nnodes: [{{name: cp-1, role: control-plane}}]"
            );
            assert!(Scenario::from_yaml(&yaml).is_err(), "{bad}");
        }
    }

    #[test]
    fn refuses_what_would_misbehave() {
        let cases = [
            ("nodes: []", "no nodes"),
            (
                "kubernetes: v1.34.2\nnodes: [{name: w-1, role: worker}]",
                "no control-plane",
            ),
            (
                "nodes: [{name: cp-1, role: control-plane}]",
                "no running version",
            ),
            (
                "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane}, {name: cp-1, role: worker}]",
                "appears twice",
            ),
            (
                "kubernetes: v1.34.2\nnodes: [{name: CP_1, role: control-plane}]",
                "not a valid hostname",
            ),
            (
                "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane, user: admin}]",
                "user `admin`",
            ),
            (
                "kubernetes: v1.34\nnodes: [{name: cp-1, role: control-plane}]",
                "not a Kubernetes version",
            ),
            (
                "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane}]\nfaults: {pdb_block: [w-9]}",
                "names node w-9",
            ),
            (
                "kubernetes: v1.34.2\nboot_delay: -1\nnodes: [{name: cp-1, role: control-plane}]",
                "boot_delay",
            ),
            (
                "kubernetes: v1.34.2\nkubelet_restart: 0\nnodes: [{name: cp-1, role: control-plane}]",
                "kubelet_restart",
            ),
            (
                "kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane, colour: red}]",
                "colour",
            ),
        ];
        for (yaml, expected) in cases {
            let err = format!("{:#}", Scenario::from_yaml(yaml).unwrap_err());
            assert!(
                err.contains(expected),
                "{yaml}\n→ {err}\n(expected `{expected}`)"
            );
        }
    }
}

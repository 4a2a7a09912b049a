//! The state shared by the supervisor (outside the nodes) and the emulated
//! tools (inside them): one directory, bind-mounted into every node at
//! [`CLUSTER_DIR`], holding the cluster state, the fault switches and the
//! append-only event log. Every read-modify-write holds an exclusive `flock`
//! on `state.lock`, so concurrent `kubectl` calls on different nodes and the
//! supervisor never lose an update.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Where the shared cluster directory appears inside every node.
pub const CLUSTER_DIR: &str = "/var/lib/fleetsim/cluster";
/// Where a node's own boot record appears inside that node (read-only).
pub const NODE_FILE: &str = "/var/lib/fleetsim/node.json";
/// A staged Flatcar OS update inside a node: present (as [`OsUpdate`]) from
/// the moment an update is downloaded until the reboot that applies it.
pub const OS_UPDATE_FILE: &str = "/var/lib/fleetsim/os-update.json";

/// The content of [`OS_UPDATE_FILE`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsUpdate {
    /// The Flatcar version the next boot runs, e.g. `4081.3.0`.
    pub new_version: String,
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    ControlPlane,
    Worker,
}

/// Written by the supervisor before each boot; read by the node's tools.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeBoot {
    pub name: String,
    pub role: Role,
    pub boot_id: String,
    /// The kubernetes sysext merged at this boot (what kubelet/kubeadm/kubectl report).
    pub kubernetes: String,
    /// The Flatcar version booted.
    pub os: String,
    pub booted_at: f64,
    /// The containerd sysext merged at this boot (`2.1.4`), empty for none
    /// (the OS's own containerd).
    #[serde(default)]
    pub containerd: String,
}

/// The cluster as the API server would describe it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cluster {
    /// `kubernetesVersion` in the kubeadm-config ConfigMap.
    pub version: String,
    /// Seconds after a boot before the kubelet reports Ready.
    pub kubelet_delay: f64,
    /// Seconds after a control-plane boot before its API server answers.
    pub api_delay: f64,
    /// Seconds each API request of kubectl takes (the round trip to the
    /// API server and etcd). 0 when unset, so unit tests stay fast.
    #[serde(default)]
    pub api_latency: f64,
    /// Seconds `kubeadm upgrade apply|node` works (writing manifests,
    /// waiting for the kubelet) before it is done. 0 when unset.
    #[serde(default)]
    pub kubeadm_duration: f64,
    pub nodes: BTreeMap<String, ClusterNode>,
    /// A kube-proxy DaemonSet exists. Starts false: Cilium replaces it.
    pub kube_proxy: bool,
    /// Kured's DaemonSet, when the scenario installs it.
    pub kured: Option<DaemonSet>,
    /// ConfigMaps other than kubeadm-config, keyed `namespace/name`.
    pub configmaps: BTreeMap<String, ConfigMap>,
    /// Bumped on every change to any object; objects carry their own copy.
    pub resource_version: u64,
    /// Workload pods the scenario adds (besides the DaemonSets', CoreDNS and
    /// the per-worker app the sim always runs).
    #[serde(default)]
    pub pods: Vec<PodSpec>,
    /// PodDisruptionBudgets the scenario adds.
    #[serde(default)]
    pub pdbs: Vec<PdbSpec>,
    /// Deprecated APIs clients requested (the API server's
    /// `apiserver_requested_deprecated_apis` gauge).
    #[serde(default)]
    pub deprecated_apis: Vec<DeprecatedApi>,
    /// When each control plane's kubeadm certificates expire (seconds since
    /// the epoch); renewed by `kubeadm upgrade apply|node`.
    #[serde(default)]
    pub certs_expire: BTreeMap<String, f64>,
    /// The endpoints of an external etcd (kubeadm-config `etcd.external`);
    /// empty: kubeadm's stacked etcd, a static pod per control plane.
    #[serde(default)]
    pub external_etcd: Vec<String>,
    /// ClusterConfiguration's `extraArgs` of the control plane, keyed
    /// `apiServer`, `controllerManager` or `scheduler`, then flag → value
    /// (`feature-gates` → `A=true`): what kubeadm renders into the static
    /// pods it writes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub control_plane_args: BTreeMap<String, BTreeMap<String, String>>,
    /// ClusterConfiguration's `featureGates`: kubeadm's own gates, gate →
    /// value, which kubeadm's upgrade checks against the gates it knows
    /// (`tools::kubeadm::feature_gates`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kubeadm_feature_gates: BTreeMap<String, bool>,
    /// The etcd image tag a control plane's static pod runs, where it is
    /// not the one kubeadm's `SupportedEtcdVersion` names for its
    /// `control_plane_version` (a scenario's `etcd:`, until a kubeadm
    /// upgrade deploys a newer one); see `etcd_pod/tag.rs`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub etcd_images: BTreeMap<String, String>,
    /// Rook-Ceph, when the scenario installs it (`crate::ceph`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph: Option<crate::ceph::CephSpec>,
}

/// A workload pod of the scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodSpec {
    pub namespace: String,
    pub name: String,
    /// The node it is scheduled on.
    pub node: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its annotations: anyone who may create a pod may set any (a decoy's
    /// kubeadm endpoint annotation, in tests/cli/hardening.rs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `KIND/NAME` of its controller (`ReplicaSet/web-7d9f8b6c5d`,
    /// `StatefulSet/zk`, `Job/backup`); none: a bare pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `Running` (default), `Succeeded`, `Failed` or `Pending`.
    #[serde(default = "running")]
    pub phase: String,
    /// Its one container's image; unset: `registry.example/app:1`. (A pod
    /// named after Kured's image, say, that cannot reboot its node: no
    /// hostPID, not privileged, as a user's own pod.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

fn running() -> String {
    "Running".into()
}

/// A PodDisruptionBudget of the scenario (policy/v1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PdbSpec {
    pub namespace: String,
    pub name: String,
    /// An integer or a percentage (`"50%"`); exactly one of the two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<serde_json::Value>,
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

/// A label selector requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub key: String,
    pub operator: String,
    #[serde(default)]
    pub values: Vec<String>,
}

/// One `apiserver_requested_deprecated_apis` series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeprecatedApi {
    pub group: String,
    pub version: String,
    pub resource: String,
    #[serde(default)]
    pub subresource: String,
    /// `1.32`: the release that removes it.
    pub removed_release: String,
    /// The control planes whose kube-apiserver served the request (each
    /// instance's gauge counts only what it served itself); empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub served_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterNode {
    pub role: Role,
    /// The node's sshd is running (false from reboot until boot completes).
    pub up: bool,
    pub booted_at: f64,
    /// What the node's kubelet last reported (`status.nodeInfo.kubeletVersion`):
    /// set when a kubelet starts, kept while none runs.
    pub kubelet_version: String,
    pub unschedulable: bool,
    /// Version of this node's control-plane static pods (control-plane nodes only):
    /// set by `upgrade apply` / `upgrade node`.
    pub control_plane_version: Option<String>,
    /// The Flatcar version booted (`status.nodeInfo.osImage`); set at each boot.
    #[serde(default)]
    pub os: String,
    /// The boot id of the current boot (`status.nodeInfo.bootID`); set at each boot.
    #[serde(default)]
    pub boot_id: String,
    /// The node's IP address (`InternalIP`, and the host IP of its pods).
    #[serde(default)]
    pub address: String,
    /// The kubelet running on the node, set by the kubelet when it starts
    /// and cleared when the node goes down. It counts only for the boot it
    /// names (see [`ClusterNode::kubelet_running`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletRun>,
    /// Labels set through the API (`kubectl label`, Kured's pre- and
    /// post-reboot labels) on top of those the kubelet and kubeadm put
    /// (`api::objects::nodes::node_json`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// A kubelet that started and is running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KubeletRun {
    /// The boot it started in.
    pub boot_id: String,
    pub started_at: f64,
    /// The static pods whose manifest the kubelet last found missing from
    /// `/etc/kubernetes/manifests` (`crate::static_pod_files`): it stopped
    /// them, or never started them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub manifests_out: Vec<String>,
}

impl ClusterNode {
    /// The node is up and this boot's kubelet runs: only then does the node
    /// post status and, on a control plane, run its static pods.
    pub fn kubelet_running(&self) -> Option<&KubeletRun> {
        self.kubelet
            .as_ref()
            .filter(|k| self.up && k.boot_id == self.boot_id)
    }
}

/// Kured's DaemonSet as installed: its pod template's one container and
/// the lock annotation fleetctl and Kured's pods take turns on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    /// The container's image (`ghcr.io/kubereboot/kured:1.23.0`).
    #[serde(default)]
    pub image: String,
    /// The container's `command` (empty: the image's entrypoint).
    #[serde(default)]
    pub command: Vec<String>,
    pub args: Vec<String>,
    /// The container's `env`, as the API returns it.
    #[serde(default)]
    pub env: Vec<serde_json::Value>,
    /// `metadata.labels` (the chart's `app.kubernetes.io/*`, or `name: kured`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub resource_version: u64,
    /// Its pods run Kured's loop (`crate::kured`): reboot a node whose
    /// `/run/reboot-required` exists, under the lock.
    #[serde(default)]
    pub active: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConfigMap {
    pub data: BTreeMap<String, String>,
    pub resource_version: u64,
    pub created: f64,
    /// `metadata.uid`: new for every object created, so a ConfigMap
    /// deleted and created again is told apart by it.
    #[serde(default)]
    pub uid: String,
}

impl Cluster {
    /// The resourceVersion a write gets: above every object's, as etcd's
    /// revision is.
    pub fn next_resource_version(&self) -> u64 {
        let kured = self.kured.as_ref().map_or(0, |k| k.resource_version);
        let cms = self
            .configmaps
            .values()
            .map(|c| c.resource_version)
            .max()
            .unwrap_or(0);
        self.resource_version.max(kured).max(cms) + 1
    }

    /// Ready once the node's kubelet has run for `kubelet_delay`.
    pub fn node_ready(&self, name: &str, at: f64) -> bool {
        self.nodes
            .get(name)
            .and_then(ClusterNode::kubelet_running)
            .is_some_and(|k| at >= k.started_at + self.kubelet_delay)
    }

    /// `name`'s static pods (kube-apiserver and the others) run: its kubelet
    /// started them at least `api_delay` ago, and kube-apiserver's manifest
    /// was in place when it last looked.
    pub fn static_pods_running(&self, name: &str, at: f64) -> bool {
        self.nodes.get(name).is_some_and(|n| {
            n.role == Role::ControlPlane
                && n.kubelet_running().is_some_and(|k| {
                    at >= k.started_at + self.api_delay
                        && !k
                            .manifests_out
                            .iter()
                            .any(|c| c == crate::static_pod_files::API_SERVER)
                })
        })
    }

    /// The API answers while at least one control plane's kube-apiserver runs.
    pub fn api_up(&self, at: f64) -> bool {
        self.nodes
            .keys()
            .any(|name| self.static_pods_running(name, at))
    }
}

/// Faults a scenario or a test switches on; read by the supervisor and the tools.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// Nodes that do not come back from their next reboot until removed from here.
    pub hang_on_reboot: Vec<String>,
    /// The extension hub refuses every request.
    pub hub_down: bool,
    /// How many of the next `kubeadm upgrade apply` calls fail.
    pub fail_upgrade_apply: u32,
    /// Nodes whose next `kubeadm upgrade node` fails (each consumed once).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fail_upgrade_node: Vec<String>,
    /// Nodes whose drain is blocked by a PodDisruptionBudget.
    pub pdb_block: Vec<String>,
    /// Control planes whose kube-apiserver cannot be reached at its
    /// advertise address (`kubectl --server=https://ADDR:6443` is refused),
    /// while it still runs and serves through the others.
    pub apiserver_unreachable: Vec<String>,
    /// Extra boot delay per node, in seconds.
    pub slow_boot: BTreeMap<String, f64>,
    /// The admin kubeconfig may read Kured's DaemonSet but not change it
    /// (RBAC, or a policy webhook): taking Kured's lock is Forbidden.
    /// Kured's own pods keep their rights.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub kured_lock_forbidden: bool,
    /// Nodes whose Node object a validating admission webhook refuses to
    /// change (a policy freezing them): every update or patch of it,
    /// cordon and uncordon included, is the API's 403 with the webhook's
    /// message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_node_updates: Vec<String>,
    /// Nodes whose SSH connections are cut while their next `kubeadm
    /// upgrade apply` works (each consumed once).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub drop_ssh_during_upgrade_apply: Vec<String>,
    /// The alerts the fleet's Prometheus reports, by name: `firing` or
    /// `pending` (`crate::prometheus`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub alerts: BTreeMap<String, String>,
    /// Every etcd snapshot saved from now on is damaged on the node's disk
    /// right after etcdctl wrote it (a failing disk): `truncate` cuts its
    /// last 100 bytes, `flip` flips one bit in its first page; `grow`
    /// extends it (sparse) to 10 GiB, the size of the snapshot of an etcd
    /// whose quota was raised past etcd's suggested 8 GiB, or a node lying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damage_etcd_snapshot: Option<SnapshotDamage>,
    /// The kubelet of a version on a node exits 1 at every start, after
    /// logging why (`crate::tools::kubelet::CRASH`): node → `v1.35` (any
    /// patch of the minor) or `v1.35.3` (that patch). systemd restarts it
    /// as it restarts any failed kubelet: a crash loop, the Node NotReady.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kubelet_crash: BTreeMap<String, String>,
    /// A HEALTH_ERR check Ceph raises while this is set (`OSD_FULL`,
    /// `PG_DAMAGED`…; `crate::ceph`), until cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph_health_err: Option<String>,
    /// When Rook's operator stopped (seconds since the epoch): the
    /// CephCluster's `.status.ceph` stays as it last wrote it, and is not
    /// there at all when it stopped before its first health check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph_operator_stopped: Option<f64>,
    /// The kubelet of a version on a node exits 1 at its first `starts`
    /// starts of every boot, then runs (`crate::tools::kubelet::NO_RUNTIME`:
    /// containerd not serving yet, which the bakery's kubelet.service is
    /// not ordered after): node → version as in `kubelet_crash`. systemd
    /// restarts it after `RestartSec`, the counter `NRestarts` grows, and
    /// the node recovers by itself.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kubelet_slow_start: BTreeMap<String, SlowStart>,
    /// Control planes whose etcd member the kubelet starts that many
    /// seconds late at its next start (a slow disk, an image pulled
    /// again): the real member is simply not running meanwhile, then
    /// catches up with its peers as etcd does. Consumed by that start.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub etcd_late: BTreeMap<String, f64>,
    /// The containerd of a version on a node serves no CRI (its `cri`
    /// plugin disabled or failed to load): node → `2.2` (any patch of the
    /// minor) or `2.2.0` (that patch). Any kubelet booted with it exits 1
    /// at every start (`crate::tools::kubelet::CRASH`: `unknown service
    /// runtime.v1.RuntimeService`), whatever its own version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub containerd_no_cri: BTreeMap<String, String>,
    /// The kubelet of a version on a node answers `--version` with one
    /// line of 32 MiB (`Kubernetes vX.Y.Z` and then junk, as a broken or
    /// hostile binary may): node → version as in `kubelet_crash`. The
    /// service itself runs; every poll of fleetctl's wait after the reboot
    /// gets the whole line, as much as fleetctl reads of one output.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kubelet_version_flood: BTreeMap<String, String>,
    /// The https hub (scenario `hub.https`) answers every request with
    /// `302 Found` and a `Location:` on the same path of the plain-HTTP
    /// hub, as a misconfigured or hostile server would.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redirect_to_http: bool,
}

/// [`Faults::kubelet_slow_start`]: which kubelet, how many failed starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowStart {
    pub version: String,
    pub starts: u32,
}

impl Faults {
    /// Whether the `kubelet_crash` fault holds the kubelet `version` (as
    /// `v1.35.3`) on `node`.
    pub fn kubelet_crashes(&self, node: &str, version: &str) -> bool {
        self.kubelet_crash
            .get(node)
            .is_some_and(|v| version_matches(version, v))
    }

    /// Whether the `containerd_no_cri` fault holds the containerd
    /// `version` (as `2.2.0`, the boot record's) on `node`.
    pub fn containerd_serves_no_cri(&self, node: &str, version: &str) -> bool {
        !version.is_empty()
            && self
                .containerd_no_cri
                .get(node)
                .is_some_and(|v| version_matches(version, v))
    }

    /// Whether the `kubelet_version_flood` fault holds the kubelet
    /// `version` on `node`.
    pub fn kubelet_floods(&self, node: &str, version: &str) -> bool {
        self.kubelet_version_flood
            .get(node)
            .is_some_and(|v| version_matches(version, v))
    }

    /// How many starts in a boot the `kubelet_slow_start` fault fails for
    /// the kubelet `version` on `node` (0: none).
    pub fn kubelet_failing_starts(&self, node: &str, version: &str) -> u32 {
        self.kubelet_slow_start
            .get(node)
            .filter(|s| version_matches(version, &s.version))
            .map_or(0, |s| s.starts)
    }
}

/// `v1.35.3` is held by `v1.35` (any patch) and by `v1.35.3`.
fn version_matches(version: &str, fault: &str) -> bool {
    version == fault || version.starts_with(&format!("{fault}."))
}

/// How [`Faults::damage_etcd_snapshot`] damages a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotDamage {
    Truncate,
    Flip,
    Grow,
}

/// One mutating call, or a node's own action (boot, shutdown, kubelet start).
/// Fields after `pins` are optional and absent from the JSON when unset, so
/// older readers and older logs keep working.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub t: f64,
    pub node: String,
    pub argv: Vec<String>,
    /// `ok`, or the error the tool printed.
    pub result: String,
    /// The kubernetes MatchPattern(s) in the node's sysupdate configs at the time,
    /// so tests can see who was given which pin when.
    #[serde(default)]
    pub pins: Vec<String>,
    /// The Kubernetes version involved: of the binary that ran (kubeadm,
    /// kubectl, kubelet), of the kubelet a boot merged, of the static pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `(kubelet)` only: the kubeadm version that wrote the kubelet config
    /// the kubelet loaded (`none` when the file carries no such stamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
}

/// The shared directory, seen from wherever the caller runs.
#[derive(Debug, Clone)]
pub struct Shared {
    pub dir: PathBuf,
}

// The File is held only for its flock, released when it closes.
struct Lock(#[allow(dead_code)] File);

impl Lock {
    fn take(dir: &Path) -> Result<Lock> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("state.lock"))
            .with_context(|| format!("opening {}/state.lock", dir.display()))?;
        // SAFETY: flock on a file descriptor we own; released when the File closes.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            anyhow::bail!(
                "flock {}/state.lock: {}",
                dir.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(Lock(f))
    }
}

impl Shared {
    pub fn new(dir: impl Into<PathBuf>) -> Shared {
        Shared { dir: dir.into() }
    }

    /// Inside a node.
    pub fn in_node() -> Shared {
        Shared::new(CLUSTER_DIR)
    }

    fn read_json<T: for<'de> Deserialize<'de> + Default>(&self, file: &str) -> Result<T> {
        let path = self.dir.join(file);
        match fs::read(&path) {
            Ok(b) => {
                serde_json::from_slice(&b).with_context(|| format!("parsing {}", path.display()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn write_json<T: Serialize>(&self, file: &str, value: &T) -> Result<()> {
        let path = self.dir.join(file);
        let tmp = self.dir.join(format!(".{file}.tmp"));
        // Compact: a thousand-node cluster.json is read and written at
        // every boot and kubectl call, under the one lock.
        fs::write(&tmp, serde_json::to_vec(value)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, &path).with_context(|| format!("renaming to {}", path.display()))
    }

    pub fn cluster(&self) -> Result<Cluster> {
        let _l = Lock::take(&self.dir)?;
        self.read_json("cluster.json")
    }

    /// Read-modify-write of the cluster state under the lock.
    pub fn update_cluster<R>(&self, f: impl FnOnce(&mut Cluster) -> Result<R>) -> Result<R> {
        let _l = Lock::take(&self.dir)?;
        let mut c: Cluster = self.read_json("cluster.json")?;
        let r = f(&mut c)?;
        self.write_json("cluster.json", &c)?;
        Ok(r)
    }

    pub fn faults(&self) -> Result<Faults> {
        let _l = Lock::take(&self.dir)?;
        self.read_json("faults.json")
    }

    pub fn update_faults<R>(&self, f: impl FnOnce(&mut Faults) -> R) -> Result<R> {
        let _l = Lock::take(&self.dir)?;
        let mut x: Faults = self.read_json("faults.json")?;
        let r = f(&mut x);
        self.write_json("faults.json", &x)?;
        Ok(r)
    }

    /// Appends one event line (O_APPEND under the lock: lines never interleave).
    pub fn record(&self, event: &Event) -> Result<()> {
        let _l = Lock::take(&self.dir)?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("events.jsonl"))
            .context("opening events.jsonl")?;
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        f.write_all(&line).context("appending to events.jsonl")
    }

    pub fn events(&self) -> Result<Vec<Event>> {
        let _l = Lock::take(&self.dir)?;
        let text = match fs::read_to_string(self.dir.join("events.jsonl")) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).context("reading events.jsonl"),
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).with_context(|| format!("bad event line: {l}")))
            .collect()
    }
}

//! The fleet's state directory, in one place: every path the supervisor,
//! `fleetsim ctl`, the harness and node-init agree on. See
//! docs/simulator.md ("State directory") for the same map in prose.

use std::path::{Path, PathBuf};

/// The top-level directories a node changes, each an overlayfs whose lower
/// layer is the host's directory and whose upper layer is the node's "disk".
pub const OVERLAID: [&str; 6] = ["usr", "etc", "opt", "var", "root", "home"];

/// Where the multi-call binary is hard-linked inside every node, relative to
/// `/`. kubelet, kubeadm and kubectl are not here: they come from the
/// kubernetes sysext merged at boot, whose wrappers run the
/// `usr/lib/fleetsim/` links.
pub const TOOL_LINKS: [&str; 13] = [
    "usr/lib/fleetsim/etcd-container",
    "usr/lib/fleetsim/kubelet",
    "usr/lib/fleetsim/containerd",
    "usr/lib/fleetsim/kubeadm",
    "usr/lib/fleetsim/kubectl",
    "usr/bin/update_engine_client",
    "usr/bin/systemctl",
    "usr/bin/systemd-run",
    "usr/bin/journalctl",
    "usr/bin/systemd-sysext",
    "usr/lib/systemd/systemd-sysupdate",
    "usr/sbin/reboot",
    "usr/sbin/shutdown",
];

/// The sshd configuration file inside a node (never the host's own).
pub const SSHD_CONFIG: &str = "/etc/ssh/sshd_config.fleetsim";
/// The host key a node presents, inside the node.
pub const HOST_KEY: &str = "/etc/ssh/fleetsim_host_ed25519_key";

/// A fleet's state directory (`DIR` in the docs).
#[derive(Debug, Clone)]
pub struct FleetDir {
    root: PathBuf,
}

impl FleetDir {
    pub fn new(root: impl Into<PathBuf>) -> FleetDir {
        FleetDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The shared cluster directory (cluster.json, faults.json, events.jsonl).
    pub fn cluster(&self) -> PathBuf {
        self.root.join("cluster")
    }

    /// The hub's document root; images live under `hub/kubernetes/`.
    pub fn hub(&self) -> PathBuf {
        self.root.join("hub")
    }

    /// The copy of the fleetsim binary every node links to.
    pub fn binary(&self) -> PathBuf {
        self.root.join("bin").join("fleetsim")
    }

    /// The real kubectl binaries every node links to (`crate::clients`).
    pub fn clients(&self) -> PathBuf {
        self.root.join("bin").join("clients")
    }

    pub fn ssh_dir(&self) -> PathBuf {
        self.root.join("ssh")
    }

    /// The operator's private key, authorized for root and core on every node.
    pub fn identity(&self) -> PathBuf {
        self.ssh_dir().join("id_ed25519")
    }

    pub fn known_hosts(&self) -> PathBuf {
        self.ssh_dir().join("known_hosts")
    }

    pub fn inventory(&self) -> PathBuf {
        self.root.join("inventory.yaml")
    }

    /// The supervisor's description of the running fleet (hub URL, addresses).
    pub fn fleet_json(&self) -> PathBuf {
        self.root.join("fleet.json")
    }

    /// Exists while every node has booted once and the supervisor runs.
    pub fn ready(&self) -> PathBuf {
        self.root.join("ready")
    }

    pub fn node(&self, name: &str) -> PathBuf {
        self.root.join("nodes").join(name)
    }

    /// The node's persistent layer for `/<top>` ("its disk").
    pub fn upper(&self, name: &str, top: &str) -> PathBuf {
        self.node(name).join("upper").join(top)
    }

    /// overlayfs's work directory for `/<top>`; must sit beside the upper one.
    pub fn work(&self, name: &str, top: &str) -> PathBuf {
        self.node(name).join("work").join(top)
    }

    /// A path inside the node (absolute, e.g. `/etc/os-release`) mapped to
    /// the node's upper layer on the host. `None` when the path is not under
    /// an overlaid directory.
    pub fn in_upper(&self, name: &str, node_path: &str) -> Option<PathBuf> {
        let rel = node_path.strip_prefix('/')?;
        let (top, rest) = rel.split_once('/').unwrap_or((rel, ""));
        if !OVERLAID.contains(&top) {
            return None;
        }
        let base = self.upper(name, top);
        Some(if rest.is_empty() {
            base
        } else {
            base.join(rest)
        })
    }

    /// The node's boot record, bind-mounted read-only at `state::NODE_FILE`.
    pub fn node_json(&self, name: &str) -> PathBuf {
        self.node(name).join("node.json")
    }

    /// Bind-mounted over `/proc/sys/kernel/random/boot_id` inside the node.
    pub fn boot_id(&self, name: &str) -> PathBuf {
        self.node(name).join("boot_id")
    }

    /// What node-init needs to know to boot the node (see `node_init::InitConfig`).
    pub fn init_json(&self, name: &str) -> PathBuf {
        self.node(name).join("init.json")
    }

    /// Where node-init mounts the sysext image before overlaying /usr with it
    /// (inside the node's mount namespace only; detached once merged).
    pub fn sysext_staging(&self, name: &str) -> PathBuf {
        self.node(name).join("sysext")
    }

    /// Exists while `fleetsim ctl power-cycle` waits for the supervisor to
    /// pull the node's plug.
    pub fn power_cycle_request(&self, name: &str) -> PathBuf {
        self.node(name).join("power-cycle")
    }

    /// `fleetsim ctl drop-ssh`'s request: the supervisor cuts the node's SSH
    /// connections and removes the file.
    pub fn drop_ssh_request(&self, name: &str) -> PathBuf {
        self.node(name).join("drop-ssh")
    }

    /// node-init's and sshd's stderr, across every boot.
    pub fn console_log(&self, name: &str) -> PathBuf {
        self.node(name).join("console.log")
    }

    /// A real-OS node's `/dev/console`, this boot's only: what its systemd
    /// wrote there, above all the line of a boot it gave up on.
    pub fn console_device(&self, name: &str) -> PathBuf {
        self.node(name).join("dev-console.log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_node_paths_to_the_upper_layer() {
        let d = FleetDir::new("/tmp/f");
        assert_eq!(
            d.in_upper("w-1", "/etc/os-release"),
            Some(PathBuf::from("/tmp/f/nodes/w-1/upper/etc/os-release"))
        );
        assert_eq!(
            d.in_upper("w-1", "/opt"),
            Some(PathBuf::from("/tmp/f/nodes/w-1/upper/opt"))
        );
        assert_eq!(d.in_upper("w-1", "/run/reboot-required"), None);
        assert_eq!(d.in_upper("w-1", "relative/path"), None);
    }
}

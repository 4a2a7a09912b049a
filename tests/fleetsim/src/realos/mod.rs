//! Real-OS nodes (scenario `os: systemd`, issue 18): a node boots a Debian 13
//! root (systemd 257) with Flatcar's paths on top, with the real systemd as
//! PID 1, so systemd-sysext, systemd-sysupdate, systemd-run, systemctl,
//! journald and `systemctl reboot` are the real ones. What stays emulated:
//! the kubelet, kubeadm, kubectl, update_engine and the cluster.
//!
//! - [`rootfs`]: the cached root image (`tests/fleetsim/rootfs.sh`, embedded);
//! - [`cgroup`]: each node boots in a cgroup of its own, the root of its cgroup
//!   namespace, so nothing depends on the host's cgroup layout;
//! - [`init`]: what runs as PID 1 before systemd (mounts, `pivot_root`);
//! - [`disk`]: what provisioning changes on a real-OS node's disk;
//! - [`boot`]: what the supervisor records once a real-OS node is up.
//!
//! docs/simulator.md ("Real-OS nodes") has the design and the differences
//! found between the real tools and the emulations.

pub mod boot;
pub mod cgroup;
pub mod disk;
pub mod init;
pub mod rootfs;
pub mod sys;

/// How long a real-OS node may take from its init to sshd listening: a
/// whole systemd boot (journald, sysext merge, ssh.service), on a machine
/// that may boot several at once.
pub const SSHD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

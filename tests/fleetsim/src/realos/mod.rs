//! Real-OS nodes (scenario `os_layer: systemd`, issue 18): a node boots a Debian 13
//! root (systemd 257) with Flatcar's paths on top, with the real systemd as
//! PID 1, so systemd-sysext, systemd-sysupdate, systemd-run, systemctl,
//! journald and `systemctl reboot` are the real ones. What stays emulated:
//! the kubelet, kubeadm, kubectl, update_engine and the cluster.
//!
//! - [`rootfs`]: the cached root image (`tests/fleetsim/rootfs.sh`, embedded);
//! - [`cgroup`]: each node boots in a cgroup of its own, the root of its cgroup
//!   namespace, so nothing depends on the host's cgroup layout;
//! - [`init`]: what runs as PID 1 before systemd (mounts, `pivot_root`);
//! - [`limits`]: the inotify limit every node's systemd shares with the others;
//! - [`disk`]: what provisioning changes on a real-OS node's disk;
//! - [`boot`]: what the supervisor records once a real-OS node is up;
//! - [`record`]: the event a real tool's run leaves in the log;
//! - [`timer`]: the node's own sysupdate timer, when its scenario enables it.
//!
//! docs/simulator.md ("Real-OS nodes") has the design and the differences
//! found between the real tools and the emulations.

pub mod boot;
pub mod cgroup;
pub mod disk;
pub mod init;
pub mod limits;
pub mod record;
pub mod rootfs;
pub mod sys;
pub mod timer;

/// How long a real-OS node may take from its init to sshd listening: a
/// whole systemd boot (journald, sysext merge, ssh.service), on a machine
/// that may boot several at once.
pub const SSHD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

#[cfg(test)]
mod tests {
    use crate::scenario::{Os, Scenario};

    #[test]
    fn a_scenario_asks_for_real_os_nodes_by_os_layer() {
        let yaml = "kubernetes: v1.34.2\nos_layer: systemd\nnodes:\n  - {name: cp-1, role: control-plane}\n";
        let s = Scenario::from_yaml(yaml).unwrap();
        assert_eq!(s.os_layer, Os::Systemd);
        assert_eq!(
            Scenario::from_yaml("kubernetes: v1.34.2\nnodes: [{name: cp-1, role: control-plane}]")
                .unwrap()
                .os_layer,
            Os::Emulated
        );
        let err = Scenario::from_yaml(
            "kubernetes: v1.34.2\nos_layer: real\nnodes: [{name: cp-1, role: control-plane}]",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("os_layer"), "{err:#}");
        let light = Scenario::new()
            .control_planes(1)
            .kubernetes("v1.34.2")
            .os_layer(Os::Systemd)
            .light(true);
        let err = light.validate().unwrap_err();
        assert!(format!("{err:#}").contains("exclude each other"), "{err:#}");
        let v1 = Scenario::new()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .os_layer(Os::Systemd)
            .with_node("w-1", |n| n.cgroup_v1 = true);
        let err = v1.validate().unwrap_err();
        assert!(
            format!("{err:#}").contains("node w-1: `cgroup_v1`"),
            "{err:#}"
        );
        let timer = Scenario::new()
            .control_planes(1)
            .kubernetes("v1.34.2")
            .os_layer(Os::Emulated)
            .with_node("cp-1", |n| n.sysupdate_timer = true);
        let err = timer.validate().unwrap_err();
        assert!(
            format!("{err:#}").contains("node cp-1: `sysupdate_timer` needs `os_layer: systemd`"),
            "{err:#}"
        );
        assert!(timer.os_layer(Os::Systemd).validate().is_ok());
    }
}

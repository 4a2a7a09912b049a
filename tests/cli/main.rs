//! fleetctl's integration tests: the real binary against the simulated
//! fleet (tests/fleetsim): real sshd per node, real shell, real dropped
//! connections on reboot. One test binary, a module per area.

mod ansible;
mod apply;
mod apply_faults;
mod ceph;
mod containerd;
mod etcd_cgroup;
mod etcd_downgrade;
mod etcd_restore;
mod feature_gates;
mod hardening;
mod hostile_nodes;
mod integrity;
mod jump;
mod kubeadm_writes;
mod kured_gates;
mod lock;
mod offline_rollback;
mod on_failure;
mod one_path;
mod pacing;
mod plan;
mod rollback;
mod snapshots;
mod ssh_certs;
mod status;
mod support;
mod sysupdate_ha;
mod timer;

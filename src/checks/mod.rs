//! The checks fleetctl runs before every minor hop, as pure functions over
//! what the cluster and the nodes already say: no I/O here, so every rule is
//! a unit test fed with real command output kept under `fixtures/`.
//!
//! kubeadm lets several things through that break a cluster on the new
//! minor: clients still calling an API version the minor removes, kubelet
//! flags and feature gates the new kubelet or control plane refuses, drains
//! that a PodDisruptionBudget holds forever, certificates about to expire,
//! and images missing from the hub.
//! `plan` shows each check's verdict with what to do, and `apply` runs them
//! again right before the hop. docs/checks.md describes the JSON they carry.
//!
//! Each module parses one tool's output and judges one hop; the steps
//! run the commands (`crate::remote::kubectl` builds them) and hand the
//! output here.

mod apiservers;
pub mod ceph;
mod certs;
mod cgroup;
#[cfg(test)]
mod checks_fuzz;
#[cfg(test)]
mod checks_script_tests;
mod configmaps;
mod etcd_health;
mod etcd_members;
mod feature_gates;
mod flags;
mod hub_images;
mod kubeadm_gates;
mod kubelet_config;
mod kured_env;
mod kured_flags;
mod kured_found;
mod metrics;
mod node_cgroup;
mod node_labels;
mod pdb;
mod prediction;
mod verdicts;

pub use apiservers::{
    ApiServerInstance, ControlPlane, InstanceMetrics, check_removed_apis_across,
    parse_apiserver_instances, parse_internal_ips,
};
pub use certs::{CertExpiration, CertKind, Residual, check_certificates, parse_check_expiration};
pub use cgroup::{FAILS_CGROUP_V1_FROM, check_cgroup, check_cgroup_hop, skips_system_verification};
pub use configmaps::{
    ClusterConfigs, ClusterConfiguration, ControlPlaneComponent, KUBELET_CONFIGMAP,
    KubeletConfigDoc, parse_kubeadm_configmap, parse_kubelet_configmap,
};
pub use etcd_health::{
    DEFAULT_ETCD_DATA_DIR, EtcdTopology, SnapshotDigest, SnapshotStatus, SnapshotVerifier,
    cluster_name, etcd_topology, has_snapshot_trailer, parse_snapshot_status,
};
pub use etcd_members::{
    CATCH_UP_ENTRIES, EtcdMember, EtcdMembers, MemberStatus, parse_etcd_members,
};
pub use feature_gates::{
    ADDED_FEATURE_GATES, AddedGate, GateSources, LOCKED_FEATURE_GATES, LockedGate,
    REMOVED_FEATURE_GATES, RemovedGate, added_after, check_feature_gates, locked_at,
    parse_gate_list, parse_gate_pairs, removed_by,
};
pub use flags::{
    FlagOrigin, KUBEADM_FLAGS_ENV, KubeletFlag, NodeKubeletFiles, REMOVED_KUBELET_FLAGS,
    RemovedFlag, check_kubelet_flags, flag_removed_by, kubelet_flags,
};
pub use hub_images::{HubImage, check_hub, image_name};
pub use kubeadm_gates::{KUBEADM_GATES, KubeadmGate, NODE_LOCAL_CRI_SOCKET, kubeadm_refuses};
pub use kubelet_config::{EMPTY_FLAGS_BUG, KubeletView, Unforeseen, check_kubelet_config, views};
pub use kured_env::{EnvPrecedence, KuredEnvVar, env_precedence, parse_kured_settings};
pub use kured_flags::{KuredGates, blocking_pod_names, parse_kured_gates};
pub use kured_found::{KuredContainer, find_kured};
pub use metrics::{DeprecatedApi, check_removed_apis, parse_deprecated_apis};
pub use node_cgroup::{KUBELET_CONFIG, NodeCgroup, fail_cgroup_v1};
pub use node_labels::{NodeLabel, label_key_ok, label_value_ok, parse_node_labels};
pub use pdb::{
    Budget, LabelSelector, Operator, Pod, Requirement, check_drains, parse_pdbs, parse_pods,
};
pub use prediction::{INSTANCE_CONFIG, Predicted, predict};
pub use verdicts::{Check, CheckName, Verdict, apply_ignores};

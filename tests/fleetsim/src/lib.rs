//! fleetsim: a simulated Flatcar + kubeadm fleet for fleetctl's tests and demo.
//! Every node is a real OpenSSH `sshd` in its own mount, PID and UTS
//! namespace; see docs/simulator.md.

pub mod accounts;
pub mod api;
pub mod boot;
pub mod ceph;
pub mod cgroup;
pub mod clients;
pub mod containerd;
pub mod ctl;
pub mod etcd_pod;
pub mod feature_gates;
pub mod harness;
pub mod hub;
pub mod hub_tls;
pub mod image;
pub mod invariants;
pub mod inventory;
pub mod journal;
pub mod kubelet_files;
pub mod kured;
pub mod layout;
pub mod merge;
pub mod net;
pub mod node_init;
pub mod pins;
pub mod power;
pub mod prometheus;
pub mod provision;
pub mod realos;
pub mod scenario;
pub mod service;
pub mod sessions;
pub mod sig;
pub mod state;
pub mod static_pod_files;
pub mod supervisor;
pub mod tools;
pub mod unit;
pub mod version;

pub use harness::Fleet;
pub use scenario::{NodeSpec, Pin, Scenario};

//! fleetsim: a simulated Flatcar + kubeadm fleet for fleetctl's tests and demo.
//! Every node is a real OpenSSH `sshd` in its own mount, PID and UTS
//! namespace; see docs/simulator.md.

pub mod state;
pub mod tools;

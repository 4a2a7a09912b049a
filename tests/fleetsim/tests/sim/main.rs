//! fleetsim's own tests: every behaviour of the simulated fleet, driven
//! through the real `ssh` client against real sshd nodes. One test binary
//! (a module per area) so cargo links once. Needs root, openssh-server and
//! sudo, like the simulator itself.

mod api;
mod checks;
mod common;
mod containerd;
mod detach;
mod etcd;

mod faults;
mod hub;
mod kubelet;
mod kured;
mod leaks;
mod login;
mod node;
mod node_kubectl;
mod order;
mod realos;
mod reboot;
mod scale;

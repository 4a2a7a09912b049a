//! kubeadm's stacked etcd, with the real etcd: one member per control
//! plane, run by the node's kubelet as its etcd static pod, and the model
//! of that pod's container that `kubectl exec etcd-<node> -- …` reaches.
//!
//! - `certs`: the etcd PKI of `kubeadm init phase certs`, on each control
//!   plane's disk at `/etc/kubernetes/pki/etcd`.
//! - `member`: the etcd process (Debian's `/usr/bin/etcd`, 3.4) with the
//!   flags kubeadm's static pod manifest gives it
//!   (`cmd/kubeadm/app/phases/etcd/local.go`, `getEtcdCommand`), started by
//!   the kubelet inside the node's namespaces, so a reboot or a power cut
//!   takes it down with everything else of the node; its data stays on the
//!   node's disk at `/var/lib/etcd` (kubeadm's hostPath).
//! - `container`: what runs when the API server execs into the pod: which
//!   binaries each image has, and the real etcdctl against this node's
//!   member for everything it can do; `command_line`, etcdctl's words as
//!   it reads them.
//! - `tag`: which image each control plane's etcd runs (kubeadm's choice
//!   per version) and what each image has.
//!
//! The image's binaries are the host's, copied once into `DIR/bin/` and
//! hard-linked into every node at [`IMAGE_DIR`], off the PATH: a Flatcar
//! host has no etcd or etcdctl of its own, so the node's `/usr/bin/etcd*`
//! are hidden (whiteouts) like the host's kubelet.
//!
//! A sim artefact: every node shares the host's network namespace (each has
//! its own 127.A.B.N address), so no member can listen on 127.0.0.1:2379 as
//! a real one does inside its node. A member listens on its node's address
//! only, and the container model sends what the command addresses to
//! `127.0.0.1:2379` or `localhost:2379` to that address: the same member a
//! real pod (hostNetwork) reaches there. The server certificate names both.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::layout::FleetDir;
use crate::provision::Disk;

pub mod certs;
mod command_line;
pub mod container;
pub mod member;
pub mod tag;

/// kubeadm's `etcd.local.dataDir` default, a hostPath of the pod.
pub const DATA_DIR: &str = "/var/lib/etcd";
/// kubeadm's etcd certificates, the pod's other hostPath.
pub const PKI_DIR: &str = "/etc/kubernetes/pki/etcd";
pub const CLIENT_PORT: u16 = 2379;
pub const PEER_PORT: u16 = 2380;
/// `--listen-metrics-urls`: `/health` and `/metrics` over plain HTTP, what
/// kubeadm's liveness and startup probes ask.
pub const METRICS_PORT: u16 = 2381;
/// Where the etcd image's binaries are inside every node.
pub const IMAGE_DIR: &str = "/usr/lib/fleetsim/etcd-image";
/// The binaries of the image, from Debian's etcd-server and etcd-client.
pub const HOST_BINARIES: [(&str, &str); 2] = [
    ("/usr/bin/etcd", "etcd-server"),
    ("/usr/bin/etcdctl", "etcd-client"),
];

fn fleet_copy(fleet: &FleetDir) -> PathBuf {
    fleet.root().join("bin").join("etcd-image")
}

/// Copies the host's etcd and etcdctl into the fleet's directory (once per
/// fleet: nodes hard-link them, and the host's may be upgraded meanwhile).
pub fn copy_image(fleet: &FleetDir) -> Result<()> {
    let dir = fleet_copy(fleet);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (host, package) in HOST_BINARIES {
        let name = file_name(host);
        let target = dir.join(name);
        fs::copy(host, &target).with_context(|| {
            format!("copying {host} (the etcd static pods run it): apt-get install -y {package}")
        })?;
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755))
            .with_context(|| format!("chmod {}", target.display()))?;
    }
    Ok(())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Links the image's binaries into the node's `IMAGE_DIR`.
pub fn install(disk: &Disk, fleet: &FleetDir) -> Result<()> {
    for (host, _) in HOST_BINARIES {
        let name = file_name(host);
        disk.hard_link(
            &format!("{IMAGE_DIR}/{name}"),
            &fleet_copy(fleet).join(name),
        )?;
    }
    Ok(())
}

/// The image's binary `name` (`etcd`, `etcdctl`) under `root`.
pub fn binary(root: &Path, name: &str) -> PathBuf {
    root.join(IMAGE_DIR.trim_start_matches('/')).join(name)
}

/// `https://ADDR:PORT`.
pub fn url(address: &str, port: u16) -> String {
    format!("https://{address}:{port}")
}

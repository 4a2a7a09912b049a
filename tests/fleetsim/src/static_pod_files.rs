//! The static pod manifests of a control plane, `/etc/kubernetes/manifests/`:
//! what `kubeadm init`/`join` wrote there, and what the kubelet reads back.
//!
//! The real kubelet runs one pod per file in its `staticPodPath`
//! (pkg/kubelet/config/file.go: it lists the directory at start, again on
//! every inotify event and every `fileCheckFrequency`, 20 s by default), so
//! an operator stops a control plane's etcd or kube-apiserver by moving its
//! manifest out, and starts it again by moving it back: the first steps of
//! etcd's restore (docs/apply.md "Restoring from the snapshot"). The sim's
//! kubelet polls the directory every second (`tools::kubelet`).
//!
//! What the sim reads from a manifest is whether it is there and, for etcd,
//! the host directory of its `etcd-data` volume (kubeadm's `etcd.local.
//! dataDir`, the member's data). The etcd command written here is the one
//! the member runs (`etcd_pod::member::Plan::args`), so an operator reads
//! `--name`, `--initial-advertise-peer-urls` and `--initial-cluster` from it
//! as on a real node. The shape is kubeadm's (`GetEtcdPodSpec` in
//! cmd/kubeadm/app/phases/etcd/local.go, `ComponentPod` in
//! cmd/kubeadm/app/util/staticpod/utils.go); the image and the resource
//! fields are left out, since the sim does not rewrite manifests when
//! kubeadm upgrades a node (the etcd image is `etcd_pod::tag`'s record).

use anyhow::{Context, Result};
use serde_json::Value;
use std::path::Path;

use crate::etcd_pod::member::Plan;
use crate::etcd_pod::{DATA_DIR, PKI_DIR};
use crate::provision::Disk;

/// The kubelet's `staticPodPath` as kubeadm configures it.
pub const DIR: &str = "/etc/kubernetes/manifests";
pub const ETCD: &str = "etcd";
pub const API_SERVER: &str = "kube-apiserver";
/// kubeadm's control-plane components, then etcd (stacked only).
pub const CONTROL_PLANE: [&str; 3] = [API_SERVER, "kube-controller-manager", "kube-scheduler"];
/// The volume of the etcd pod that holds the member's data.
const ETCD_DATA: &str = "etcd-data";

/// The manifest's path inside the node.
pub fn path(component: &str) -> String {
    format!("{DIR}/{component}.yaml")
}

/// Every control plane's manifests, as `kubeadm init`/`join` left them
/// (written at `fleetsim up`, with the etcd PKI): etcd's only with a
/// stacked etcd.
pub fn write_all(
    fleet: &crate::layout::FleetDir,
    members: &[(String, std::net::Ipv4Addr)],
    stacked_etcd: bool,
) -> Result<()> {
    let all: Vec<(String, String)> = members
        .iter()
        .map(|(n, a)| (n.clone(), a.to_string()))
        .collect();
    for (name, address) in &all {
        let plan = Plan {
            name: name.clone(),
            address: address.clone(),
            members: all.clone(),
            data_dir: DATA_DIR.to_string(),
        };
        let disk = Disk { fleet, node: name };
        write(&disk, stacked_etcd.then_some(&plan))
            .with_context(|| format!("{name}: writing the static pod manifests"))?;
    }
    Ok(())
}

/// Writes a control plane's manifests: the three components, and etcd when
/// `etcd` says the node runs a stacked member.
fn write(disk: &Disk, etcd: Option<&Plan>) -> Result<()> {
    for component in CONTROL_PLANE {
        disk.file(
            &path(component),
            component_manifest(component).as_bytes(),
            0o600,
            (0, 0),
        )?;
    }
    if let Some(plan) = etcd {
        disk.file(&path(ETCD), etcd_manifest(plan).as_bytes(), 0o600, (0, 0))?;
    }
    Ok(())
}

fn component_manifest(component: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  labels:\n    component: {component}\n    tier: control-plane\n  \
         name: {component}\n  namespace: kube-system\nspec:\n  containers:\n  - command:\n    - {component}\n    \
         name: {component}\n  hostNetwork: true\n  priorityClassName: system-node-critical\nstatus: {{}}\n"
    )
}

fn etcd_manifest(plan: &Plan) -> String {
    let command: String = std::iter::once("etcd".to_string())
        .chain(plan.args())
        .map(|a| format!("    - {a}\n"))
        .collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  annotations:\n    \
         kubeadm.kubernetes.io/etcd.advertise-client-urls: {client}\n  labels:\n    component: etcd\n    \
         tier: control-plane\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - command:\n{command}    \
         name: etcd\n    volumeMounts:\n    - mountPath: {DATA_DIR}\n      name: {ETCD_DATA}\n    \
         - mountPath: {PKI_DIR}\n      name: etcd-certs\n  hostNetwork: true\n  priorityClassName: system-node-critical\n  \
         volumes:\n  - hostPath:\n      path: {PKI_DIR}\n      type: DirectoryOrCreate\n    name: etcd-certs\n  \
         - hostPath:\n      path: {DATA_DIR}\n      type: DirectoryOrCreate\n    name: {ETCD_DATA}\nstatus: {{}}\n",
        client = crate::etcd_pod::url(&plan.address, crate::etcd_pod::CLIENT_PORT),
    )
}

/// Whether `component`'s manifest is in the kubelet's directory under `root`.
pub fn present(root: &Path, component: &str) -> bool {
    root.join(path(component).trim_start_matches('/')).is_file()
}

/// The host directory of the etcd pod's `etcd-data` volume, read from the
/// manifest under `root`.
pub fn etcd_data_dir(root: &Path) -> Result<String> {
    let file = root.join(path(ETCD).trim_start_matches('/'));
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    data_dir_of(&text).with_context(|| format!("{}: no hostPath volume {ETCD_DATA}", path(ETCD)))
}

fn data_dir_of(text: &str) -> Option<String> {
    let pod: Value = serde_saphyr::from_str(text).ok()?;
    pod.pointer("/spec/volumes")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(ETCD_DATA))?
        .pointer("/hostPath/path")?
        .as_str()
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            name: "cp-1".into(),
            address: "127.1.2.10".into(),
            members: vec![("cp-1".into(), "127.1.2.10".into())],
            data_dir: DATA_DIR.into(),
        }
    }

    #[test]
    fn the_etcd_manifest_names_the_member_and_its_data_volume() {
        let text = etcd_manifest(&plan());
        assert_eq!(data_dir_of(&text).as_deref(), Some(DATA_DIR));
        let pod: Value = serde_saphyr::from_str(&text).unwrap();
        let command: Vec<&str> = pod
            .pointer("/spec/containers/0/command")
            .and_then(Value::as_array)
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(command[0], "etcd");
        assert!(command.contains(&"--name=cp-1"));
        assert!(command.contains(&"--initial-advertise-peer-urls=https://127.1.2.10:2380"));
        let moved = text.replace("path: /var/lib/etcd\n", "path: /var/lib/etcd-restored\n");
        assert_eq!(
            data_dir_of(&moved).as_deref(),
            Some("/var/lib/etcd-restored")
        );
        assert_eq!(
            data_dir_of(&component_manifest(API_SERVER)),
            None,
            "no etcd-data volume"
        );
    }
}

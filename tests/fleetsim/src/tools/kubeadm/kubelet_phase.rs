//! The kubelet-config phase of `kubeadm upgrade apply|node`
//! (`WriteKubeletConfigFiles`, cmd/kubeadm/app/phases/upgrade/postupgrade.go):
//! config.yaml from the cluster's `kube-system/kubelet-config` ConfigMap,
//! with, from v1.34, the node's `instance-config.yaml` laid over it
//! (`WriteConfigToDisk`, cmd/kubeadm/app/phases/kubelet/config.go). A
//! v1.34–v1.36 kubeadm creates that file when the node has none, moving
//! `--container-runtime-endpoint` out of kubeadm-flags.env (no such file:
//! "error reading kubeadm flags file"); v1.37 requires it
//! (kubernetes/kubernetes#138645).

use super::super::Env;
use super::super::util::KubeVersion;
use crate::kubelet_files;

/// The first kubeadm that requires instance-config.yaml (#138645).
const INSTANCE_REQUIRED_SINCE_MINOR: u64 = 37;

/// The kubelet-config phase: the kubelet's config, written by this kubeadm
/// from the cluster's kubelet-config ConfigMap and, from v1.34, the node's
/// instance-config.yaml (created first when missing).
pub(super) fn write_kubelet_config(env: &Env, kubeadm: KubeVersion) -> Result<(), String> {
    let phase = "error execution phase kubelet-config";
    let cluster = env
        .shared()
        .cluster()
        .map_err(|e| format!("{phase}: failed to download the kubelet configuration: {e:#}"))?;
    let Some(configmap) = cluster
        .configmaps
        .get(kubelet_files::CONFIGMAP)
        .and_then(|cm| cm.data.get(kubelet_files::CONFIGMAP_KEY))
    else {
        return Err(format!(
            "{phase}: failed to download the kubelet configuration: configmaps \"kubelet-config\" not found"
        ));
    };
    let instance = if kubeadm.minor >= u64::from(kubelet_files::INSTANCE_SINCE_MINOR) {
        Some(ensure_instance_config(env, kubeadm)?)
    } else {
        None
    };
    let path = env.path(kubelet_files::CONFIG_FILE);
    let text = kubelet_files::written_config(&kubeadm.to_string(), configmap, instance.as_deref());
    path.parent()
        .map(std::fs::create_dir_all)
        .transpose()
        .and_then(|_| std::fs::write(&path, text))
        .map_err(|e| {
            format!(
                "error execution phase kubelet-config: failed to write kubelet configuration to file \"{}\": {e}",
                kubelet_files::CONFIG_FILE
            )
        })
}

/// The node's instance-config.yaml, as kubeadm v1.34+ finds or makes it:
/// v1.34–v1.36 create it from kubeadm-flags.env's
/// `--container-runtime-endpoint`, which they take out of that file; v1.37
/// requires it.
fn ensure_instance_config(env: &Env, kubeadm: KubeVersion) -> Result<String, String> {
    let phase = "error execution phase kubelet-config";
    let path = env.path(kubelet_files::INSTANCE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => return Ok(text),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!(
                "{phase}: failed to read {}: {e}",
                kubelet_files::INSTANCE_FILE
            ));
        }
        Err(_) => {}
    }
    if kubeadm.minor >= INSTANCE_REQUIRED_SINCE_MINOR {
        return Err(format!(
            "{phase}: could not read the kubelet instance configuration {:?}: open {}: no such file or directory",
            kubelet_files::INSTANCE_FILE,
            kubelet_files::INSTANCE_FILE
        ));
    }
    let flags_path = env.path(kubelet_files::FLAGS_FILE);
    let flags = std::fs::read_to_string(&flags_path).map_err(|e| {
        format!(
            "{phase}: error reading kubeadm flags file: open {}: {e}",
            kubelet_files::FLAGS_FILE
        )
    })?;
    let endpoint = kubelet_files::flag_value(&flags, kubelet_files::ENDPOINT_FLAG);
    if endpoint.is_some()
        && let Some(without) = kubelet_files::without_flag(&flags, kubelet_files::ENDPOINT_FLAG)
    {
        std::fs::write(&flags_path, without).map_err(|e| {
            format!(
                "{phase}: failed to write {}: {e}",
                kubelet_files::FLAGS_FILE
            )
        })?;
    }
    let text = kubelet_files::instance_config(endpoint.as_deref().unwrap_or_default());
    std::fs::write(&path, &text).map_err(|e| {
        format!(
            "{phase}: error writing kubelet instance configuration: {}: {e}",
            kubelet_files::INSTANCE_FILE
        )
    })?;
    Ok(text)
}

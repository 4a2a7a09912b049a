//! What a hop's kubeadm leaves for the kubelet on one node, known before
//! anything runs: the checks judge the kubelet the node will start, not the
//! files it has today.
//!
//! `kubeadm upgrade apply` and `upgrade node` both end in
//! `WriteKubeletConfigFiles` (cmd/kubeadm/app/phases/upgrade/postupgrade.go)
//! and their post-upgrade phase (cmd/kubeadm/app/cmd/phases/upgrade/postupgrade.go):
//!
//! 1. From v1.34 (kubeadm's `NodeLocalCRISocket`, beta and on by default in
//!    v1.34, GA in v1.36, gate removed in v1.37 by kubernetes/kubernetes#138645):
//!    a node without `/var/lib/kubelet/instance-config.yaml` gets one, holding
//!    the `--container-runtime-endpoint` taken out of `KUBELET_KUBEADM_ARGS`
//!    in kubeadm-flags.env, which is written again without it. Reading a
//!    kubeadm-flags.env that does not exist is an error. v1.37 no longer
//!    creates the file: without it the upgrade errors (#138645).
//! 2. `/var/lib/kubelet/config.yaml` is written from the `kubelet-config`
//!    ConfigMap, the `--patches` directory's kubelet patches (fleetctl runs
//!    kubeadm without `--patches` or `--config`, so there are none) and, from
//!    v1.34, `instance-config.yaml` laid over it as a patch
//!    (`WriteConfigToDisk`, cmd/kubeadm/app/phases/kubelet/config.go).
//!    Whatever only the node's own config.yaml said is gone: kubeadm's
//!    documented way to change every kubelet is the ConfigMap
//!    (kubernetes.io, "Reconfiguring a kubeadm cluster").
//! 3. The post-upgrade phase removes `unwantedFlags` from kubeadm-flags.env:
//!    `--pod-infra-container-image` in v1.35 (`super::flags` tracks that one),
//!    `--container-runtime-endpoint` in v1.37 (#138645).
//!
//! `resolvConf` is left out of the comparison: kubeadm sets it per node
//! when it writes the file (`Mutate` of its kubelet component config, for
//! systemd-resolved), so a difference there is kubeadm's own.

use std::collections::BTreeMap;

use serde_json::Value;

use super::configmaps::{KUBELET_CONFIGMAP, KubeletConfigDoc};
use super::flags::{KUBEADM_FLAGS_ENV, KubeletFlag, kubelet_flags};
use super::kubeadm_gates::{NODE_LOCAL_CRI_SOCKET, effective};
use crate::version::Minor;

/// Where kubeadm ≥ v1.34 keeps what it lays over the ConfigMap for this node.
pub const INSTANCE_CONFIG: &str = "/var/lib/kubelet/instance-config.yaml";

/// The first kubeadm that moves the runtime endpoint into [`INSTANCE_CONFIG`].
const INSTANCE_CONFIG_FROM: Minor = Minor::new(1, 34);
/// The first kubeadm that requires [`INSTANCE_CONFIG`] and strips the flag.
const INSTANCE_CONFIG_REQUIRED_FROM: Minor = Minor::new(1, 37);

const ENDPOINT_FLAG: &str = "--container-runtime-endpoint";

/// Fields kubeadm sets per node when it writes config.yaml.
const PER_NODE_FIELDS: &[&str] = &["resolvConf"];

/// One node's kubelet files as the kubeadm of a hop leaves them.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicted {
    /// config.yaml: the ConfigMap's document with instance-config laid over.
    pub config: KubeletConfigDoc,
    /// instance-config.yaml, when there is one after the step.
    pub instance: Option<KubeletConfigDoc>,
    /// kubeadm-flags.env after the step (`None`: the node has none).
    pub flags_env: Option<String>,
}

/// What kubeadm `minor`'s upgrade on a node writes, from the cluster's
/// kubelet document, the node's instance-config.yaml and kubeadm-flags.env,
/// and the value kubeadm-config's `featureGates` gives `NodeLocalCRISocket`
/// (`None`: not set); `Err` says why that kubeadm would fail instead.
/// kubeadm reads the gate from the cluster's configuration, not from its
/// version alone (`features.Enabled`): set to `false`, a v1.34 or v1.35
/// kubeadm leaves the endpoint in kubeadm-flags.env and writes config.yaml
/// from the ConfigMap alone; from v1.36 the gate is locked on and the
/// value no longer counts (kubernetes/kubernetes#135742 removed the
/// disabled path).
pub fn predict(
    configmap: &KubeletConfigDoc,
    instance: Option<&str>,
    flags_env: Option<&str>,
    minor: Minor,
    node_local_cri_socket: Option<bool>,
) -> Result<Predicted, String> {
    let node_local = minor >= INSTANCE_CONFIG_FROM
        && effective(NODE_LOCAL_CRI_SOCKET, node_local_cri_socket, minor).unwrap_or(true);
    let mut instance = instance
        .map(KubeletConfigDoc::parse)
        .transpose()
        .map_err(|e| format!("{INSTANCE_CONFIG} is not a kubelet configuration: {e:#}"))?;
    let mut flags_env = flags_env.map(str::to_string);
    if node_local && instance.is_none() {
        if minor >= INSTANCE_CONFIG_REQUIRED_FROM {
            return Err(format!(
                "there is no {INSTANCE_CONFIG}, which kubeadm {minor}'s upgrade requires \
                 (kubernetes/kubernetes#138645); a kubeadm from v1.34 to v1.36 creates it"
            ));
        }
        let Some(env) = flags_env.as_deref() else {
            return Err(format!(
                "there is no {KUBEADM_FLAGS_ENV}, which kubeadm {minor} reads to create \
                 {INSTANCE_CONFIG} (\"error reading kubeadm flags file\")"
            ));
        };
        let endpoint = kubelet_flags(KUBEADM_FLAGS_ENV, env)
            .into_iter()
            .find(|f| f.origin.kubeadm_owned() && f.flag == ENDPOINT_FLAG)
            .and_then(|f| f.value);
        let mut doc = KubeletConfigDoc::default();
        doc.fields.insert(
            "containerRuntimeEndpoint".into(),
            Value::from(endpoint.clone().unwrap_or_default()),
        );
        instance = Some(doc);
        if endpoint.is_some() {
            flags_env = Some(without_kubeadm_flag(env, ENDPOINT_FLAG));
        }
    }
    if minor >= INSTANCE_CONFIG_REQUIRED_FROM
        && let Some(env) = &flags_env
    {
        flags_env = Some(without_kubeadm_flag(env, ENDPOINT_FLAG));
    }
    let mut config = configmap.clone();
    if node_local && let Some(over) = &instance {
        for (k, v) in &over.fields {
            config.fields.insert(k.clone(), v.clone());
        }
    }
    Ok(Predicted {
        config,
        instance,
        flags_env,
    })
}

/// kubeadm-flags.env written again without `flag` in `KUBELET_KUBEADM_ARGS`,
/// as kubeadm writes it (`KUBELET_KUBEADM_ARGS="…"`, one line).
fn without_kubeadm_flag(env: &str, flag: &str) -> String {
    let kept: Vec<String> = kubelet_flags(KUBEADM_FLAGS_ENV, env)
        .into_iter()
        .filter(|f| f.origin.kubeadm_owned() && f.flag != flag)
        .map(|f| match f.value {
            Some(v) => format!("{}={v}", f.flag),
            None => f.flag,
        })
        .collect();
    format!("KUBELET_KUBEADM_ARGS=\"{}\"\n", kept.join(" "))
}

/// A setting of the node's own config.yaml that the written file will not
/// have (or will have with another value).
#[derive(Debug, Clone, PartialEq)]
pub struct Lost {
    pub field: String,
    /// As the node's file has it, as YAML-ish text.
    pub now: String,
    /// As the ConfigMap (and instance-config) make it; `None`: absent.
    pub after: Option<String>,
}

/// The settings `current` (the node's config.yaml) has that `predicted`
/// does not keep.
pub fn lost_settings(current: &KubeletConfigDoc, predicted: &KubeletConfigDoc) -> Vec<Lost> {
    current
        .fields
        .iter()
        .filter(|(k, _)| !PER_NODE_FIELDS.contains(&k.as_str()))
        .filter(|(k, v)| predicted.get(k) != Some(*v))
        .map(|(k, v)| Lost {
            field: k.clone(),
            now: show(v),
            after: predicted.get(k).map(show),
        })
        .collect()
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `--fail-cgroupv1` the kubelet gets on its command line, from any of
/// its flag files (a flag overrides the configuration file): `None` when no
/// file passes it. A bare `--fail-cgroupv1` is true, as Go's bool flags read.
pub fn fail_cgroupv1_flag(flags: &[KubeletFlag]) -> Option<(bool, String)> {
    flags
        .iter()
        .filter(|f| f.flag == "--fail-cgroupv1")
        .map(|f| {
            let on = f.value.as_deref().is_none_or(|v| v != "false");
            (on, format!("{} ({})", f.origin.path, f.origin.variable))
        })
        .next_back()
}

/// Every kubelet flag a node's files pass, path → content.
pub fn all_flags(files: &BTreeMap<String, String>) -> Vec<KubeletFlag> {
    files
        .iter()
        .flat_map(|(path, content)| kubelet_flags(path, content))
        .collect()
}

/// What the remedy of a lost setting says.
pub fn lost_remedy() -> String {
    format!(
        "put each named setting into {KUBELET_CONFIGMAP} (key `kubelet`; `kubectl -n kube-system \
         edit configmap kubelet-config`), which is where kubeadm documents changing every \
         kubelet's configuration (\"Reconfiguring a kubeadm cluster\"): kubeadm's upgrade \
         rewrites each node's /var/lib/kubelet/config.yaml from it. Then plan again; or go on \
         with `--ignore-check kubelet-config`, accepting that the node loses the setting"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CM: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                      cgroupDriver: systemd\ncontainerRuntimeEndpoint: \"\"\n";
    const ENV: &str = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --node-ip=10.0.0.5\"\n";

    fn doc(text: &str) -> KubeletConfigDoc {
        KubeletConfigDoc::parse(text).unwrap()
    }

    fn m(s: &str) -> Minor {
        s.parse().unwrap()
    }

    #[test]
    fn before_1_34_config_yaml_is_the_configmap_and_the_flags_stay() {
        let p = predict(&doc(CM), None, Some(ENV), m("v1.33"), None).unwrap();
        assert_eq!(p.config, doc(CM));
        assert_eq!(p.instance, None);
        assert_eq!(p.flags_env.as_deref(), Some(ENV));
    }

    #[test]
    fn from_1_34_the_endpoint_moves_into_instance_config() {
        for minor in ["v1.34", "v1.35", "v1.36"] {
            let p = predict(&doc(CM), None, Some(ENV), m(minor), None).unwrap();
            assert_eq!(
                p.config.get("containerRuntimeEndpoint"),
                Some(&Value::from("unix:///run/containerd/containerd.sock")),
                "{minor}"
            );
            assert_eq!(
                p.flags_env.as_deref(),
                Some("KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.5\"\n")
            );
            assert!(p.instance.is_some());
        }
        // Without kubeadm-flags.env, kubeadm fails.
        assert!(predict(&doc(CM), None, None, m("v1.35"), None).is_err());
    }

    #[test]
    fn kubeadm_config_turning_node_local_cri_socket_off_counts_until_kubeadm_locks_it() {
        // featureGates: {NodeLocalCRISocket: false}: v1.34 and v1.35 keep
        // the endpoint in kubeadm-flags.env and write no instance-config.
        for minor in ["v1.34", "v1.35"] {
            let p = predict(&doc(CM), None, Some(ENV), m(minor), Some(false)).unwrap();
            assert_eq!(p.config, doc(CM), "{minor}");
            assert_eq!(p.instance, None);
            assert_eq!(p.flags_env.as_deref(), Some(ENV));
        }
        // Locked on from v1.36: the value no longer counts.
        let p = predict(&doc(CM), None, Some(ENV), m("v1.36"), Some(false)).unwrap();
        assert!(p.instance.is_some());
    }

    #[test]
    fn an_instance_config_is_laid_over_and_1_37_strips_the_flag_anyway() {
        let instance = "containerRuntimeEndpoint: unix:///run/crio/crio.sock\n";
        let p = predict(&doc(CM), Some(instance), Some(ENV), m("v1.36"), None).unwrap();
        assert_eq!(p.flags_env.as_deref(), Some(ENV), "v1.36 leaves the flag");
        assert_eq!(
            p.config.get("containerRuntimeEndpoint"),
            Some(&Value::from("unix:///run/crio/crio.sock"))
        );
        let p = predict(&doc(CM), Some(instance), Some(ENV), m("v1.37"), None).unwrap();
        assert_eq!(
            p.flags_env.as_deref(),
            Some("KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.5\"\n")
        );
        let err = predict(&doc(CM), None, Some(ENV), m("v1.37"), None).unwrap_err();
        assert!(err.contains("#138645"), "{err}");
    }

    #[test]
    fn what_only_the_node_file_says_is_lost() {
        let node = doc(&format!(
            "{CM}failCgroupV1: false\nmaxPods: 200\nresolvConf: /run/systemd/resolve/resolv.conf\n"
        ));
        let cm = doc(&format!("{CM}maxPods: 110\n"));
        let lost = lost_settings(&node, &cm);
        assert_eq!(
            lost,
            [
                Lost {
                    field: "failCgroupV1".into(),
                    now: "false".into(),
                    after: None
                },
                Lost {
                    field: "maxPods".into(),
                    now: "200".into(),
                    after: Some("110".into())
                },
            ]
        );
        assert!(lost_settings(&doc(CM), &doc(CM)).is_empty());
    }

    #[test]
    fn the_fail_cgroupv1_flag_is_read_from_any_file() {
        let files = BTreeMap::from([(
            "/etc/sysconfig/kubelet".to_string(),
            "KUBELET_EXTRA_ARGS=--fail-cgroupv1=false\n".to_string(),
        )]);
        let (on, at) = fail_cgroupv1_flag(&all_flags(&files)).unwrap();
        assert!(!on);
        assert!(at.contains("/etc/sysconfig/kubelet"), "{at}");
        let bare = BTreeMap::from([(
            KUBEADM_FLAGS_ENV.to_string(),
            "KUBELET_KUBEADM_ARGS=\"--fail-cgroupv1\"\n".to_string(),
        )]);
        assert_eq!(
            fail_cgroupv1_flag(&all_flags(&bare)).map(|f| f.0),
            Some(true)
        );
        assert_eq!(fail_cgroupv1_flag(&[]), None);
    }
}

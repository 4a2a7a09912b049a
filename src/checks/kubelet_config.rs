//! The `kubelet-config` check: what a node's kubelet configuration loses
//! when the hop's kubeadm rewrites it from the cluster's ConfigMap
//! (`super::prediction`), and kubeadm steps that would fail on it. Also
//! the per-node view of the kubelet after the hop that the cgroup check
//! reads, so both judge the same prediction.

use super::configmaps::{KUBELET_CONFIGMAP, KubeletConfigDoc};
use super::flags::{KUBEADM_FLAGS_ENV, KubeletFlag, NodeKubeletFiles};
use super::node_cgroup::{KUBELET_CONFIG, NodeCgroup};
use super::prediction::{Predicted, all_flags, lost_remedy, lost_settings, predict};
use super::verdicts::{Check, CheckName, Verdict};
use crate::version::{Minor, Version};

/// kubeadm v1.35.0's post-upgrade fails on `KUBELET_KUBEADM_ARGS=""`
/// (kubernetes/kubeadm#3279); later v1.35 patches do not
/// (kubernetes/kubernetes#136131, the cherry-pick of #136127).
pub const EMPTY_FLAGS_BUG: Version = Version::new(1, 35, 0);

/// Why the files a hop's kubeadm leaves on a node are not known.
#[derive(Debug, Clone, PartialEq)]
pub enum Unforeseen {
    /// The ConfigMap could not be read: unchecked, a warning.
    Unread(String),
    /// That kubeadm would fail on the node's files (or on a missing
    /// ConfigMap): a block.
    Fails(String),
}

impl std::fmt::Display for Unforeseen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unforeseen::Unread(e) | Unforeseen::Fails(e) => f.write_str(e),
        }
    }
}

/// One node's kubelet as the hop leaves it.
#[derive(Debug, Clone)]
pub struct KubeletView {
    pub node: String,
    /// `Some(true)`: cgroup v2; `Some(false)`: v1; `None`: not known.
    pub v2: Option<bool>,
    /// The node's config.yaml before the hop (as earlier hops leave it).
    pub current: Option<String>,
    /// What this hop's kubeadm writes on the node; `None` when it runs no
    /// kubeadm there; `Err`: why that cannot be known, or why kubeadm fails.
    pub predicted: Option<Result<Predicted, Unforeseen>>,
    /// Every kubelet flag the node passes after the hop's kubeadm.
    pub flags: Vec<KubeletFlag>,
}

impl KubeletView {
    /// The kubelet document the node starts with after the hop, and where
    /// it comes from; `Err` when that is not known.
    pub fn config(&self) -> Result<(Option<KubeletConfigDoc>, &'static str), String> {
        match &self.predicted {
            Some(Ok(p)) => Ok((Some(p.config.clone()), KUBELET_CONFIGMAP)),
            Some(Err(e)) => Err(e.to_string()),
            None => match self.current.as_deref().map(KubeletConfigDoc::parse) {
                Some(Ok(doc)) => Ok((Some(doc), KUBELET_CONFIG)),
                Some(Err(e)) => Err(format!(
                    "{} is not a kubelet configuration: {e:#}",
                    KUBELET_CONFIG
                )),
                None => Ok((None, KUBELET_CONFIG)),
            },
        }
    }
}

/// Every node's kubelet after a hop to `minor` whose kubeadm runs on
/// `kubeadm_nodes`, from the nodes' files and the cluster's ConfigMap.
pub fn views(
    cgroups: &[NodeCgroup],
    files: &[NodeKubeletFiles],
    configmap: &Result<Option<KubeletConfigDoc>, String>,
    kubeadm_nodes: &[&str],
    minor: Minor,
    node_local_cri_socket: Option<bool>,
) -> Vec<KubeletView> {
    cgroups
        .iter()
        .map(|n| {
            let mut node_files = files
                .iter()
                .find(|f| f.node == n.node)
                .map(|f| f.files.clone())
                .unwrap_or_default();
            let predicted = kubeadm_nodes.contains(&n.node.as_str()).then(|| {
                let cm = match configmap {
                    Ok(Some(doc)) => doc,
                    Ok(None) => {
                        return Err(Unforeseen::Fails(format!(
                            "{KUBELET_CONFIGMAP} does not exist, and kubeadm's upgrade writes \
                             config.yaml from it"
                        )));
                    }
                    Err(e) => {
                        return Err(Unforeseen::Unread(format!(
                            "could not read {KUBELET_CONFIGMAP}: {e}"
                        )));
                    }
                };
                predict(
                    cm,
                    n.instance_config.as_deref(),
                    node_files.get(KUBEADM_FLAGS_ENV).map(String::as_str),
                    minor,
                    node_local_cri_socket,
                )
                .map_err(Unforeseen::Fails)
            });
            if let Some(Ok(p)) = &predicted {
                match &p.flags_env {
                    Some(env) => node_files.insert(KUBEADM_FLAGS_ENV.to_string(), env.clone()),
                    None => node_files.remove(KUBEADM_FLAGS_ENV),
                };
            }
            KubeletView {
                node: n.node.clone(),
                v2: n.v2,
                current: n.kubelet_config.clone(),
                predicted,
                flags: all_flags(&node_files),
            }
        })
        .collect()
}

/// The `kubelet-config` check of a hop to `minor` (newest patch `version`).
pub fn check_kubelet_config(
    views: &[KubeletView],
    minor: Minor,
    version: Option<&Version>,
) -> Check {
    let mut blocking = Vec::new();
    let mut unknown = Vec::new();
    for v in views {
        let Some(predicted) = &v.predicted else {
            continue;
        };
        let p = match predicted {
            Ok(p) => p,
            Err(Unforeseen::Unread(e)) => {
                unknown.push(format!("{}: {e}", v.node));
                continue;
            }
            Err(Unforeseen::Fails(e)) => {
                blocking.push(format!(
                    "{}: kubeadm {minor}'s upgrade would fail: {e}",
                    v.node
                ));
                continue;
            }
        };
        let Some(current) = v.current.as_deref() else {
            continue;
        };
        let current = match KubeletConfigDoc::parse(current) {
            Ok(doc) => doc,
            Err(e) => {
                unknown.push(format!(
                    "{}: its {} could not be read: {e:#}",
                    v.node, KUBELET_CONFIG
                ));
                continue;
            }
        };
        // What instance-config.yaml sets is kubeadm's own per-node value
        // (the runtime endpoint it moves there), not a local edit.
        let per_node = |field: &str| p.instance.as_ref().is_some_and(|i| i.get(field).is_some());
        for lost in lost_settings(&current, &p.config)
            .into_iter()
            .filter(|l| !per_node(&l.field))
        {
            let after = match &lost.after {
                Some(a) => format!("becomes `{}: {a}`", lost.field),
                None => "is not set there".to_string(),
            };
            blocking.push(format!(
                "{}: `{}: {}` in its {} is lost at the kubeadm step: kubeadm {minor} rewrites the \
                 file from {KUBELET_CONFIGMAP}, where it {after}",
                v.node, lost.field, lost.now, KUBELET_CONFIG,
            ));
        }
    }
    if !blocking.is_empty() {
        return Check {
            name: CheckName::KubeletConfig,
            verdict: Verdict::Block,
            summary: format!(
                "kubeadm {minor} rewrites the kubelet configuration from the cluster's, and a node \
                 would lose settings of its own"
            ),
            details: blocking.into_iter().chain(unknown).collect(),
            remedy: Some(lost_remedy()),
        };
    }
    let empty_flags_bug =
        version == Some(&EMPTY_FLAGS_BUG) && views.iter().any(|v| v.predicted.is_some());
    if !unknown.is_empty() || empty_flags_bug {
        let mut details = unknown;
        if empty_flags_bug {
            details.push(format!(
                "the newest {minor} patch published is {EMPTY_FLAGS_BUG}, whose kubeadm fails its \
                 post-upgrade on a kubeadm-flags.env without flags (`KUBELET_KUBEADM_ARGS=\"\"`, \
                 kubernetes/kubeadm#3279); a later {minor} patch has the fix \
                 (kubernetes/kubernetes#136131)"
            ));
        }
        return Check {
            name: CheckName::KubeletConfig,
            verdict: Verdict::Warn,
            summary: "what kubeadm writes for the kubelet could not all be foreseen".to_string(),
            details,
            remedy: Some(
                "fix what the details say and plan again, or wait for the next patch of the hop's \
                 minor on the hub"
                    .to_string(),
            ),
        };
    }
    Check::pass(
        CheckName::KubeletConfig,
        format!("kubeadm {minor} keeps every node's kubelet settings"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CM: &str = "kind: KubeletConfiguration\ncgroupDriver: systemd\n";
    const ENV: &str = "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n";

    fn node(name: &str, config: &str) -> (NodeCgroup, NodeKubeletFiles) {
        (
            NodeCgroup {
                node: name.into(),
                v2: Some(true),
                kubelet_config: Some(config.into()),
                instance_config: None,
            },
            NodeKubeletFiles {
                node: name.into(),
                files: [(KUBEADM_FLAGS_ENV.to_string(), ENV.to_string())].into(),
                ..Default::default()
            },
        )
    }

    fn m(s: &str) -> Minor {
        s.parse().unwrap()
    }

    #[test]
    fn a_setting_only_the_node_has_blocks_before_anything_runs() {
        let (a, fa) = node("w-1", &format!("{CM}failCgroupV1: false\n"));
        let (b, fb) = node("w-2", CM);
        let cm = Ok(Some(KubeletConfigDoc::parse(CM).unwrap()));
        let views = views(&[a, b], &[fa, fb], &cm, &["w-1", "w-2"], m("v1.35"), None);
        let check = check_kubelet_config(&views, m("v1.35"), None);
        assert_eq!(check.verdict, Verdict::Block, "{check:?}");
        assert_eq!(check.details.len(), 1, "{check:?}");
        assert!(check.details[0].starts_with("w-1: `failCgroupV1: false`"));
        assert!(check.details[0].contains("lost at the kubeadm step"));
        assert!(check.remedy.unwrap().contains("kubelet-config"));
        // Nodes whose kubeadm does not run in the hop keep their file.
        let (a, fa) = node("w-1", &format!("{CM}failCgroupV1: false\n"));
        let views2 = super::views(&[a], &[fa], &cm, &[], m("v1.35"), None);
        let check = check_kubelet_config(&views2, m("v1.35"), None);
        assert_eq!(check.verdict, Verdict::Pass);
    }

    #[test]
    fn the_endpoint_kubeadm_moves_into_instance_config_is_not_a_lost_setting() {
        // A v1.33 node: config.yaml as the ConfigMap says, endpoint a flag.
        let cm = "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: \"\"\n";
        let (a, fa) = node("w-1", cm);
        let cm = Ok(Some(KubeletConfigDoc::parse(cm).unwrap()));
        let views = views(&[a], &[fa], &cm, &["w-1"], m("v1.34"), None);
        let check = check_kubelet_config(&views, m("v1.34"), None);
        assert_eq!(check.verdict, Verdict::Pass, "{check:?}");
    }

    #[test]
    fn an_unreadable_configmap_warns_and_v1_35_0_warns() {
        let (a, fa) = node("w-1", CM);
        let views = views(&[a], &[fa], &Err("boom".into()), &["w-1"], m("v1.35"), None);
        let check = check_kubelet_config(&views, m("v1.35"), None);
        assert_eq!(check.verdict, Verdict::Warn);
        assert!(check.details[0].contains("boom"));
        let (a, fa) = node("w-1", CM);
        let cm = Ok(Some(KubeletConfigDoc::parse(CM).unwrap()));
        let views = super::views(&[a], &[fa], &cm, &["w-1"], m("v1.35"), None);
        let check = check_kubelet_config(&views, m("v1.35"), Some(&Version::new(1, 35, 0)));
        assert_eq!(check.verdict, Verdict::Warn);
        assert!(
            check.details[0].contains("kubernetes/kubeadm#3279"),
            "{check:?}"
        );
        let check = check_kubelet_config(&views, m("v1.35"), Some(&Version::new(1, 35, 1)));
        assert_eq!(check.verdict, Verdict::Pass);
    }

    #[test]
    fn the_view_carries_the_flags_after_the_hop() {
        let (a, fa) = node("w-1", CM);
        let cm = Ok(Some(KubeletConfigDoc::parse(CM).unwrap()));
        let views = views(&[a], &[fa], &cm, &["w-1"], m("v1.34"), None);
        assert!(
            views[0]
                .flags
                .iter()
                .all(|f| f.flag != "--container-runtime-endpoint"),
            "{views:?}"
        );
        let (doc, from) = views[0].config().unwrap();
        assert_eq!(from, KUBELET_CONFIGMAP);
        assert!(doc.unwrap().get("containerRuntimeEndpoint").is_some());
    }
}

//! Nodes a v1.35+ kubelet refuses to start on: a cgroup v1 host whose
//! kubelet configuration does not say `failCgroupV1: false`.
//!
//! KEP-5573 (kubernetes/kubernetes#134298) made cgroup v1 unsupported in
//! v1.35 and turned the kubelet's `failCgroupV1` default to `true`. The
//! kubelet then validates its configuration before anything else
//! (`validateKubeletOSConfiguration` in
//! pkg/kubelet/apis/config/validation/validation_linux.go, called from
//! cmd/kubelet/app/server.go) and exits with `failed to validate kubelet
//! configuration, error: kubelet is configured to not run on a host using
//! cgroup v1. cgroup v1 support is unsupported and will be removed in a
//! future release`. kubeadm does not look (its upgrade docs only carry a
//! note, and its SystemVerification preflight errors only when the kubelet
//! it detects is already v1.35, kubernetes/kubernetes#134744, whereas
//! fleetctl runs kubeadm before the node reboots into the new kubelet): a
//! hop to v1.35 reboots such a node into a kubelet that never starts, and
//! the node stays NotReady. #134744's release note is also where kubeadm
//! says to allow cgroup v1: `failCgroupV1: false` in the
//! `kube-system/kubelet-config` ConfigMap.
//!
//! Flatcar boots cgroup v2 since 2969.0.0, but nodes installed before (its
//! post-update script put `systemd.unified_cgroup_hierarchy=0` into
//! `/usr/share/oem/grub.cfg`, Flatcar's "Switching to unified cgroups") and
//! nodes booted with that parameter run v1. On v2 the
//! root of `/sys/fs/cgroup` is the unified hierarchy and has
//! `cgroup.controllers`; on v1 it is a tmpfs of per-controller hierarchies
//! and has none (the facts script tests for that file).
//!
//! Only `/var/lib/kubelet/config.yaml` (`--config`, what kubeadm writes) is
//! read: a `failCgroupV1: false` in a `--config-dir` drop-in is not seen,
//! and the block then needs `--ignore-check cgroup`. Nor is the
//! `kube-system/kubelet-config` ConfigMap, from which kubeadm's upgrade
//! (its kubelet-config phase) rewrites config.yaml: the remedy says to set
//! it there too, or the hop's own kubeadm step undoes a local edit.

use serde::Deserialize;

use super::model::{Check, CheckName, Verdict};
use crate::version::Minor;

/// The first kubelet minor that refuses cgroup v1 by default.
pub const FAILS_CGROUP_V1_FROM: Minor = Minor::new(1, 35);

/// Where kubeadm writes the kubelet's configuration (`--config`).
pub const KUBELET_CONFIG: &str = "/var/lib/kubelet/config.yaml";

/// What one node said about its cgroup hierarchy and its kubelet config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCgroup {
    pub node: String,
    /// `Some(true)`: cgroup v2; `Some(false)`: v1; `None`: not known.
    pub v2: Option<bool>,
    /// The content of [`KUBELET_CONFIG`], `None` when absent or unreadable.
    pub kubelet_config: Option<String>,
    /// `/var/lib/kubelet/instance-config.yaml`, `None` when absent or unreadable.
    pub instance_config: Option<String>,
}

#[derive(Deserialize)]
struct KubeletConfiguration {
    #[serde(rename = "failCgroupV1")]
    fail_cgroup_v1: Option<bool>,
}

/// `failCgroupV1` as the kubelet config sets it: `Ok(None)` when unset (the
/// kubelet's default then applies), `Err` when the file is not YAML the
/// kubelet would load.
pub fn fail_cgroup_v1(config: &str) -> Result<Option<bool>, String> {
    serde_saphyr::from_str::<KubeletConfiguration>(config)
        .map(|c| c.fail_cgroup_v1)
        .map_err(|e| format!("{KUBELET_CONFIG} is not a kubelet configuration: {e}"))
}

/// The `cgroup` check of a hop to `minor`, over every node: the kubelet the
/// hop (or a later reboot) starts there is at least `minor`.
pub fn check_cgroup(nodes: &[NodeCgroup], minor: Minor) -> Check {
    if minor < FAILS_CGROUP_V1_FROM {
        return Check {
            name: CheckName::Cgroup,
            verdict: Verdict::Pass,
            summary: format!("the kubelet of {minor} still starts on cgroup v1 hosts"),
            details: Vec::new(),
            remedy: None,
        };
    }
    let mut blocked = Vec::new();
    let mut unknown = Vec::new();
    let mut allowed = Vec::new();
    for n in nodes {
        match n.v2 {
            Some(true) => {}
            None => unknown.push(format!(
                "{}: could not tell whether it runs cgroup v1 or v2",
                n.node
            )),
            Some(false) => match n.kubelet_config.as_deref().map(fail_cgroup_v1) {
                Some(Ok(Some(false))) => allowed.push(format!(
                    "{}: cgroup v1, allowed by `failCgroupV1: false` in {KUBELET_CONFIG} \
                     (unsupported since v1.35, to be removed)",
                    n.node
                )),
                Some(Ok(_)) => blocked.push(format!(
                    "{}: cgroup v1 (no /sys/fs/cgroup/cgroup.controllers), and {KUBELET_CONFIG} \
                     does not set `failCgroupV1: false`",
                    n.node
                )),
                Some(Err(e)) => blocked.push(format!("{}: cgroup v1, and {e}", n.node)),
                None => blocked.push(format!(
                    "{}: cgroup v1 (no /sys/fs/cgroup/cgroup.controllers), and {KUBELET_CONFIG} \
                     could not be read",
                    n.node
                )),
            },
        }
    }
    let (verdict, summary, remedy) = if !blocked.is_empty() {
        (
            Verdict::Block,
            format!(
                "{} node(s) run cgroup v1, where the kubelet of {minor} refuses to start \
                 (\"kubelet is configured to not run on a host using cgroup v1\")",
                blocked.len()
            ),
            Some(format!(
                "boot each named node on cgroup v2: remove systemd.unified_cgroup_hierarchy=0 \
                 and systemd.legacy_systemd_cgroup_controller from its kernel command line \
                 (/usr/share/oem/grub.cfg on Flatcar) and containerd's \
                 /etc/systemd/system/containerd.service.d/10-use-cgroupfs.conf, then reboot it \
                 (Flatcar's \"Switching to unified cgroups\"); or allow cgroup v1 (unsupported \
                 from v1.35, KEP-5573) with `failCgroupV1: false`, both in the kubelet-config \
                 ConfigMap of kube-system (kubeadm's upgrade rewrites {KUBELET_CONFIG} from it) \
                 and in the node's {KUBELET_CONFIG}. Then plan again"
            )),
        )
    } else if !unknown.is_empty() {
        (
            Verdict::Warn,
            "could not read every node's cgroup hierarchy, so this is unchecked".to_string(),
            Some(format!(
                "check `test -e /sys/fs/cgroup/cgroup.controllers` on the named nodes: a node \
                 without it needs `failCgroupV1: false` in {KUBELET_CONFIG} before {minor}"
            )),
        )
    } else {
        (
            Verdict::Pass,
            "every node runs cgroup v2, or allows cgroup v1 in its kubelet configuration"
                .to_string(),
            None,
        )
    };
    Check {
        name: CheckName::Cgroup,
        verdict,
        summary,
        details: blocked.into_iter().chain(unknown).chain(allowed).collect(),
        remedy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                          cgroupDriver: systemd\n";

    fn node(name: &str, v2: Option<bool>, config: Option<&str>) -> NodeCgroup {
        NodeCgroup {
            node: name.into(),
            v2,
            kubelet_config: config.map(str::to_string),
            instance_config: None,
        }
    }

    fn v(s: &str) -> Minor {
        s.parse().unwrap()
    }

    #[test]
    fn a_cgroup_v1_node_blocks_the_hop_to_1_35_and_names_both_ways_out() {
        let nodes = [
            node("cp-1", Some(true), Some(CONFIG)),
            node("w-1", Some(false), Some(CONFIG)),
        ];
        let check = check_cgroup(&nodes, v("v1.35"));
        assert_eq!(check.verdict, Verdict::Block);
        assert_eq!(check.details.len(), 1);
        assert!(check.details[0].starts_with("w-1: cgroup v1"), "{check:?}");
        let remedy = check.remedy.unwrap();
        assert!(remedy.contains("systemd.unified_cgroup_hierarchy=0"));
        assert!(remedy.contains("failCgroupV1: false"));
        // Every later minor too; earlier ones do not care.
        assert_eq!(check_cgroup(&nodes, v("v1.37")).verdict, Verdict::Block);
        assert_eq!(check_cgroup(&nodes, v("v1.34")).verdict, Verdict::Pass);
    }

    #[test]
    fn fail_cgroup_v1_false_lets_it_through_and_true_or_unset_does_not() {
        let allow = format!("{CONFIG}failCgroupV1: false\n");
        let deny = format!("{CONFIG}failCgroupV1: true\n");
        let pass = check_cgroup(&[node("w-1", Some(false), Some(&allow))], v("v1.35"));
        assert_eq!(pass.verdict, Verdict::Pass);
        assert!(pass.details[0].contains("allowed by `failCgroupV1: false`"));
        for config in [
            Some(deny.as_str()),
            Some(CONFIG),
            None,
            Some("failCgroupV1: ["),
        ] {
            let c = check_cgroup(&[node("w-1", Some(false), config)], v("v1.35"));
            assert_eq!(c.verdict, Verdict::Block, "{config:?}");
        }
        assert_eq!(fail_cgroup_v1(&allow), Ok(Some(false)));
        assert_eq!(fail_cgroup_v1(CONFIG), Ok(None));
    }

    #[test]
    fn an_unknown_hierarchy_warns_and_cgroup_v2_passes() {
        let c = check_cgroup(&[node("w-1", None, None)], v("v1.35"));
        assert_eq!(c.verdict, Verdict::Warn);
        assert!(c.details[0].starts_with("w-1:"));
        let c = check_cgroup(&[node("w-1", Some(true), None)], v("v1.36"));
        assert_eq!(c.verdict, Verdict::Pass);
        assert!(c.details.is_empty());
    }
}

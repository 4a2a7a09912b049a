//! Nodes a v1.35+ kubelet refuses to start on, and that kubeadm's own
//! preflight refuses to upgrade: cgroup v1 hosts.
//!
//! KEP-5573 (kubernetes/kubernetes#134298) made cgroup v1 unsupported in
//! v1.35 and turned the kubelet's `failCgroupV1` default to `true`. The
//! kubelet then validates its configuration before anything else
//! (`validateKubeletOSConfiguration` in
//! pkg/kubelet/apis/config/validation/validation_linux.go, called from
//! cmd/kubelet/app/server.go) and exits with `failed to validate kubelet
//! configuration, error: kubelet is configured to not run on a host using
//! cgroup v1. cgroup v1 support is unsupported and will be removed in a
//! future release`, unless its configuration says `failCgroupV1: false`
//! (or its command line `--fail-cgroupv1=false`, which wins over the file).
//!
//! kubeadm refuses too, before it changes anything: from v1.35 its
//! `upgrade apply` and `upgrade node` run the SystemVerification preflight
//! with the kubelet version the upgrade leads to (the detected kubelet's
//! MINOR+1, kubernetes/kubernetes#134744: "During upgrade pass a
//! KubeletVersion that is with MINOR+1"), and system-validators' cgroup
//! validator (`validators/cgroup_validator_linux.go`, v1.12.1,
//! kubernetes/system-validators#61) returns an *error* on cgroup v1 for a
//! kubelet of v1.35 or later, whatever `failCgroupV1` says. kubeadm's
//! upgrade docs (kubernetes/website#53082) say both: set `failCgroupV1` to
//! false *and* explicitly skip that validation. So a v1 node passes this
//! check only with the operator's `--ignore-check cgroup`, and then
//! fleetctl runs that node's kubeadm, and only that node's, with
//! `--ignore-preflight-errors=SystemVerification`
//! ([`skips_system_verification`]).
//!
//! What counts is the configuration the kubelet will have after the hop:
//! kubeadm's upgrade rewrites `/var/lib/kubelet/config.yaml` from the
//! `kube-system/kubelet-config` ConfigMap (`super::prediction`), so a
//! `failCgroupV1: false` only in the node's own file is lost at the
//! kubeadm step, and is named so.
//!
//! Flatcar boots cgroup v2 since 2969.0.0, but nodes installed before (its
//! post-update script put `systemd.unified_cgroup_hierarchy=0` into
//! `/usr/share/oem/grub.cfg`, Flatcar's "Switching to unified cgroups") and
//! nodes booted with that parameter run v1. On v2 the root of
//! `/sys/fs/cgroup` is the unified hierarchy and has `cgroup.controllers`;
//! on v1 it is a tmpfs of per-controller hierarchies and has none (the
//! facts script tests for that file).

use super::kubelet_config::KubeletView;
use super::node_cgroup::{KUBELET_CONFIG, NodeCgroup, fail_cgroup_v1};
use super::verdicts::{Check, CheckName, Verdict};
use crate::version::Minor;

/// The first kubelet minor that refuses cgroup v1 by default.
pub const FAILS_CGROUP_V1_FROM: Minor = Minor::new(1, 35);

/// Whether the `minor` kubelet starts on each node with the config.yaml it
/// has now: the last look before a reboot, after kubeadm wrote the file.
/// The plan's check is [`check_cgroup_hop`].
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

/// The nodes whose kubeadm step of a hop to `minor` runs with
/// `--ignore-preflight-errors=SystemVerification`: cgroup v1 nodes, from
/// v1.35, and only once the operator ignored the `cgroup` check.
pub fn skips_system_verification(
    nodes: &[NodeCgroup],
    minor: Minor,
    ignored: &[CheckName],
) -> Vec<String> {
    if minor < FAILS_CGROUP_V1_FROM || !ignored.contains(&CheckName::Cgroup) {
        return Vec::new();
    }
    nodes
        .iter()
        .filter(|n| n.v2 == Some(false))
        .map(|n| n.node.clone())
        .collect()
}

/// The `cgroup` check of a hop to `minor`, over every node (any later boot
/// starts the new kubelet there too), judged on the kubelet configuration
/// the hop leaves ([`KubeletView`]): a v1 node blocks, because either its
/// kubelet will refuse to start or kubeadm's SystemVerification refuses
/// the upgrade; only `--ignore-check cgroup` lets the second through.
pub fn check_cgroup_hop(views: &[KubeletView], minor: Minor) -> Check {
    if minor < FAILS_CGROUP_V1_FROM {
        return Check::pass(
            CheckName::Cgroup,
            format!("the kubelet of {minor} still starts on cgroup v1 hosts"),
        );
    }
    let mut refused = Vec::new();
    let mut preflight = Vec::new();
    let mut unknown = Vec::new();
    for v in views {
        match v.v2 {
            Some(true) => continue,
            None => {
                unknown.push(format!(
                    "{}: could not tell whether it runs cgroup v1 or v2",
                    v.node
                ));
                continue;
            }
            Some(false) => {}
        }
        let setting = match super::prediction::fail_cgroupv1_flag(&v.flags) {
            Some((on, at)) => Ok((Some(on), format!("`--fail-cgroupv1` in {at}"))),
            None => v.config().map(|(doc, from)| {
                (
                    doc.and_then(|d| d.fail_cgroup_v1()),
                    format!("`failCgroupV1` in {from}"),
                )
            }),
        };
        match setting {
            Ok((Some(false), at)) if v.predicted.is_some() => preflight.push(format!(
                "{}: cgroup v1; its kubelet allows it ({at} is false), but kubeadm {minor}'s \
                 SystemVerification preflight refuses cgroup v1 for a {minor} kubelet \
                 (kubernetes/kubernetes#134744)",
                v.node
            )),
            Ok((Some(false), _)) => {}
            Ok((_, at)) => {
                let lost = v.predicted.is_some()
                    && v.current
                        .as_deref()
                        .and_then(|c| fail_cgroup_v1(c).ok().flatten())
                        == Some(false);
                let why = if lost {
                    format!(
                        "`failCgroupV1: false` is only in its own {KUBELET_CONFIG}, which is \
                         lost at the kubeadm step ({at} is not false)"
                    )
                } else {
                    format!("{at} is not false")
                };
                refused.push(format!(
                    "{}: cgroup v1 (no /sys/fs/cgroup/cgroup.controllers), and {why}: its \
                     {minor} kubelet would refuse to start",
                    v.node
                ));
            }
            Err(e) => refused.push(format!("{}: cgroup v1, and {e}", v.node)),
        }
    }
    let (verdict, summary, remedy) = if !refused.is_empty() || !preflight.is_empty() {
        (
            Verdict::Block,
            format!(
                "{} node(s) run cgroup v1, which the {minor} kubelet or kubeadm {minor}'s \
                 preflight refuses",
                refused.len() + preflight.len()
            ),
            Some(format!(
                "boot each named node on cgroup v2: remove systemd.unified_cgroup_hierarchy=0 \
                 and systemd.legacy_systemd_cgroup_controller from its kernel command line \
                 (/usr/share/oem/grub.cfg on Flatcar) and containerd's \
                 /etc/systemd/system/containerd.service.d/10-use-cgroupfs.conf, then reboot it \
                 (Flatcar's \"Switching to unified cgroups\"). Or keep cgroup v1 (unsupported \
                 from v1.35, KEP-5573): set `failCgroupV1: false` in the kubelet-config \
                 ConfigMap of kube-system (kubeadm's upgrade rewrites {KUBELET_CONFIG} from it), \
                 then go past kubeadm's SystemVerification preflight on purpose with \
                 `--ignore-check cgroup`: fleetctl then passes \
                 --ignore-preflight-errors=SystemVerification to those nodes' kubeadm only"
            )),
        )
    } else if !unknown.is_empty() {
        (
            Verdict::Warn,
            "could not read every node's cgroup hierarchy, so this is unchecked".to_string(),
            Some(format!(
                "check `test -e /sys/fs/cgroup/cgroup.controllers` on the named nodes: a node \
                 without it needs `failCgroupV1: false` in the kubelet-config ConfigMap \
                 before {minor}"
            )),
        )
    } else {
        (Verdict::Pass, "every node runs cgroup v2".to_string(), None)
    };
    Check {
        name: CheckName::Cgroup,
        verdict,
        summary,
        details: refused
            .into_iter()
            .chain(preflight)
            .chain(unknown)
            .collect(),
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

    fn view(name: &str, current: &str, configmap: &str, kubeadm: bool) -> KubeletView {
        use super::super::configmaps::KubeletConfigDoc;
        use super::super::flags::NodeKubeletFiles;
        let nodes = [NodeCgroup {
            node: name.into(),
            v2: Some(false),
            kubelet_config: Some(current.into()),
            instance_config: Some("containerRuntimeEndpoint: unix:///x.sock\n".into()),
        }];
        let files = [NodeKubeletFiles {
            node: name.into(),
            ..Default::default()
        }];
        let cm = Ok(Some(KubeletConfigDoc::parse(configmap).unwrap()));
        let on: &[&str] = if kubeadm { &[name] } else { &[] };
        super::super::kubelet_config::views(&nodes, &files, &cm, on, v("v1.35"), None)
            .pop()
            .unwrap()
    }

    #[test]
    fn allowed_in_the_configmap_still_blocks_for_kubeadm_preflight() {
        let allow = format!("{CONFIG}failCgroupV1: false\n");
        let c = check_cgroup_hop(&[view("w-1", &allow, &allow, true)], v("v1.35"));
        assert_eq!(c.verdict, Verdict::Block, "{c:?}");
        assert!(c.details[0].contains("SystemVerification"), "{c:?}");
        assert!(c.details[0].contains("#134744"), "{c:?}");
        assert!(c.remedy.unwrap().contains("--ignore-check cgroup"));
        // Without a kubeadm step in the hop, the kubelet alone decides.
        let c = check_cgroup_hop(&[view("w-1", &allow, &allow, false)], v("v1.35"));
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert_eq!(
            check_cgroup_hop(&[view("w-1", &allow, &allow, true)], v("v1.34")).verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn allowed_only_in_the_node_file_is_lost_at_the_kubeadm_step() {
        let allow = format!("{CONFIG}failCgroupV1: false\n");
        let c = check_cgroup_hop(&[view("w-1", &allow, CONFIG, true)], v("v1.35"));
        assert_eq!(c.verdict, Verdict::Block);
        assert!(c.details[0].contains("lost at the kubeadm step"), "{c:?}");
        assert!(c.details[0].contains("would refuse to start"), "{c:?}");
    }

    #[test]
    fn a_fail_cgroupv1_flag_counts_as_the_setting() {
        use super::super::configmaps::KubeletConfigDoc;
        use super::super::flags::NodeKubeletFiles;
        let nodes = [NodeCgroup {
            node: "w-1".into(),
            v2: Some(false),
            kubelet_config: Some(CONFIG.into()),
            instance_config: None,
        }];
        let files = [NodeKubeletFiles {
            node: "w-1".into(),
            files: [(
                "/etc/sysconfig/kubelet".to_string(),
                "KUBELET_EXTRA_ARGS=--fail-cgroupv1=false\n".to_string(),
            )]
            .into(),
            ..Default::default()
        }];
        let cm = Ok(Some(KubeletConfigDoc::parse(CONFIG).unwrap()));
        let views = super::super::kubelet_config::views(&nodes, &files, &cm, &[], v("v1.35"), None);
        assert_eq!(check_cgroup_hop(&views, v("v1.35")).verdict, Verdict::Pass);
    }

    #[test]
    fn only_cgroup_v1_nodes_skip_system_verification_and_only_when_ignored() {
        let nodes = [
            node("cp-1", Some(true), None),
            node("w-1", Some(false), None),
            node("w-2", None, None),
        ];
        let ignored = [CheckName::Cgroup];
        assert_eq!(
            skips_system_verification(&nodes, v("v1.35"), &ignored),
            ["w-1"]
        );
        assert!(skips_system_verification(&nodes, v("v1.35"), &[]).is_empty());
        assert!(skips_system_verification(&nodes, v("v1.34"), &ignored).is_empty());
    }
}

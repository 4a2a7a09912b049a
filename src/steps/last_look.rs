//! The last look at a node's kubelet files before it reboots onto the
//! hop's kubelet: the kubelet-flags and cgroup checks again, on the files
//! kubeadm has just written, for each node about to reboot.

use std::collections::BTreeMap;

use anyhow::anyhow;
use futures_util::future::join_all;

use super::context::{Apply, settled_facts};
use super::script::hop_version;
use crate::node::NodeFacts;
use crate::plan::Hop;
use crate::version::Minor;

/// The last look before a batch (one control plane, or a batch of workers)
/// reboots onto the hop's kubelet, after its kubeadm step: each node's own
/// kubelet files, as kubeadm left them, judged for the hop's kubelet. A
/// control plane's `upgrade apply`/`upgrade node` rewrites config.yaml as a
/// worker's does, and a flag put back after the hop's checks (config
/// management, a hand edit) is refused by its kubelet the same way, with the
/// API server's node at stake. A worker that jumps several
/// minors gets only the target's kubeadm, which may leave a flag an
/// intermediate kubeadm would have stripped (kubeadm v1.36 dropped
/// v1.35's cleanup of `--pod-infra-container-image`,
/// kubernetes/kubernetes#135807); then nothing reboots and the error names
/// the node and the flag. The cgroup check is judged the same way, on the
/// config.yaml kubeadm has just written (kubeadm rewrites it from the
/// kubelet-config ConfigMap, which may drop a local `failCgroupV1: false`).
pub async fn before_reboot(apply: &Apply<'_>, hop: &Hop, batch: &[String]) -> anyhow::Result<()> {
    let ignored = &apply.plan.ignored_checks;
    // The batch's nodes at once: a big batch must not wait node by node.
    let looks = batch.iter().map(|node| async move {
        let facts = settled_facts(&apply.remote(node)?).await?;
        Ok::<_, anyhow::Error>(refusals(node, &facts, hop.minor, ignored))
    });
    let mut refused = Vec::new();
    let mut nodes = Vec::new();
    for (node, look) in batch.iter().zip(join_all(looks).await) {
        let problems = look?;
        if !problems.is_empty() {
            nodes.push(node);
        }
        refused.extend(problems);
    }
    if refused.is_empty() {
        return Ok(());
    }
    // Workers were staged with their kubeadm step: a refused one is put
    // back to booting what it runs, so neither a power cut nor Kured (once
    // the lock is given back) boots the kubelet that refuses its files.
    let mut states = Vec::new();
    for node in nodes {
        let state = match super::kubeadm::undo(&apply.remote(node)?, &apply.plan.hub).await {
            Ok(s) => s,
            Err(e) => format!(
                "COULD NOT CHECK OR UNSTAGE {node} ({e:#}): make sure \
                 /etc/extensions/kubernetes.raw points at the image it runs before it reboots"
            ),
        };
        states.push(state);
    }
    Err(refusal(batch, &hop_version(hop), &refused, &states))
}

/// What one node's kubelet files, as kubeadm left them, hold that the
/// `minor` kubelet refuses: one line per check, naming the node. The flags
/// only unless `--ignore-check kubelet-flags`; the cgroup always:
/// `--ignore-check cgroup` goes past kubeadm's SystemVerification preflight
/// (a cgroup v1 node whose kubelet allows it), never past a kubelet that
/// would refuse to start on the files kubeadm just wrote.
pub(super) fn refusals(
    node: &str,
    facts: &NodeFacts,
    minor: Minor,
    ignored: &[crate::checks::CheckName],
) -> Vec<String> {
    let mut problems = Vec::new();
    if !ignored.contains(&crate::checks::CheckName::KubeletFlags) {
        problems.extend(target_kubelet_flags(node, &facts.kubelet_files, minor));
    }
    problems.extend(target_cgroup(node, facts, minor));
    problems
}

/// The error that stops the run before `batch` reboots: what each refused
/// node's kubelet would refuse, and each one's state after its unstage.
pub(super) fn refusal(
    batch: &[String],
    version: &str,
    refused: &[String],
    states: &[String],
) -> anyhow::Error {
    anyhow!(
        "not rebooting {}: the {version} kubelet would refuse to start:\n  {}\n{}\nNothing was \
         rebooted in this step. Fix that on that node, then run `fleetctl apply` again",
        batch.join(", "),
        refused.join("\n  "),
        states.join("\n")
    )
}

/// The kubelet flags of one node's files that the `minor` kubelet refuses,
/// as one line naming the node, the flag and the file; `None` when none.
/// Nothing strips a flag any more at this point: kubeadm has run.
fn target_kubelet_flags(
    node: &str,
    files: &BTreeMap<String, String>,
    minor: Minor,
) -> Option<String> {
    use crate::checks::{NodeKubeletFiles, Verdict, check_kubelet_flags};
    let files = NodeKubeletFiles {
        node: node.to_string(),
        files: files.clone(),
        stripped_earlier: Default::default(),
    };
    let check = check_kubelet_flags(&[files], minor, false);
    (check.verdict == Verdict::Block).then(|| check.details.join("; "))
}

/// The cgroup check of the `minor` kubelet against the node's hierarchy and
/// the config.yaml kubeadm has just written for it; `None` when it starts.
fn target_cgroup(node: &str, facts: &NodeFacts, minor: Minor) -> Option<String> {
    use crate::checks::{NodeCgroup, Verdict, check_cgroup};
    let mine = NodeCgroup {
        node: node.to_string(),
        v2: facts.cgroup.v2,
        kubelet_config: facts.cgroup.kubelet_config.clone(),
        instance_config: facts.cgroup.instance_config.clone(),
    };
    let check = check_cgroup(&[mine], minor);
    (check.verdict == Verdict::Block).then(|| check.details.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_with(path: &str, content: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(path.to_string(), content.to_string())])
    }

    #[test]
    fn a_flag_kubeadm_left_for_the_target_kubelet_is_named_with_its_node_and_file() {
        let facts = facts_with(
            crate::checks::KUBEADM_FLAGS_ENV,
            "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n",
        );
        let found = target_kubelet_flags("w-1", &facts, Minor::new(1, 37)).unwrap();
        assert!(
            found.starts_with(
                "w-1: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env"
            ),
            "{found}"
        );
        // The v1.34 kubelet still knows it.
        assert_eq!(target_kubelet_flags("w-1", &facts, Minor::new(1, 34)), None);
    }

    #[test]
    fn clean_files_pass() {
        let facts = facts_with(
            crate::checks::KUBEADM_FLAGS_ENV,
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n",
        );
        assert_eq!(target_kubelet_flags("w-1", &facts, Minor::new(1, 37)), None);
    }

    /// A node's facts as the last look reads them: running v1.35.1, on
    /// cgroup `v2` or v1, with these kubelet files and config.yaml.
    fn node(v2: bool, flags: &str, config_yaml: &str) -> NodeFacts {
        let state = crate::plan::testkit::fleet("v1.35.1")
            .worker("n", "v1.35.1")
            .with("n", |f| {
                f.kubelet_files = facts_with(crate::checks::KUBEADM_FLAGS_ENV, flags);
                f.cgroup = crate::node::CgroupFacts {
                    v2: Some(v2),
                    kubelet_config: Some(config_yaml.into()),
                    instance_config: None,
                };
            })
            .build();
        state.nodes[0].facts.clone()
    }

    const CLEAN: &str = "KUBELET_KUBEADM_ARGS=\"\"\n";
    const POD_INFRA: &str =
        "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";

    /// What tests/cli/jump.rs proved on real-OS fleets (a worker jumping to
    /// v1.37, a control plane taking v1.36): a flag put back after the
    /// hop's checks, that the hop's kubeadm left, stops the node's reboot,
    /// and the error names the node, the flag and the file.
    #[test]
    fn a_flag_kubeadm_left_refuses_the_reboot_of_a_worker_or_a_control_plane() {
        use crate::checks::CheckName;
        for (node, minor) in [("w-2", Minor::new(1, 37)), ("cp-2", Minor::new(1, 36))] {
            let found = refusals(node, &node_facts(true, POD_INFRA), minor, &[]);
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(
                found[0].starts_with(&format!(
                    "{node}: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env"
                )),
                "{found:?}"
            );
            assert!(refusals(node, &node_facts(true, CLEAN), minor, &[]).is_empty());
            // `--ignore-check kubelet-flags` goes past the flags, on purpose.
            let ignored = [CheckName::KubeletFlags];
            assert!(refusals(node, &node_facts(true, POD_INFRA), minor, &ignored).is_empty());
        }
    }

    /// tests/cli/jump.rs's cgroup v1 control plane: `upgrade apply` rewrote
    /// config.yaml without `failCgroupV1: false`; the v1.35 kubelet would not
    /// start, and `--ignore-check cgroup` (kubeadm's preflight) does not
    /// change that.
    #[test]
    fn a_cgroup_v1_node_whose_config_kubeadm_rewrote_is_refused_even_with_cgroup_ignored() {
        use crate::checks::CheckName;
        let v1_35 = Minor::new(1, 35);
        let ignored = [CheckName::Cgroup, CheckName::KubeletConfig];
        let dropped = node(false, CLEAN, "kind: KubeletConfiguration\n");
        let found = refusals("cp-1", &dropped, v1_35, &ignored);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("cp-1: cgroup v1"), "{found:?}");
        // Allowed again where kubeadm left it: the reboot goes ahead.
        let allowed = node(false, CLEAN, "failCgroupV1: false\n");
        assert!(refusals("cp-1", &allowed, v1_35, &ignored).is_empty());
        // The v1.34 kubelet still starts on cgroup v1; cgroup v2 always.
        assert!(refusals("cp-1", &dropped, Minor::new(1, 34), &[]).is_empty());
        assert!(refusals("cp-1", &node(true, CLEAN, ""), v1_35, &[]).is_empty());
    }

    #[test]
    fn the_refusal_names_the_batch_the_version_each_problem_and_each_nodes_state() {
        let e = refusal(
            &["w-1".into(), "w-2".into()],
            "v1.37.1",
            &["w-2: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env".into()],
            &["w-2 was staged with v1.37.1; it has been unstaged: it boots v1.35.1 again".into()],
        );
        let text = format!("{e:#}");
        for line in [
            "not rebooting w-1, w-2: the v1.37.1 kubelet would refuse to start:",
            "\n  w-2: --pod-infra-container-image in /var/lib/kubelet/kubeadm-flags.env",
            "\nw-2 was staged with v1.37.1; it has been unstaged",
            "Nothing was rebooted in this step",
            "run `fleetctl apply` again",
        ] {
            assert!(text.contains(line), "no `{line}` in {text}");
        }
    }

    fn node_facts(v2: bool, flags: &str) -> NodeFacts {
        node(v2, flags, "failCgroupV1: false\n")
    }
}

//! The last look at a node's kubelet files before it reboots onto the
//! hop's kubelet: the kubelet-flags and cgroup checks again, on the files
//! kubeadm has just written, for each node about to reboot.

use std::collections::BTreeMap;

use anyhow::bail;
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
    use crate::checks::CheckName;
    let ignored = &apply.plan.ignored_checks;
    let flags = !ignored.contains(&CheckName::KubeletFlags);
    // Always: `--ignore-check cgroup` goes past kubeadm's SystemVerification
    // preflight (a cgroup v1 node whose kubelet allows it), never past a
    // kubelet that would refuse to start on the files kubeadm just wrote.
    let cgroup = true;
    // The batch's nodes at once: a big batch must not wait node by node.
    let looks = batch.iter().map(|node| async move {
        let facts = settled_facts(&apply.remote(node)?).await?;
        let mut problems = Vec::new();
        if flags {
            problems.extend(target_kubelet_flags(node, &facts.kubelet_files, hop.minor));
        }
        if cgroup {
            problems.extend(target_cgroup(node, &facts, hop.minor));
        }
        Ok::<_, anyhow::Error>(problems)
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
    bail!(
        "not rebooting {}: the {} kubelet would refuse to start:\n  {}\n{}\nNothing was \
         rebooted in this step. Fix that on that node, then run `fleetctl apply` again",
        batch.join(", "),
        hop_version(hop),
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
}

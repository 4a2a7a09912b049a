//! The end of a hop: check that the cluster is where the hop says it is,
//! then remove images no rollback needs any more. Nothing to undo: the
//! verification changes nothing, and an image is only removed when it is
//! neither running nor staged.

use anyhow::bail;

use super::context::Apply;
use super::gates;
use super::runner::Remote;
use crate::plan::{Component, Hop, HopKind};
use crate::remote::upgrade;
use crate::version::Version;

/// Every node runs the hop's version, the cluster is on its minor, and
/// kube-proxy has not come back.
pub async fn verify(apply: &Apply<'_>, hop: &Hop) -> anyhow::Result<()> {
    let cluster = gates::cluster(&apply.api()?).await?;
    let mut problems = Vec::new();
    for n in &apply.inv.nodes {
        if apply.plan.workers.leaves_behind(hop.minor, &n.name) {
            continue; // a worker that jumps later (plan::workers)
        }
        let Some(c) = cluster.nodes.iter().find(|c| c.name == n.name) else {
            problems.push(format!("{} is not known to the API server", n.name));
            continue;
        };
        let ok = match (&hop.version, &c.kubelet_version) {
            (Some(want), Some(have)) => want == have,
            (None, Some(have)) => have.minor() == hop.minor,
            (_, None) => false,
        };
        if !ok {
            problems.push(format!(
                "{} reports kubelet {}, expected {}",
                n.name,
                c.kubelet_version
                    .as_ref()
                    .map_or_else(|| "unknown".into(), Version::to_string),
                hop.version
                    .as_ref()
                    .map_or_else(|| hop.minor.to_string(), Version::to_string)
            ));
        }
    }
    if hop.kind != HopKind::Converge
        && cluster.version.as_ref().map(Version::minor) != Some(hop.minor)
    {
        problems.push(format!(
            "the cluster (kubeadm-config) is at {}, expected {}",
            cluster
                .version
                .as_ref()
                .map_or_else(|| "unknown".into(), Version::to_string),
            hop.minor
        ));
    }
    if cluster.kube_proxy {
        problems.push(
            "a kube-proxy DaemonSet exists: something ran kubeadm without --skip-phases addon/kube-proxy; \
             delete it (kubectl -n kube-system delete ds kube-proxy) — Cilium replaces it"
                .into(),
        );
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!("after hop {}: {}", hop.minor, problems.join("; "))
}

/// Removes old kubernetes images from one node (the script itself keeps
/// whatever the symlink resolves to).
pub async fn remove_images(r: &Remote, versions: &[Version]) -> anyhow::Result<()> {
    r.check_root("remove old kubernetes images", &command(versions))
        .await?;
    Ok(())
}

pub fn command(versions: &[Version]) -> String {
    let v: Vec<String> = versions.iter().map(Version::to_string).collect();
    upgrade::remove_images(Component::Kubernetes.name(), &v)
}

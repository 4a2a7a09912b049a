//! `kubectl -n kube-system exec etcd-<node> -- …` in the emulated kubectl,
//! and which etcd image each control plane runs.
//!
//! - The image is the one kubeadm's `SupportedEtcdVersion`
//!   (cmd/kubeadm/app/constants/constants.go) names for the control plane's
//!   version: 3.5.21-0 up to v1.33; for v1.34, 3.6.4-0 from kubeadm v1.34.0
//!   and v1.34.1 and 3.6.5-0 from v1.34.2 (kubernetes/kubernetes#134251);
//!   3.6.6-0 for v1.35 (kubernetes/kubernetes#135271) and 3.6.8-0 from v1.36
//!   (kubernetes/kubernetes#137107). A scenario's `etcd:` starts the control
//!   planes on another tag (a cluster set up by an older kubeadm patch);
//!   `kubeadm upgrade apply|node` deploys its own tag when that is newer
//!   (`Cluster::etcd_images`).
//! - The command runs in the pod's container, `etcd_pod::container`: the
//!   real etcdctl against the node's real member, with each image's tools
//!   modelled on top. The API server's exec runs the same model.
//!
//! Only the etcd pod of the node kubectl runs on is reachable (the
//! container runs here); anything else is refused as unsupported.

use anyhow::Result;

use super::{Cli, Env, Res, connect};
pub(crate) use crate::etcd_pod::container::etcd_tag;
use crate::etcd_pod::container::{Container, Outcome};

/// The etcd image tag kubeadm at `version` deploys.
pub(super) fn image_tag(version: &str) -> &'static str {
    let v = crate::tools::util::KubeVersion::parse(version);
    let (minor, patch) = v.map_or((34, 2), |v| (v.minor, v.patch));
    match (minor, patch) {
        (..=33, _) => "3.5.21-0",
        (34, ..=1) => "3.6.4-0",
        (34, _) => "3.6.5-0",
        (35, _) => "3.6.6-0",
        _ => "3.6.8-0",
    }
}

/// The tag the etcd static pod of control plane `node` runs.
pub(crate) fn running_tag(c: &crate::state::Cluster, node: &str) -> String {
    if let Some(tag) = c.etcd_images.get(node) {
        return tag.clone();
    }
    let version = c
        .nodes
        .get(node)
        .and_then(|n| n.control_plane_version.clone())
        .unwrap_or_else(|| c.version.clone());
    image_tag(&version).to_string()
}

/// After kubeadm at `version` upgraded control plane `node`: its etcd runs
/// kubeadm's tag, unless it already ran a newer one (kubeadm never
/// downgrades etcd).
pub(crate) fn upgraded_by_kubeadm(c: &mut crate::state::Cluster, node: &str, version: &str) {
    let ours = image_tag(version);
    if c.etcd_images
        .get(node)
        .is_some_and(|t| crate::tools::vercmp(t, ours).is_le())
    {
        c.etcd_images.remove(node);
    }
}

pub(super) fn exec(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let [_, pod, command @ ..] = cli.words.as_slice() else {
        return Ok(Res::unsupported(env, args));
    };
    if command.is_empty() || !pod.starts_with("etcd-") {
        return Ok(Res::unsupported(env, args));
    }
    let c = match connect(env, cli)? {
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    let ns = cli.namespace();
    let found = super::pods::all_pods(&c, crate::state::now())
        .into_iter()
        .find(|p| p.namespace == ns && &p.name == pod);
    let Some(found) = found else {
        return Ok(Res::fail(
            env,
            &format!("Error from server (NotFound): pods \"{pod}\" not found"),
        ));
    };
    if found.node != env.node_name() {
        return Ok(Res::unsupported(env, args));
    }
    let tag = running_tag(&c, &found.node);
    let address = c
        .nodes
        .get(&found.node)
        .map(|n| n.address.clone())
        .unwrap_or_default();
    let damage = env.shared().faults()?.damage_etcd_snapshot;
    let root = env.path("/");
    let container = Container {
        root: &root,
        pod,
        tag: &tag,
        address: &address,
        damage,
    };
    let outcome = container.exec(command, &mut *env.out, &mut *env.err)?;
    match outcome {
        Outcome::Exited(0) => Ok(Res::ok()),
        Outcome::Exited(code) => {
            let line = format!("command terminated with exit code {code}");
            crate::tools::complain!(env, "{line}");
            Ok(Res {
                code,
                record: Some(line),
            })
        }
        // The kubelet's InternalError Status, as kubectl prints it.
        Outcome::RuntimeError(msg) => Ok(Res::fail(
            env,
            &format!("error: Internal error occurred: {msg}"),
        )),
    }
}

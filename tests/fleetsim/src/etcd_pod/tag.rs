//! Which etcd image a control plane's etcd static pod runs, and what each
//! image has.
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
//! - The registry.k8s.io images up to 3.6.4-0 ship `etcd` and `etcdctl`
//!   only; from 3.6.5 the image is etcd's official one, with `etcdutl`
//!   (`container.rs` says what that changes).

use crate::state::Cluster;

/// `3.6.4-0` → (3, 6, 4, 0); `None` for anything else.
pub fn parse(tag: &str) -> Option<(u64, u64, u64, u64)> {
    let (version, build) = tag.split_once('-')?;
    let mut parts = version.split('.').map(|p| p.parse::<u64>().ok());
    let t = (
        parts.next()??,
        parts.next()??,
        parts.next()??,
        build.parse().ok()?,
    );
    parts.next().is_none().then_some(t)
}

/// An etcd 3.6 image (its etcdctl has no `snapshot status`; its server
/// sends the storage version with a snapshot).
pub(crate) fn is_3_6(tag: &str) -> bool {
    parse(tag).is_some_and(|(major, minor, ..)| (major, minor) >= (3, 6))
}

/// etcd's official image (3.6.5 and later): etcdutl.
pub(crate) fn has_etcdutl(tag: &str) -> bool {
    parse(tag).is_some_and(|(major, minor, patch, _)| (major, minor, patch) >= (3, 6, 5))
}

/// The etcd image tag kubeadm at `version` deploys.
pub(crate) fn kubeadm_deploys(version: &str) -> &'static str {
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
pub(crate) fn running(c: &Cluster, node: &str) -> String {
    if let Some(tag) = c.etcd_images.get(node) {
        return tag.clone();
    }
    let version = c
        .nodes
        .get(node)
        .and_then(|n| n.control_plane_version.clone())
        .unwrap_or_else(|| c.version.clone());
    kubeadm_deploys(&version).to_string()
}

/// After kubeadm at `version` upgraded control plane `node`: its etcd runs
/// kubeadm's tag, unless it already ran a newer one (kubeadm never
/// downgrades etcd).
pub(crate) fn upgraded_by_kubeadm(c: &mut Cluster, node: &str, version: &str) {
    let ours = kubeadm_deploys(version);
    if c.etcd_images
        .get(node)
        .is_some_and(|t| crate::tools::vercmp(t, ours).is_le())
    {
        c.etcd_images.remove(node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_images_follow_kubeadms_constants_and_kubeadm_upgrades_them() {
        assert_eq!(kubeadm_deploys("v1.33.9"), "3.5.21-0");
        assert_eq!(kubeadm_deploys("v1.34.0"), "3.6.4-0");
        assert_eq!(kubeadm_deploys("v1.34.1"), "3.6.4-0");
        assert_eq!(kubeadm_deploys("v1.34.2"), "3.6.5-0");
        assert_eq!(kubeadm_deploys("v1.35.0"), "3.6.6-0");
        assert_eq!(kubeadm_deploys("v1.36.1"), "3.6.8-0");
        let mut c = Cluster::default();
        c.etcd_images.insert("cp1".into(), "3.6.4-0".into());
        upgraded_by_kubeadm(&mut c, "cp1", "v1.34.3");
        assert!(c.etcd_images.is_empty(), "kubeadm v1.34.3 deploys 3.6.5-0");
        c.etcd_images.insert("cp1".into(), "3.6.9-0".into());
        upgraded_by_kubeadm(&mut c, "cp1", "v1.35.0");
        assert_eq!(c.etcd_images["cp1"], "3.6.9-0", "never a downgrade");
        assert_eq!(parse("3.6.4-0"), Some((3, 6, 4, 0)));
        assert_eq!(parse("3.6.4"), None);
        assert_eq!(parse("v3.6.4-0"), None);
    }

    #[test]
    fn only_the_official_images_have_etcdutl() {
        assert!(!has_etcdutl("3.5.21-0") && !has_etcdutl("3.6.4-0"));
        assert!(has_etcdutl("3.6.5-0") && has_etcdutl("3.6.8-0"));
        assert!(!is_3_6("3.5.21-0") && is_3_6("3.6.4-0"));
    }
}

//! Which kube-apiservers a rollback's kubelet must stay within (issue 38):
//! the versions their pods really run, not kubeadm-config alone. Midway
//! through a hop, or after someone ran kubeadm by hand, kubeadm-config can
//! name one version while a kube-apiserver runs another; the skew policy
//! (kubernetes.io/releases/version-skew-policy, "kubelet") is about the
//! servers that run. The pods' versions come from their image tags
//! ([`crate::node::ClusterFacts::apiservers`]), as the wait for a control
//! plane's static pods reads them.

use crate::node::ClusterFacts;
use crate::version::{Minor, Version};

/// The newest and the oldest kube-apiserver minor: the newest of
/// kubeadm-config's version and every running pod's; the oldest of what
/// the control planes' facts say (`from_facts`) and every running pod's.
pub fn apiserver_bounds(
    cluster: &ClusterFacts,
    from_facts: Option<Minor>,
) -> (Option<Minor>, Option<Minor>) {
    let running = || cluster.apiservers.iter().map(Version::minor);
    let newest = cluster
        .version
        .as_ref()
        .map(Version::minor)
        .into_iter()
        .chain(running())
        .max();
    let oldest = from_facts.into_iter().chain(running()).min();
    (newest, oldest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testkit::*;

    #[test]
    fn the_running_kube_apiservers_bound_the_skew_with_kubeadm_config() {
        let mut s = fleet("v1.36.2")
            .cp("cp-1", "v1.36.2")
            .worker("w-1", "v1.36.2")
            .build();
        s.nodes[1].facts.kubernetes.images = vec![v("v1.33.9"), v("v1.36.2")];
        s.cluster.apiservers = vec![v("v1.36.2"), v("v1.37.1")];
        let bounds = apiserver_bounds(&s.cluster, Some(Minor::new(1, 36)));
        assert_eq!(bounds, (Some(Minor::new(1, 37)), Some(Minor::new(1, 36))));
        // A pod still on an older minor lowers the oldest.
        s.cluster.apiservers = vec![v("v1.35.9")];
        let bounds = apiserver_bounds(&s.cluster, Some(Minor::new(1, 36)));
        assert_eq!(bounds, (Some(Minor::new(1, 36)), Some(Minor::new(1, 35))));
        // None listed: kubeadm-config and the facts, as before.
        s.cluster.apiservers.clear();
        let bounds = apiserver_bounds(&s.cluster, Some(Minor::new(1, 36)));
        assert_eq!(bounds, (Some(Minor::new(1, 36)), Some(Minor::new(1, 36))));
    }
}

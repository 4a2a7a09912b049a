//! What the Ceph gate (`crate::steps::ceph`) runs on the first control
//! plane: the discovery script, then the `ceph` commands of Rook's toolbox
//! through `kubectl exec`, the way Rook's docs use the toolbox
//! (Documentation/Troubleshooting/ceph-toolbox.md). Every command is
//! read-only: fleetctl sets no Ceph flag (no `noout`, no `norebalance`).

use super::kubectl::kubectl;

/// The cluster's clock, every CephCluster and the toolbox pods, in
/// sections. Parse with `crate::checks::ceph::read_discovery`.
pub const DISCOVER_SCRIPT: &str = concat!(include_str!("prelude.sh"), include_str!("ceph.sh"));

/// `kubectl -n NS exec POD -- ceph ARGS… --format json`; `None` when `ns`
/// or `pod` is not a DNS-1123 name (they come from the cluster).
pub fn toolbox(ns: &str, pod: &str, args: &[&str]) -> Option<String> {
    if !super::is_dns_subdomain(ns) || !super::is_dns_subdomain(pod) {
        return None;
    }
    let mut words = vec!["-n", ns, "exec", pod, "--", "ceph"];
    words.extend_from_slice(args);
    words.extend_from_slice(&["--format", "json"]);
    Some(kubectl(&words))
}

/// The three readings of one cluster's state from its toolbox, as probes
/// of one script (sections `health`, `pgs`, `tree`); `None` as in [`toolbox`].
pub fn toolbox_script(ns: &str, pod: &str) -> Option<String> {
    let mut script = include_str!("prelude.sh").to_string();
    script.push_str("printf \"@@fleetctl:ceph-toolbox 1@@\\n\"\n");
    for (name, args) in [
        ("health", &["health", "detail"][..]),
        ("pgs", &["pg", "stat"][..]),
        ("tree", &["osd", "tree"][..]),
    ] {
        script.push_str(&format!(
            "probe {name} $fleetctl_timeout {}\n",
            toolbox(ns, pod, args)?
        ));
    }
    script.push_str("printf \"@@fleetctl:done@@\\n\"\n");
    Some(script)
}

/// `ceph osd ok-to-stop ID…`: whether Ceph's mgr lets these OSDs stop
/// without a PG going inactive (`DaemonServer::_handle_command`).
pub fn ok_to_stop(ns: &str, pod: &str, ids: &[u32]) -> Option<String> {
    let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
    let mut args = vec!["osd", "ok-to-stop"];
    args.extend(ids.iter().map(String::as_str));
    toolbox(ns, pod, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dns_names_reach_the_command_line() {
        assert_eq!(
            ok_to_stop("rook-ceph", "rook-ceph-tools-7b75b967db-x8kzq", &[0, 3]).unwrap(),
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s -n rook-ceph \
             exec rook-ceph-tools-7b75b967db-x8kzq -- ceph osd ok-to-stop 0 3 --format json"
        );
        for bad in ["", "a b", "x;rm -rf /", "$(id)", "-n", "A"] {
            assert!(toolbox(bad, "p", &["status"]).is_none(), "{bad}");
            assert!(toolbox("ns", bad, &["status"]).is_none(), "{bad}");
        }
        let script = toolbox_script("rook-ceph", "tools").unwrap();
        assert!(script.contains("probe pgs $fleetctl_timeout kubectl"));
        assert!(!script.contains('\''));
    }
}

//! What the etcd gate asks (`crate::steps::etcd_gate`): the member list and
//! every member's status, with etcdctl in the etcd static pod of a control
//! plane, through the API (kubeadm's images carry etcdctl, not a shell).
//! Read-only. Parse with `crate::checks::parse_etcd_members`.

use super::before_hop::{etcd_exec, etcdctl_connection};
use super::kubectl::words;

/// etcdctl in `etcd-<node>` with kubeadm's certificates, then `args`.
fn etcdctl(node: &str, args: &[&str]) -> String {
    let mut all = vec!["etcdctl".to_string()];
    all.extend(etcdctl_connection());
    all.extend(words(args));
    etcd_exec(node, all)
}

/// `etcdctl member list -w json`, asked of `node`'s member.
pub fn member_list(node: &str) -> String {
    etcdctl(node, &["member", "list", "-w", "json"])
}

/// `etcdctl endpoint status --cluster -w json`: every member's own status
/// (the ones that answer on stdout, the others named on stderr, exit 1).
/// `--command-timeout` bounds each member's answer, so one that hangs
/// costs seconds, not kubectl's request timeout.
pub fn endpoint_status(node: &str) -> String {
    etcdctl(
        node,
        &[
            "endpoint",
            "status",
            "--cluster",
            "--command-timeout=3s",
            "-w",
            "json",
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_etcdctl_in_the_static_pod_with_kubeadms_certificates() {
        let cmd = endpoint_status("cp-2");
        assert!(
            cmd.contains(
                "-n kube-system exec etcd-cp-2 -- etcdctl --endpoints=https://127.0.0.1:2379 \
                 --cacert=/etc/kubernetes/pki/etcd/ca.crt"
            ),
            "{cmd}"
        );
        assert!(
            cmd.ends_with("endpoint status --cluster --command-timeout=3s -w json"),
            "{cmd}"
        );
        assert!(member_list("cp-1").ends_with("etcdctl --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key member list -w json"));
    }
}

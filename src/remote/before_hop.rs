//! What the checks before each hop read beyond the checks script, and the
//! etcd snapshot: all read-only except `etcd_snapshot_save`, which writes
//! one file into etcd's data directory. kubectl calls go through
//! [`super::kubectl::kubectl`], the one place a kubectl command line is made.

use super::kubectl::{kubectl, words};

// `/metrics`, the budgets and kubeadm's certificates are read by
// `super::CHECKS_SCRIPT` (checks.sh), in one round trip.

/// The running pods of one namespace: what the PDB check reads for a
/// budget that allows no disruption (a budget only covers pods of its own
/// namespace), so a big cluster's whole pod list never crosses the wire.
pub fn get_running_pods_in(namespace: &str) -> String {
    kubectl(&[
        "get",
        "pods",
        "-n",
        namespace,
        "--field-selector=status.phase=Running",
        "-o",
        "json",
    ])
}

/// kubeadm's ClusterConfiguration, for `crate::checks::etcd_topology`.
pub fn get_kubeadm_config() -> String {
    kubectl(&[
        "-n",
        "kube-system",
        "get",
        "configmap",
        "kubeadm-config",
        "-o",
        "json",
    ])
}

/// Where kubeadm keeps etcd's certificates; its etcd static pod mounts this
/// directory at the same path (`etcd-certs`).
pub const ETCD_PKI: &str = "/etc/kubernetes/pki/etcd";

/// etcdctl's connection to the local member, with the certificates
/// kubeadm's etcd static pod is started with (`--trusted-ca-file`,
/// `--cert-file`, `--key-file` in `cmd/kubeadm/app/phases/etcd/local.go`).
/// The server certificate also works as a client one: kubeadm issues it
/// for both server and client auth.
pub(super) fn etcdctl_connection() -> Vec<String> {
    vec![
        "--endpoints=https://127.0.0.1:2379".to_string(),
        format!("--cacert={ETCD_PKI}/ca.crt"),
        format!("--cert={ETCD_PKI}/server.crt"),
        format!("--key={ETCD_PKI}/server.key"),
    ]
}

/// `kubectl -n kube-system exec etcd-<node> -- ARGS…`: runs in kubeadm's etcd
/// static pod, whose image carries etcdctl (and, in the images that ship it,
/// etcdutl).
pub(super) fn etcd_exec(node: &str, args: Vec<String>) -> String {
    let pod = format!("etcd-{node}");
    let mut all: Vec<String> = words(&["-n", "kube-system", "exec", &pod, "--"]);
    all.extend(args);
    kubectl(&all)
}

/// Saves a snapshot of etcd to `<data_dir>/<file>` inside the etcd pod of
/// `node`, which is the same path on the host (kubeadm mounts the data
/// directory at its own path), so it can be copied off over SSH. `data_dir`
/// comes from `crate::checks::etcd_topology`.
pub fn etcd_snapshot_save(node: &str, data_dir: &str, file: &str) -> String {
    let mut args = vec!["etcdctl".to_string()];
    args.extend(etcdctl_connection());
    args.extend(words(&["snapshot", "save"]));
    args.push(format!("{}/{file}", data_dir.trim_end_matches('/')));
    etcd_exec(node, args)
}

/// `etcdutl snapshot status PATH -w json`, for
/// `crate::checks::parse_snapshot_status`. etcdutl is the tool for it: etcd
/// v3.5 deprecated `etcdctl snapshot status` and v3.6 removed it
/// (etcd-io/etcd#13809). It reads the file, so it needs no connection.
pub fn etcdutl_snapshot_status(node: &str, path: &str) -> String {
    etcd_exec(
        node,
        words(&["etcdutl", "snapshot", "status", path, "-w", "json"]),
    )
}

/// The same with etcdctl, for etcd v3.5 images built without etcdutl
/// (registry.k8s.io/etcd images have copied only etcd and etcdctl,
/// etcd-io/etcd#13764); prints the same JSON.
pub fn etcdctl_snapshot_status(node: &str, path: &str) -> String {
    etcd_exec(
        node,
        words(&["etcdctl", "snapshot", "status", path, "-w", "json"]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s";

    /// The words kubectl receives when `cmd` runs in a real shell.
    fn argv(cmd: &str) -> Vec<String> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("kubectl");
        std::fs::write(
            &fake,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = std::process::Command::new("sh")
            .args(["-c", cmd])
            .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .skip(2)
            .map(String::from)
            .collect()
    }

    #[test]
    fn the_checks_read_commands() {
        assert_eq!(
            get_running_pods_in("web"),
            format!("{KUBECTL} get pods -n web --field-selector=status.phase=Running -o json")
        );
        assert_eq!(
            get_kubeadm_config(),
            format!("{KUBECTL} -n kube-system get configmap kubeadm-config -o json")
        );
    }

    #[test]
    fn the_etcd_snapshot_runs_etcdctl_in_the_static_pod_with_kubeadms_certificates() {
        let save = etcd_snapshot_save("cp-1", "/var/lib/etcd/", "fleetctl-v1.35.db");
        assert_eq!(
            save,
            format!(
                "{KUBECTL} -n kube-system exec etcd-cp-1 -- etcdctl \
                 --endpoints=https://127.0.0.1:2379 --cacert=/etc/kubernetes/pki/etcd/ca.crt \
                 --cert=/etc/kubernetes/pki/etcd/server.crt --key=/etc/kubernetes/pki/etcd/server.key \
                 snapshot save /var/lib/etcd/fleetctl-v1.35.db"
            )
        );
        assert_eq!(
            etcdutl_snapshot_status("cp-1", "/var/lib/etcd/fleetctl-v1.35.db"),
            format!(
                "{KUBECTL} -n kube-system exec etcd-cp-1 -- etcdutl snapshot status \
                 /var/lib/etcd/fleetctl-v1.35.db -w json"
            )
        );
        assert!(
            etcdctl_snapshot_status("cp-1", "/x.db")
                .contains("-- etcdctl snapshot status /x.db -w json")
        );
    }

    #[test]
    fn odd_names_reach_kubectl_as_single_words() {
        let seen = argv(&etcd_snapshot_save("cp 1", "/var/lib/etcd", "a b;$(id).db"));
        assert_eq!(seen[3], "etcd-cp 1");
        assert_eq!(seen.last().unwrap(), "/var/lib/etcd/a b;$(id).db");
        let seen = argv(&get_running_pods_in("w'1 $(id)"));
        assert_eq!(seen[3], "w'1 $(id)");
    }
}

//! The `kubectl` calls apply's lock makes, as argument lists, and the one
//! place that turns them into a command line: a reviewer reads here exactly
//! what fleetctl asks the API server to change.
//!
//! Every call runs as root on a control-plane node with the kubeadm admin
//! kubeconfig, so fleetctl needs no credentials on the laptop. Arguments
//! are built as separate words and quoted only when joined, so a JSON
//! annotation value (full of `"` and `{`) reaches kubectl byte for byte.
//!
//! kubectl reports API failures on stderr as `Error from server (Reason):
//! …`; [`api_error`] reads the reason back so the lock can tell "someone
//! else holds it" from "something broke".

use super::word;

/// The kubeadm admin kubeconfig on every control-plane node.
pub const ADMIN_KUBECONFIG: &str = "/etc/kubernetes/admin.conf";

/// Bounds each API request, so an unreachable API server fails in seconds
/// instead of holding apply until the SSH command timeout.
pub const REQUEST_TIMEOUT: &str = "20s";

/// Where fleetctl's own lock lives when Kured is not installed.
pub const LOCK_NAMESPACE: &str = "kube-system";

/// The configmap that *is* fleetctl's lock when Kured is not installed:
/// creating it is atomic, so two applies cannot both succeed.
pub const LOCK_CONFIGMAP: &str = "fleetctl-lock";

/// `kubectl --kubeconfig=… --request-timeout=… ARGS…`, each argument one
/// word for the remote shell.
pub fn kubectl<S: AsRef<str>>(args: &[S]) -> String {
    let mut cmd =
        format!("kubectl --kubeconfig={ADMIN_KUBECONFIG} --request-timeout={REQUEST_TIMEOUT}");
    for arg in args {
        cmd.push(' ');
        cmd.push_str(&word(arg.as_ref()));
    }
    cmd
}

fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// Reads a DaemonSet (Kured's) with its args, annotations and resourceVersion.
pub fn get_daemonset(namespace: &str, name: &str) -> Vec<String> {
    words(&["-n", namespace, "get", "daemonset", name, "-o", "json"])
}

/// Sets annotation `key` on a DaemonSet only if it is still at
/// `resource_version`: a concurrent change (Kured taking its lock) makes the
/// API answer Conflict instead of being overwritten. Without `overwrite`,
/// kubectl also refuses when the key already has a value; `overwrite` is for
/// replacing a value already judged free (an expired or emptied lock) at
/// that same resource version.
pub fn annotate_daemonset(
    namespace: &str,
    name: &str,
    key: &str,
    value: &str,
    resource_version: &str,
    overwrite: bool,
) -> Vec<String> {
    let mut args = words(&["-n", namespace, "annotate", "daemonset", name]);
    args.push(format!("{key}={value}"));
    args.push(format!("--resource-version={resource_version}"));
    if overwrite {
        args.push("--overwrite".into());
    }
    args
}

/// Removes annotation `key` from a DaemonSet, only if it is still at
/// `resource_version` (so a lock someone took meanwhile is left alone).
pub fn remove_daemonset_annotation(
    namespace: &str,
    name: &str,
    key: &str,
    resource_version: &str,
) -> Vec<String> {
    let mut args = words(&["-n", namespace, "annotate", "daemonset", name]);
    args.push(format!("{key}-"));
    args.push(format!("--resource-version={resource_version}"));
    args
}

/// Creates a configmap from `key=value` literals; fails with AlreadyExists
/// if it exists, which is what makes it a lock.
pub fn create_configmap(namespace: &str, name: &str, literals: &[(&str, &str)]) -> Vec<String> {
    let mut args = words(&["-n", namespace, "create", "configmap", name]);
    args.extend(
        literals
            .iter()
            .map(|(key, value)| format!("--from-literal={key}={value}")),
    );
    args
}

/// Reads a configmap as JSON.
pub fn get_configmap(namespace: &str, name: &str) -> Vec<String> {
    words(&["-n", namespace, "get", "configmap", name, "-o", "json"])
}

/// Deletes a configmap (NotFound if it is already gone).
pub fn delete_configmap(namespace: &str, name: &str) -> Vec<String> {
    words(&["-n", namespace, "delete", "configmap", name])
}

/// The API server's own readiness, etcd included: prints `ok`.
pub fn readyz() -> String {
    kubectl(&["get", "--raw", "/readyz"])
}

/// The exit status of [`cordon_and_drain`] when the cordon itself failed
/// and the drain never ran (kubectl exits 1 on its errors).
pub const CORDON_FAILED: u32 = 97;

/// `kubectl cordon` then `kubectl drain` (`timeout_flag` is its
/// `--timeout=…`), in one command: one round trip instead of two, and the
/// drain starts the moment the cordon is done.
pub fn cordon_and_drain(node: &str, timeout_flag: &str) -> String {
    let cordon = kubectl(&["cordon", node]);
    let drain = kubectl(&[
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        timeout_flag,
    ]);
    format!("{cordon} || exit {CORDON_FAILED}; {drain}")
}

pub fn uncordon(node: &str) -> String {
    kubectl(&["uncordon", node])
}

/// The exit status of [`ready_then_uncordon`] while `kubectl wait` has not
/// seen the node Ready (and so the uncordon did not run).
pub const NOT_READY: u32 = 98;

/// `kubectl wait` for the node's Ready condition, then `kubectl uncordon`
/// only once it is Ready: one command, so the uncordon follows at once.
pub fn ready_then_uncordon(node: &str) -> String {
    let target = format!("node/{node}");
    let wait = kubectl(&["wait", "--for=condition=Ready", &target, "--timeout=10s"]);
    format!("{wait} || exit {NOT_READY}; {}", uncordon(node))
}

/// The static pods kubeadm runs on a control-plane node, by the names of
/// their mirror pods (`<component>-<node>`).
pub const STATIC_POD_COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The control plane's static pods on `node`, as JSON (a `List` of the ones
/// found; kubectl exits 1 and names the missing ones on stderr).
pub fn get_static_pods(node: &str) -> String {
    let mut args: Vec<String> = words(&["-n", "kube-system", "get", "pod"]);
    args.extend(STATIC_POD_COMPONENTS.iter().map(|c| format!("{c}-{node}")));
    args.extend(words(&["-o", "json"]));
    kubectl(&args)
}

/// Why kubectl failed, when the reason decides what the lock does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiError {
    /// `Error from server (NotFound): daemonsets.apps "kured" not found`
    NotFound,
    /// `error: failed to create configmap: configmaps "fleetctl-lock" already
    /// exists` (current kubectl `create configmap`), or `Error from server
    /// (AlreadyExists): …` (older kubectl, other verbs).
    AlreadyExists,
    /// `Error from server (Conflict): Operation cannot be fulfilled on …: the
    /// object has been modified; …` — the resourceVersion moved on.
    Conflict,
    /// kubectl's own refusal without `--overwrite`: `error: --overwrite is
    /// false but found the following declared annotation(s): 'KEY' already
    /// has a value (…)`. It means the annotation appeared since we read it.
    AnnotationExists,
}

/// Reads kubectl's stderr for the failures the lock handles; `None` for
/// anything else (which the caller reports as it is).
pub fn api_error(stderr: &str) -> Option<ApiError> {
    if stderr.contains("(NotFound)") {
        Some(ApiError::NotFound)
    } else if stderr.contains("(AlreadyExists)")
        || (stderr.contains("failed to create") && stderr.contains("already exists"))
    {
        Some(ApiError::AlreadyExists)
    } else if stderr.contains("(Conflict)") {
        Some(ApiError::Conflict)
    } else if stderr.contains("--overwrite is false") && stderr.contains("already has a value") {
        Some(ApiError::AnnotationExists)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sh -c "<cmd>"` with a `kubectl` on PATH that prints one
    /// argument per line, so we see what kubectl would receive.
    fn argv_seen_by_kubectl(cmd: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("kubectl");
        std::fs::write(
            &fake,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_json_annotation_reaches_kubectl_as_one_exact_word() {
        let value = r#"{"nodeID":"fleetctl/o'brien@lap top","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":0}"#;
        let args = annotate_daemonset(
            "kube-system",
            "kured",
            "weave.works/kured-node-lock",
            value,
            "4711",
            false,
        );
        let seen = argv_seen_by_kubectl(&kubectl(&args));
        assert_eq!(
            seen,
            [
                "--kubeconfig=/etc/kubernetes/admin.conf",
                "--request-timeout=20s",
                "-n",
                "kube-system",
                "annotate",
                "daemonset",
                "kured",
                &format!("weave.works/kured-node-lock={value}"),
                "--resource-version=4711",
            ]
        );
    }

    #[test]
    fn the_command_also_survives_sudo_sh_c_wrapping() {
        let args = create_configmap(
            LOCK_NAMESPACE,
            LOCK_CONFIGMAP,
            &[("holder", "fleetctl/it's me@host"), ("pid", "42")],
        );
        let wrapped = crate::ssh::shell::sudo_wrap(&kubectl(&args));
        // Without sudo here: strip it and run the inner `sh -c '…'` as is.
        let inner = wrapped.strip_prefix("sudo -n ").unwrap();
        let seen = argv_seen_by_kubectl(inner);
        assert_eq!(
            &seen[2..],
            [
                "-n",
                "kube-system",
                "create",
                "configmap",
                "fleetctl-lock",
                "--from-literal=holder=fleetctl/it's me@host",
                "--from-literal=pid=42",
            ]
        );
    }

    #[test]
    fn plain_words_stay_bare_and_everything_else_is_quoted() {
        let args = [
            "-n",
            "kube-system",
            "get",
            "daemonset",
            "kured",
            "-o",
            "json",
        ];
        assert_eq!(
            kubectl(&args),
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s \
             -n kube-system get daemonset kured -o json"
        );
        let odd = ["", "a b", "$(id)", "x;y", "*", "~root", "k=v w"];
        let seen = argv_seen_by_kubectl(&kubectl(&odd));
        assert_eq!(&seen[2..], odd);
    }

    #[test]
    fn overwrite_and_removal_forms() {
        let args = annotate_daemonset("ns", "ds", "k", "v", "9", true);
        assert_eq!(args.last().map(String::as_str), Some("--overwrite"));
        assert_eq!(
            remove_daemonset_annotation("ns", "ds", "k", "9"),
            [
                "-n",
                "ns",
                "annotate",
                "daemonset",
                "ds",
                "k-",
                "--resource-version=9"
            ]
        );
        assert_eq!(
            delete_configmap("kube-system", "fleetctl-lock"),
            ["-n", "kube-system", "delete", "configmap", "fleetctl-lock"]
        );
    }

    #[test]
    fn kubectl_error_reasons_are_recognised_in_real_wording() {
        let cases = [
            (
                r#"Error from server (NotFound): daemonsets.apps "kured" not found"#,
                Some(ApiError::NotFound),
            ),
            (
                r#"Error from server (AlreadyExists): configmaps "fleetctl-lock" already exists"#,
                Some(ApiError::AlreadyExists),
            ),
            (
                r#"error: failed to create configmap: configmaps "fleetctl-lock" already exists"#,
                Some(ApiError::AlreadyExists),
            ),
            (
                r#"Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps "kured": the object has been modified; please apply your changes to the latest version and try again"#,
                Some(ApiError::Conflict),
            ),
            (
                "error: --overwrite is false but found the following declared annotation(s): 'weave.works/kured-node-lock' already has a value ({})",
                Some(ApiError::AnnotationExists),
            ),
            (
                "error: You must be logged in to the server (Unauthorized)",
                None,
            ),
            (
                "The connection to the server 10.0.0.1:6443 was refused",
                None,
            ),
        ];
        for (stderr, want) in cases {
            assert_eq!(api_error(stderr), want, "{stderr}");
        }
    }

    /// Runs `script` with a fake `kubectl` first in PATH that appends its
    /// verb to a log and exits with `$FAIL_<VERB>` (0 when unset).
    fn with_fake_kubectl(script: &str, fail: &[(&str, u32)]) -> (Option<i32>, String) {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("kubectl");
        std::fs::write(
            &fake,
            "#!/bin/sh\nfor a; do case $a in --*) ;; *) verb=$a; break;; esac; done\n\
             echo \"$verb\" >> \"$LOG\"\neval \"exit \\${FAIL_$verb:-0}\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.path().join("log");
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", script])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    dir.path().display(),
                    std::env::var("PATH").unwrap()
                ),
            )
            .env("LOG", &log);
        for (verb, code) in fail {
            cmd.env(format!("FAIL_{verb}"), code.to_string());
        }
        let status = cmd.status().unwrap();
        (
            status.code(),
            std::fs::read_to_string(&log).unwrap_or_default(),
        )
    }

    #[test]
    fn cordon_and_drain_is_one_command_that_tells_a_failed_cordon_apart() {
        let cmd = cordon_and_drain("w-1", "--timeout=300s");
        assert_eq!(
            cmd,
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s cordon w-1 || exit 97; \
             kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s drain w-1 \
             --ignore-daemonsets --delete-emptydir-data --timeout=300s"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[]),
            (Some(0), "cordon\ndrain\n".into())
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("drain", 1)]),
            (Some(1), "cordon\ndrain\n".into()),
            "a failed drain is the drain's own status"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("cordon", 1)]),
            (Some(CORDON_FAILED as i32), "cordon\n".into()),
            "no drain without a cordon"
        );
    }

    #[test]
    fn uncordon_runs_only_once_the_node_is_ready() {
        let cmd = ready_then_uncordon("w-1");
        assert_eq!(
            cmd,
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s wait --for=condition=Ready \
             node/w-1 --timeout=10s || exit 98; \
             kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s uncordon w-1"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[]),
            (Some(0), "wait\nuncordon\n".into())
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("wait", 1)]),
            (Some(NOT_READY as i32), "wait\n".into()),
            "not Ready: never uncordoned"
        );
        assert_eq!(
            with_fake_kubectl(&cmd, &[("uncordon", 1)]),
            (Some(1), "wait\nuncordon\n".into()),
            "a failed uncordon is its own status"
        );
    }
}

// ---------------------------------------------------------------------------
// Before each hop: what the checks in `crate::checks` read, and the etcd
// snapshot. All read-only except `etcd_snapshot_save`, which writes one file
// into etcd's data directory.

/// The API server's metrics in the Prometheus text format, for
/// `crate::checks::parse_deprecated_apis`. The gauge it reads is per
/// kube-apiserver process: this asks the one admin.conf reaches.
pub fn get_metrics() -> String {
    kubectl(&["get", "--raw", "/metrics"])
}

/// Every PodDisruptionBudget, for `crate::checks::parse_pdbs`. Budgets are
/// few even on big clusters, so the whole objects are fine.
pub fn get_pdbs() -> String {
    kubectl(&["get", "pdb", "-A", "-o", "json"])
}

/// The running pods of every namespace, for `crate::checks::parse_pods`.
/// Only running pods count against a budget (eviction ignores the others),
/// so the API server leaves out completed Jobs and pending pods, often most
/// of a big cluster's pod list.
pub fn get_running_pods() -> String {
    kubectl(&[
        "get",
        "pods",
        "-A",
        "--field-selector=status.phase=Running",
        "-o",
        "json",
    ])
}

/// The running pods on one node: for a hop that drains few nodes of a big
/// cluster, one call per drained node returns far less than
/// [`get_running_pods`] (a field selector cannot OR several nodes).
pub fn get_running_pods_on(node: &str) -> String {
    let selector = format!("--field-selector=spec.nodeName={node},status.phase=Running");
    kubectl(&["get", "pods", "-A", &selector, "-o", "json"])
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
fn etcdctl_connection() -> Vec<String> {
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
fn etcd_exec(node: &str, args: Vec<String>) -> String {
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
mod check_command_tests {
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
        assert_eq!(get_metrics(), format!("{KUBECTL} get --raw /metrics"));
        assert_eq!(get_pdbs(), format!("{KUBECTL} get pdb -A -o json"));
        assert_eq!(
            get_running_pods(),
            format!("{KUBECTL} get pods -A --field-selector=status.phase=Running -o json")
        );
        assert_eq!(
            get_running_pods_on("w-1"),
            format!(
                "{KUBECTL} get pods -A --field-selector=spec.nodeName=w-1,status.phase=Running -o json"
            )
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
        let seen = argv(&get_running_pods_on("w'1"));
        assert_eq!(
            seen[3],
            "--field-selector=spec.nodeName=w'1,status.phase=Running"
        );
    }
}

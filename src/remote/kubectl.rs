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

/// One line per DaemonSet, then one per container of its pod template:
///
/// ```text
/// daemonset<TAB>NAMESPACE<TAB>NAME
/// container<TAB>NAME<TAB>IMAGE<TAB>PROGRAM
/// ```
///
/// PROGRAM is the first word of the container's `command` (empty when it
/// has none: the image's entrypoint runs). Enough to tell which container
/// runs Kured, and nothing more: no arguments and no environment, which
/// hold other programs' settings and secrets (notification URLs, tokens).
/// Kured's own are read with [`get_container_settings`]. A missing field
/// prints nothing (kubectl's `--allow-missing-template-keys`, on by
/// default); `[0]` of an absent list selects nothing.
const DAEMONSET_RECORD: &str = concat!(
    r#"daemonset{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}"#,
    r#"{range .spec.template.spec.containers[*]}"#,
    r#"container{"\t"}{.name}{"\t"}{.image}{"\t"}{.command[0]}{"\n"}"#,
    r#"{end}"#,
);

/// Every DaemonSet in every namespace, as [`DAEMONSET_RECORD`]s: where Kured
/// runs, whatever namespace its manifest or Helm release put it in.
pub fn list_daemonsets() -> Vec<String> {
    let template = format!("jsonpath={{range .items[*]}}{DAEMONSET_RECORD}{{end}}");
    vec![
        "get".into(),
        "daemonsets".into(),
        "--all-namespaces".into(),
        "-o".into(),
        template,
    ]
}

/// One container of one DaemonSet's pod template, by its position: its
/// name (to check it is still the one listed), then `command`, `args`,
/// `env` and `envFrom` as JSON, tab-separated, on one line (empty when
/// unset). kubectl's jsonpath prints lists and maps as JSON since
/// Kubernetes 1.19 (kubernetes/kubernetes#89660), and JSON escapes tabs
/// and newlines. Asked only for the container that runs Kured.
pub fn get_container_settings(namespace: &str, name: &str, index: usize) -> Vec<String> {
    let field = |f: &str| format!("{{.spec.template.spec.containers[{index}].{f}}}");
    let template = format!(
        r#"jsonpath={}{{"\t"}}{}{{"\t"}}{}{{"\t"}}{}{{"\t"}}{}"#,
        field("name"),
        field("command"),
        field("args"),
        field("env"),
        field("envFrom"),
    );
    let mut args = words(&["-n", namespace, "get", "daemonset", name, "-o"]);
    args.push(template);
    args
}

/// Every pod in every namespace with its containers' images and programs,
/// one line per pod, then one per container:
///
/// ```text
/// pod<TAB>NAMESPACE<TAB>NAME
/// container<TAB>NAME<TAB>IMAGE<TAB>PROGRAM
/// ```
///
/// Asked only when no DaemonSet runs Kured, to tell "no Kured" from "Kured
/// run some other way" before falling back to fleetctl's own lock; as for
/// DaemonSets, no arguments or environment.
pub fn list_pods() -> Vec<String> {
    let template = concat!(
        r#"jsonpath={range .items[*]}pod{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}"#,
        r#"{range .spec.containers[*]}container{"\t"}{.name}{"\t"}{.image}{"\t"}{.command[0]}{"\n"}{end}{end}"#,
    );
    vec![
        "get".into(),
        "pods".into(),
        "--all-namespaces".into(),
        "-o".into(),
        template.into(),
    ]
}

/// The DaemonSet that holds Kured's lock, reduced to
/// `RESOURCEVERSION<TAB>VALUE` (VALUE empty when the annotation is absent
/// or empty): the one annotation, not the others.
pub fn get_lock_annotation(namespace: &str, name: &str, key: &str) -> Vec<String> {
    let template = format!(
        r#"jsonpath={{.metadata.resourceVersion}}{{"\t"}}{{.metadata.annotations.{}}}"#,
        jsonpath_field(key)
    );
    let mut args = words(&["-n", namespace, "get", "daemonset", name, "-o"]);
    args.push(template);
    args
}

/// `key` as one jsonpath field name: kubectl's parser ends a field at `.`
/// (and `,[]{}$@`, blanks) unless a backslash escapes it, and drops the
/// backslashes (client-go util/jsonpath/parser.go, `parseField`/`advance`).
fn jsonpath_field(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if ".,[]{}$@ \t\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Sets annotation `key` on a DaemonSet only if it is still at
/// `resource_version`: kubectl puts the version into its merge patch and
/// the API server answers Conflict when the object moved on (kubectl
/// `annotate --resource-version`). `--overwrite` because the caller has
/// already judged the current value, at that very version: absent, free,
/// or its own lock being refreshed.
pub fn annotate_daemonset(
    namespace: &str,
    name: &str,
    key: &str,
    value: &str,
    resource_version: &str,
) -> Vec<String> {
    let mut args = words(&["-n", namespace, "annotate", "daemonset", name]);
    args.push(format!("{key}={value}"));
    args.push(format!("--resource-version={resource_version}"));
    args.push("--overwrite".into());
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

/// fleetctl's lock configmap as `RESOURCEVERSION<TAB>UID<TAB>DATA`, DATA
/// its `data` as JSON: the version and uid are the preconditions of any
/// later change.
pub fn get_lock_configmap(namespace: &str, name: &str) -> Vec<String> {
    let mut args = words(&["-n", namespace, "get", "configmap", name, "-o"]);
    args.push(r#"jsonpath={.metadata.resourceVersion}{"\t"}{.metadata.uid}{"\t"}{.data}"#.into());
    args
}

/// Sets `data` keys of a configmap only if it is still at
/// `resource_version`: a merge patch that carries `metadata.resourceVersion`
/// is applied to the stored object and the update refused with Conflict
/// when the versions differ (the same mechanism `annotate
/// --resource-version` relies on).
pub fn patch_configmap_data(
    namespace: &str,
    name: &str,
    resource_version: &str,
    data: &[(&str, &str)],
) -> Vec<String> {
    let data: serde_json::Map<String, serde_json::Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": resource_version},
        "data": data,
    });
    let mut args = words(&[
        "-n",
        namespace,
        "patch",
        "configmap",
        name,
        "--type=merge",
        "-p",
    ]);
    args.push(patch.to_string());
    args
}

/// A kubectl call whose request body comes on its stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithStdin {
    pub args: Vec<String>,
    pub stdin: String,
}

/// Deletes a configmap only if it is still the object fleetctl read: same
/// uid (not deleted and recreated since) and same resourceVersion (not
/// changed since). `kubectl delete NAME` cannot send preconditions; `delete
/// --raw PATH -f -` sends stdin as the DELETE body (kubectl rawhttp), and
/// the API server refuses with 409 Conflict when a precondition does not
/// hold (apiserver registry/rest `BeforeDelete`).
pub fn delete_configmap_if_unchanged(
    namespace: &str,
    name: &str,
    resource_version: &str,
    uid: &str,
) -> WithStdin {
    let body = serde_json::json!({
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "preconditions": {"uid": uid, "resourceVersion": resource_version},
    });
    WithStdin {
        args: vec![
            "delete".into(),
            "--raw".into(),
            format!("/api/v1/namespaces/{namespace}/configmaps/{name}"),
            "-f".into(),
            "-".into(),
        ],
        stdin: body.to_string(),
    }
}

/// The API server's own readiness, etcd included: prints `ok`.
pub fn readyz() -> String {
    kubectl(&["get", "--raw", "/readyz"])
}

/// `kubectl drain` (`timeout_flag` is its `--timeout=…`). It cordons the
/// node itself before evicting anything (`kubectl drain --help`: "The given
/// node will be marked unschedulable to prevent new pods from arriving"),
/// printing `node/NAME cordoned`; no separate `kubectl cordon`, so one API
/// client start less per node.
pub fn drain(node: &str, timeout_flag: &str) -> String {
    kubectl(&[
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        timeout_flag,
    ])
}

/// What `kubectl drain` printed once the node is cordoned: `node/NAME
/// cordoned`, or `node/NAME already cordoned` (kubectl's cordon helper).
pub fn drain_cordoned(node: &str, output: &str) -> bool {
    output.lines().any(|l| {
        let l = l.trim();
        l == format!("node/{node} cordoned") || l == format!("node/{node} already cordoned")
    })
}

pub fn uncordon(node: &str) -> String {
    kubectl(&["uncordon", node])
}

/// The line in which `kubectl cordon`/`uncordon` says the API refused the
/// change. Their exit status does not: kubectl's RunCordonOrUncordon
/// (staging/src/k8s.io/kubectl/pkg/cmd/drain/drain.go) prints `error: unable
/// to uncordon node "w-1": …` and goes on to the next node, returning nil,
/// so a refused uncordon exits 0 (seen with the real kubectl 1.33 against
/// the simulated API server).
pub fn schedulability_refused(stderr: &str) -> Option<&str> {
    stderr.lines().map(str::trim).find(|l| {
        l.starts_with("error: unable to cordon node")
            || l.starts_with("error: unable to uncordon node")
    })
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
    /// object has been modified; …` — the resourceVersion moved on — or,
    /// for a delete with preconditions, `… the ResourceVersion in the
    /// precondition (…) does not match …`.
    Conflict,
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
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sh -c "<cmd>"` with a `kubectl` on PATH that prints one
    /// argument per line, then what it read on stdin after a `--stdin--`
    /// line, so we see exactly what kubectl would receive.
    fn seen_by_kubectl(cmd: &str, stdin: &str) -> (Vec<String>, String) {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("kubectl");
        std::fs::write(
            &fake,
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\necho --stdin--\ncat\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let (args, input) = text.split_once("--stdin--\n").unwrap();
        (args.lines().map(String::from).collect(), input.to_string())
    }

    fn argv_seen_by_kubectl(cmd: &str) -> Vec<String> {
        seen_by_kubectl(cmd, "").0
    }

    #[test]
    fn a_json_annotation_reaches_kubectl_as_one_exact_word() {
        let value = r#"{"nodeID":"fleetctl/o'brien@lap top","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":900000000000}"#;
        let args = annotate_daemonset(
            "kube-system",
            "kured",
            "weave.works/kured-node-lock",
            value,
            "4711",
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
                "--overwrite",
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
        let args = ["-n", "kube-system", "get", "configmap", "fleetctl-lock"];
        assert_eq!(
            kubectl(&args),
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s \
             -n kube-system get configmap fleetctl-lock"
        );
        let odd = ["", "a b", "$(id)", "x;y", "*", "~root", "k=v w"];
        let seen = argv_seen_by_kubectl(&kubectl(&odd));
        assert_eq!(&seen[2..], odd);
    }

    #[test]
    fn the_jsonpath_templates_reach_kubectl_byte_for_byte_even_through_sudo() {
        for args in [
            list_daemonsets(),
            list_pods(),
            get_container_settings("kured", "kured", 0),
            get_lock_annotation("kured", "kured", "weave.works/kured-node-lock"),
            get_lock_configmap(LOCK_NAMESPACE, LOCK_CONFIGMAP),
        ] {
            let wrapped = crate::ssh::shell::sudo_wrap(&kubectl(&args));
            let inner = wrapped.strip_prefix("sudo -n ").unwrap();
            assert_eq!(argv_seen_by_kubectl(inner)[2..], args);
        }
    }

    #[test]
    fn the_reads_name_only_the_fields_the_lock_uses() {
        assert_eq!(
            list_daemonsets(),
            [
                "get",
                "daemonsets",
                "--all-namespaces",
                "-o",
                concat!(
                    r#"jsonpath={range .items[*]}daemonset{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}"#,
                    r#"{range .spec.template.spec.containers[*]}container{"\t"}{.name}{"\t"}{.image}{"\t"}"#,
                    r#"{.command[0]}{"\n"}{end}{end}"#,
                ),
            ]
        );
        assert_eq!(
            get_container_settings("kured", "kured", 1),
            [
                "-n",
                "kured",
                "get",
                "daemonset",
                "kured",
                "-o",
                concat!(
                    r#"jsonpath={.spec.template.spec.containers[1].name}{"\t"}"#,
                    r#"{.spec.template.spec.containers[1].command}{"\t"}"#,
                    r#"{.spec.template.spec.containers[1].args}{"\t"}"#,
                    r#"{.spec.template.spec.containers[1].env}{"\t"}"#,
                    r#"{.spec.template.spec.containers[1].envFrom}"#,
                ),
            ]
        );
        assert_eq!(
            list_pods(),
            [
                "get",
                "pods",
                "--all-namespaces",
                "-o",
                concat!(
                    r#"jsonpath={range .items[*]}pod{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}"#,
                    r#"{range .spec.containers[*]}container{"\t"}{.name}{"\t"}{.image}{"\t"}{.command[0]}{"\n"}{end}{end}"#,
                ),
            ]
        );
        assert_eq!(
            get_lock_annotation("kured", "kured", "weave.works/kured-node-lock"),
            [
                "-n",
                "kured",
                "get",
                "daemonset",
                "kured",
                "-o",
                r#"jsonpath={.metadata.resourceVersion}{"\t"}{.metadata.annotations.weave\.works/kured-node-lock}"#,
            ]
        );
        assert_eq!(
            get_lock_configmap("kube-system", "fleetctl-lock"),
            [
                "-n",
                "kube-system",
                "get",
                "configmap",
                "fleetctl-lock",
                "-o",
                r#"jsonpath={.metadata.resourceVersion}{"\t"}{.metadata.uid}{"\t"}{.data}"#,
            ]
        );
    }

    #[test]
    fn an_annotation_key_is_one_jsonpath_field() {
        assert_eq!(
            jsonpath_field("weave.works/kured-node-lock"),
            r"weave\.works/kured-node-lock"
        );
        assert_eq!(jsonpath_field("a.b.c/x_y-z"), r"a\.b\.c/x_y-z");
        assert_eq!(jsonpath_field("odd[key]"), r"odd\[key\]");
    }

    #[test]
    fn removal_and_patch_forms() {
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
        let args = patch_configmap_data(
            "kube-system",
            "fleetctl-lock",
            "77",
            &[("heartbeat", "2026-11-29T19:31:12Z")],
        );
        assert_eq!(
            args,
            [
                "-n",
                "kube-system",
                "patch",
                "configmap",
                "fleetctl-lock",
                "--type=merge",
                "-p",
                r#"{"data":{"heartbeat":"2026-11-29T19:31:12Z"},"metadata":{"resourceVersion":"77"}}"#,
            ]
        );
        assert_eq!(argv_seen_by_kubectl(&kubectl(&args))[2..], args);
    }

    #[test]
    fn the_preconditioned_delete_sends_its_body_on_stdin() {
        let call = delete_configmap_if_unchanged(
            "kube-system",
            "fleetctl-lock",
            "41",
            "6f1d8f2e-0c1a-4a56-9d8e-2b7f0c3a9e11",
        );
        assert_eq!(
            call.args,
            [
                "delete",
                "--raw",
                "/api/v1/namespaces/kube-system/configmaps/fleetctl-lock",
                "-f",
                "-"
            ]
        );
        let body: serde_json::Value = serde_json::from_str(&call.stdin).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "preconditions": {
                    "uid": "6f1d8f2e-0c1a-4a56-9d8e-2b7f0c3a9e11",
                    "resourceVersion": "41",
                },
            })
        );
        let wrapped = crate::ssh::shell::sudo_wrap(&kubectl(&call.args));
        let inner = wrapped.strip_prefix("sudo -n ").unwrap();
        let (seen, stdin) = seen_by_kubectl(inner, &call.stdin);
        assert_eq!(seen[2..], call.args);
        assert_eq!(stdin, call.stdin, "the body reaches kubectl's stdin whole");
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
                r#"Error from server (Conflict): Operation cannot be fulfilled on ConfigMap "fleetctl-lock": the ResourceVersion in the precondition (41) does not match the ResourceVersion in record (42). The object might have been modified"#,
                Some(ApiError::Conflict),
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
    fn drain_is_one_kubectl_that_cordons_and_says_so() {
        assert_eq!(
            drain("w-1", "--timeout=300s"),
            "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s drain w-1 \
             --ignore-daemonsets --delete-emptydir-data --timeout=300s"
        );
        // kubectl's own lines (pkg/drain/cordon.go via `kubectl drain`).
        let out =
            "node/w-1 cordoned\nevicting pod default/web-1\npod/web-1 evicted\nnode/w-1 drained\n";
        assert!(drain_cordoned("w-1", out));
        assert!(drain_cordoned("w-1", "node/w-1 already cordoned\n"));
        assert!(!drain_cordoned("w-1", "node/w-10 cordoned\n"));
        assert!(!drain_cordoned(
            "w-1",
            "Error from server (NotFound): nodes \"w-1\" not found\n"
        ));
    }

    #[test]
    fn a_refused_uncordon_is_read_from_stderr_not_the_exit_status() {
        let refused = "error: unable to uncordon node \"w-1\": nodes \"w-1\" is forbidden: \
                       User \"system:node:w-2\" cannot patch resource \"nodes\"\n";
        assert_eq!(schedulability_refused(refused), Some(refused.trim()));
        assert_eq!(schedulability_refused("node/w-1 uncordoned\n"), None);
        assert_eq!(schedulability_refused(""), None);
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
// Before each hop: what the checks in `crate::checks` read beyond the checks
// script, and the etcd snapshot. All read-only except `etcd_snapshot_save`, which writes one file
// into etcd's data directory.

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

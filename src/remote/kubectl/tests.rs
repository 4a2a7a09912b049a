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
    let wrapped = crate::shell::sudo_wrap(&kubectl(&args));
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

/// A listing's record marker (a random one in use).
const M: &str = "@@m@@";

#[test]
fn the_jsonpath_templates_reach_kubectl_byte_for_byte_even_through_sudo() {
    for args in [
        list_daemonsets(M).args,
        list_pods(M).args,
        get_container_settings("kured", "kured", 0),
        get_lock_annotation("kured", "kured", "weave.works/kured-node-lock"),
        get_lock_configmap(LOCK_NAMESPACE, LOCK_CONFIGMAP),
    ] {
        let wrapped = crate::shell::sudo_wrap(&kubectl(&args));
        let inner = wrapped.strip_prefix("sudo -n ").unwrap();
        assert_eq!(argv_seen_by_kubectl(inner)[2..], args);
    }
}

#[test]
fn the_reads_name_only_the_fields_the_lock_uses() {
    assert_eq!(
        list_daemonsets(M).args,
        [
            "get",
            "daemonsets",
            "--all-namespaces",
            "-o",
            "jsonpath-file=/dev/stdin"
        ]
    );
    assert_eq!(
        list_daemonsets(M).template,
        concat!(
            "{range .items[*]}@@m@@daemonset@@m@@{.metadata.namespace}@@m@@{.metadata.name}",
            "@@m@@{.spec.template.spec.hostPID}{range .spec.template.spec.containers[*]}@@m@@container",
            "@@m@@{.name}@@m@@{.image}@@m@@{.command[0]}@@m@@{.securityContext.privileged}{end}{end}",
        )
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
        list_pods(M).args,
        [
            "get",
            "pods",
            "--all-namespaces",
            "-o",
            "jsonpath-file=/dev/stdin"
        ]
    );
    assert_eq!(
        list_pods(M).template,
        concat!(
            "{range .items[*]}@@m@@pod@@m@@{.metadata.namespace}@@m@@{.metadata.name}",
            "@@m@@{.spec.hostPID}@@m@@{.metadata.ownerReferences[0].kind}{range .spec.containers[*]}",
            "@@m@@container@@m@@{.name}@@m@@{.image}@@m@@{.command[0]}@@m@@{.securityContext.privileged}",
            "{end}{end}",
        )
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
    let wrapped = crate::shell::sudo_wrap(&kubectl(&call.args));
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

/// Issue 38: the record marker goes over stdin, never on kubectl's command
/// line, where any local user of the node reads it in `ps`.
#[test]
fn the_record_marker_is_never_on_the_command_line() {
    for query in [list_daemonsets(M), list_pods(M)] {
        let line = kubectl(&query.args);
        assert!(!line.contains(M), "{line}");
        assert!(query.template.contains(M));
    }
}

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

pub(super) fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// A listing's query: kubectl's arguments, and the jsonpath template it
/// reads on stdin (`-o jsonpath-file=/dev/stdin`). The template holds the
/// record marker, which must stay secret to do its job (a field that knew
/// it could forge records): on the command line, any local user of the
/// node could read it in `ps` or `/proc/PID/cmdline` while kubectl runs.
/// kubectl reads a `jsonpath-file` template with `ReadFile`
/// (kubernetes/kubernetes, staging/src/k8s.io/cli-runtime/pkg/
/// genericclioptions/jsonpath_flags.go, `JSONPathPrintFlags.ToPrinter`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingQuery {
    pub args: Vec<String>,
    /// The template, for stdin.
    pub template: String,
}

fn listing_query(kind: &str, template: String) -> ListingQuery {
    ListingQuery {
        args: words(&[
            "get",
            kind,
            "--all-namespaces",
            "-o",
            "jsonpath-file=/dev/stdin",
        ]),
        template,
    }
}

/// Every DaemonSet in every namespace, each field after `marker` (a random
/// string drawn for this listing, `crate::steps::lock::Marker`, so that no
/// field can forge a record; see [`ListingQuery`]):
///
/// ```text
/// MdaemonsetMNAMESPACEMNAMEMHOSTPID
/// McontainerMNAMEMIMAGEMPROGRAMMPRIVILEGED   (per container)
/// ```
///
/// PROGRAM is the first word of the container's `command` (empty when it
/// has none: the image's entrypoint runs); HOSTPID and PRIVILEGED are
/// `true` or empty. Enough to tell which container runs Kured and whether
/// it can reboot its node, and nothing more: no arguments and no
/// environment, which hold other programs' settings and secrets
/// (notification URLs, tokens). Kured's own are read with
/// [`get_container_settings`]. A missing field prints nothing (kubectl's
/// `--allow-missing-template-keys`, on by default); `[0]` of an absent
/// list selects nothing.
pub fn list_daemonsets(marker: &str) -> ListingQuery {
    let m = marker;
    let template = format!(
        "{{range .items[*]}}{m}daemonset{m}{{.metadata.namespace}}{m}{{.metadata.name}}\
         {m}{{.spec.template.spec.hostPID}}{{range .spec.template.spec.containers[*]}}{m}container\
         {m}{{.name}}{m}{{.image}}{m}{{.command[0]}}{m}{{.securityContext.privileged}}{{end}}{{end}}"
    );
    listing_query("daemonsets", template)
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
/// as [`list_daemonsets`] prints DaemonSets (fields after `marker`), with
/// the kind of the pod's first owner:
///
/// ```text
/// MpodMNAMESPACEMNAMEMHOSTPIDMOWNERKIND
/// McontainerMNAMEMIMAGEMPROGRAMMPRIVILEGED   (per container)
/// ```
///
/// Asked only when no DaemonSet runs Kured, to tell "no Kured" from "Kured
/// run some other way" before falling back to fleetctl's own lock; as for
/// DaemonSets, no arguments or environment.
pub fn list_pods(marker: &str) -> ListingQuery {
    let m = marker;
    let template = format!(
        "{{range .items[*]}}{m}pod{m}{{.metadata.namespace}}{m}{{.metadata.name}}\
         {m}{{.spec.hostPID}}{m}{{.metadata.ownerReferences[0].kind}}{{range .spec.containers[*]}}\
         {m}container{m}{{.name}}{m}{{.image}}{m}{{.command[0]}}{m}{{.securityContext.privileged}}\
         {{end}}{{end}}"
    );
    listing_query("pods", template)
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

/// `kubectl label node NODE k=v… --overwrite`: Kured's pre- and
/// post-reboot labels. kubectl GETs the node and PATCHes it with a JSON
/// merge patch of `metadata.labels` (`cmd/label/label.go`:
/// `jsonpatch.CreateMergePatch`, `types.MergePatchType`); the API server
/// checks the keys. `labels` are `key=value` words checked by
/// `crate::checks::parse_node_labels`, each one argument.
pub fn label_node(node: &str, labels: &[String]) -> String {
    let mut args = vec!["label".to_string(), "node".to_string(), node.to_string()];
    args.extend(labels.iter().cloned());
    args.push("--overwrite".to_string());
    kubectl(&args)
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

/// Every pod in kube-system on `node`, as JSON: the control plane's mirror
/// pods among them (`crate::node::parse_mirror_pods`).
pub fn get_static_pods(node: &str) -> String {
    kubectl(&[
        "-n".to_string(),
        "kube-system".to_string(),
        "get".to_string(),
        "pods".to_string(),
        format!("--field-selector=spec.nodeName={node}"),
        "-o".to_string(),
        "json".to_string(),
    ])
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
mod tests;

//! The pods that hold a node's reboot under Kured's
//! `--blocking-pod-selector` (`crate::steps::kured_gates`): the query
//! Kured's `KubernetesBlockingChecker.IsBlocked` makes
//! (kubereboot/kured `pkg/blockers/kubernetespod.go`). Read-only.

use super::kubectl::kubectl;

/// Kured's field selector for the pods of `node` that still run or wait.
fn on_node(node: &str) -> String {
    format!(
        "--field-selector=spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown"
    )
}

/// `kubectl get pods -A -l SELECTOR --field-selector … -o name`: one
/// `pod/NAME` line per pod that holds `node` (none: kubectl says `No
/// resources found` on stderr and exits 0). `selector` was checked by
/// `crate::checks::parse_kured_gates`, and is one argument here.
pub fn blocking_pods(selector: &str, node: &str) -> String {
    kubectl(&[
        "get".to_string(),
        "pods".to_string(),
        "-A".to_string(),
        "-l".to_string(),
        selector.to_string(),
        on_node(node),
        "-o".to_string(),
        "name".to_string(),
    ])
}

/// Every DaemonSet's containers, for `status` to find Kured's
/// (`crate::checks::find_kured`): one line per DaemonSet, `NAMESPACE NAME`
/// then per container `NAME IMAGE COMMAND ARGS ENV`, tab-separated, the
/// lists as JSON (kubectl's jsonpath prints lists as JSON since 1.19,
/// kubernetes/kubernetes#89660; JSON escapes tabs and newlines), empty when
/// unset. Read-only.
pub fn daemonset_containers() -> String {
    let template = r#"jsonpath={range .items[*]}{.metadata.namespace}{"\t"}{.metadata.name}{range .spec.template.spec.containers[*]}{"\t"}{.name}{"\t"}{.image}{"\t"}{.command}{"\t"}{.args}{"\t"}{.env}{end}{"\n"}{end}"#;
    kubectl(&["get", "daemonsets", "-A", "-o", template])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_what_kured_asks_with_the_selector_as_one_word() {
        let cmd = blocking_pods("runtime in (long,batch)", "w-2");
        assert!(
            cmd.ends_with(
                "get pods -A -l 'runtime in (long,batch)' '--field-selector=spec.nodeName=w-2,\
                 status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown' -o name"
            ),
            "{cmd}"
        );
    }
}

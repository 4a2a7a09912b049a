//! The checks script run for real against a fake root
//! (`remote::fake_root`): what it prints splits into the probes
//! (`node::parse_check_outputs`) and each probe parses with the checks'
//! own parsers.

use crate::node::parse_check_outputs;
use crate::remote::CHECKS_SCRIPT;
use crate::remote::fake_root::FakeRoot;

use super::{parse_check_expiration, parse_deprecated_apis};

const CHECK_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures");

#[test]
fn checks_script_keeps_only_the_gauge_and_reports_each_probe() {
    let fake = FakeRoot::new();
    fake.tool(
        "kubectl",
        &format!(
            r#"case "$*" in
*"get --raw /metrics"*) cat {dir}/apiserver-metrics.txt ;;
*"get pdb -A -o json"*) echo "Error from server (Forbidden): poddisruptionbudgets.policy is forbidden" >&2; exit 1 ;;
*"-n kube-system get configmap kubelet-config kubeadm-config --ignore-not-found -o json"*)
  echo '{{"kind":"List","items":[{{"kind":"ConfigMap","metadata":{{"name":"kubeadm-config"}},"data":{{"ClusterConfiguration":"kind: ClusterConfiguration"}}}}]}}' ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
            dir = CHECK_FIXTURES
        ),
    )
    .tool(
        "kubeadm",
        &format!(
            r#"[ "$*" = "certs check-expiration" ] || exit 2; cat {CHECK_FIXTURES}/kubeadm-certs-check-expiration.txt"#
        ),
    );
    let out = parse_check_outputs(&fake.run(CHECKS_SCRIPT)).unwrap();
    let metrics = out.metrics.unwrap();
    assert!(
        metrics
            .lines()
            .all(|l| l.starts_with("apiserver_requested_deprecated_apis{")
                || l.starts_with("process_start_time_seconds ")),
        "{metrics}"
    );
    let apis = parse_deprecated_apis(&metrics).unwrap();
    assert_eq!(apis.len(), 2, "{apis:?}");
    assert!(out.pdbs.unwrap_err().contains("(Forbidden)"));
    let certs = parse_check_expiration(&out.certs.unwrap()).unwrap();
    assert!(!certs.is_empty());
    assert_eq!(out.kubelet_configmap, Ok(None), "NotFound is no ConfigMap");
    assert!(
        out.kubeadm_configmap
            .unwrap()
            .is_some_and(|c| c.contains("ClusterConfiguration"))
    );
}

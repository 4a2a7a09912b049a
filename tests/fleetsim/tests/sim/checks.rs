//! What fleetctl's pre-hop checks read, on a running fleet: the API
//! server's metrics, budgets and pods, kubeadm's certificates, an etcd
//! snapshot in the static pod.

use crate::common::{run, small, start};
use fleetsim::state::{DeprecatedApi, PdbSpec, PodSpec};

const KUBECTL: &str = "kubectl --kubeconfig=/etc/kubernetes/admin.conf --request-timeout=20s";

#[test]
fn the_checks_inputs_answer_as_a_real_cluster_would() {
    let mut scenario = small(1);
    scenario.deprecated_apis = vec![DeprecatedApi {
        group: "flowcontrol.apiserver.k8s.io".into(),
        version: "v1beta3".into(),
        resource: "prioritylevelconfigurations".into(),
        subresource: String::new(),
        removed_release: "1.32".into(),
        served_by: Vec::new(),
    }];
    scenario.pods = vec![PodSpec {
        namespace: "db".into(),
        name: "postgres-0".into(),
        node: "w-1".into(),
        labels: [("app".to_string(), "postgres".to_string())].into(),
        annotations: Default::default(),
        owner: Some("StatefulSet/postgres".into()),
        phase: "Running".into(),
        image: None,
    }];
    scenario.pdbs = vec![PdbSpec {
        namespace: "db".into(),
        name: "postgres".into(),
        max_unavailable: Some(serde_json::json!(0)),
        match_labels: [("app".to_string(), "postgres".to_string())].into(),
        ..Default::default()
    }];
    scenario.cert_expiry_days = 20.0;
    let fleet = start(scenario);
    fleet.wait_ready("w-1").unwrap();
    let metrics = run(
        &fleet,
        "cp-1",
        "root",
        &format!("{KUBECTL} get --raw /metrics"),
    );
    assert!(metrics.contains(
        "apiserver_requested_deprecated_apis{group=\"flowcontrol.apiserver.k8s.io\",removed_release=\"1.32\",\
         resource=\"prioritylevelconfigurations\",subresource=\"\",version=\"v1beta3\"} 1\n"
    ));
    let pdbs: serde_json::Value = serde_json::from_str(&run(
        &fleet,
        "cp-1",
        "root",
        &format!("{KUBECTL} get pdb -A -o json"),
    ))
    .unwrap();
    assert_eq!(pdbs["items"][0]["status"]["disruptionsAllowed"], 0);
    let pods: serde_json::Value = serde_json::from_str(&run(
        &fleet,
        "cp-1",
        "root",
        &format!(
            "{KUBECTL} get pods -A --field-selector=spec.nodeName=w-1,status.phase=Running -o json"
        ),
    ))
    .unwrap();
    assert!(
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["metadata"]["name"] == "postgres-0")
    );
    let certs = run(&fleet, "cp-1", "root", "kubeadm certs check-expiration");
    assert!(
        certs
            .lines()
            .any(|l| l.starts_with("apiserver ") && l.contains("   19d ")),
        "{certs}"
    );
    let save = run(
        &fleet,
        "cp-1",
        "root",
        &format!(
            "{KUBECTL} -n kube-system exec etcd-cp-1 -- etcdctl --endpoints=https://127.0.0.1:2379 \
             --cacert=/etc/kubernetes/pki/etcd/ca.crt --cert=/etc/kubernetes/pki/etcd/server.crt \
             --key=/etc/kubernetes/pki/etcd/server.key snapshot save /var/lib/etcd/fleetctl-v1.35.db"
        ),
    );
    assert_eq!(
        save,
        "Snapshot saved at /var/lib/etcd/fleetctl-v1.35.db\nServer version 3.6.0\n"
    );
    let size = run(
        &fleet,
        "cp-1",
        "root",
        "stat -c %s /var/lib/etcd/fleetctl-v1.35.db",
    );
    assert!(size.trim().parse::<u64>().unwrap() >= 4096);
}

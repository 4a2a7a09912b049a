//! Every kube-apiserver instance of an HA control plane, and the removed-API
//! verdict over all of them (see `super::metrics` for the gauge itself and
//! why one `/metrics` read is not enough).
//!
//! Where each instance listens comes from its static pod manifest
//! `/etc/kubernetes/manifests/kube-apiserver.yaml` as the API shows it (the
//! kube-system mirror pod the kubelet creates from that file):
//! `--advertise-address` and `--secure-port`, which kubeadm writes there
//! (`cmd/kubeadm/app/phases/controlplane/manifests.go`,
//! `getAPIServerCommand`), else kubeadm's annotation
//! `kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint`
//! (`cmd/kubeadm/app/constants`). Nothing read here reaches a command line
//! unvalidated: a node name must be DNS-1123, an address an IP.
//!
//! The request carries admin.conf's client certificate, so only a real
//! instance is asked: the kube-system mirror pod of a control plane of the
//! inventory, at an address of that node. A mirror pod is what the kubelet
//! creates for a static pod: annotation `kubernetes.io/config.mirror` and a
//! controller ownerReference to its own Node (`CreateMirrorPod` in
//! kubernetes' pkg/kubelet/pod/mirror_client.go; the NodeRestriction
//! admission plugin lets a kubelet create mirror pods for itself only,
//! KEP-1314). Anyone who can create a pod can label it
//! `component=kube-apiserver` and name any address; such a pod, or one
//! naming an address that is not its node's (the inventory's, or the
//! Node's `InternalIP`), is refused with a line that says so, and its
//! address is never asked.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use anyhow::{Context as _, Result};
use serde_json::Value;

use super::metrics::{DeprecatedApi, judge};
use super::verdicts::{Check, CheckName, Verdict};
use crate::version::Minor;

/// One kube-apiserver instance: the control plane it runs on and where it
/// listens (its advertise address and secure port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServerInstance {
    pub node: String,
    pub endpoint: SocketAddr,
}

/// What one instance's `/metrics` said, or why it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceMetrics {
    /// `cp-2 (10.0.0.2:6443)`, or `the API server admin.conf reaches`.
    pub instance: String,
    /// The node, for "requested at" (empty when not known).
    pub node: String,
    pub apis: Result<Vec<DeprecatedApi>, String>,
}

/// A control plane of the inventory and the addresses its kube-apiserver
/// may be asked at: the inventory's address (when it is an IP) and the
/// Node's `InternalIP`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlane {
    pub name: String,
    pub addresses: Vec<IpAddr>,
}

/// The `InternalIP`s of each Node in `kubectl get nodes -o json`.
pub fn parse_internal_ips(json: &str) -> Result<BTreeMap<String, Vec<IpAddr>>> {
    let doc: Value = serde_json::from_str(json).context("the node list is not JSON")?;
    let items = doc
        .get("items")
        .and_then(Value::as_array)
        .context("the node list has no items")?;
    let mut ips = BTreeMap::new();
    for node in items {
        let Some(name) = node["metadata"]["name"].as_str() else {
            continue;
        };
        let addresses = node["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["type"] == "InternalIP")
            .filter_map(|a| a["address"].as_str()?.parse().ok())
            .collect();
        ips.insert(name.to_string(), addresses);
    }
    Ok(ips)
}

/// The kube-apiserver instances in `kubectl -n kube-system get pods -o
/// json`: the mirror pods labelled `component=kube-apiserver` of
/// `control_planes`, each with its node and endpoint, an address of that
/// node (see the module doc). A pod that is not such a mirror pod, or whose
/// node or address is unusable, is a problem naming it (second list),
/// never an argument on a command line.
pub fn parse_apiserver_instances(
    json: &str,
    control_planes: &[ControlPlane],
) -> Result<(Vec<ApiServerInstance>, Vec<String>)> {
    let doc: Value = serde_json::from_str(json).context("the pod list is not JSON")?;
    let items = doc
        .get("items")
        .and_then(Value::as_array)
        .context("the pod list has no items")?;
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for pod in items {
        let meta = &pod["metadata"];
        if meta["labels"]["component"] != "kube-apiserver" {
            continue;
        }
        let name = format!(
            "{}/{}",
            meta["namespace"].as_str().unwrap_or("?"),
            meta["name"].as_str().unwrap_or("?")
        )
        .escape_debug()
        .to_string();
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !is_node_name(node) {
            problems.push(format!(
                "kube-apiserver pod {name}: no valid node name ({:?})",
                node.escape_debug().to_string()
            ));
            continue;
        }
        let Some(control_plane) = control_planes.iter().find(|c| c.name == node) else {
            problems.push(format!(
                "pod {name}: labelled component=kube-apiserver on {node}, which is not a control plane \
                 of the inventory: not asked for /metrics"
            ));
            continue;
        };
        if !is_mirror_pod_of(pod, node) {
            problems.push(format!(
                "pod {name}: labelled component=kube-apiserver, but not the kube-system mirror pod of \
                 {node}'s static pod (annotation kubernetes.io/config.mirror, owned by Node {node}): \
                 not asked for /metrics"
            ));
            continue;
        }
        match endpoint(pod) {
            Some(endpoint) if control_plane.addresses.contains(&endpoint.ip()) => {
                found.push(ApiServerInstance {
                    node: node.to_string(),
                    endpoint,
                })
            }
            Some(endpoint) => problems.push(format!(
                "{node}: its kube-apiserver pod {name} names {endpoint}, not an address of {node} (the \
                 inventory's or the Node's InternalIP): not asked for /metrics"
            )),
            None => problems.push(format!(
                "{node}: its kube-apiserver pod names no usable --advertise-address, so it cannot be \
                 asked at its own address"
            )),
        }
    }
    found.sort_by(|a, b| a.node.cmp(&b.node));
    found.dedup_by(|a, b| a.node == b.node);
    Ok((found, problems))
}

/// What the kubelet makes of a static pod: in kube-system here, with the
/// mirror annotation and a controller ownerReference to its own Node.
fn is_mirror_pod_of(pod: &Value, node: &str) -> bool {
    let meta = &pod["metadata"];
    meta["namespace"] == "kube-system"
        && meta["annotations"]["kubernetes.io/config.mirror"].is_string()
        && meta["ownerReferences"].as_array().is_some_and(|owners| {
            owners
                .iter()
                .any(|o| o["kind"] == "Node" && o["name"] == node && o["controller"] == true)
        })
}

/// DNS-1123 subdomain, as Kubernetes requires of node names.
fn is_node_name(s: &str) -> bool {
    crate::remote::is_dns_subdomain(s)
}

/// `--advertise-address` and `--secure-port` (default 6443) of the pod's
/// kube-apiserver container, else kubeadm's endpoint annotation.
fn endpoint(pod: &Value) -> Option<SocketAddr> {
    let containers = pod["spec"]["containers"].as_array()?;
    let args: Vec<&str> = containers
        .iter()
        .find(|c| c["name"] == "kube-apiserver")
        .or_else(|| containers.first())
        .into_iter()
        .flat_map(|c| {
            ["command", "args"]
                .into_iter()
                .filter_map(|k| c[k].as_array())
                .flatten()
        })
        .filter_map(Value::as_str)
        .collect();
    let flag = |name: &str| {
        args.iter()
            .rev()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
    };
    let from_flags = flag("advertise-address")
        .and_then(|a| a.parse::<IpAddr>().ok())
        .and_then(|ip| {
            let port = match flag("secure-port") {
                Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
                None => 6443,
            };
            Some(SocketAddr::new(ip, port))
        });
    from_flags.or_else(|| {
        pod["metadata"]["annotations"]["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"]
            .as_str()?
            .parse()
            .ok()
    })
}

/// The removed-API verdict over every instance read: their requests
/// merged, each API with the control planes that served it; an instance
/// that could not be read turns a pass into a warning that names it, and
/// is listed under a block or warning too.
pub fn check_removed_apis_across(
    instances: &[InstanceMetrics],
    hop: Minor,
    target: Minor,
) -> Check {
    let mut served: BTreeMap<DeprecatedApi, Vec<String>> = BTreeMap::new();
    let mut unread = Vec::new();
    for i in instances {
        match &i.apis {
            Ok(apis) => {
                for a in apis {
                    let at = served.entry(a.clone()).or_default();
                    if !i.node.is_empty() && !at.contains(&i.node) {
                        at.push(i.node.clone());
                    }
                }
            }
            Err(e) => unread.push(format!(
                "{}: its kube-apiserver's /metrics could not be read, so the deprecated requests it \
                 served are unknown: {e}",
                i.instance
            )),
        }
    }
    let read = instances.len() - unread.len();
    if read == 0 {
        return Check {
            name: CheckName::RemovedApis,
            verdict: Verdict::Warn,
            summary: "could not read any kube-apiserver's deprecated-API metric, so this is unchecked"
                .to_string(),
            details: unread,
            remedy: Some(
                "make each control plane's kube-apiserver reachable at its advertise address from the \
                 first control plane and plan again, or go on knowing `removed-apis` was not checked"
                    .to_string(),
            ),
        };
    }
    let requested: Vec<DeprecatedApi> = served.keys().cloned().collect();
    let mut check = judge(&requested, hop, target, &served);
    if unread.is_empty() {
        return check;
    }
    if check.verdict == Verdict::Pass {
        check.verdict = Verdict::Warn;
        check.summary = format!(
            "{}; but {} of {} kube-apiserver instance(s) could not be read",
            check.summary,
            unread.len(),
            instances.len()
        );
        check.remedy = Some(
            "make that kube-apiserver reachable at its advertise address from the first control \
             plane and plan again: a client it served may call an API this hop removes"
                .to_string(),
        );
    }
    check.details.extend(unread);
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> Minor {
        s.parse().unwrap()
    }

    fn api(group: &str, version: &str, resource: &str, removed: &str) -> DeprecatedApi {
        DeprecatedApi {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            subresource: String::new(),
            removed_release: removed.into(),
        }
    }

    fn mirror_pod(node: &str, command: &[&str], endpoint: Option<&str>) -> serde_json::Value {
        let mut annotations = serde_json::json!({"kubernetes.io/config.mirror": "x"});
        if let Some(e) = endpoint {
            annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"] =
                e.into();
        }
        serde_json::json!({
            "metadata": {"name": format!("kube-apiserver-{node}"), "namespace": "kube-system",
                         "labels": {"component": "kube-apiserver", "tier": "control-plane"},
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                              "uid": "u", "controller": true}]},
            "spec": {"nodeName": node, "containers": [{"name": "kube-apiserver", "command": command}]}
        })
    }

    fn cp(name: &str, addresses: &[&str]) -> ControlPlane {
        ControlPlane {
            name: name.into(),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    fn control_planes() -> Vec<ControlPlane> {
        vec![
            cp("cp-1", &["10.0.0.1"]),
            cp("cp-2", &["10.0.0.2"]),
            cp("cp-3", &["fd00::3"]),
            cp("cp-4", &["10.0.0.4"]),
            cp("cp-5", &["10.0.0.5"]),
        ]
    }

    #[test]
    fn only_mirror_pods_of_the_control_planes_at_their_own_address_are_asked() {
        let mut user = mirror_pod(
            "cp-1",
            &["kube-apiserver", "--advertise-address=10.9.9.9"],
            None,
        );
        user["metadata"]["namespace"] = "team-a".into();
        let mut bare = mirror_pod(
            "cp-2",
            &["kube-apiserver", "--advertise-address=10.0.0.2"],
            None,
        );
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        bare["metadata"]["name"] = "decoy".into();
        let mut unannotated = mirror_pod("cp-2", &["kube-apiserver"], Some("10.0.0.2:6443"));
        unannotated["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("kubernetes.io/config.mirror");
        let list = serde_json::json!({"kind": "PodList", "items": [
            user,
            bare,
            unannotated,
            // A worker's kubelet can create a mirror pod for itself.
            mirror_pod("w-1", &["kube-apiserver", "--advertise-address=10.0.1.1"], None),
            // A control plane's mirror pod naming another host.
            mirror_pod("cp-3", &["kube-apiserver", "--advertise-address=10.9.9.9"], None),
            mirror_pod("cp-1", &["kube-apiserver", "--advertise-address=10.0.0.1"], None),
        ]});
        let (found, problems) =
            parse_apiserver_instances(&list.to_string(), &control_planes()).unwrap();
        assert_eq!(
            found,
            [ApiServerInstance {
                node: "cp-1".into(),
                endpoint: "10.0.0.1:6443".parse().unwrap()
            }]
        );
        assert_eq!(problems.len(), 5, "{problems:#?}");
        for (problem, start) in problems.iter().zip([
            "pod team-a/kube-apiserver-cp-1: labelled component=kube-apiserver, but not the kube-system mirror pod",
            "pod kube-system/decoy: labelled component=kube-apiserver, but not the kube-system mirror pod of cp-2's",
            "pod kube-system/kube-apiserver-cp-2: labelled component=kube-apiserver, but not the kube-system mirror pod",
            "pod kube-system/kube-apiserver-w-1: labelled component=kube-apiserver on w-1, which is not a control plane",
            "cp-3: its kube-apiserver pod kube-system/kube-apiserver-cp-3 names 10.9.9.9:6443, not an address of cp-3",
        ]) {
            assert!(problem.starts_with(start), "{problem}");
            assert!(problem.ends_with("not asked for /metrics"), "{problem}");
        }
        let nodes = serde_json::json!({"items": [
            {"metadata": {"name": "cp-1"}, "status": {"addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": "cp-1"},
                {"type": "InternalIP", "address": "fd00::1"}]}},
            {"metadata": {"name": "cp-2"}, "status": {}},
        ]});
        let ips = parse_internal_ips(&nodes.to_string()).unwrap();
        assert_eq!(
            ips["cp-1"],
            [
                "10.0.0.1".parse::<IpAddr>().unwrap(),
                "fd00::1".parse().unwrap()
            ]
        );
        assert!(ips["cp-2"].is_empty());
    }

    #[test]
    fn instances_come_from_the_mirror_pods_advertise_address() {
        let list = serde_json::json!({"kind": "PodList", "items": [
            mirror_pod("cp-2", &["kube-apiserver", "--advertise-address=10.0.0.2", "--secure-port=6443"], None),
            mirror_pod("cp-1", &["kube-apiserver", "--advertise-address=10.0.0.1"], Some("10.0.0.1:6443")),
            // No flag: kubeadm's annotation (IPv6, bracketed as JoinHostPort writes it).
            mirror_pod("cp-3", &["kube-apiserver"], Some("[fd00::3]:8443")),
            // Something that would become an argument: refused, named.
            mirror_pod("cp-4", &["kube-apiserver", "--advertise-address=10.0.0.4;reboot"], None),
            mirror_pod("Bad;Name", &["kube-apiserver", "--advertise-address=10.0.0.5"], None),
            {"metadata": {"name": "etcd-cp-1", "labels": {"component": "etcd"}}, "spec": {"nodeName": "cp-1"}},
        ]});
        let (found, problems) =
            parse_apiserver_instances(&list.to_string(), &control_planes()).unwrap();
        let shown: Vec<String> = found
            .iter()
            .map(|i| format!("{} {}", i.node, i.endpoint))
            .collect();
        assert_eq!(
            shown,
            [
                "cp-1 10.0.0.1:6443",
                "cp-2 10.0.0.2:6443",
                "cp-3 [fd00::3]:8443"
            ]
        );
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0]
                .starts_with("cp-4: its kube-apiserver pod names no usable --advertise-address")
        );
        assert!(problems[1].contains("no valid node name"), "{problems:?}");
        assert!(parse_apiserver_instances("<html>", &control_planes()).is_err());
    }

    fn instance(node: &str, apis: Result<Vec<DeprecatedApi>, &str>) -> InstanceMetrics {
        InstanceMetrics {
            instance: format!("{node} (10.0.0.9:6443)"),
            node: node.into(),
            apis: apis.map_err(String::from),
        }
    }

    #[test]
    fn an_api_only_the_second_instance_served_blocks_and_names_it() {
        let served = api("batch", "v1beta1", "cronjobs", "1.35");
        let check = check_removed_apis_across(
            &[
                instance("cp-1", Ok(vec![])),
                instance("cp-2", Ok(vec![served.clone()])),
                instance("cp-3", Ok(vec![])),
            ],
            m("v1.35"),
            m("v1.35"),
        );
        assert_eq!(check.verdict, Verdict::Block);
        assert_eq!(
            check.details,
            ["batch/v1beta1 cronjobs (removed in v1.35), requested at cp-2"]
        );
    }

    #[test]
    fn an_unreadable_instance_is_a_warning_naming_it_never_a_pass() {
        let check = check_removed_apis_across(
            &[
                instance("cp-1", Ok(vec![])),
                instance("cp-2", Err("connection refused")),
            ],
            m("v1.35"),
            m("v1.35"),
        );
        assert_eq!(check.verdict, Verdict::Warn);
        assert!(
            check
                .summary
                .contains("1 of 2 kube-apiserver instance(s) could not be read"),
            "{}",
            check.summary
        );
        assert_eq!(
            check.details,
            [
                "cp-2 (10.0.0.9:6443): its kube-apiserver's /metrics could not be read, so the deprecated \
              requests it served are unknown: connection refused"
            ]
        );
        // A block stays a block, with the unread instance listed under it.
        let block = check_removed_apis_across(
            &[
                instance(
                    "cp-1",
                    Ok(vec![api("batch", "v1beta1", "cronjobs", "1.35")]),
                ),
                instance("cp-2", Err("connection refused")),
            ],
            m("v1.35"),
            m("v1.35"),
        );
        assert_eq!(block.verdict, Verdict::Block);
        assert_eq!(block.details.len(), 2);
        // None readable: unchecked, a warning.
        let none = check_removed_apis_across(&[instance("cp-1", Err("x"))], m("v1.35"), m("v1.35"));
        assert_eq!(none.verdict, Verdict::Warn);
        assert!(none.summary.contains("unchecked"));
    }

    #[test]
    fn the_per_instance_script_quotes_nothing_it_cannot_and_parses_back() {
        let a: SocketAddr = "10.0.0.2:6443".parse().unwrap();
        let b: SocketAddr = "[fd00::3]:6443".parse().unwrap();
        let script = crate::remote::instance_metrics_script(&[
            ("cp-2".into(), a),
            ("cp-3".into(), b),
            ("bad'name".into(), a),
        ]);
        assert!(!script.contains('\''), "sudo sh -c '…' would break");
        assert!(script.contains("probe \"metrics cp-2\" fleetctl_metrics_at \"10.0.0.2:6443\"\n"));
        assert!(script.contains("probe \"metrics cp-3\" fleetctl_metrics_at \"[fd00::3]:6443\"\n"));
        assert!(!script.contains("bad"), "an unvalidated name is left out");
        let sh = std::process::Command::new("sh")
            .args(["-n", "-c", &script])
            .output()
            .unwrap();
        assert!(
            sh.status.success(),
            "{}",
            String::from_utf8_lossy(&sh.stderr)
        );
        let output = "@@fleetctl:metrics 1@@\n\
            @@fleetctl:begin metrics cp-2@@\nprocess_start_time_seconds 1.7e+09\n\n@@fleetctl:stderr@@\n@@fleetctl:end 0@@\n\
            @@fleetctl:begin metrics cp-3@@\n\n@@fleetctl:stderr@@\nThe connection to the server [fd00::3]:6443 was refused - did you specify the right host or port?\n@@fleetctl:end 1@@\n\
            @@fleetctl:done@@\n";
        let read = crate::node::parse_instance_metrics(
            output,
            &["cp-2".into(), "cp-3".into(), "cp-4".into()],
        )
        .unwrap();
        assert_eq!(
            read[0].1.as_deref(),
            Ok("process_start_time_seconds 1.7e+09\n")
        );
        let e = read[1].1.as_ref().unwrap_err();
        assert!(
            e.contains("exit status 1: The connection to the server [fd00::3]:6443 was refused"),
            "{e}"
        );
        assert!(
            read[2]
                .1
                .as_ref()
                .unwrap_err()
                .contains("no section for cp-4")
        );
    }
}

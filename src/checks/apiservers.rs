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

/// The items of a `kubectl get <what>s -o json` list.
fn list_items(json: &str, what: &str) -> Result<Vec<Value>> {
    let mut doc: Value =
        serde_json::from_str(json).with_context(|| format!("the {what} list is not JSON"))?;
    match doc.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => Ok(items),
        _ => anyhow::bail!("the {what} list has no items"),
    }
}

/// The `InternalIP`s of each control plane in `kubectl get nodes -o json`:
/// the Nodes labelled `node-role.kubernetes.io/control-plane` (any value,
/// as `kubectl get nodes -l node-role.kubernetes.io/control-plane` lists
/// them). The list may hold every node (the cluster facts' read,
/// `crate::remote::CHECKS_AFTER_CLUSTER_SCRIPT`); a worker's addresses
/// never count. A kubelet cannot set that label on its own Node: the
/// NodeRestriction admission plugin lets a node set only the
/// `kubernetes.io` labels `k8s.io/kubelet/pkg/apis` `IsKubeletLabel`
/// lists (KEP "Bounding Self-Labeling Kubelets",
/// plugin/pkg/admission/noderestriction), so it is the cluster's word.
pub fn parse_internal_ips(json: &str) -> Result<BTreeMap<String, Vec<IpAddr>>> {
    let mut ips = BTreeMap::new();
    for node in &list_items(json, "node")? {
        let Some(name) = node["metadata"]["name"].as_str() else {
            continue;
        };
        if node["metadata"]["labels"]
            .get("node-role.kubernetes.io/control-plane")
            .is_none()
        {
            continue;
        }
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
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for pod in &list_items(json, "pod")? {
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
mod tests;

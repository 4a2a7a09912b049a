//! What the checks before a hop read from the fleet (`crate::plan::Inputs`):
//! the checks script on the first control plane, the pods of the budgets
//! that allow no disruption, each kube-apiserver's deprecated-API gauge,
//! and from the nodes' facts their kubelet flag files and architectures.

use crate::checks::{self, HubImage, NodeKubeletFiles};
use crate::node::{self, NodeFacts};
use crate::plan;
use crate::remote;
use crate::ssh::Session;

/// What the checks before a hop read (`crate::plan::Inputs`): from the
/// first control plane, the checks script, then, only when some budget
/// allows no disruption, the running pods of those budgets' namespaces;
/// from the nodes' facts, their kubelet flag files and architectures.
/// `control_planes`: the inventory's, with their addresses, the only
/// kube-apiservers asked for `/metrics` (`crate::checks::apiservers`).
/// `cluster_output`: what the cluster script printed moments before on the
/// same fleet (planning), whose reads of the nodes, kube-system's
/// kube-apiserver pods and ConfigMaps are not asked again.
/// Never fails: a source that could not be read carries why, and its check
/// says so.
pub async fn check_inputs<'a>(
    session: Option<&Session>,
    cluster_output: Option<&str>,
    facts: impl IntoIterator<Item = (&'a str, &'a NodeFacts)>,
    hub_images: Option<Vec<HubImage>>,
    control_planes: &[crate::inventory::Node],
) -> plan::Inputs {
    let mut kubelet_files = Vec::new();
    let mut arches = Vec::new();
    let mut cgroups = Vec::new();
    for (node, f) in facts {
        cgroups.push(checks::NodeCgroup {
            node: node.to_string(),
            v2: f.cgroup.v2,
            kubelet_config: f.cgroup.kubelet_config.clone(),
            instance_config: f.cgroup.instance_config.clone(),
        });
        kubelet_files.push(NodeKubeletFiles {
            node: node.to_string(),
            files: f.kubelet_files.clone(),
            ..Default::default()
        });
        if let Some(arch) = &f.arch {
            arches.push((node.to_string(), arch.clone()));
        }
    }
    let mut inputs = plan::Inputs {
        deprecated_apis: Err("no control-plane node answered".into()),
        budgets: Err("no control-plane node answered".into()),
        pods: Ok(Vec::new()),
        certificates: Err("no control-plane node answered".into()),
        kubelet_files,
        hub_images,
        arches,
        cgroups,
        cluster_configs: Default::default(),
    };
    let Some(s) = session else {
        return inputs;
    };
    let script = match cluster_output {
        Some(_) => remote::CHECKS_AFTER_CLUSTER_SCRIPT,
        None => remote::CHECKS_SCRIPT,
    };
    let outputs = match s.exec_root(script, None).await {
        Ok(out) => match cluster_output {
            Some(cluster) => node::parse_check_outputs_after_cluster(&out.stdout, cluster),
            None => node::parse_check_outputs(&out.stdout),
        }
        .map_err(|e| format!("{e:#}")),
        Err(e) => Err(format!("{e:#}")),
    };
    let outputs = match outputs {
        Ok(o) => o,
        Err(e) => {
            let e = format!("{}: {e}", s.node());
            inputs.deprecated_apis = Err(e.clone());
            inputs.budgets = Err(e.clone());
            inputs.cluster_configs = checks::ClusterConfigs {
                kubelet: Err(e.clone()),
                cluster: Err(e.clone()),
            };
            inputs.certificates = Err(e);
            return inputs;
        }
    };
    inputs.cluster_configs = checks::ClusterConfigs {
        kubelet: parsed_found(
            s,
            outputs.kubelet_configmap,
            checks::parse_kubelet_configmap,
        ),
        cluster: parsed_found(
            s,
            outputs.kubeadm_configmap,
            checks::parse_kubeadm_configmap,
        ),
    };
    let control_planes = control_plane_addresses(control_planes, &outputs.control_plane_nodes);
    inputs.deprecated_apis =
        Ok(deprecated_apis(s, outputs.metrics, outputs.apiservers, &control_planes).await);
    inputs.certificates = parsed(s, outputs.certs, checks::parse_check_expiration);
    inputs.budgets = parsed(s, outputs.pdbs, checks::parse_pdbs);
    if let Ok(budgets) = &inputs.budgets {
        let mut namespaces: Vec<&str> = budgets
            .iter()
            .filter(|b| b.disruptions_allowed <= 0)
            .map(|b| b.namespace.as_str())
            .collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        let mut pods = Vec::new();
        for ns in namespaces {
            let read = match s
                .exec_root(&remote::before_hop::get_running_pods_in(ns), None)
                .await
            {
                Ok(out) if out.success() => Ok(out.stdout),
                Ok(out) => Err(format!(
                    "`kubectl get pods -n {ns}` failed: {}",
                    out.stderr.trim()
                )),
                Err(e) => Err(format!("{e:#}")),
            };
            match parsed(s, read, checks::parse_pods) {
                Ok(p) => pods.extend(p),
                Err(e) => {
                    inputs.pods = Err(e);
                    break;
                }
            }
        }
        if inputs.pods.is_ok() {
            inputs.pods = Ok(pods);
        }
    }
    inputs
}

/// The deprecated-API gauge of every kube-apiserver instance, each read at
/// its advertise address through `s` (the first control plane; see
/// `crate::checks::metrics`). When the instances cannot be listed, the one
/// admin.conf reaches stands in, with a warning entry saying the others
/// were not read.
async fn deprecated_apis(
    s: &Session,
    via_admin_conf: Result<String, String>,
    pods: Result<String, String>,
    control_planes: &[checks::ControlPlane],
) -> Vec<checks::InstanceMetrics> {
    let admin_conf = |problem: String| {
        vec![
            checks::InstanceMetrics {
                instance: format!("the API server {}'s admin.conf reaches", s.node()),
                node: String::new(),
                apis: parsed(s, via_admin_conf.clone(), checks::parse_deprecated_apis),
            },
            checks::InstanceMetrics {
                instance: "the other kube-apiserver instances".to_string(),
                node: String::new(),
                apis: Err(problem),
            },
        ]
    };
    let listed = pods.and_then(|json| {
        checks::parse_apiserver_instances(&json, control_planes).map_err(|e| format!("{e:#}"))
    });
    let (instances, problems) = match listed {
        Ok((found, problems)) if !found.is_empty() => (found, problems),
        Ok(_) => {
            return admin_conf(format!(
                "{}: no kube-apiserver pod found in kube-system",
                s.node()
            ));
        }
        Err(e) => {
            return admin_conf(format!(
                "{}: the kube-apiserver pods could not be listed: {e}",
                s.node()
            ));
        }
    };
    let targets: Vec<(String, std::net::SocketAddr)> = instances
        .iter()
        .map(|i| (i.node.clone(), i.endpoint))
        .collect();
    let nodes: Vec<String> = targets.iter().map(|(n, _)| n.clone()).collect();
    let reads = match s
        .exec_root(&remote::instance_metrics_script(&targets), None)
        .await
    {
        Ok(out) => node::parse_instance_metrics(&out.stdout, &nodes).unwrap_or_else(|e| {
            nodes
                .iter()
                .map(|n| (n.clone(), Err(format!("{e:#}"))))
                .collect()
        }),
        Err(e) => nodes
            .iter()
            .map(|n| (n.clone(), Err(format!("{e:#}"))))
            .collect(),
    };
    let mut out: Vec<checks::InstanceMetrics> = instances
        .iter()
        .zip(reads)
        .map(|(i, (_, read))| checks::InstanceMetrics {
            instance: format!("{} ({})", i.node, i.endpoint),
            node: i.node.clone(),
            apis: read.and_then(|text| {
                checks::parse_deprecated_apis(&text).map_err(|e| format!("{e:#}"))
            }),
        })
        .collect();
    out.extend(problems.into_iter().map(|p| checks::InstanceMetrics {
        instance: p.split(':').next().unwrap_or_default().to_string(),
        node: String::new(),
        apis: Err(p),
    }));
    out
}

/// A ConfigMap's probe parsed: `Ok(None)` when the API server says it does
/// not exist; otherwise as [`parsed`].
fn parsed_found<T>(
    s: &Session,
    output: Result<Option<String>, String>,
    parse: impl Fn(&str) -> anyhow::Result<T>,
) -> Result<Option<T>, String> {
    match output {
        Ok(None) => Ok(None),
        Ok(Some(text)) => parsed(s, Ok(text), parse).map(Some),
        Err(e) => Err(format!("{}: {e}", s.node())),
    }
}

/// Each control plane of the inventory with the addresses its kube-apiserver
/// may be asked at: the inventory's (when it is an IP) and its Node's
/// InternalIPs (when the node list could be read).
fn control_plane_addresses(
    nodes: &[crate::inventory::Node],
    listed: &Result<String, String>,
) -> Vec<checks::ControlPlane> {
    let internal = listed
        .as_ref()
        .ok()
        .and_then(|json| checks::parse_internal_ips(json).ok())
        .unwrap_or_default();
    nodes
        .iter()
        .filter(|n| n.role == crate::inventory::Role::ControlPlane)
        .map(|n| {
            let mut addresses: Vec<std::net::IpAddr> = n.address.parse().ok().into_iter().collect();
            addresses.extend(internal.get(&n.name).into_iter().flatten().copied());
            checks::ControlPlane {
                name: n.name.clone(),
                addresses,
            }
        })
        .collect()
}

/// A probe's output parsed, or why not, naming the node it came from.
fn parsed<T>(
    s: &Session,
    output: Result<String, String>,
    parse: impl Fn(&str) -> anyhow::Result<T>,
) -> Result<T, String> {
    output
        .and_then(|text| parse(&text).map_err(|e| format!("{e:#}")))
        .map_err(|e| format!("{}: {e}", s.node()))
}

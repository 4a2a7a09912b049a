//! The planner's refusals and warnings: everything it checks about the fleet
//! and the target before and after computing the steps. Kept apart from the
//! step ordering so each rule reads on its own.

use std::collections::BTreeMap;

use crate::inventory::Role;
use crate::node::{Extension, Pin};
use crate::version::{Minor, TargetVersion};

use super::level::Level;
use super::model::{Action, Component, Hop, Refusal, StrayConfig, Warning};
use super::state::{FleetNode, FleetState};
use super::sysupdate::render_config;
use super::workers::KUBELET_MAX_BEHIND;
use crate::hub::HubVersions;

/// More minors than this in one plan is a typo in the target (`v1.370`), not
/// an upgrade anyone means to run unattended.
pub(super) const MAX_HOPS: u64 = 12;

/// The cluster's version: kubeadm-config's `kubernetesVersion`, or, when
/// that is missing, the first control-plane node's kubelet (with a warning).
pub(super) fn cluster_level(
    state: &FleetState,
    first: &FleetNode,
    warnings: &mut Vec<Warning>,
) -> Result<Level, Refusal> {
    if let Some(v) = &state.cluster.version {
        return Ok(Level::exact(v));
    }
    let Some(v) = &first.facts.kubernetes.running else {
        return Err(Refusal::UnknownClusterVersion {
            node: first.name.clone(),
        });
    };
    warnings.push(Warning::ClusterVersionUnknown {
        node: first.name.clone(),
        assumed: v.clone(),
    });
    Ok(Level::exact(v))
}

/// Minors from `from` to `to` (negative when `to` is older); a different
/// major counts as far away in that direction.
pub(super) fn gap(from: Minor, to: Minor) -> i64 {
    const FAR: i64 = i64::MAX / 2;
    if from.major == to.major {
        let d = i128::from(to.minor) - i128::from(from.minor);
        i64::try_from(d).map_or(if d > 0 { FAR } else { -FAR }, |d| d.clamp(-FAR, FAR))
    } else if to.major > from.major {
        FAR
    } else {
        -FAR
    }
}

/// No downgrade, no change of major.
pub(super) fn direction(
    cluster: &Level,
    target: &TargetVersion,
    hub: &HubVersions,
) -> Result<(), Refusal> {
    let to = target.minor();
    if to.major != cluster.minor.major {
        return Err(Refusal::MajorChange {
            from: cluster.minor,
            to,
        });
    }
    let cluster_text = cluster
        .version
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| cluster.minor.to_string());
    // An exact target is a floor, not a pin: the minor's pinned config
    // stages the hub's newest patch in its place (`wants` warns). A cluster
    // past the asked patch but not past that newest one is where this very
    // plan leads (a rerun after `upgrade apply` of the newest, or a finished
    // run): nothing moves down, so it is planned like the minor. A cluster
    // past every patch the hub has of the minor is a real downgrade this
    // plan never staged. Without the hub's list nothing can be staged
    // below the cluster either (a node's patch only moves up), so a rerun
    // with the hub unreadable resumes. docs/upgrade-path.md, "The target".
    let older_exact = match (target, &cluster.version) {
        (TargetVersion::Exact(v), Some(c)) if v < c => {
            hub.is_resolved() && hub.newest(v.minor()).is_none_or(|newest| newest < c)
        }
        _ => false,
    };
    if to < cluster.minor || older_exact {
        return Err(Refusal::Downgrade {
            cluster: cluster_text,
            target: target.clone(),
        });
    }
    if gap(cluster.minor, to) > MAX_HOPS as i64 {
        return Err(Refusal::TooFar {
            from: cluster.minor,
            to,
            max: MAX_HOPS,
        });
    }
    Ok(())
}

/// The hub URL must render into a pinned config before anything else is decided.
pub(super) fn hub_url(hub: &str) -> Result<(), Refusal> {
    render_config(Component::Kubernetes, Minor::new(1, 0), hub)
        .map(|_| ())
        .map_err(|e| Refusal::InvalidHub {
            hub: hub.to_string(),
            reason: format!("{e:#}"),
        })
}

/// The patch each minor from the cluster's to the target will stage.
/// Every minor past the cluster's must be on the hub (when the hub was
/// readable); an exact target must be one of its patches.
pub(super) fn wants(
    cluster: &Level,
    target: &TargetVersion,
    hub: &HubVersions,
    warnings: &mut Vec<Warning>,
) -> Result<BTreeMap<Minor, Level>, Refusal> {
    if let HubVersions::Unresolved(reason) = hub {
        warnings.push(Warning::HubUnresolved {
            reason: reason.clone(),
        });
    }
    let mut wants = BTreeMap::new();
    let mut minor = cluster.minor;
    // `direction` bounds the distance; the bound here keeps this loop finite
    // whatever a caller skipped.
    for _ in 0..=MAX_HOPS {
        let version = hub.newest(minor).cloned();
        if hub.is_resolved() && version.is_none() && minor > cluster.minor {
            return Err(Refusal::Unpublished {
                minor,
                published: hub.minors(),
            });
        }
        wants.insert(minor, Level { minor, version });
        if minor >= target.minor() {
            break;
        }
        minor = minor.next();
    }
    if let (TargetVersion::Exact(requested), true) = (target, hub.is_resolved()) {
        if !hub.contains(requested) {
            return Err(Refusal::NotOnHub {
                requested: requested.clone(),
                available: hub.patches(requested.minor()),
            });
        }
        if let Some(newest) = hub.newest(requested.minor())
            && newest > requested
        {
            warnings.push(Warning::ExactOlderThanHub {
                requested: requested.clone(),
                staged: newest.clone(),
            });
        }
    }
    Ok(wants)
}

/// Refuses a fleet whose kubelets are already outside what the path can
/// handle. The path itself never breaks the skew policy (everyone moves one
/// minor per hop, the API server first), so only the starting state can.
pub(super) fn skew(
    state: &FleetState,
    first: &FleetNode,
    cluster: &Level,
    target: Minor,
) -> Result<(), Refusal> {
    let c = cluster.minor;
    for node in &state.nodes {
        let Some(kubelet) = &node.facts.kubernetes.running else {
            continue;
        };
        let ahead = gap(c, kubelet.minor());
        let is_first = node.name == first.name;
        // An upgrade interrupted between the first control-plane node's
        // reboot and its `upgrade apply` leaves it exactly one minor ahead.
        if is_first && (ahead > 1 || (ahead == 1 && target == c)) {
            let limit = if ahead > 1 {
                format!("{} (one minor past the cluster's {c})", c.next())
            } else {
                format!("the target {target}")
            };
            return Err(Refusal::KubeletAhead {
                node: node.name.clone(),
                kubelet: kubelet.clone(),
                limit,
            });
        }
        if !is_first && ahead > 0 {
            return Err(Refusal::KubeletAhead {
                node: node.name.clone(),
                kubelet: kubelet.clone(),
                limit: format!("the API server ({c})"),
            });
        }
        if -ahead > KUBELET_MAX_BEHIND as i64 {
            return Err(Refusal::KubeletTooOld {
                node: node.name.clone(),
                kubelet: kubelet.clone(),
                cluster: c,
            });
        }
        if node.role == Role::ControlPlane && -ahead > 1 {
            return Err(Refusal::ControlPlaneBehind {
                node: node.name.clone(),
                kubelet: kubelet.clone(),
                cluster: c,
            });
        }
    }
    Ok(())
}

/// The cluster's own minor need not be on the hub unless a node must stage it.
pub(super) fn current_published(
    hops: &[Hop],
    cluster: &Level,
    wants: &BTreeMap<Minor, Level>,
    hub: &HubVersions,
) -> Result<(), Refusal> {
    let unpublished = hub.is_resolved()
        && wants
            .get(&cluster.minor)
            .is_some_and(|w| w.version.is_none());
    let stages_it = hops.iter().filter(|h| h.minor == cluster.minor).any(|h| {
        h.steps().any(|s| {
            matches!(
                s.action,
                Action::Download {
                    component: Component::Kubernetes,
                    ..
                }
            )
        })
    });
    if unpublished && stages_it {
        return Err(Refusal::Unpublished {
            minor: cluster.minor,
            published: hub.minors(),
        });
    }
    Ok(())
}

/// Warnings about the fleet as gathered, node by node in inventory order.
pub(super) fn fleet_warnings(
    state: &FleetState,
    first: &FleetNode,
    cluster: &Level,
    hub: &HubVersions,
    hops: &[Hop],
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    for node in &state.nodes {
        let facts = &node.facts;
        config_warnings(
            node,
            Component::Kubernetes,
            &facts.kubernetes,
            hub,
            &mut warnings,
        );
        if state.containerd_version.is_some()
            && let Some(ctr) = &facts.containerd
        {
            config_warnings(node, Component::Containerd, ctr, hub, &mut warnings);
        }
        version_warnings(node, first, cluster, &mut warnings);
        if let Some(os) = &facts.os.staged {
            warnings.push(Warning::OsUpdateStaged {
                node: node.name.clone(),
                version: os.clone(),
                reboot_hop: first_reboot(hops, &node.name),
            });
        }
        match state.cluster_node(&node.name) {
            None => warnings.push(Warning::NotInCluster {
                node: node.name.clone(),
            }),
            Some(cn) => {
                if !cn.ready {
                    warnings.push(Warning::NotReady {
                        node: node.name.clone(),
                    });
                }
                if cn.cordoned {
                    warnings.push(Warning::Cordoned {
                        node: node.name.clone(),
                    });
                }
            }
        }
    }
    warnings
}

fn first_reboot(hops: &[Hop], node: &str) -> Option<Minor> {
    hops.iter()
        .find(|h| {
            h.steps()
                .any(|s| s.node == node && s.action == Action::Roll)
        })
        .map(|h| h.minor)
}

/// A plain-HTTP hub, and hop images the hub gives no single checksum for.
pub(super) fn hub_warnings(url: &str, hub: &HubVersions, hops: &[Hop]) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if url.starts_with("http://") {
        warnings.push(Warning::InsecureHub {
            hub: url.to_string(),
        });
    }
    if hub.is_resolved() {
        for hop in hops {
            if let Some(v) = &hop.version
                && hop.sha256.is_none()
                && hop
                    .steps()
                    .any(|s| matches!(s.action, Action::Download { .. }))
            {
                warnings.push(Warning::UnverifiedImage { version: v.clone() });
            }
        }
    }
    warnings
}

/// The oldest minor fleetctl runs kubeadm for: `kubeadm upgrade node` got
/// its addon phases (and so accepts `--skip-phases addon/kube-proxy`) in v1.32.
pub(super) const OLDEST_KUBEADM_MINOR: Minor = Minor::new(1, 32);

/// Every hop that calls kubeadm goes to v1.32 or later.
pub(super) fn kubeadm_floor(hops: &[Hop]) -> Result<(), Refusal> {
    match hops
        .iter()
        .find(|h| h.kubeadm && h.minor < OLDEST_KUBEADM_MINOR)
    {
        Some(h) => Err(Refusal::KubeadmTooOld { minor: h.minor }),
        None => Ok(()),
    }
}

fn config_warnings(
    node: &FleetNode,
    component: Component,
    ext: &Extension,
    hub: &HubVersions,
    warnings: &mut Vec<Warning>,
) {
    for conf in ext.configs.iter().filter(|c| c.pin == Pin::Floating) {
        warnings.push(Warning::Floating {
            node: node.name.clone(),
            component,
            path: conf.path.clone(),
            would_stage: match component {
                Component::Kubernetes => hub.newest_overall().cloned(),
                Component::Containerd => None,
            },
        });
    }
    let main = component.config_path();
    if ext.configs.iter().any(|c| c.path != main) {
        warnings.push(Warning::StrayConfigs {
            node: node.name.clone(),
            component,
            configs: ext
                .configs
                .iter()
                .map(|c| StrayConfig {
                    path: c.path.clone(),
                    pin: c.pin.clone(),
                })
                .collect(),
        });
    }
}

fn version_warnings(
    node: &FleetNode,
    first: &FleetNode,
    cluster: &Level,
    warnings: &mut Vec<Warning>,
) {
    let k8s = &node.facts.kubernetes;
    if k8s.running.is_none() {
        warnings.push(Warning::UnknownRunning {
            node: node.name.clone(),
        });
    }
    let Some(staged) = &k8s.staged else {
        return;
    };
    let main = Component::Kubernetes.config_path();
    if let Some(Pin::Pinned(pinned)) = k8s.configs.iter().find(|c| c.path == main).map(|c| &c.pin)
        && staged.minor() != *pinned
    {
        warnings.push(Warning::StagedOtherMinor {
            node: node.name.clone(),
            staged: staged.clone(),
            pinned: *pinned,
        });
    }
    if node.name != first.name && gap(cluster.minor, staged.minor()) > 0 {
        warnings.push(Warning::StagedAhead {
            node: node.name.clone(),
            staged: staged.clone(),
            cluster: cluster.minor,
        });
    }
}

//! A control plane's static pods as the API shows them after its reboot:
//! only this node's own mirror pods, and only what they say of this boot.
//!
//! A mirror pod is the Pod object the kubelet writes for a static pod; the
//! kubelet marks it with the annotation `kubernetes.io/config.mirror`
//! (`ConfigMirrorAnnotationKey` in kubernetes/kubernetes
//! pkg/kubelet/types/pod_update.go, the value of `v1.MirrorPodAnnotationKey`;
//! `IsMirrorPod` there is the test for it), and sets `spec.nodeName` to its
//! node. A pod merely named `kube-apiserver-<node>` may be anything else
//! (a pod anyone created with that name), so the annotation and the node
//! are both required.
//!
//! The API keeps a mirror pod across its node's reboot with the status the
//! kubelet last wrote, until the new kubelet writes a new one; and the
//! kubelet keeps a pod's `status.startTime` from the status it had
//! (`updateStatusInternal` in pkg/kubelet/status/status_manager.go keeps
//! the old start time), which for a static pod, whose UID is the hash of
//! its manifest, survives the reboot. So "this boot" is read from the
//! containers: each container's `state.running.startedAt` must be at or
//! after the node's boot.

use anyhow::{Context, Result};
use serde::Deserialize;

use crate::version::Version;

/// The annotation the kubelet puts on every mirror pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The most pods read from one node's listing.
const MAX_PODS: usize = 1000;

/// One pod of the node's listing, as far as the wait needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorPod {
    pub name: String,
    /// Carries [`MIRROR_ANNOTATION`].
    pub mirror: bool,
    /// `spec.nodeName`.
    pub node: String,
    /// `status.phase` is `Running` and every container is ready.
    pub running: bool,
    /// The tag of its first container's image.
    pub version: Option<Version>,
    /// The latest `state.running.startedAt` of its containers; `None` when
    /// one of them does not run.
    pub started: Option<jiff::Timestamp>,
}

#[derive(Deserialize)]
struct MirrorPodList {
    #[serde(default)]
    items: Vec<MirrorPodJson>,
}

#[derive(Deserialize)]
struct MirrorPodJson {
    metadata: MirrorPodMeta,
    #[serde(default)]
    spec: MirrorPodSpec,
    #[serde(default)]
    status: MirrorPodStatus,
}

#[derive(Deserialize)]
struct MirrorPodMeta {
    name: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MirrorPodSpec {
    #[serde(default)]
    node_name: String,
    #[serde(default)]
    containers: Vec<Container>,
}

#[derive(Deserialize)]
struct Container {
    #[serde(default)]
    image: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MirrorPodStatus {
    #[serde(default)]
    phase: String,
    #[serde(default)]
    container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize)]
struct ContainerStatus {
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    state: ContainerState,
}

#[derive(Deserialize, Default)]
struct ContainerState {
    running: Option<Running>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Running {
    started_at: Option<String>,
}

/// `kubectl -n kube-system get pods --field-selector spec.nodeName=NODE -o
/// json`: the pods of one node.
pub fn parse_mirror_pods(json: &str) -> Result<Vec<MirrorPod>> {
    let list: MirrorPodList = serde_json::from_str(json)
        .context("`kubectl get pods -o json` printed something that is not a list of pods")?;
    Ok(list
        .items
        .into_iter()
        .take(MAX_PODS)
        .map(|p| {
            let statuses = &p.status.container_statuses;
            let started = statuses
                .iter()
                .map(|c| {
                    c.state
                        .running
                        .as_ref()
                        .and_then(|r| r.started_at.as_deref())
                        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                })
                .collect::<Option<Vec<_>>>()
                .and_then(|ts| ts.into_iter().max());
            MirrorPod {
                mirror: p.metadata.annotations.contains_key(MIRROR_ANNOTATION),
                running: p.status.phase == "Running"
                    && !statuses.is_empty()
                    && statuses.iter().all(|c| c.ready),
                version: p
                    .spec
                    .containers
                    .first()
                    .and_then(|c| c.image.rsplit_once(':'))
                    .and_then(|(_, tag)| tag.parse().ok()),
                started,
                node: p.spec.node_name,
                name: p.metadata.name,
            }
        })
        .collect())
}

/// Reads [`crate::remote::BOOT_TIME`]'s three numbers (`/proc/stat`'s
/// btime, PID 1's start in clock ticks after it, the ticks per second):
/// when the node's init started, in the node's clock, which is the clock
/// its kubelet stamps container starts with.
pub fn parse_boot_time(out: &str) -> Option<jiff::Timestamp> {
    let mut n = out.split_whitespace().map(|w| w.parse::<u64>().ok());
    let (btime, ticks, hz) = (n.next()??, n.next()??, n.next()??);
    if hz == 0 {
        return None;
    }
    let secs = i64::try_from(btime.checked_add(ticks / hz)?).ok()?;
    jiff::Timestamp::from_second(secs).ok()
}

/// Why `pod` (named `name`) is not yet this boot's static pod of `node`
/// running at a version `at` accepts; `None`: it is.
pub fn mirror_pod_lag(
    pods: &[MirrorPod],
    name: &str,
    node: &str,
    booted: Option<jiff::Timestamp>,
    at: impl Fn(&Option<Version>) -> bool,
) -> Option<String> {
    let Some(p) = pods
        .iter()
        .find(|p| p.name == name && p.mirror && p.node == node)
    else {
        return Some(format!("{name} has no mirror pod on {node}"));
    };
    let version = || {
        p.version
            .as_ref()
            .map_or_else(|| "an unknown version".into(), Version::to_string)
    };
    if !p.running {
        return Some(format!("{name} is not Running at {}", version()));
    }
    if !at(&p.version) {
        return Some(format!("{name} is Running at {}", version()));
    }
    match (booted, p.started) {
        (Some(boot), Some(started)) if started < boot => Some(format!(
            "{name} shows a container started at {started}, before {node}'s boot at {boot} \
             (its status is from before the reboot)"
        )),
        (Some(_), None) => Some(format!("{name} has a container that is not running")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> String {
        std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/node/fixtures/kubectl-get-static-pods.json"
        ))
        .unwrap()
    }

    fn any(_: &Option<Version>) -> bool {
        true
    }

    #[test]
    fn reads_the_kubelets_mirror_pods() {
        let pods = parse_mirror_pods(&fixture()).unwrap();
        let api = &pods[0];
        assert_eq!(api.name, "kube-apiserver-cp-1");
        assert!(api.mirror && api.running);
        assert_eq!(api.node, "cp-1");
        assert_eq!(api.version, Some("v1.35.3".parse().unwrap()));
        assert_eq!(pods[1].version, Some("v1.34.2".parse().unwrap()));
        assert_eq!(api.started, Some("2026-11-30T09:12:43Z".parse().unwrap()));
        let boot_before = Some("2026-11-30T09:10:00Z".parse().unwrap());
        let boot_after = Some("2026-11-30T09:20:00Z".parse().unwrap());
        assert_eq!(
            mirror_pod_lag(&pods, "kube-apiserver-cp-1", "cp-1", boot_before, any),
            None
        );
        let stale = mirror_pod_lag(&pods, "kube-apiserver-cp-1", "cp-1", boot_after, any).unwrap();
        assert!(stale.contains("before cp-1's boot"), "{stale}");
        // The scheduler crash-loops: not Running, no start time.
        assert!(pods[1].started.is_none());
        assert!(
            mirror_pod_lag(&pods, "kube-scheduler-cp-1", "cp-1", boot_before, any)
                .unwrap()
                .contains("not Running")
        );
    }

    #[test]
    fn a_pod_without_the_annotation_or_on_another_node_is_no_mirror_pod() {
        let mut v: serde_json::Value = serde_json::from_str(&fixture()).unwrap();
        v["items"][0]["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(MIRROR_ANNOTATION);
        let pods = parse_mirror_pods(&v.to_string()).unwrap();
        assert!(
            mirror_pod_lag(&pods, "kube-apiserver-cp-1", "cp-1", None, any)
                .unwrap()
                .contains("no mirror pod")
        );
        let pods = parse_mirror_pods(&fixture()).unwrap();
        assert!(mirror_pod_lag(&pods, "kube-apiserver-cp-1", "cp-2", None, any).is_some());
        assert!(parse_mirror_pods("{\"items\":[{\"kind\":\"Node\"}]}").is_err());
        assert!(parse_mirror_pods("not json").is_err());
    }

    #[test]
    fn the_boot_time_is_btime_plus_pid_1s_start() {
        assert_eq!(
            parse_boot_time("1764493800\n250\n100\n"),
            Some(jiff::Timestamp::from_second(1764493802).unwrap())
        );
        assert_eq!(parse_boot_time("1764493800\n\n100\n"), None);
        assert_eq!(parse_boot_time("1 2 0"), None);
        assert_eq!(parse_boot_time("x"), None);
    }
}

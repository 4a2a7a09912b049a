//! Pure parsers for what `crate::remote::FACTS_SCRIPT` and `CLUSTER_SCRIPT`
//! print: no I/O, so every corner (missing tools, missing files, CRLF,
//! noise before the first section, truncated output) is a unit test.
//!
//! A probe that could not run means "absent" (no kubelet → no running
//! Kubernetes), never an error; a probe that ran and printed something
//! unreadable is an error, because guessing there could plan the wrong
//! upgrade.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::{
    CgroupFacts, ClusterFacts, ClusterNode, Extension, NodeFacts, OsFacts, Pin, StageRecord,
    SysupdateConfig,
};
use crate::version::{Minor, Version};

mod check_outputs;
mod cluster_json;
pub use check_outputs::{CheckOutputs, parse_check_outputs, parse_check_outputs_after_cluster};
mod probes;
pub use probes::parse_probes;
mod sections;
use cluster_json::*;
use sections::*;

/// update_engine's state once an OS update is written and waits for a reboot.
const NEED_REBOOT: &str = "UPDATE_STATUS_UPDATED_NEED_REBOOT";

/// Architecture suffixes sysext image names carry (`kubernetes-v1.35.2-x86-64.raw`).
const ARCHES: &[&str] = &["x86-64", "arm64", "amd64", "aarch64", "x86_64"];

/// Parses the output of `FACTS_SCRIPT`.
pub fn parse_facts(output: &str) -> Result<NodeFacts> {
    let sections = Sections::of_script("facts", output)?;
    let kubernetes = extension(&sections, "kubernetes", "kubelet")
        .context("cannot read the node's Kubernetes facts")?;
    let containerd = extension(&sections, "containerd", "containerd")
        .context("cannot read the node's containerd facts")?;
    Ok(NodeFacts {
        hostname: sections.trimmed("hostname").unwrap_or_default(),
        boot_id: sections.trimmed("boot-id").unwrap_or_default(),
        uptime_seconds: sections
            .trimmed("uptime")
            .and_then(|u| uptime_seconds(&u))
            .unwrap_or(0),
        os: os_facts(&sections),
        kubernetes,
        containerd: Some(containerd).filter(has_sysext),
        reboot_required: sections.status("reboot-required") == Some(0),
        kubeadm_step: sections
            .trimmed("kubeadm-step")
            .and_then(|t| t.parse().ok()),
        arch: sections.trimmed("arch").filter(|a| !a.is_empty()),
        kubelet_files: sections
            .all("kubelet-file")
            .filter(|s| s.status == Some(0))
            .filter_map(|s| Some((s.arg?.to_string(), s.stdout.clone())))
            .collect(),
        stage_records: ["kubernetes", "containerd"]
            .into_iter()
            .filter_map(|c| Some((c.to_string(), stage_record(&sections, c)?)))
            .collect(),
        cgroup: CgroupFacts {
            v2: match sections.status("cgroup-v2") {
                Some(0) => Some(true),
                Some(1) => Some(false),
                _ => None,
            },
            kubelet_config: sections.ok("kubelet-config").map(|s| s.stdout.clone()),
            instance_config: sections.ok("instance-config").map(|s| s.stdout.clone()),
        },
    })
}

/// What `CLUSTER_SCRIPT` reads of kube-system, in one call.
pub(super) const KUBE_SYSTEM_READ: &str = "kubectl -n kube-system get configmap/kubeadm-config configmap/kubelet-config daemonset/kube-proxy";

/// Parses the output of `CLUSTER_SCRIPT`.
pub fn parse_cluster(output: &str) -> Result<ClusterFacts> {
    let sections = Sections::of_script("cluster", output)?;
    let nodes = sections.succeeded("nodes", "kubectl get nodes")?;
    let nodes = cluster_nodes(&nodes.stdout)?;
    let what = KUBE_SYSTEM_READ;
    let objects = found_objects(&sections.succeeded("kube-system", what)?.stdout, what)?;
    let version = match objects.get(&object("ConfigMap", "kubeadm-config")) {
        Some(json) => kubeadm_version(json)?,
        None => None,
    };
    let kube_proxy = objects.contains_key(&object("DaemonSet", "kube-proxy"));
    // Optional: an older script, or a kubectl that failed, leaves the
    // skew check to kubeadm-config and the nodes' own facts.
    let apiservers = match sections.get("apiservers") {
        // Only kubelets' mirror pods: a pod anyone created with the label
        // says nothing about what runs.
        Some(s) if s.status == Some(0) => super::parse_mirror_pods(&s.stdout)
            .map(|pods| {
                pods.into_iter()
                    .filter(|p| p.mirror)
                    .filter_map(|p| p.version)
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Ok(ClusterFacts {
        nodes,
        version,
        kube_proxy,
        apiservers,
    })
}

/// The key of an object in [`found_objects`]' answer.
pub(super) fn object(kind: &str, name: &str) -> (String, String) {
    (kind.to_string(), name.to_string())
}

/// What `GATES_SCRIPT` printed: whether the API server is ready (`None`) or
/// what is wrong, and the nodes as it sees them.
#[derive(Debug, Clone, PartialEq)]
pub struct GateView {
    pub not_ready: Option<String>,
    pub nodes: Vec<ClusterNode>,
}

/// Parses the output of `GATES_SCRIPT`. `/readyz` not answering `ok` is a
/// finding; the node list missing is an error (no gate can pass without it).
pub fn parse_gates(output: &str) -> Result<GateView> {
    let sections = Sections::of_script("gates", output)?;
    let not_ready = match sections.get("readyz") {
        Some(s) if s.status == Some(0) && s.stdout.trim() == "ok" => None,
        Some(s) => Some(format!(
            "the API server is not healthy (/readyz: {})",
            s.stderr.trim().lines().last().unwrap_or(s.stdout.trim())
        )),
        None => Some("the API server's /readyz was not asked (the output stopped)".into()),
    };
    let nodes = match (&not_ready, sections.get("nodes")) {
        // An API server that is not ready may not list nodes either; its
        // readiness is the finding.
        (Some(_), Some(s)) if s.status != Some(0) => Vec::new(),
        _ => cluster_nodes(&sections.succeeded("nodes", "kubectl get nodes")?.stdout)?,
    };
    Ok(GateView { not_ready, nodes })
}

/// The metrics script's answer per instance (node name, in `nodes`' order):
/// the gauge lines, or why that instance could not be read.
pub fn parse_instance_metrics(
    output: &str,
    nodes: &[String],
) -> Result<Vec<(String, Result<String, String>)>> {
    let sections = Sections::of_script("metrics", output)?;
    Ok(nodes
        .iter()
        .map(|node| {
            let what = format!("kubectl get --raw /metrics at {node}'s kube-apiserver");
            let read = match sections
                .all("metrics")
                .find(|s| s.arg == Some(node.as_str()))
            {
                Some(s) if s.status == Some(0) => Ok(s.stdout.clone()),
                Some(s) => Err(s.failure(&what)),
                None => Err(format!(
                    "the output has no section for {node}, so `{what}` never ran"
                )),
            };
            (node.clone(), read)
        })
        .collect())
}

/// Which minor a sysupdate transfer file lets through, from the
/// `MatchPattern=` lines of its `[Source]` section (the `[Target]` one only
/// names local files): `kubernetes-v1.37.@v-%a.raw` is pinned to v1.37,
/// `kubernetes-@v-%a.raw` floats. Several patterns: floating if any floats,
/// pinned if all agree, otherwise unknown.
pub fn detect_pin(component: &str, content: &str) -> Pin {
    let patterns = source_match_patterns(content);
    if patterns.is_empty() {
        return Pin::Unknown;
    }
    let kinds: Vec<Pin> = patterns.iter().map(|p| classify(component, p)).collect();
    if kinds.contains(&Pin::Floating) {
        return Pin::Floating;
    }
    match kinds.first() {
        Some(Pin::Pinned(minor)) if kinds.iter().all(|k| k == &Pin::Pinned(*minor)) => {
            Pin::Pinned(*minor)
        }
        _ => Pin::Unknown,
    }
}

/// The version in a sysext image name: `kubernetes-v1.35.2-x86-64.raw` →
/// v1.35.2. `None` for anything else in the directory (partial downloads,
/// other components, hand-copied files).
pub fn image_version(component: &str, file_name: &str) -> Option<Version> {
    let rest = file_name
        .strip_prefix(component)?
        .strip_prefix('-')?
        .strip_suffix(".raw")?;
    let bare = ARCHES
        .iter()
        .find_map(|arch| rest.strip_suffix(arch)?.strip_suffix('-'))
        .unwrap_or(rest);
    bare.parse().ok()
}

// ---------------------------------------------------------------------------
// Node facts

fn os_facts(sections: &Sections<'_>) -> OsFacts {
    let release = sections
        .ok("os-release")
        .map(|s| key_values(&s.stdout))
        .unwrap_or_default();
    let running = release
        .get("VERSION")
        .or_else(|| release.get("VERSION_ID"))
        .cloned()
        .unwrap_or_default();
    // The status lines are on stdout; the tool logs on stderr. Read both in
    // case a build swaps them.
    let engine = sections
        .get("update-engine")
        .map(|s| {
            let mut kv = key_values(&s.stderr);
            kv.extend(key_values(&s.stdout));
            kv
        })
        .unwrap_or_default();
    let current_op = engine.get("CURRENT_OP").cloned().unwrap_or_default();
    let staged = (current_op == NEED_REBOOT).then(|| {
        match engine.get("NEW_VERSION").map(String::as_str) {
            // Old update_engine builds reported 0.0.0.0 even with an update staged.
            None | Some("" | "0.0.0" | "0.0.0.0") => "unknown".to_string(),
            Some(v) => v.to_string(),
        }
    });
    OsFacts {
        running,
        staged,
        current_op,
    }
}

/// `KEY=value` lines (os-release, update_engine_client), quotes removed.
fn key_values(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.trim().split_once('=')?;
            let key_ok = !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            key_ok.then(|| (key.to_string(), unquote(value.trim()).to_string()))
        })
        .collect()
}

fn unquote(value: &str) -> &str {
    ['"', '\'']
        .iter()
        .find_map(|&q| value.strip_prefix(q)?.strip_suffix(q))
        .unwrap_or(value)
}

/// `/proc/uptime` is "seconds.fraction idle.fraction".
fn uptime_seconds(text: &str) -> Option<u64> {
    let first = text.split_whitespace().next()?;
    let whole = first.split('.').next()?;
    whole.parse().ok()
}

/// `/var/lib/fleetctl/staged/<component>`: a boot id, then the previous
/// target. Anything else (an edited or truncated file) counts as no record.
fn stage_record(sections: &Sections<'_>, component: &str) -> Option<StageRecord> {
    let text = sections.trimmed(&format!("{component}-stage-record"))?;
    let mut lines = text.lines();
    let boot_id = lines.next()?.trim();
    let valid = !boot_id.is_empty()
        && boot_id.len() <= 64
        && boot_id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    if !valid {
        return None;
    }
    let previous = lines
        .next()
        .and_then(|target| image_version(component, file_name(target.trim())));
    Some(StageRecord {
        boot_id: boot_id.to_string(),
        previous,
    })
}

fn extension(sections: &Sections<'_>, component: &str, binary: &str) -> Result<Extension> {
    let running = running_version(sections, component, binary)?;
    let staged_target = sections.trimmed(&format!("{component}-staged"));
    let staged = staged_target
        .as_deref()
        .and_then(|target| image_version(component, file_name(target)));
    let mut images: Vec<Version> = sections
        .ok(&format!("{component}-images"))
        .map(|s| {
            s.stdout
                .lines()
                .filter_map(|l| image_version(component, l.trim()))
                .collect()
        })
        .unwrap_or_default();
    images.sort();
    images.dedup();
    let config_section = format!("{component}-config");
    let mut configs: Vec<SysupdateConfig> = sections
        .all(&config_section)
        .filter(|s| s.status == Some(0))
        .filter_map(|s| Some(sysupdate_config(component, s.arg?, &s.stdout)))
        .collect();
    configs.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Extension {
        running,
        staged,
        staged_target,
        images,
        configs,
    })
}

/// What `<binary> --version` says, if it ran. It ran and printed no version:
/// an error, not "absent", so a broken binary is not taken for a missing one.
fn running_version(
    sections: &Sections<'_>,
    component: &str,
    binary: &str,
) -> Result<Option<Version>> {
    let Some(section) = sections.ok(&format!("{component}-running")) else {
        return Ok(None);
    };
    match first_version(&section.stdout) {
        Some(v) => Ok(Some(v)),
        None => bail!(
            "`{binary} --version` succeeded but printed {}, which holds no version \
             like v1.2.3; check the {binary} binary on this node",
            excerpt(&section.stdout)
        ),
    }
}

/// The first word that is a full version: `Kubernetes v1.34.5` → v1.34.5;
/// `containerd github.com/containerd/containerd/v2 v2.1.4 <commit>` → v2.1.4.
fn first_version(text: &str) -> Option<Version> {
    text.split_whitespace()
        .filter(|w| w.matches('.').count() >= 2)
        .find_map(|w| w.parse().ok())
}

/// The last component of a symlink target, absolute or relative.
fn file_name(target: &str) -> &str {
    target.rsplit('/').next().unwrap_or(target)
}

fn sysupdate_config(component: &str, path: &str, content: &str) -> SysupdateConfig {
    SysupdateConfig {
        path: path.to_string(),
        sha256: sha256_hex(content.as_bytes()),
        pin: detect_pin(component, content),
        content: content.to_string(),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A containerd "extension" only counts when there is a sysext to speak of:
/// Flatcar ships containerd in the base image too.
fn has_sysext(ext: &Extension) -> bool {
    ext.staged_target.is_some() || !ext.images.is_empty() || !ext.configs.is_empty()
}

// ---------------------------------------------------------------------------
// Pins

/// The `MatchPattern=` values of the `[Source]` section, in order, with
/// systemd's semantics: several per line, an empty assignment resets.
fn source_match_patterns(content: &str) -> Vec<String> {
    let mut section = String::new();
    let mut patterns = Vec::new();
    for line in content.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if section != "Source" || key.trim() != "MatchPattern" {
            continue;
        }
        let value = value.trim();
        if value.is_empty() {
            patterns.clear();
        } else {
            patterns.extend(value.split_whitespace().map(str::to_string));
        }
    }
    patterns
}

/// One pattern: `<component>-@v…` floats, `<component>-vX.Y.@v…` is pinned.
fn classify(component: &str, pattern: &str) -> Pin {
    let Some(rest) = pattern
        .strip_prefix(component)
        .and_then(|p| p.strip_prefix('-'))
    else {
        return Pin::Unknown;
    };
    if rest.starts_with("@v") {
        return Pin::Floating;
    }
    let Some((minor, _)) = rest.split_once(".@v") else {
        return Pin::Unknown;
    };
    match minor.parse::<Minor>() {
        Ok(m) => Pin::Pinned(m),
        Err(_) => Pin::Unknown,
    }
}

#[cfg(test)]
mod tests;

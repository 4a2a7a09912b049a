//! What kubectl shows of DaemonSets and pods, read so that no object's
//! field can pass for another record.
//!
//! The listings name only what finding Kured needs (names, images, the
//! program, and whether the pod may reach its node's PID 1: `hostPID` and
//! `privileged`), never other programs' arguments or environment, which
//! hold their settings and secrets and which `kubectl -o json` would print
//! (and the journal record) for every DaemonSet and pod. `-o json` of every
//! pod is also far past the 32 MiB fleetctl reads of a command on a large
//! cluster. So kubectl's jsonpath prints them, and the records are
//! delimited by a marker drawn at random for each listing
//! ([`Marker::new`]): every field is the text between two markers. A tab or
//! a newline in an image or a command (the API server accepts both there)
//! is then part of that field, and an object created before the listing
//! cannot contain the marker, so it cannot forge a record of its own (as a
//! line `daemonset<TAB>kube-system<TAB>kured` inside a command once could).

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The random record delimiter of one listing: `@@fleetctl-<32 hex>@@`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker(String);

impl Marker {
    /// 128 bits from the kernel's random source (`/dev/urandom`, random(4)).
    pub fn new() -> anyhow::Result<Marker> {
        use std::io::Read;
        let mut bytes = [0u8; 16];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("reading /dev/urandom for the listing's record marker")?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Marker(format!("@@fleetctl-{hex}@@")))
    }

    /// A fixed marker, for tests.
    #[cfg(test)]
    pub fn fixed(text: &str) -> Marker {
        Marker(format!("@@fleetctl-{text}@@"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A DaemonSet as [`crate::remote::kubectl::list_daemonsets`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonSetInfo {
    pub namespace: String,
    pub name: String,
    /// Its pods share their node's PID namespace (`hostPID: true`).
    pub host_pid: bool,
    pub containers: Vec<ContainerInfo>,
}

/// One container of a pod template (or a pod). The listings give only its
/// name, image, program (`command`'s first word) and whether it is
/// privileged; `args`, `env` and `env_from` are read for Kured's container
/// alone ([`parse_settings`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerInfo {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    /// `securityContext.privileged: true`.
    pub privileged: bool,
    pub args: Vec<String>,
    /// Env vars by name: `Some` literal value, `None` set from a reference
    /// (`valueFrom`) fleetctl cannot read.
    pub env: BTreeMap<String, Option<String>>,
    /// It also takes env vars wholesale from a configmap or secret.
    pub env_from: bool,
}

/// A pod as [`crate::remote::kubectl::list_pods`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub host_pid: bool,
    /// The kind of its first owner (`DaemonSet`, `ReplicaSet`, `Node` for a
    /// static pod's mirror); empty for a bare pod.
    pub owner: String,
    pub containers: Vec<ContainerInfo>,
}

/// One record: its kind's fields, then its containers.
struct Record {
    fields: Vec<String>,
    containers: Vec<ContainerInfo>,
}

/// Splits a listing at `marker`: `KIND` and `fields` more fields per
/// record, then `container NAME IMAGE PROGRAM PRIVILEGED` per container.
fn parse_listing(
    text: &str,
    marker: &Marker,
    kind: &str,
    fields: usize,
) -> anyhow::Result<Vec<Record>> {
    let mut tokens = text.split(marker.as_str());
    let lead = tokens.next().unwrap_or("");
    if !lead.trim().is_empty() {
        bail!("kubectl printed something before the first record: {lead:?}");
    }
    let tokens: Vec<&str> = tokens.collect();
    let mut records: Vec<Record> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let take = |n: usize| -> anyhow::Result<Vec<String>> {
            let got = tokens.get(i + 1..i + 1 + n).with_context(|| {
                format!(
                    "record {} ({}) ends after {} of its {n} fields",
                    records.len() + 1,
                    tokens[i],
                    tokens.len() - i - 1
                )
            })?;
            Ok(got.iter().map(|t| t.to_string()).collect())
        };
        match tokens[i] {
            k if k == kind => {
                records.push(Record {
                    fields: take(fields)?,
                    containers: Vec::new(),
                });
                i += 1 + fields;
            }
            "container" => {
                let f = take(4)?;
                let Some(owner) = records.last_mut() else {
                    bail!("a container before any {kind}");
                };
                owner.containers.push(ContainerInfo {
                    name: f[0].clone(),
                    image: f[1].clone(),
                    command: if f[2].is_empty() {
                        Vec::new()
                    } else {
                        vec![f[2].clone()]
                    },
                    privileged: f[3] == "true",
                    ..ContainerInfo::default()
                });
                i += 5;
            }
            other => bail!(
                "record {}: not a {kind} or container record: {other:?}",
                records.len() + 1
            ),
        }
    }
    Ok(records)
}

/// Parses [`crate::remote::kubectl::list_daemonsets`]'s output.
pub fn parse_daemonsets(text: &str, marker: &Marker) -> anyhow::Result<Vec<DaemonSetInfo>> {
    Ok(parse_listing(text, marker, "daemonset", 3)?
        .into_iter()
        .map(|r| DaemonSetInfo {
            namespace: r.fields[0].clone(),
            name: r.fields[1].clone(),
            host_pid: r.fields[2] == "true",
            containers: r.containers,
        })
        .collect())
}

/// Parses [`crate::remote::kubectl::list_pods`]'s output.
pub fn parse_pods(text: &str, marker: &Marker) -> anyhow::Result<Vec<PodInfo>> {
    Ok(parse_listing(text, marker, "pod", 4)?
        .into_iter()
        .map(|r| PodInfo {
            namespace: r.fields[0].clone(),
            name: r.fields[1].clone(),
            host_pid: r.fields[2] == "true",
            owner: r.fields[3].clone(),
            containers: r.containers,
        })
        .collect())
}

#[derive(Deserialize)]
struct EnvJson {
    name: String,
    #[serde(default)]
    value: Option<String>,
}

/// Parses [`k::get_container_settings`]'s output: `NAME COMMAND ARGS ENV
/// ENVFROM`, tab-separated, the lists as JSON (empty when unset).
pub fn parse_settings(text: &str) -> anyhow::Result<ContainerInfo> {
    let fields: Vec<&str> = text.trim_end_matches('\n').split('\t').collect();
    if fields.len() != 5 || text.trim_end_matches('\n').contains('\n') {
        bail!("not one container's name, command, args, env and envFrom: {text:?}");
    }
    let list = |i: usize, what: &str| -> anyhow::Result<Vec<String>> {
        let text = fields[i];
        if text.is_empty() {
            return Ok(Vec::new());
        }
        serde_json::from_str(text).with_context(|| {
            format!(
                "the container's {what} is not a JSON list: {text} \
                 (kubectl older than 1.19 prints Go syntax here; fleetctl needs a newer kubectl)"
            )
        })
    };
    let env: Vec<EnvJson> = if fields[3].is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(fields[3])
            .with_context(|| format!("the container's env is not a JSON list: {}", fields[3]))?
    };
    Ok(ContainerInfo {
        name: fields[0].into(),
        image: String::new(),
        privileged: false,
        command: list(1, "command")?,
        args: list(2, "args")?,
        env: env.into_iter().map(|e| (e.name, e.value)).collect(),
        env_from: !fields[4].is_empty() && fields[4] != "[]",
    })
}

#[cfg(test)]
mod tests;

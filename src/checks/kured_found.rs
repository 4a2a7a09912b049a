//! Kured's container among the cluster's DaemonSets, for `status` (which
//! takes no lock, so it finds Kured itself): the first container whose
//! program or image is named `kured`, as the lock's discovery recognises
//! Kured (`crate::steps::lock`'s `runs_kured`: the manifest and the Helm
//! chart run `/usr/bin/kured` from a `…/kured:<version>` image).
//! Parses `crate::remote::kured_pods::daemonset_containers`; bounded.

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// The most DaemonSets read.
const MAX_DAEMONSETS: usize = 1024;

/// Kured's container as its DaemonSet declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredContainer {
    /// `namespace/name` of its DaemonSet.
    pub daemonset: String,
    pub image: String,
    /// `command` then `args`.
    pub argv: Vec<String>,
    /// Its `env`: a literal value, or `None` for a `valueFrom`.
    pub env: Vec<(String, Option<String>)>,
}

#[derive(Deserialize)]
struct EnvVar {
    name: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default, rename = "valueFrom")]
    value_from: Option<serde_json::Value>,
}

/// `kured:1.17.1` or `ghcr.io/kubereboot/kured@sha256:…` → `kured`.
fn image_name(image: &str) -> &str {
    let path = image.split('@').next().unwrap_or(image);
    let last = path.rsplit('/').next().unwrap_or(path);
    last.split(':').next().unwrap_or(last)
}

fn list(text: &str, what: &str) -> Result<Vec<String>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    serde_json::from_str(text).with_context(|| format!("the container's {what} is not a JSON list"))
}

/// The first container running Kured, `None` when no DaemonSet runs it.
pub fn find_kured(text: &str) -> Result<Option<KuredContainer>> {
    for (i, line) in text.lines().enumerate() {
        if i == MAX_DAEMONSETS {
            bail!("more than {MAX_DAEMONSETS} DaemonSets; fleetctl reads at most that many");
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < 2 || !(fields.len() - 2).is_multiple_of(5) {
            bail!("not a DaemonSet's containers: {line:?}");
        }
        for c in fields[2..].chunks(5) {
            let command = list(c[2], "command")?;
            let program = command.first().map(|p| p.rsplit('/').next().unwrap_or(p));
            if program != Some("kured") && image_name(c[1]) != "kured" {
                continue;
            }
            let mut argv = command;
            argv.extend(list(c[3], "args")?);
            let env: Vec<EnvVar> = match c[4] {
                "" => Vec::new(),
                text => {
                    serde_json::from_str(text).context("the container's env is not a JSON list")?
                }
            };
            return Ok(Some(KuredContainer {
                daemonset: format!("{}/{}", fields[0], fields[1]),
                image: c[1].to_string(),
                argv,
                env: env
                    .into_iter()
                    .map(|e| {
                        let value = if e.value_from.is_some() {
                            None
                        } else {
                            Some(e.value.unwrap_or_default())
                        };
                        (e.name, value)
                    })
                    .collect(),
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kureds_container_by_program_or_image() {
        let text = "kube-system\tcoredns\tcoredns\tregistry.k8s.io/coredns:v1.11\t\t[\"-conf\"]\t\n\
                    ops\tkured\tsidecar\tbusybox\t[\"sleep\"]\t\t\tkured\tghcr.io/kubereboot/kured:1.17.1\t\
                    [\"/usr/bin/kured\"]\t[\"--blocking-pod-selector=app=backup\"]\t\
                    [{\"name\":\"KURED_NODE_ID\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"spec.nodeName\"}}},\
                    {\"name\":\"KURED_PROMETHEUS_URL\",\"value\":\"http://p:9090\"}]\n";
        let k = find_kured(text).unwrap().unwrap();
        assert_eq!(k.daemonset, "ops/kured");
        assert_eq!(
            k.argv,
            ["/usr/bin/kured", "--blocking-pod-selector=app=backup"]
        );
        assert_eq!(
            k.env,
            [
                ("KURED_NODE_ID".to_string(), None),
                (
                    "KURED_PROMETHEUS_URL".to_string(),
                    Some("http://p:9090".to_string())
                )
            ]
        );
        assert_eq!(
            find_kured("kube-system\tcoredns\tc\tcoredns:1\t\t\t\n").unwrap(),
            None
        );
        assert!(find_kured("ns\tds\tonly-two\tfields\n").is_err());
        assert!(find_kured("ns\tds\tk\tkured:1\tnot json\t\t\n").is_err());
    }
}

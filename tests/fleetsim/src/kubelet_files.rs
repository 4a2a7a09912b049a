//! The two files kubeadm writes for the kubelet, and what the kubelet reads
//! from them at every start: `/var/lib/kubelet/kubeadm-flags.env` (its
//! command-line flags, through the unit's `EnvironmentFile=`) and
//! `/var/lib/kubelet/config.yaml` (its KubeletConfiguration, `--config`).
//!
//! The trap these carry (kubernetes/kubernetes#133779, #133778): kubeadm up
//! to v1.34 wrote `--pod-infra-container-image` into the flags file at
//! `init`/`join`; kubelet v1.35 no longer has that flag and refuses to
//! start with it; only kubeadm v1.35's `upgrade` (apply and node) removes it.
//! So the v1.35 kubeadm must run before the node boots the v1.35 kubelet.
//!
//! config.yaml is not a template of its own: kubeadm writes it from the
//! cluster's `kube-system/kubelet-config` ConfigMap (key `kubelet`) with,
//! from v1.34, `/var/lib/kubelet/instance-config.yaml` laid over it
//! (`WriteConfigToDisk`, cmd/kubeadm/app/phases/kubelet/config.go). That
//! file holds the node's `containerRuntimeEndpoint`, which kubeadm v1.34+
//! (NodeLocalCRISocket, beta and on by default in v1.34) no longer writes
//! into the flags file at init/join (KEP-4656; kubernetes/website#51503).

use crate::version::Version;

pub const FLAGS_FILE: &str = "/var/lib/kubelet/kubeadm-flags.env";
pub const CONFIG_FILE: &str = "/var/lib/kubelet/config.yaml";
/// The flag kubelet v1.35 removed.
pub const POD_INFRA_FLAG: &str = "--pod-infra-container-image";
/// The first kubelet without it, and the only kubeadm that removes it.
pub const POD_INFRA_REMOVED_MINOR: u32 = 35;
/// kubeadm's per-node kubelet configuration (v1.34+).
pub const INSTANCE_FILE: &str = "/var/lib/kubelet/instance-config.yaml";
/// The first kubeadm that keeps the runtime endpoint in [`INSTANCE_FILE`].
pub const INSTANCE_SINCE_MINOR: u32 = 34;
/// The flag [`INSTANCE_FILE`] replaces.
pub const ENDPOINT_FLAG: &str = "--container-runtime-endpoint";
/// containerd's socket, as kubeadm detects it.
pub const ENDPOINT: &str = "unix:///run/containerd/containerd.sock";
/// The ConfigMap kubeadm keeps the cluster's KubeletConfiguration in, and its key.
pub const CONFIGMAP: &str = "kube-system/kubelet-config";
pub const CONFIGMAP_KEY: &str = "kubelet";
/// How the sim stamps the config with the kubeadm that wrote it, so the
/// kubelet's start can say which config it loaded (a comment: real
/// KubeletConfiguration files carry none, and the kubelet ignores it).
const STAMP: &str = "# fleetsim: written by kubeadm ";

/// The flags file `kubeadm init`/`join` of `kubeadm` wrote.
/// From v1.34 the runtime endpoint is in [`INSTANCE_FILE`] instead
/// ([`initial_instance`]).
pub fn initial_flags(kubeadm: &Version) -> String {
    let mut args = Vec::new();
    if kubeadm.minor < INSTANCE_SINCE_MINOR {
        args.push(format!("{ENDPOINT_FLAG}={ENDPOINT}"));
    }
    if kubeadm.minor < POD_INFRA_REMOVED_MINOR {
        args.push(format!("{POD_INFRA_FLAG}=registry.k8s.io/pause:3.10"));
    }
    format!("KUBELET_KUBEADM_ARGS=\"{}\"\n", args.join(" "))
}

/// The instance-config.yaml `kubeadm init`/`join` of `kubeadm` wrote, if any.
pub fn initial_instance(kubeadm: &Version) -> Option<String> {
    (kubeadm.minor >= INSTANCE_SINCE_MINOR).then(|| instance_config(ENDPOINT))
}

/// An instance-config.yaml holding `endpoint`.
pub fn instance_config(endpoint: &str) -> String {
    format!("containerRuntimeEndpoint: \"{endpoint}\"\n")
}

/// `containerRuntimeEndpoint` of a kubelet configuration document (or of
/// an instance-config.yaml); `None` when unset or empty.
pub fn endpoint_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("containerRuntimeEndpoint:"))
        .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|v| !v.is_empty())
}

/// Whether the flags file's `KUBELET_KUBEADM_ARGS` holds no flag (`""`,
/// blanks, or no such line), as kubeadm's `ReadKubeletDynamicEnvFile` finds.
pub fn has_no_flags(text: &str) -> bool {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("KUBELET_KUBEADM_ARGS="))
        .all(|v| v.trim().trim_matches('"').trim().is_empty())
}

/// The value of `flag` in the flags file's `KUBELET_KUBEADM_ARGS`.
pub fn flag_value(text: &str, flag: &str) -> Option<String> {
    let at = find_flag(text, flag)?;
    let after = &text[at + flag.len()..];
    let value = after
        .strip_prefix('=')
        .or_else(|| after.strip_prefix(' '))?;
    Some(value[..word_len(value)].to_string())
}

/// The flags file without `--pod-infra-container-image` (either spelling:
/// `=value` or a separate word), the rest byte for byte; `None` when the
/// flag is not there.
pub fn without_pod_infra_flag(text: &str) -> Option<String> {
    without_flag(text, POD_INFRA_FLAG)
}

/// The flags file without `flag` (`--name`), as [`without_pod_infra_flag`].
pub fn without_flag(text: &str, flag: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        match strip_flag(line, flag) {
            Some(fixed) => {
                out.push_str(&fixed);
                changed = true;
            }
            None => out.push_str(line),
        }
    }
    changed.then_some(out)
}

/// One line without the flag and the space before it (or after it, when
/// it comes first in the value).
fn strip_flag(line: &str, flag: &str) -> Option<String> {
    let start = find_flag(line, flag)?;
    let after = &line[start + flag.len()..];
    let mut end = start + flag.len();
    if let Some(value) = after.strip_prefix('=') {
        end += 1 + word_len(value);
    } else {
        let spaces = after.len() - after.trim_start_matches(' ').len();
        end += spaces + word_len(&after[spaces..]);
    }
    let before = &line[..start];
    let (from, to) = if before.ends_with(' ') {
        (start - 1, end)
    } else if line[end..].starts_with(' ') {
        (start, end + 1)
    } else {
        (start, end)
    };
    Some(format!("{}{}", &line[..from], &line[to..]))
}

/// Where the flag starts as a word of its own (not a prefix of another flag).
fn find_flag(line: &str, flag: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = line[from..].find(flag) {
        let at = from + i;
        let next = line[at + flag.len()..].chars().next();
        let prev = line[..at].chars().next_back();
        let starts_word = matches!(prev, None | Some(' ' | '"' | '\''));
        let ends_word = matches!(next, None | Some('=' | ' ' | '"' | '\'' | '\n'));
        if starts_word && ends_word {
            return Some(at);
        }
        from = at + flag.len();
    }
    None
}

fn word_len(s: &str) -> usize {
    s.find([' ', '"', '\'', '\n']).unwrap_or(s.len())
}

/// The kubelet config a kubeadm writes (`init`, `join`, or the
/// `kubelet-config` phase of `upgrade`) from the ConfigMap kubeadm init
/// uploaded, stamped with its version; no instance-config laid over.
pub fn config_yaml(kubeadm: &str) -> String {
    written_config(kubeadm, &cluster_config(""), None)
}

/// config.yaml as `kubeadm` writes it: the ConfigMap's document, with the
/// instance-config's `containerRuntimeEndpoint` laid over it (a patch:
/// the line replaced, or added when the document has none), stamped.
pub fn written_config(kubeadm: &str, configmap: &str, instance: Option<&str>) -> String {
    let mut doc = configmap.to_string();
    if let Some(endpoint) = instance.and_then(endpoint_of) {
        let line = format!("containerRuntimeEndpoint: {endpoint}");
        let mut replaced = false;
        let mut lines: Vec<String> = doc
            .lines()
            .map(|l| {
                if l.starts_with("containerRuntimeEndpoint:") {
                    replaced = true;
                    line.clone()
                } else {
                    l.to_string()
                }
            })
            .collect();
        if !replaced {
            lines.push(line);
        }
        doc = lines.join("\n") + "\n";
    }
    format!("{STAMP}{kubeadm}\n{doc}")
}

/// The KubeletConfiguration `kubeadm init` uploads to the kubelet-config
/// ConfigMap, with a scenario's own lines (`failCgroupV1: false`) after it.
pub fn cluster_config(extra: &str) -> String {
    format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1\n\
         authentication:\n  anonymous:\n    enabled: false\n  webhook:\n    cacheTTL: 0s\n    enabled: true\n  x509:\n    clientCAFile: /etc/kubernetes/pki/ca.crt\n\
         authorization:\n  mode: Webhook\n  webhook:\n    cacheAuthorizedTTL: 0s\n    cacheUnauthorizedTTL: 0s\n\
         cgroupDriver: systemd\n\
         clusterDNS:\n- 10.96.0.10\n\
         clusterDomain: cluster.local\n\
         containerRuntimeEndpoint: \"\"\n\
         healthzBindAddress: 127.0.0.1\n\
         healthzPort: 10248\n\
         kind: KubeletConfiguration\n\
         logging: {{}}\n\
         rotateCertificates: true\n\
         staticPodPath: /etc/kubernetes/manifests\n\
         {extra}"
    )
}

/// Which kubeadm wrote a kubelet config (`None`: not one the sim stamped).
pub fn config_stamp(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(STAMP))
        .map(|v| v.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn kubeadm_up_to_1_34_writes_the_flag_and_1_35_does_not() {
        assert_eq!(
            initial_flags(&v("v1.33.2")),
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
        );
        // From v1.34 the endpoint is in instance-config.yaml.
        assert_eq!(
            initial_flags(&v("v1.34.2")),
            "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
        );
        assert_eq!(initial_flags(&v("v1.35.0")), "KUBELET_KUBEADM_ARGS=\"\"\n");
        assert_eq!(initial_instance(&v("v1.33.2")), None);
        assert_eq!(
            initial_instance(&v("v1.34.2"))
                .as_deref()
                .and_then(endpoint_of)
                .as_deref(),
            Some(ENDPOINT)
        );
    }

    #[test]
    fn config_yaml_is_the_configmap_with_the_instance_config_laid_over() {
        let cm = cluster_config("failCgroupV1: false\n");
        let text = written_config("v1.35.3", &cm, Some(&instance_config(ENDPOINT)));
        assert_eq!(config_stamp(&text).as_deref(), Some("v1.35.3"));
        assert!(text.contains("\nfailCgroupV1: false\n"), "{text}");
        assert_eq!(endpoint_of(&text).as_deref(), Some(ENDPOINT));
        assert_eq!(endpoint_of(&config_yaml("v1.33.1")), None);
        let flags = format!("KUBELET_KUBEADM_ARGS=\"{ENDPOINT_FLAG}={ENDPOINT} --v=2\"\n");
        assert_eq!(flag_value(&flags, ENDPOINT_FLAG).as_deref(), Some(ENDPOINT));
        assert_eq!(flag_value(&flags, POD_INFRA_FLAG), None);
    }

    #[test]
    fn removing_the_flag_keeps_the_rest_byte_for_byte() {
        let fixed = without_pod_infra_flag(&initial_flags(&v("v1.33.2"))).unwrap();
        assert_eq!(
            fixed,
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n"
        );
        let cases = [
            (
                "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=pause:3.9 --node-ip=10.0.0.1\"\nOTHER=1\n",
                "KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.1\"\nOTHER=1\n",
            ),
            (
                "KUBELET_KUBEADM_ARGS=\"--a=1 --pod-infra-container-image pause:3.9 --b=2\"",
                "KUBELET_KUBEADM_ARGS=\"--a=1 --b=2\"",
            ),
            (
                "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=pause:3.9\"\n",
                "KUBELET_KUBEADM_ARGS=\"\"\n",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(
                without_pod_infra_flag(before).as_deref(),
                Some(after),
                "{before}"
            );
        }
        assert_eq!(without_pod_infra_flag(&initial_flags(&v("v1.35.0"))), None);
        assert_eq!(
            without_pod_infra_flag("X=\"--pod-infra-container-image-x=1\"\n"),
            None,
            "another flag with the same prefix stays"
        );
    }

    #[test]
    fn the_config_names_the_kubeadm_that_wrote_it() {
        let text = config_yaml("v1.35.3");
        assert_eq!(config_stamp(&text).as_deref(), Some("v1.35.3"));
        assert!(text.contains("\nkind: KubeletConfiguration\n"));
        assert_eq!(config_stamp("kind: KubeletConfiguration\n"), None);
    }
}

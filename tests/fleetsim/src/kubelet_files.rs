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

use crate::version::Version;

pub const FLAGS_FILE: &str = "/var/lib/kubelet/kubeadm-flags.env";
pub const CONFIG_FILE: &str = "/var/lib/kubelet/config.yaml";
/// The flag kubelet v1.35 removed.
pub const POD_INFRA_FLAG: &str = "--pod-infra-container-image";
/// The first kubelet without it, and the only kubeadm that removes it.
pub const POD_INFRA_REMOVED_MINOR: u32 = 35;
/// How the sim stamps the config with the kubeadm that wrote it, so the
/// kubelet's start can say which config it loaded (a comment: real
/// KubeletConfiguration files carry none, and the kubelet ignores it).
const STAMP: &str = "# fleetsim: written by kubeadm ";

/// The flags file `kubeadm init`/`join` of `kubeadm` wrote.
pub fn initial_flags(kubeadm: &Version) -> String {
    let mut args =
        "--container-runtime-endpoint=unix:///run/containerd/containerd.sock".to_string();
    if kubeadm.minor < POD_INFRA_REMOVED_MINOR {
        args.push_str(&format!(" {POD_INFRA_FLAG}=registry.k8s.io/pause:3.10"));
    }
    format!("KUBELET_KUBEADM_ARGS=\"{args}\"\n")
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
/// `kubelet-config` phase of `upgrade`), stamped with its version.
pub fn config_yaml(kubeadm: &str) -> String {
    format!(
        "{STAMP}{kubeadm}\n\
         apiVersion: kubelet.config.k8s.io/v1beta1\n\
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
         staticPodPath: /etc/kubernetes/manifests\n"
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
            initial_flags(&v("v1.34.2")),
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
        );
        assert_eq!(
            initial_flags(&v("v1.35.0")),
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n"
        );
    }

    #[test]
    fn removing_the_flag_keeps_the_rest_byte_for_byte() {
        let fixed = without_pod_infra_flag(&initial_flags(&v("v1.34.2"))).unwrap();
        assert_eq!(fixed, initial_flags(&v("v1.35.0")));
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

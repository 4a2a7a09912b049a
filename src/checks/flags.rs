//! kubelet flags a minor removes. A kubelet given a flag it no longer knows
//! exits at once (`failed to parse kubelet flag: unknown flag: …`), so the
//! node comes back from its reboot NotReady and the hop stops half-way.
//!
//! kubeadm sometimes cleans up after itself: for one release its `upgrade`
//! removes the flag from `/var/lib/kubelet/kubeadm-flags.env`, the file it
//! owns. It never touches `KUBELET_EXTRA_ARGS` (`/etc/sysconfig/kubelet`,
//! `/etc/default/kubelet`) or a drop-in, where operators and image builders
//! put flags of their own. So the same flag warns in one file and blocks in
//! another.

use std::collections::{BTreeMap, BTreeSet};

use super::verdicts::{Check, CheckName, Verdict};
use crate::version::Minor;

/// The file kubeadm writes at init/join and edits during `upgrade`.
pub const KUBEADM_FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";

/// The variable kubeadm writes into [`KUBEADM_FLAGS_ENV`].
const KUBEADM_VARIABLE: &str = "KUBELET_KUBEADM_ARGS";

/// A kubelet flag that a minor removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedFlag {
    /// With its dashes: `--pod-infra-container-image`.
    pub flag: &'static str,
    /// The first kubelet minor that refuses it.
    pub removed_in: Minor,
    /// The kubeadm minors whose `upgrade apply`/`upgrade node` remove it from
    /// [`KUBEADM_FLAGS_ENV`] (and nowhere else).
    pub stripped_by: &'static [Minor],
    /// Where this is established.
    pub source: &'static str,
}

impl RemovedFlag {
    pub fn stripped_by(&self, kubeadm: Minor) -> bool {
        self.stripped_by.contains(&kubeadm)
    }
}

/// The removal of kubelet flag `flag` (`--name`) at or before `by`: a
/// kubelet of minor `by` refuses it. `None` when that kubelet still takes it.
pub fn flag_removed_by(flag: &str, by: Minor) -> Option<&'static RemovedFlag> {
    REMOVED_KUBELET_FLAGS
        .iter()
        .find(|r| r.flag == flag && r.removed_in <= by)
}

/// Every kubelet flag removal fleetctl knows, oldest first. To add one: the
/// kubelet PR that removed it, and the kubeadm PRs (if any) that add and
/// drop its cleanup in `upgrade`; `stripped_by` lists the kubeadm minors that
/// have the cleanup. Researched for v1.27–v1.37; only removals that can be
/// cited are listed. Swept against CHANGELOG-1.32 … CHANGELOG-1.37 for issue
/// 14: besides the pause image flag (v1.35) only `--register-schedulable`
/// (v1.34) went; `--cloud-config`, `--experimental-mounter-path` and
/// `--experimental-allocatable-ignore-eviction`, deprecated long ago, are
/// still parsed (their removal, kubernetes/kubernetes#129394, was closed
/// unmerged).
pub const REMOVED_KUBELET_FLAGS: &[RemovedFlag] = &[
    RemovedFlag {
        flag: "--container-runtime",
        removed_in: Minor::new(1, 27),
        stripped_by: &[Minor::new(1, 26)],
        source: "removed from the kubelet in v1.27 (kubernetes/kubernetes#114017); kubeadm \
                 v1.26's upgrade drops it from kubeadm-flags.env (kubernetes/kubernetes#112000, \
                 CleanupKubeletDynamicEnvFileContainerRuntime, \"Remove in 1.27\"), and v1.27 \
                 removed that cleanup (kubernetes/kubernetes#114409)",
    },
    RemovedFlag {
        flag: "--keep-terminated-pod-volumes",
        removed_in: Minor::new(1, 31),
        stripped_by: &[],
        source: "removed from the kubelet in v1.31 (kubernetes/kubernetes#122082, ACTION \
                 REQUIRED); kubeadm never wrote it, so no kubeadm strips it",
    },
    RemovedFlag {
        flag: "--register-schedulable",
        removed_in: Minor::new(1, 34),
        stripped_by: &[],
        source: "removed from the kubelet in v1.34 (kubernetes/kubernetes#122384, CHANGELOG-1.34: \
                 \"Removed the deprecated `--register-schedulable` command line argument from the \
                 kubelet\"); kubeadm never wrote it, so no kubeadm strips it",
    },
    RemovedFlag {
        flag: "--pod-infra-container-image",
        removed_in: Minor::new(1, 35),
        stripped_by: &[Minor::new(1, 35)],
        source: "removed from the kubelet in v1.35 (kubernetes/kubernetes#133779, ACTION \
                 REQUIRED); kubeadm v1.35 stops writing it and its upgrade removes it from \
                 kubeadm-flags.env (kubernetes/kubernetes#133778); kubeadm v1.36 no longer does \
                 (kubernetes/kubernetes#135807, in CHANGELOG-1.36)",
    },
];

/// Where a flag was found.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlagOrigin {
    pub path: String,
    /// `KUBELET_KUBEADM_ARGS`, `KUBELET_EXTRA_ARGS`, … or `ExecStart` for a
    /// flag written straight into a unit's command line.
    pub variable: String,
}

impl FlagOrigin {
    /// kubeadm's upgrade edits exactly this variable of exactly this file.
    pub fn kubeadm_owned(&self) -> bool {
        self.path == KUBEADM_FLAGS_ENV && self.variable == KUBEADM_VARIABLE
    }
}

/// One flag as a node passes it to the kubelet.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeletFlag {
    /// With its dashes, without the value: `--node-ip`.
    pub flag: String,
    /// `--flag=value` or `--flag value`; `None` for a bare `--flag`.
    pub value: Option<String>,
    pub origin: FlagOrigin,
}

/// The kubelet's flags in one file the kubelet unit reads: an environment
/// file (`kubeadm-flags.env`, `/etc/sysconfig/kubelet`, `/etc/default/kubelet`:
/// `KUBELET_…ARGS="…"`) or a unit drop-in (`Environment="KUBELET_…ARGS=…"`,
/// or flags straight in an `ExecStart=` that runs the kubelet). Comments and
/// variables that are not `KUBELET_*ARGS` are skipped; backslash
/// continuations are joined, as systemd joins them.
pub fn kubelet_flags(path: &str, content: &str) -> Vec<KubeletFlag> {
    let mut flags = Vec::new();
    for line in logical_lines(content) {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(assignments) = line.strip_prefix("Environment=") {
            for word in words(assignments) {
                if let Some((key, value)) = word.split_once('=') {
                    collect(&mut flags, path, key, value);
                }
            }
        } else if let Some(command) = line.strip_prefix("ExecStart=") {
            let tokens = words(command);
            let runs_kubelet = tokens
                .first()
                .is_some_and(|t| t.rsplit('/').next() == Some("kubelet"));
            if runs_kubelet {
                collect(&mut flags, path, "ExecStart", &tokens[1..].join(" "));
            }
        } else if let Some((key, value)) = line.split_once('=') {
            let value = words(value).join(" ");
            collect(&mut flags, path, key.trim(), &value);
        }
    }
    flags
}

/// The files of one node's kubelet unit, path → content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeKubeletFiles {
    pub node: String,
    pub files: BTreeMap<String, String>,
    /// Flags an earlier hop of the plan removes from this node's
    /// kubeadm-flags.env before this hop (its kubeadm strips them): gone
    /// from that file by the time this hop runs, wherever else they stay.
    pub stripped_earlier: BTreeSet<String>,
}

impl NodeKubeletFiles {
    /// The files as the hop to `minor` leaves them on this node when it
    /// runs that minor's kubeadm here: what kubeadm strips from
    /// kubeadm-flags.env is gone for every later hop.
    pub fn after_kubeadm(&mut self, minor: Minor) {
        for removed in REMOVED_KUBELET_FLAGS
            .iter()
            .filter(|r| r.stripped_by(minor))
        {
            self.stripped_earlier.insert(removed.flag.to_string());
        }
    }
}

/// The verdict for a hop to `hop`. `kubeadm` says whether the hop runs that
/// minor's `kubeadm upgrade` on the nodes it reboots (a converge hop may
/// not). For every flag removed at or before `hop`: warn when kubeadm will
/// strip it during the hop, block otherwise, naming the node and the file.
/// Flags removed before `hop` count too: a node whose kubelet lags the
/// cluster still starts with them today, and would not after this reboot.
pub fn check_kubelet_flags(nodes: &[NodeKubeletFiles], hop: Minor, kubeadm: bool) -> Check {
    let mut stripped = Vec::new();
    let mut blocking = Vec::new();
    for node in nodes {
        for (path, content) in &node.files {
            for found in kubelet_flags(path, content) {
                if found.origin.kubeadm_owned() && node.stripped_earlier.contains(&found.flag) {
                    continue;
                }
                let Some(removed) = flag_removed_by(&found.flag, hop) else {
                    continue;
                };
                let will_strip =
                    kubeadm && found.origin.kubeadm_owned() && removed.stripped_by(hop);
                let line = format!(
                    "{}: {} in {} ({}), removed in {}",
                    node.node,
                    found.flag,
                    found.origin.path,
                    found.origin.variable,
                    removed.removed_in
                );
                if will_strip {
                    stripped.push(format!(
                        "{line}; kubeadm {hop} removes it during the upgrade"
                    ));
                } else {
                    blocking.push(format!(
                        "{line}; nothing removes it before the kubelet restarts"
                    ));
                }
            }
        }
    }
    if !blocking.is_empty() {
        let mut details = blocking;
        details.extend(stripped);
        return Check {
            name: CheckName::KubeletFlags,
            verdict: Verdict::Block,
            summary: format!(
                "the {hop} kubelet would refuse to start: a flag it no longer knows is still set"
            ),
            details,
            remedy: Some(
                "remove the flag from that file on that node (for KUBELET_EXTRA_ARGS, also from \
                 nodeRegistration.kubeletExtraArgs in your kubeadm configuration so a re-join does \
                 not bring it back), then plan again"
                    .to_string(),
            ),
        };
    }
    if !stripped.is_empty() {
        return Check {
            name: CheckName::KubeletFlags,
            verdict: Verdict::Warn,
            summary: format!("flags the {hop} kubelet refuses, which kubeadm {hop} strips"),
            details: stripped,
            remedy: Some(format!(
                "nothing to do for this hop; a node you upgrade by hand must run kubeadm {hop}'s \
                 upgrade before its kubelet restarts"
            )),
        };
    }
    Check::pass(
        CheckName::KubeletFlags,
        format!("no node passes a kubelet flag that {hop} removed"),
    )
}

fn collect(flags: &mut Vec<KubeletFlag>, path: &str, variable: &str, value: &str) {
    let is_args =
        variable == "ExecStart" || (variable.starts_with("KUBELET_") && variable.ends_with("ARGS"));
    if !is_args {
        return;
    }
    let origin = FlagOrigin {
        path: path.to_string(),
        variable: variable.to_string(),
    };
    let tokens: Vec<&str> = value.split_whitespace().collect();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        i += 1;
        if !token.starts_with("--") || token.len() == 2 {
            continue;
        }
        let (flag, value) = match token.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_string())),
            None => match tokens.get(i) {
                Some(next) if !next.starts_with('-') && !next.starts_with('$') => {
                    i += 1;
                    (token, Some(next.to_string()))
                }
                _ => (token, None),
            },
        };
        flags.push(KubeletFlag {
            flag: flag.to_string(),
            value,
            origin: origin.clone(),
        });
    }
}

/// Lines with systemd's backslash continuations joined.
fn logical_lines(content: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in content.lines() {
        let raw = raw.trim_end_matches('\r');
        match raw.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head);
                current.push(' ');
            }
            None => {
                current.push_str(raw);
                lines.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

/// Whitespace-separated words with `"…"` and `'…'` quoting removed, as
/// systemd reads `Environment=` and `ExecStart=` and environment files.
fn words(s: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests;

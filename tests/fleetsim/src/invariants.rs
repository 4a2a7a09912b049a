//! What must hold in the event log of any correct upgrade, checked after the
//! fact so every fleetctl apply test can assert it in one line:
//!
//! 1. **Skew.** No kubelet ever runs newer (by minor) than the oldest running
//!    kube-apiserver (version skew policy; in HA the allowed kubelets narrow
//!    to the oldest instance). A control plane's kube-apiserver runs from its
//!    `(static-pods)` event while its kubelet runs, at that event's version.
//! 2. **kubeadm first.** A node boots a v1.M kubelet (M above the minor its
//!    previous boot ran) only after a successful v1.M kubeadm `upgrade
//!    apply`/`upgrade node` on that node since that previous boot — the
//!    kubeadm that rewrites what the new kubelet reads — and that kubelet
//!    starts with a config written by a v1.M kubeadm.
//! 3. **No crash.** No kubelet start failed.
//! 4. **Not too old.** No kubelet runs more than three minors older than the
//!    newest running kube-apiserver (the skew policy's other bound, since
//!    v1.28: "kubelet … may be up to three minor versions older than
//!    kube-apiserver", kubernetes.io/releases/version-skew-policy). A worker
//!    that keeps its kubelet while the control planes take several minors
//!    (`fleetctl --workers jump`) must stop before it falls further behind.
//!
//! Pure functions over `&[Event]`: no fleet needed to test them, and a test
//! can check a log it built by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::state::Event;
use crate::version::Version;

/// The rule a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// A kubelet ran newer than the oldest running kube-apiserver.
    KubeletNewerThanApiServer,
    /// A node booted a newer minor's kubelet before its own kubeadm step.
    KubeletBeforeKubeadm,
    /// An upgraded kubelet started with a config another kubeadm wrote.
    KubeletConfigNotFromKubeadm,
    /// A kubelet failed to start.
    KubeletCrashed,
    /// A kubelet ran more than three minors older than the newest running
    /// kube-apiserver.
    KubeletTooOld,
}

/// How many minors a kubelet may trail kube-apiserver (skew policy, v1.28+).
pub const KUBELET_MAX_BEHIND: u32 = 3;

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::KubeletNewerThanApiServer => "kubelet newer than the oldest kube-apiserver",
            Rule::KubeletBeforeKubeadm => "kubelet booted before its kubeadm upgrade",
            Rule::KubeletConfigNotFromKubeadm => "kubelet config not written by its kubeadm",
            Rule::KubeletCrashed => "kubelet failed to start",
            Rule::KubeletTooOld => "kubelet more than three minors older than a kube-apiserver",
        })
    }
}

/// One breach of a rule, at one event.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub rule: Rule,
    pub node: String,
    /// The index of the event in the log where it happened.
    pub index: usize,
    pub t: f64,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at event #{} (t={:.3}): {}: {}",
            self.node, self.index, self.t, self.rule, self.detail
        )
    }
}

/// What the log says about one node so far.
#[derive(Debug, Default)]
struct Node {
    /// Index of its current and previous `(boot)`.
    boot: Option<usize>,
    previous_boot: Option<usize>,
    /// What the current boot merged, and the last version an earlier boot merged.
    booted: Option<Version>,
    ran_before: Option<Version>,
    kubelet: Option<Version>,
    apiserver: Option<Version>,
    /// Successful kubeadm upgrades: (event index, binary version).
    kubeadm: Vec<(usize, Version)>,
}

impl Node {
    /// The minor this boot moved to, if it moved up.
    fn upgraded_to(&self) -> Option<Version> {
        match (self.booted, self.ran_before) {
            (Some(now), Some(before)) if now.minor_series() > before.minor_series() => Some(now),
            _ => None,
        }
    }
}

fn version(e: &Event) -> Option<Version> {
    e.version.as_deref().and_then(|v| Version::parse(v).ok())
}

fn is_kubeadm_upgrade(e: &Event) -> bool {
    let a: Vec<&str> = e.argv.iter().map(String::as_str).collect();
    matches!(a.as_slice(), ["kubeadm", "upgrade", "apply" | "node", ..])
}

/// Every violation of the rules above, in log order.
pub fn check(events: &[Event]) -> Vec<Violation> {
    let mut nodes: BTreeMap<&str, Node> = BTreeMap::new();
    let mut out = Vec::new();
    let mut too_new: BTreeSet<String> = BTreeSet::new();
    let mut too_old: BTreeSet<String> = BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        let violation = |rule, detail: String| Violation {
            rule,
            node: e.node.clone(),
            index: i,
            t: e.t,
            detail,
        };
        let node = nodes.entry(e.node.as_str()).or_default();
        match e.argv.first().map(String::as_str) {
            Some("(boot)") => {
                node.previous_boot = node.boot;
                node.boot = Some(i);
                node.ran_before = node.booted.or(node.ran_before);
                node.booted = version(e);
                node.kubelet = None;
                node.apiserver = None;
                if let (Some(to), Some(since)) = (node.upgraded_to(), node.previous_boot) {
                    let done = node
                        .kubeadm
                        .iter()
                        .any(|(at, v)| *at > since && v.minor_series() == to.minor_series());
                    if !done {
                        let before = node.ran_before.map(|v| v.to_string()).unwrap_or_default();
                        out.push(violation(
                            Rule::KubeletBeforeKubeadm,
                            format!(
                                "booted kubelet {to} (ran {before} before) with no successful {} kubeadm \
                                 upgrade apply/node on {} since its previous boot (event #{since})",
                                to.minor_series(),
                                e.node
                            ),
                        ));
                    }
                }
            }
            Some("(shutdown)") => {
                node.kubelet = None;
                node.apiserver = None;
            }
            Some("(kubelet)") if e.result == "ok" => {
                node.kubelet = version(e);
                if let Some(to) = node.upgraded_to().filter(|to| node.kubelet == Some(*to)) {
                    let config = e.config.as_deref().and_then(|c| Version::parse(c).ok());
                    if config.map(|c| c.minor_series()) != Some(to.minor_series()) {
                        out.push(violation(
                            Rule::KubeletConfigNotFromKubeadm,
                            format!(
                                "kubelet {to} started with a config written by kubeadm {}, not by a {} kubeadm",
                                e.config.as_deref().unwrap_or("(unknown)"),
                                to.minor_series()
                            ),
                        ));
                    }
                }
            }
            Some("(kubelet)") => {
                node.kubelet = None;
                node.apiserver = None;
                let v = e.version.as_deref().unwrap_or("(none)");
                out.push(violation(
                    Rule::KubeletCrashed,
                    format!("kubelet {v}: {}", e.result),
                ));
            }
            Some("(static-pods)") if node.kubelet.is_some() => node.apiserver = version(e),
            Some("kubeadm") if is_kubeadm_upgrade(e) && e.result == "ok" => {
                if let Some(v) = version(e) {
                    node.kubeadm.push((i, v));
                }
            }
            _ => continue,
        }
        // The skew rule, whenever a kubelet or an API server changed.
        let oldest = nodes
            .values()
            .filter_map(|n| n.apiserver)
            .min_by_key(|v| v.minor_series());
        let mut now_too_new = BTreeSet::new();
        if let Some(oldest) = oldest {
            for (name, n) in &nodes {
                let Some(k) = n.kubelet else { continue };
                if k.minor_series() > oldest.minor_series() {
                    now_too_new.insert(name.to_string());
                    if !too_new.contains(*name) {
                        out.push(Violation {
                            rule: Rule::KubeletNewerThanApiServer,
                            node: name.to_string(),
                            index: i,
                            t: e.t,
                            detail: format!(
                                "kubelet {k} runs while the oldest running kube-apiserver is {oldest}"
                            ),
                        });
                    }
                }
            }
        }
        too_new = now_too_new;
        let newest = nodes
            .values()
            .filter_map(|n| n.apiserver)
            .max_by_key(|v| v.minor_series());
        // While no API server runs, nothing is compared: a control plane's
        // reboot does not end a breach.
        if let Some(newest) = newest {
            let mut now_too_old = BTreeSet::new();
            for (name, n) in &nodes {
                let Some(k) = n.kubelet else { continue };
                if k.major == newest.major && k.minor + KUBELET_MAX_BEHIND < newest.minor {
                    now_too_old.insert(name.to_string());
                    if !too_old.contains(*name) {
                        out.push(Violation {
                            rule: Rule::KubeletTooOld,
                            node: name.to_string(),
                            index: i,
                            t: e.t,
                            detail: format!(
                                "kubelet {k} runs while a kube-apiserver runs {newest}, more than \
                                 {KUBELET_MAX_BEHIND} minors ahead"
                            ),
                        });
                    }
                }
            }
            too_old = now_too_old;
        }
    }
    out
}

/// The intervals `(from, to)` during which no kube-apiserver ran, after the
/// first one started. One still open at the end of the log ends at
/// `f64::INFINITY`.
pub fn api_outages(events: &[Event]) -> Vec<(f64, f64)> {
    let mut kubelets: BTreeSet<&str> = BTreeSet::new();
    let mut running: BTreeSet<&str> = BTreeSet::new();
    let mut down_since: Option<f64> = None;
    let mut ever_up = false;
    let mut out = Vec::new();
    for e in events {
        let node = e.node.as_str();
        match e.argv.first().map(String::as_str) {
            Some("(boot)" | "(shutdown)") => {
                kubelets.remove(node);
                running.remove(node);
            }
            Some("(kubelet)") if e.result == "ok" => {
                kubelets.insert(node);
            }
            Some("(kubelet)") => {
                kubelets.remove(node);
                running.remove(node);
            }
            Some("(static-pods)") if kubelets.contains(node) => {
                running.insert(node);
            }
            _ => continue,
        }
        match (running.is_empty(), down_since) {
            (false, Some(from)) => {
                out.push((from, e.t));
                down_since = None;
            }
            (false, None) => ever_up = true,
            (true, None) if ever_up => down_since = Some(e.t),
            _ => {}
        }
        if !running.is_empty() {
            ever_up = true;
        }
    }
    if let Some(from) = down_since {
        out.push((from, f64::INFINITY));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log written as `t node argv… [=version] [@config] [!result]`.
    fn log(lines: &[&str]) -> Vec<Event> {
        lines
            .iter()
            .map(|l| {
                let mut e = Event {
                    result: "ok".into(),
                    ..Default::default()
                };
                let mut words = l.split_whitespace();
                e.t = words.next().unwrap().parse().unwrap();
                e.node = words.next().unwrap().into();
                for w in words {
                    if let Some(v) = w.strip_prefix('=') {
                        e.version = Some(v.into());
                    } else if let Some(c) = w.strip_prefix('@') {
                        e.config = Some(c.into());
                    } else if let Some(r) = w.strip_prefix('!') {
                        e.result = r.replace('_', " ");
                    } else {
                        e.argv.push(w.into());
                    }
                }
                e
            })
            .collect()
    }

    /// The fleet starting at v1.34.2: cp-1 and w-1 booted, kubelets running.
    const START: &[&str] = &[
        "0 cp-1 (boot) =v1.34.2",
        "0.1 cp-1 (kubelet) =v1.34.2 @v1.34.2",
        "0.2 cp-1 (static-pods) =v1.34.2",
        "0.3 w-1 (boot) =v1.34.2",
        "0.4 w-1 (kubelet) =v1.34.2 @v1.34.2",
    ];

    /// The new order, v1.34 → v1.35, control plane first.
    const NEW_ORDER: &[&str] = &[
        "10 cp-1 systemd-sysupdate --definitions=/run/fleetctl-a update",
        "11 cp-1 kubeadm upgrade apply v1.35.3 --yes =v1.35.3",
        "11 cp-1 (static-pods) =v1.35.3",
        "12 cp-1 reboot",
        "13 cp-1 (shutdown)",
        "14 cp-1 (boot) =v1.35.3",
        "14.1 cp-1 (kubelet) =v1.35.3 @v1.35.3",
        "14.2 cp-1 (static-pods) =v1.35.3",
        "20 w-1 kubeadm upgrade node =v1.35.3",
        "21 w-1 reboot",
        "22 w-1 (shutdown)",
        "23 w-1 (boot) =v1.35.3",
        "23.1 w-1 (kubelet) =v1.35.3 @v1.35.3",
    ];

    fn with(extra: &[&str]) -> Vec<Event> {
        log(&[START, extra].concat())
    }

    fn rules(v: &[Violation]) -> Vec<(Rule, &str)> {
        v.iter().map(|x| (x.rule, x.node.as_str())).collect()
    }

    #[test]
    fn a_kubelet_three_minors_behind_passes_and_four_is_too_old() {
        // w-1 keeps v1.34 while cp-1 climbs to v1.37 (jumping workers):
        // three minors is the policy's limit, a fourth breaks it.
        let mut lines = vec![];
        let mut t = 10.0;
        for minor in 35..=38 {
            let v = format!("=v1.{minor}.0");
            lines.push(format!("{t} cp-1 kubeadm upgrade apply v1.{minor}.0 {v}"));
            lines.push(format!("{} cp-1 (static-pods) {v}", t + 0.1));
            lines.push(format!("{} cp-1 (shutdown)", t + 1.0));
            lines.push(format!("{} cp-1 (boot) {v}", t + 2.0));
            lines.push(format!("{} cp-1 (kubelet) {v} @{}", t + 2.1, &v[1..]));
            lines.push(format!("{} cp-1 (static-pods) {v}", t + 2.2));
            t += 10.0;
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let events = with(&refs);
        let found = check(&events);
        assert_eq!(rules(&found), [(Rule::KubeletTooOld, "w-1")], "{found:?}");
        assert!(found[0].detail.contains("v1.34.2"), "{}", found[0].detail);
        assert!(found[0].detail.contains("v1.38.0"), "{}", found[0].detail);
        // Up to v1.37 only: within the policy.
        let upto: Vec<&str> = refs[..refs.len() - 6].to_vec();
        assert_eq!(check(&with(&upto)), []);
    }

    #[test]
    fn the_new_order_passes_and_the_api_is_down_only_while_cp_1_reboots() {
        let events = with(NEW_ORDER);
        assert_eq!(check(&events), []);
        assert_eq!(api_outages(&events), [(13.0, 14.2)]);
    }

    #[test]
    fn the_old_order_breaks_kubeadm_first_and_crashes() {
        let events = with(&[
            "10 cp-1 systemd-sysupdate --component=kubernetes update",
            "12 cp-1 reboot",
            "13 cp-1 (shutdown)",
            "14 cp-1 (boot) =v1.35.3",
            "14.1 cp-1 (kubelet) =v1.35.3 !failed:_unknown_flag",
            "15 cp-1 kubeadm upgrade apply v1.35.3 --yes =v1.35.3 !connection_refused",
        ]);
        let v = check(&events);
        assert_eq!(
            rules(&v),
            [
                (Rule::KubeletBeforeKubeadm, "cp-1"),
                (Rule::KubeletCrashed, "cp-1")
            ]
        );
        assert_eq!((v[0].index, v[0].t), (8, 14.0));
        let text = v[0].to_string();
        assert!(text.starts_with("cp-1 at event #8 (t=14.000): kubelet booted before its kubeadm upgrade: booted kubelet v1.35.3 (ran v1.34.2 before)"), "{text}");
        assert_eq!(api_outages(&events), [(13.0, f64::INFINITY)]);
    }

    #[test]
    fn a_kubelet_newer_than_the_api_server_is_caught_even_when_it_starts() {
        // The worker's kubeadm ran (so rule 2 holds), but the control plane
        // was never upgraded: its v1.35 kubelet runs against a v1.34 API.
        let v = check(&with(&[
            "20 w-1 kubeadm upgrade node =v1.35.3",
            "22 w-1 (shutdown)",
            "23 w-1 (boot) =v1.35.3",
            "23.1 w-1 (kubelet) =v1.35.3 @v1.35.3",
            "24 w-1 kubectl uncordon w-1 =v1.35.3",
        ]));
        assert_eq!(rules(&v), [(Rule::KubeletNewerThanApiServer, "w-1")]);
        assert_eq!(v[0].index, 8, "reported once, where it began");
    }

    #[test]
    fn in_ha_the_oldest_api_server_counts() {
        let v = check(&log(&[
            "0 cp-1 (boot) =v1.34.2",
            "0.1 cp-1 (kubelet) =v1.34.2 @v1.34.2",
            "0.2 cp-1 (static-pods) =v1.34.2",
            "0 cp-2 (boot) =v1.34.2",
            "0.1 cp-2 (kubelet) =v1.34.2 @v1.34.2",
            "0.2 cp-2 (static-pods) =v1.34.2",
            "11 cp-1 kubeadm upgrade apply v1.35.3 --yes =v1.35.3",
            "11 cp-1 (static-pods) =v1.35.3",
            "13 cp-1 (shutdown)",
            "14 cp-1 (boot) =v1.35.3",
            "14.1 cp-1 (kubelet) =v1.35.3 @v1.35.3",
            "14.2 cp-1 (static-pods) =v1.35.3",
        ]));
        // cp-2's kube-apiserver is still v1.34: cp-1's v1.35 kubelet is too new.
        assert_eq!(rules(&v), [(Rule::KubeletNewerThanApiServer, "cp-1")]);
        assert_eq!(v[0].index, 10);
    }

    #[test]
    fn only_the_nodes_own_successful_kubeadm_since_its_last_boot_counts() {
        let reboot_into_1_35 = [
            "22 w-1 (shutdown)",
            "23 w-1 (boot) =v1.35.3",
            "23.1 w-1 (kubelet) =v1.35.3 @v1.35.3",
        ];
        let upgrade_cp = &NEW_ORDER[..8];
        for kubeadm in [
            "20 cp-1 kubeadm upgrade node =v1.35.3", // another node's
            "20 w-1 kubeadm upgrade node =v1.35.3 !failed", // failed
            "20 w-1 kubeadm upgrade node =v1.34.3",  // the old minor
            "20 w-1 kubeadm version -o short =v1.35.3", // no upgrade
        ] {
            let events = with(&[upgrade_cp, &[kubeadm], &reboot_into_1_35].concat());
            assert_eq!(
                rules(&check(&events)),
                [(Rule::KubeletBeforeKubeadm, "w-1")],
                "{kubeadm}"
            );
        }
        // One before the node's previous boot does not count either.
        let events = with(
            &[
                &[
                    "5 w-1 kubeadm upgrade node =v1.35.3",
                    "6 w-1 (shutdown)",
                    "7 w-1 (boot) =v1.34.2",
                ],
                upgrade_cp,
                &reboot_into_1_35,
            ]
            .concat(),
        );
        assert_eq!(
            rules(&check(&events)),
            [(Rule::KubeletBeforeKubeadm, "w-1")]
        );
    }

    #[test]
    fn an_upgraded_kubelet_needs_its_kubeadms_config() {
        let mut lines = NEW_ORDER.to_vec();
        let last = lines.len() - 1;
        lines[last] = "23.1 w-1 (kubelet) =v1.35.3 @v1.34.2";
        let v = check(&with(&lines));
        assert_eq!(rules(&v), [(Rule::KubeletConfigNotFromKubeadm, "w-1")]);
        lines[last] = "23.1 w-1 (kubelet) =v1.35.3";
        assert_eq!(
            rules(&check(&with(&lines))),
            [(Rule::KubeletConfigNotFromKubeadm, "w-1")]
        );
    }

    #[test]
    fn a_patch_reboot_and_a_first_boot_need_no_kubeadm() {
        let events = with(&[
            "22 w-1 (shutdown)",
            "23 w-1 (boot) =v1.34.3",
            "23.1 w-1 (kubelet) =v1.34.3 @v1.34.2",
        ]);
        assert_eq!(check(&events), []);
        assert_eq!(
            check(&log(&[
                "0 w-9 (boot) =v1.36.0",
                "1 w-9 (kubelet) =v1.36.0 @v1.36.0"
            ])),
            []
        );
    }

    #[test]
    fn a_node_without_a_kubelet_is_a_crash_and_an_outage() {
        let events = with(&[
            "13 cp-1 (shutdown)",
            "14 cp-1 (boot)",
            "14.1 cp-1 (kubelet) !failed:_Unit_kubelet.service_not_found.",
        ]);
        let v = check(&events);
        assert_eq!(rules(&v), [(Rule::KubeletCrashed, "cp-1")]);
        assert!(
            v[0].detail.contains("Unit kubelet.service not found."),
            "{}",
            v[0]
        );
        assert_eq!(api_outages(&events), [(13.0, f64::INFINITY)]);
    }
}

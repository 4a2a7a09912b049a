//! `fleetsim ctl` and `fleetsim events`: flip faults and publish images on a
//! running fleet, and read its event log. They only touch the state
//! directory (under the same locks the tools use), so they work from any
//! shell while the supervisor runs.

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use crate::layout::FleetDir;
use crate::state::{Event, Faults, Shared, now};
use crate::version::Version;

pub const CTL_USAGE: &str = "\
fleetsim ctl --dir DIR COMMAND
  hang NODE              NODE does not come back from its next reboot
  release NODE           let a hung NODE boot
  hub-down | hub-up      the extension hub answers 503 / serves again
  publish vX.Y.Z         add an image to the hub (SHA256SUMS follows)
  publish-containerd X.Y.Z  add a containerd image (the bakery's name: no v)
  fail-upgrade-apply N   the next N `kubeadm upgrade apply` calls fail
  fail-upgrade-node NODE the next `kubeadm upgrade node` on NODE fails
  power-cycle NODE       NODE loses power: killed at once, then boots what is staged
  pdb-block NODE         a PodDisruptionBudget blocks draining NODE
  pdb-unblock NODE       drains of NODE succeed again
  slow-boot NODE SECS    NODE's boots take SECS longer (0 to reset)
  drop-ssh NODE          cut NODE's SSH connections now (sshd's sessions die, the listener stays)
  drop-ssh-during-upgrade-apply NODE
                         cut them while NODE's next `kubeadm upgrade apply` works
  kured-lock-forbidden   the admin kubeconfig may no longer change Kured's DaemonSet
  kured-lock-allowed     it may again
  ceph-health-err CODE   Ceph raises HEALTH_ERR check CODE (OSD_FULL, PG_DAMAGED…)
  ceph-health-err-clear  it clears
  ceph-operator-stop     Rook's operator stops: the CephCluster's status goes stale
  ceph-operator-start    it runs again
  alert NAME firing|pending|resolved
                         the fleet's Prometheus (and Alertmanager) report alert NAME so";

/// One `fleetsim ctl` command, parsed.
#[derive(Debug, PartialEq)]
pub enum Ctl {
    Hang(String),
    Release(String),
    HubDown,
    HubUp,
    Publish(Version),
    PublishContainerd(String),
    FailUpgradeApply(u32),
    FailUpgradeNode(String),
    PowerCycle(String),
    PdbBlock(String),
    PdbUnblock(String),
    SlowBoot(String, f64),
    KuredLockForbidden(bool),
    DropSsh(String),
    DropSshDuringUpgradeApply(String),
    /// Ceph's injected HEALTH_ERR check, or `None` to clear it.
    CephHealthErr(Option<String>),
    /// Rook's operator stops (true) or runs again.
    CephOperatorStop(bool),
    /// An alert's state: `firing`, `pending`, or `None` once resolved.
    Alert(String, Option<String>),
}

pub fn parse(args: &[String]) -> Result<Ctl> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    Ok(match a.as_slice() {
        ["hang", n] => Ctl::Hang(n.to_string()),
        ["release", n] => Ctl::Release(n.to_string()),
        ["hub-down"] => Ctl::HubDown,
        ["hub-up"] => Ctl::HubUp,
        ["publish", v] => Ctl::Publish(Version::parse(v)?),
        ["publish-containerd", v] => {
            crate::containerd::check_version(v)?;
            Ctl::PublishContainerd(v.to_string())
        }
        ["fail-upgrade-apply", n] => Ctl::FailUpgradeApply(
            n.parse()
                .with_context(|| format!("fail-upgrade-apply: `{n}` is not a count"))?,
        ),
        ["fail-upgrade-node", n] => Ctl::FailUpgradeNode(n.to_string()),
        ["power-cycle", n] => Ctl::PowerCycle(n.to_string()),
        ["pdb-block", n] => Ctl::PdbBlock(n.to_string()),
        ["pdb-unblock", n] => Ctl::PdbUnblock(n.to_string()),
        ["drop-ssh", n] => Ctl::DropSsh(n.to_string()),
        ["drop-ssh-during-upgrade-apply", n] => Ctl::DropSshDuringUpgradeApply(n.to_string()),
        ["ceph-health-err", code] => {
            if code.is_empty() || !code.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                bail!("ceph-health-err: `{code}` is not a Ceph health code (A_CODE_LIKE_THIS)");
            }
            Ctl::CephHealthErr(Some(code.to_string()))
        }
        ["ceph-health-err-clear"] => Ctl::CephHealthErr(None),
        ["ceph-operator-stop"] => Ctl::CephOperatorStop(true),
        ["ceph-operator-start"] => Ctl::CephOperatorStop(false),
        ["kured-lock-forbidden"] => Ctl::KuredLockForbidden(true),
        ["kured-lock-allowed"] => Ctl::KuredLockForbidden(false),
        ["slow-boot", n, s] => {
            let secs: f64 = s
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .with_context(|| format!("slow-boot: `{s}` is not a number of seconds ≥ 0"))?;
            Ctl::SlowBoot(n.to_string(), secs)
        }
        ["alert", name, state] => {
            let state = match *state {
                "firing" | "pending" => Some(state.to_string()),
                "resolved" => None,
                other => bail!("alert {name}: `{other}` is not firing, pending or resolved"),
            };
            Ctl::Alert(name.to_string(), state)
        }
        _ => bail!("unknown ctl command `{}`\n{CTL_USAGE}", a.join(" ")),
    })
}

/// Applies `ctl` to the fleet in `fleet` and records it in the event log.
pub fn run(fleet: &FleetDir, ctl: &Ctl, argv: &[String]) -> Result<String> {
    let shared = Shared::new(fleet.cluster());
    if let Some(node) = ctl_node(ctl) {
        check_node(&shared, node)?;
    }
    let message = match ctl {
        Ctl::PowerCycle(node) => {
            // The supervisor's node thread watches for this file and pulls
            // the plug; a node that is down already ignores it.
            let path = fleet.power_cycle_request(node);
            std::fs::write(&path, b"").with_context(|| format!("writing {}", path.display()))?;
            format!("{node} loses power")
        }
        Ctl::DropSsh(node) => {
            // The supervisor's node thread acts on it and removes it.
            let path = fleet.drop_ssh_request(node);
            std::fs::write(&path, b"").with_context(|| format!("writing {}", path.display()))?;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while path.exists() {
                if std::time::Instant::now() > deadline {
                    let _ = std::fs::remove_file(&path);
                    bail!(
                        "the supervisor did not act on {} within 10 s (is {node} down?)",
                        path.display()
                    );
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            format!("{node}'s SSH connections cut")
        }
        Ctl::PublishContainerd(v) => {
            let cache = crate::image::Cache::default_location()?;
            let name = crate::containerd::image_name(v);
            if crate::hub::publish_containerd(&fleet.hub(), &cache, v)? {
                format!("published {name}")
            } else {
                format!("the hub already serves {name}")
            }
        }
        Ctl::Publish(v) => {
            let cache = crate::image::Cache::default_location()?;
            if crate::hub::publish(&fleet.hub(), &cache, v)? {
                format!("published {}", v.image_name())
            } else {
                format!("the hub already serves {}", v.image_name())
            }
        }
        other => {
            shared.update_faults(|f| apply(f, other))?;
            "ok".to_string()
        }
    };
    let mut full = vec!["fleetsim".to_string(), "ctl".to_string()];
    full.extend(argv.iter().cloned());
    shared.record(&Event {
        t: now(),
        node: "(fleetsim)".into(),
        argv: full,
        result: "ok".into(),
        pins: Vec::new(),
        ..Default::default()
    })?;
    Ok(message)
}

fn ctl_node(ctl: &Ctl) -> Option<&str> {
    match ctl {
        Ctl::Hang(n)
        | Ctl::Release(n)
        | Ctl::FailUpgradeNode(n)
        | Ctl::PowerCycle(n)
        | Ctl::PdbBlock(n)
        | Ctl::PdbUnblock(n)
        | Ctl::SlowBoot(n, _)
        | Ctl::DropSsh(n)
        | Ctl::DropSshDuringUpgradeApply(n) => Some(n),
        _ => None,
    }
}

fn check_node(shared: &Shared, node: &str) -> Result<()> {
    let cluster = shared.cluster()?;
    if cluster.nodes.is_empty() {
        bail!(
            "{}/cluster.json has no nodes: is a fleet running in this --dir?",
            shared.dir.display()
        );
    }
    if !cluster.nodes.contains_key(node) {
        let known: Vec<&str> = cluster.nodes.keys().map(String::as_str).collect();
        bail!("no node {node} in this fleet (nodes: {})", known.join(", "));
    }
    Ok(())
}

/// The fault change itself; pure, so it is unit-tested.
pub fn apply(f: &mut Faults, ctl: &Ctl) {
    fn add(list: &mut Vec<String>, n: &str) {
        if !list.iter().any(|x| x == n) {
            list.push(n.to_string());
        }
    }
    match ctl {
        Ctl::Hang(n) => add(&mut f.hang_on_reboot, n),
        Ctl::Release(n) => f.hang_on_reboot.retain(|x| x != n),
        Ctl::HubDown => f.hub_down = true,
        Ctl::HubUp => f.hub_down = false,
        Ctl::FailUpgradeApply(k) => f.fail_upgrade_apply = *k,
        Ctl::FailUpgradeNode(n) => add(&mut f.fail_upgrade_node, n),
        Ctl::PdbBlock(n) => add(&mut f.pdb_block, n),
        Ctl::PdbUnblock(n) => f.pdb_block.retain(|x| x != n),
        Ctl::SlowBoot(n, s) if *s == 0.0 => {
            f.slow_boot.remove(n);
        }
        Ctl::SlowBoot(n, s) => {
            f.slow_boot.insert(n.clone(), *s);
        }
        Ctl::KuredLockForbidden(on) => f.kured_lock_forbidden = *on,
        Ctl::DropSshDuringUpgradeApply(n) => add(&mut f.drop_ssh_during_upgrade_apply, n),
        Ctl::Alert(name, Some(state)) => {
            f.alerts.insert(name.clone(), state.clone());
        }
        Ctl::CephHealthErr(code) => f.ceph_health_err = code.clone(),
        Ctl::CephOperatorStop(true) => f.ceph_operator_stopped = Some(now()),
        Ctl::CephOperatorStop(false) => f.ceph_operator_stopped = None,
        Ctl::Alert(name, None) => {
            f.alerts.remove(name);
        }
        Ctl::Publish(_) | Ctl::PublishContainerd(_) | Ctl::PowerCycle(_) | Ctl::DropSsh(_) => {}
    }
}

/// The event log for humans: seconds since the first event, node, argv,
/// result, and the version involved (and a kubelet's config) if any.
pub fn format_events(events: &[Event]) -> String {
    let start = events.first().map(|e| e.t).unwrap_or(0.0);
    let mut out = String::new();
    for e in events {
        let extra = match (&e.version, &e.config) {
            (Some(v), Some(c)) => format!("  [{v}, config by kubeadm {c}]"),
            (Some(v), None) => format!("  [{v}]"),
            (None, Some(c)) => format!("  [config by kubeadm {c}]"),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            out,
            "{:>8.3}  {:<12} {}  → {}{extra}",
            e.t - start,
            e.node,
            e.argv.join(" "),
            e.result
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_every_command() {
        assert_eq!(parse(&args("hang w-1")).unwrap(), Ctl::Hang("w-1".into()));
        assert_eq!(parse(&args("hub-down")).unwrap(), Ctl::HubDown);
        assert_eq!(
            parse(&args("publish v1.38.9")).unwrap(),
            Ctl::Publish(Version::parse("v1.38.9").unwrap())
        );
        assert_eq!(
            parse(&args("publish-containerd 2.1.5")).unwrap(),
            Ctl::PublishContainerd("2.1.5".into())
        );
        assert!(parse(&args("publish-containerd v2.1.5")).is_err());
        assert_eq!(
            parse(&args("fail-upgrade-apply 2")).unwrap(),
            Ctl::FailUpgradeApply(2)
        );
        assert_eq!(
            parse(&args("fail-upgrade-node w-1")).unwrap(),
            Ctl::FailUpgradeNode("w-1".into())
        );
        assert_eq!(
            parse(&args("power-cycle cp-1")).unwrap(),
            Ctl::PowerCycle("cp-1".into())
        );
        assert_eq!(
            parse(&args("slow-boot w-2 1.5")).unwrap(),
            Ctl::SlowBoot("w-2".into(), 1.5)
        );
        assert_eq!(
            parse(&args("alert KubeNodeNotReady firing")).unwrap(),
            Ctl::Alert("KubeNodeNotReady".into(), Some("firing".into()))
        );
        assert_eq!(
            parse(&args("alert KubeNodeNotReady resolved")).unwrap(),
            Ctl::Alert("KubeNodeNotReady".into(), None)
        );
        assert_eq!(
            parse(&args("ceph-health-err OSD_FULL")).unwrap(),
            Ctl::CephHealthErr(Some("OSD_FULL".into()))
        );
        assert_eq!(
            parse(&args("ceph-health-err-clear")).unwrap(),
            Ctl::CephHealthErr(None)
        );
        assert_eq!(
            parse(&args("ceph-operator-stop")).unwrap(),
            Ctl::CephOperatorStop(true)
        );
        for bad in [
            "",
            "ceph-health-err osd_full",
            "hang",
            "alert X burning",
            "publish 1.38",
            "slow-boot w-1 -1",
            "fail-upgrade-apply x",
            "explode",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn events_read_with_their_versions() {
        let events = [
            Event {
                t: 10.0,
                node: "cp-1".into(),
                argv: vec!["(kubelet)".into()],
                result: "ok".into(),
                version: Some("v1.35.3".into()),
                config: Some("v1.35.3".into()),
                ..Default::default()
            },
            Event {
                t: 10.5,
                node: "cp-1".into(),
                argv: vec!["reboot".into()],
                result: "ok".into(),
                ..Default::default()
            },
        ];
        assert_eq!(
            format_events(&events),
            "   0.000  cp-1         (kubelet)  → ok  [v1.35.3, config by kubeadm v1.35.3]\n   0.500  cp-1         reboot  → ok\n"
        );
    }

    #[test]
    fn faults_flip_and_reset() {
        let mut f = Faults::default();
        apply(&mut f, &Ctl::Hang("w-1".into()));
        apply(&mut f, &Ctl::Hang("w-1".into()));
        assert_eq!(f.hang_on_reboot, ["w-1"]);
        apply(&mut f, &Ctl::Release("w-1".into()));
        assert!(f.hang_on_reboot.is_empty());
        apply(&mut f, &Ctl::SlowBoot("w-2".into(), 2.0));
        assert_eq!(f.slow_boot.get("w-2"), Some(&2.0));
        apply(&mut f, &Ctl::SlowBoot("w-2".into(), 0.0));
        assert!(f.slow_boot.is_empty());
        apply(&mut f, &Ctl::FailUpgradeNode("w-1".into()));
        apply(&mut f, &Ctl::FailUpgradeNode("w-1".into()));
        assert_eq!(f.fail_upgrade_node, ["w-1"]);
        apply(&mut f, &Ctl::HubDown);
        assert!(f.hub_down);
        apply(&mut f, &Ctl::HubUp);
        assert!(!f.hub_down);
        apply(&mut f, &parse(&args("kured-lock-forbidden")).unwrap());
        assert!(f.kured_lock_forbidden);
        apply(&mut f, &parse(&args("kured-lock-allowed")).unwrap());
        assert!(!f.kured_lock_forbidden);
    }
}

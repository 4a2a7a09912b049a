//! Property tests of the planner over random fleets: 1–3 control-plane
//! nodes, 0–4 workers, cluster minor v1.32–v1.36, targets up to v1.38, with
//! floating or stray configs, staged-not-booted patches, staged OS updates,
//! cordoned nodes, containerd pinning, and half-done states made the only
//! honest way: by running a prefix of a real plan (see `testkit::apply_step`).

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::inventory::Role;
use crate::node::Pin;
use crate::version::{Minor, TargetVersion, Version};

use super::testkit::*;
use super::*;

mod planner_rules;
use planner_rules::*;

const HUB_MINORS: std::ops::RangeInclusive<u64> = 29..=38;

#[derive(Debug, Clone, Copy)]
enum Conf {
    Exact,
    Floating,
    Stray,
    Missing,
}

#[derive(Debug, Clone)]
struct NodeGen {
    patch: u64,
    conf: Conf,
    staged_newest: bool,
    os_update: bool,
    cordoned: bool,
}

#[derive(Debug, Clone)]
struct FleetGen {
    cps: usize,
    workers: usize,
    cluster_minor: u64,
    cluster_patch: u64,
    target_offset: u64,
    newest: Vec<u64>,
    nodes: Vec<NodeGen>,
    containerd: bool,
    /// Plan as if the hub's list could not be read (the fleet still
    /// stages from the real hub).
    unreadable: bool,
    cuts: (usize, usize),
}

fn node_gen() -> impl Strategy<Value = NodeGen> {
    (
        0u64..5,
        prop_oneof![
            6 => Just(Conf::Exact),
            2 => Just(Conf::Floating),
            1 => Just(Conf::Stray),
            1 => Just(Conf::Missing),
        ],
        any::<bool>(),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(patch, conf, staged_newest, os_update, cordoned)| NodeGen {
                patch,
                conf,
                staged_newest,
                os_update,
                cordoned,
            },
        )
}

fn fleet_gen() -> impl Strategy<Value = FleetGen> {
    (
        1usize..=3,
        0usize..=4,
        32u64..=36,
        0u64..5,
        0u64..=8,
        prop::collection::vec(0u64..=4, HUB_MINORS.count()),
        prop::collection::vec(node_gen(), 7),
        (prop::bool::weighted(0.3), prop::bool::weighted(0.2)),
        (any::<usize>(), any::<usize>()),
    )
        .prop_map(
            |(
                cps,
                workers,
                cluster_minor,
                cluster_patch,
                target_offset,
                newest,
                nodes,
                (containerd, unreadable),
                cuts,
            )| {
                FleetGen {
                    cps,
                    workers,
                    cluster_minor,
                    cluster_patch,
                    target_offset,
                    newest,
                    nodes,
                    containerd,
                    unreadable,
                    cuts,
                }
            },
        )
}

impl FleetGen {
    fn hub(&self) -> HubVersions {
        let series: Vec<(u64, u64)> = HUB_MINORS.zip(self.newest.iter().copied()).collect();
        hub(&series)
    }

    /// What the planner is told about the hub.
    fn plan_hub(&self) -> HubVersions {
        if self.unreadable {
            HubVersions::Unresolved("connection refused".into())
        } else {
            self.hub()
        }
    }

    fn newest_of(&self, minor: u64) -> u64 {
        self.newest[(minor - HUB_MINORS.start()) as usize]
    }

    fn target(&self) -> TargetVersion {
        let t = (self.cluster_minor + self.target_offset).min(*HUB_MINORS.end());
        TargetVersion::Minor(Minor::new(1, t))
    }

    /// A consistent fleet nobody has started upgrading: every node on some
    /// patch of the cluster's minor, with the irregularities drawn.
    fn state(&self) -> FleetState {
        let c = self.cluster_minor;
        let newest = self.newest_of(c);
        let cluster = Version::new(1, c, self.cluster_patch % (newest + 1));
        let mut f = fleet(&cluster.to_string());
        let names: Vec<(String, Role)> = (1..=self.cps)
            .map(|i| (format!("cp-{i}"), Role::ControlPlane))
            .chain((1..=self.workers).map(|i| (format!("w-{i}"), Role::Worker)))
            .collect();
        for ((name, role), g) in names.iter().zip(&self.nodes) {
            let running = Version::new(1, c, g.patch % (newest + 1));
            f = f.node(name, *role, &running.to_string());
            let staged = if g.staged_newest {
                Version::new(1, c, newest)
            } else {
                running.clone()
            };
            let conf = g.conf;
            let os_update = g.os_update;
            f = f.with(name, |facts| {
                facts.kubernetes.staged = Some(staged);
                match conf {
                    Conf::Exact => {}
                    Conf::Floating => facts.kubernetes.configs = vec![floating()],
                    Conf::Stray => facts.kubernetes.configs.insert(
                        0,
                        config(
                            "/etc/sysupdate.kubernetes.d/kubernetes-v1.29.conf",
                            "MatchPattern=kubernetes-v1.29.@v-%a.raw\n",
                            Pin::Pinned(Minor::new(1, 29)),
                        ),
                    ),
                    Conf::Missing => facts.kubernetes.configs.clear(),
                }
                if os_update {
                    facts.os.staged = Some("4230.3.0".into());
                }
            });
            let cordoned = g.cordoned;
            f = f.api(name, |n| n.cordoned = cordoned);
        }
        if self.containerd {
            f = f.containerd("v2.1", "v2.0.3");
        }
        f.build()
    }
}

proptest! {
    #[test]
    fn jumping_workers_hold_every_rule_and_resume(g in fleet_gen()) {
        let hub = g.hub();
        let plan_hub = g.plan_hub();
        let target = g.target();
        let jump = |s: &FleetState| plan_with(s, &target, &plan_hub, WorkerStrategy::Jump);
        let fresh = g.state();
        let p0 = jump(&fresh);
        prop_assert!(p0.is_ok(), "fresh fleet refused: {:?}", p0);
        let p0 = p0.unwrap_or_else(|_| unreachable!());
        check_hops(&fresh, &p0, target.minor())?;
        check_order(&fresh, &p0)?;
        check_invariant(&fresh, &p0, &hub)?;
        check_not_too_old(&fresh, &p0, &hub)?;
        check_execution(&fresh, &p0, &target, &plan_hub, &hub)?;

        let k = g.cuts.0 % (flat(&p0).len() + 1);
        let half = after_steps(&fresh, &p0, k, &hub);
        let p1 = jump(&half);
        prop_assert!(p1.is_ok(), "half-done fleet refused after {} steps: {:?}", k, p1);
        let p1 = p1.unwrap_or_else(|_| unreachable!());
        check_hops(&half, &p1, target.minor())?;
        check_order(&half, &p1)?;
        check_invariant(&half, &p1, &hub)?;
        check_not_too_old(&half, &p1, &hub)?;
        check_execution(&half, &p1, &target, &plan_hub, &hub)?;
        check_resume(&p0, k, &p1)?;
    }

    #[test]
    fn plans_for_fresh_and_half_done_fleets_hold_every_rule(g in fleet_gen()) {
        let hub = g.hub();
        let plan_hub = g.plan_hub();
        let target = g.target();
        let fresh = g.state();
        let p0 = plan(&fresh, &target, &plan_hub);
        prop_assert!(p0.is_ok(), "fresh fleet refused: {:?}", p0);
        let p0 = p0.unwrap_or_else(|_| unreachable!());
        check_hops(&fresh, &p0, target.minor())?;
        check_order(&fresh, &p0)?;
        check_invariant(&fresh, &p0, &hub)?;
        check_not_too_old(&fresh, &p0, &hub)?;
        check_execution(&fresh, &p0, &target, &plan_hub, &hub)?;

        // Interrupt it anywhere, plan again: only the rest remains.
        let k = g.cuts.0 % (flat(&p0).len() + 1);
        let half = after_steps(&fresh, &p0, k, &hub);
        let p1 = plan(&half, &target, &plan_hub);
        prop_assert!(p1.is_ok(), "half-done fleet refused after {} steps: {:?}", k, p1);
        let p1 = p1.unwrap_or_else(|_| unreachable!());
        check_hops(&half, &p1, target.minor())?;
        check_order(&half, &p1)?;
        check_invariant(&half, &p1, &hub)?;
        check_execution(&half, &p1, &target, &plan_hub, &hub)?;
        check_resume(&p0, k, &p1)?;

        // And interrupt the resumed plan too.
        let k2 = g.cuts.1 % (flat(&p1).len() + 1);
        let twice = after_steps(&half, &p1, k2, &hub);
        let p2 = plan(&twice, &target, &plan_hub);
        prop_assert!(p2.is_ok(), "{:?}", p2);
        let p2 = p2.unwrap_or_else(|_| unreachable!());
        check_order(&twice, &p2)?;
        check_resume(&p1, k2, &p2)?;
    }

    #[test]
    fn a_target_below_the_cluster_is_always_refused(g in fleet_gen(), back in 1u64..5) {
        let state = g.state();
        let c = state.cluster.version.as_ref().unwrap().minor();
        let target = TargetVersion::Minor(Minor::new(1, c.minor.saturating_sub(back)));
        let refused = matches!(plan(&state, &target, &g.hub()), Err(Refusal::Downgrade { .. }));
        prop_assert!(refused);
    }

    #[test]
    fn a_missing_minor_on_the_path_is_always_refused(g in fleet_gen(), pick in any::<usize>()) {
        let state = g.state();
        let target = g.target();
        let c = state.cluster.version.as_ref().unwrap().minor();
        prop_assume!(target.minor() > c);
        let span = target.minor().minor - c.minor;
        let missing = Minor::new(1, c.minor + 1 + (pick as u64 % span));
        let all = g.hub().versions().to_vec();
        let hub = HubVersions::resolved(all.into_iter().filter(|v| v.minor() != missing).collect());
        let refused = matches!(
            plan(&state, &target, &hub),
            Err(Refusal::Unpublished { minor, .. }) if minor == missing
        );
        prop_assert!(refused);
    }
}

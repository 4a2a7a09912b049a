//! The rules every plan of the property tests must hold, each a function
//! that names the first step breaking it.

use super::*;

fn first_cp(state: &FleetState) -> String {
    state.first_control_plane().unwrap().name.clone()
}

/// Hops are consecutive minors ending at the target, each of the right
/// kind; no minor past the cluster's is skipped.
pub(super) fn check_hops(
    state: &FleetState,
    plan: &Plan,
    target: Minor,
) -> Result<(), TestCaseError> {
    let cluster = state.cluster.version.as_ref().unwrap().minor();
    for pair in plan.hops.windows(2) {
        prop_assert_eq!(
            pair[1].minor,
            pair[0].minor.next(),
            "hops skip or repeat a minor"
        );
    }
    if let Some(last) = plan.hops.last() {
        prop_assert_eq!(last.minor, target);
    }
    if target > cluster {
        let upgrades: Vec<Minor> = plan
            .hops
            .iter()
            .filter(|h| h.kind == HopKind::Upgrade)
            .map(|h| h.minor)
            .collect();
        let mut expected = Vec::new();
        let mut m = cluster.next();
        while m <= target {
            expected.push(m);
            m = m.next();
        }
        prop_assert_eq!(upgrades, expected);
    }
    for hop in &plan.hops {
        let kind = if hop.minor > cluster {
            HopKind::Upgrade
        } else if hop.minor == target {
            HopKind::Converge
        } else {
            HopKind::Finish
        };
        prop_assert_eq!(hop.kind, kind);
        prop_assert!(hop.minor >= cluster);
    }
    Ok(())
}

/// kubeadm's order inside each hop: phases in their canonical order, one
/// `upgrade apply` per upgrade hop on the first control plane and before
/// anything else is staged; every control plane's kubeadm step before any
/// node is staged or rolled; every control plane rolled before any worker
/// is touched; a node's download before its kubeadm step, and its kubeadm
/// step before its staging and roll; one roll per node and hop.
pub(super) fn check_order(state: &FleetState, plan: &Plan) -> Result<(), TestCaseError> {
    let first = first_cp(state);
    let role = |n: &str| {
        state
            .nodes
            .iter()
            .find(|x| x.name == n)
            .map_or(Role::Worker, |x| x.role)
    };
    for hop in &plan.hops {
        let kinds: Vec<PhaseKind> = hop.phases.iter().map(|p| p.kind).collect();
        let mut sorted = kinds.clone();
        sorted.sort_by_key(|k| *k as u8);
        sorted.dedup();
        prop_assert_eq!(&kinds, &sorted, "phases out of order or repeated");
        for phase in &hop.phases {
            prop_assert!(!phase.steps.is_empty(), "empty phase {:?}", phase.kind);
        }
        let steps: Vec<&Step> = hop.steps().collect();
        let applies: Vec<usize> = (0..steps.len())
            .filter(|&i| matches!(steps[i].action, Action::UpgradeApply { .. }))
            .collect();
        if hop.kind == HopKind::Upgrade {
            prop_assert_eq!(applies.len(), 1, "one upgrade apply per upgrade hop");
            prop_assert_eq!(&steps[applies[0]].node, &first);
        } else {
            prop_assert!(applies.is_empty(), "no upgrade apply outside upgrade hops");
        }
        let is_kubeadm =
            |a: &Action| matches!(a, Action::UpgradeApply { .. } | Action::UpgradeNode { .. });
        let stages_or_rolls = |a: &Action| {
            matches!(
                a,
                Action::Roll
                    | Action::Stage {
                        component: Component::Kubernetes,
                        ..
                    }
            )
        };
        let last_cp_kubeadm = (0..steps.len())
            .filter(|&i| is_kubeadm(&steps[i].action) && role(&steps[i].node) == Role::ControlPlane)
            .max();
        let first_stage = (0..steps.len()).find(|&i| stages_or_rolls(&steps[i].action));
        if let (Some(k), Some(s)) = (last_cp_kubeadm, first_stage) {
            prop_assert!(
                k < s,
                "a node is staged or rolled before every control plane's kubeadm step"
            );
        }
        let last_cp_roll = (0..steps.len())
            .filter(|&i| {
                steps[i].action == Action::Roll && role(&steps[i].node) == Role::ControlPlane
            })
            .max();
        let first_worker_change = (0..steps.len()).find(|&i| {
            role(&steps[i].node) == Role::Worker
                && !matches!(steps[i].action, Action::Download { .. } | Action::Uncordon)
                && !matches!(steps[i].action, Action::RemoveImages { .. })
        });
        if let (Some(r), Some(w)) = (last_cp_roll, first_worker_change) {
            prop_assert!(
                r < w,
                "a worker is touched before every control plane rebooted"
            );
        }
        let mut rolls: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, step) in steps.iter().enumerate() {
            let mine = |f: &dyn Fn(&Action) -> bool| {
                (0..steps.len())
                    .filter(|&j| steps[j].node == step.node && f(&steps[j].action))
                    .collect::<Vec<_>>()
            };
            if is_kubeadm(&step.action) {
                for d in mine(&|a| matches!(a, Action::Download { .. })) {
                    prop_assert!(d < i, "{} runs kubeadm before its download", &step.node);
                }
                for s in mine(&stages_or_rolls) {
                    prop_assert!(
                        i < s,
                        "{} staged or rolled before its kubeadm step",
                        &step.node
                    );
                }
            }
            if step.action == Action::Roll {
                *rolls.entry(&step.node).or_default() += 1;
            }
        }
        prop_assert!(
            rolls.values().all(|&n| n == 1),
            "a node reboots twice in one hop"
        );
    }
    Ok(())
}

/// The invariant the order exists for, replayed step by step: whatever
/// moment a node rebooted unexpectedly, it would boot a kubelet no newer
/// than every kube-apiserver (each control plane's moves with its own
/// kubeadm step), with a config its own kubeadm step for that minor wrote;
/// and no kubelet that does run is newer than any kube-apiserver.
pub(super) fn check_invariant(
    state: &FleetState,
    plan: &Plan,
    hub: &HubVersions,
) -> Result<(), TestCaseError> {
    let cluster = state.cluster.version.as_ref().map(|v| v.minor());
    let mut apiservers: BTreeMap<String, Option<Minor>> = state
        .nodes
        .iter()
        .filter(|n| n.role == Role::ControlPlane)
        .map(|n| (n.name.clone(), cluster))
        .collect();
    let mut s = state.clone();
    for step in flat(plan) {
        apply_step(&mut s, &step, hub);
        match &step.action {
            Action::UpgradeApply { .. } | Action::UpgradeNode { .. }
                if apiservers.contains_key(&step.node) =>
            {
                let now = s.cluster.version.as_ref().map(|v| v.minor());
                apiservers.insert(step.node.clone(), now);
            }
            _ => {}
        }
        let oldest = apiservers.values().flatten().min().copied();
        for node in &s.nodes {
            let k = &node.facts.kubernetes;
            let (Some(running), Some(staged)) = (&k.running, &k.staged) else {
                continue;
            };
            if let Some(oldest) = oldest {
                prop_assert!(
                    running.minor() <= oldest,
                    "after `{}`, {} runs kubelet {} with a kube-apiserver at {}",
                    step.describe(),
                    &node.name,
                    running,
                    oldest
                );
                prop_assert!(
                    staged.minor() <= oldest,
                    "after `{}`, {} would boot kubelet {} with a kube-apiserver at {}",
                    step.describe(),
                    &node.name,
                    staged,
                    oldest
                );
            }
            if staged.minor() > running.minor() {
                prop_assert_eq!(
                    node.facts.kubeadm_step.as_ref().map(|v| v.minor()),
                    Some(staged.minor()),
                    "after `{}`, {} would boot {} without its kubeadm step",
                    step.describe(),
                    &node.name,
                    staged
                );
            }
        }
    }
    Ok(())
}

/// The skew policy's other side, replayed step by step: no kubelet that
/// runs is ever more than three minors behind the newest kube-apiserver,
/// and none would boot that far behind either.
pub(super) fn check_not_too_old(
    state: &FleetState,
    plan: &Plan,
    hub: &HubVersions,
) -> Result<(), TestCaseError> {
    let mut s = state.clone();
    for step in flat(plan) {
        apply_step(&mut s, &step, hub);
        let Some(api) = s.cluster.version.as_ref().map(|v| v.minor()) else {
            continue;
        };
        for node in &s.nodes {
            let Some(running) = &node.facts.kubernetes.running else {
                continue;
            };
            prop_assert!(
                running.minor().minor + 3 >= api.minor,
                "after `{}`, {} runs kubelet {} with the API server at {}",
                step.describe(),
                &node.name,
                running,
                api
            );
        }
    }
    Ok(())
}

/// Running the plan hop by hop: every node that runs an older minor than
/// the hop reboots exactly once in it (every-hop), or each worker reboots
/// once plus once per stop the plan names (jump); at the end the fleet is
/// exactly at the target, so planning again finds nothing to do.
pub(super) fn check_execution(
    state: &FleetState,
    plan: &Plan,
    target: &TargetVersion,
    plan_hub: &HubVersions,
    hub: &HubVersions,
) -> Result<(), TestCaseError> {
    let mut s = state.clone();
    if plan.workers.strategy == WorkerStrategy::Jump {
        prop_assert!(plan.workers.reboots <= plan.workers.every_hop_reboots);
        for node in state.nodes.iter().filter(|n| n.role == Role::Worker) {
            let stops = plan
                .workers
                .stops
                .iter()
                .find(|w| w.node == node.name)
                .map_or(0, |w| w.minors.len());
            let reboots = plan.reboots()[&node.name];
            prop_assert!(
                reboots <= 1 + stops,
                "{} reboots {} times with {} stops",
                &node.name,
                reboots,
                stops
            );
        }
    }
    for hop in &plan.hops {
        for node in &s.nodes {
            if plan.workers.leaves_behind(hop.minor, &node.name) {
                continue;
            }
            let behind = node
                .facts
                .kubernetes
                .running
                .as_ref()
                .is_none_or(|v| v.minor() < hop.minor);
            let reboots = hop
                .steps()
                .filter(|st| st.node == node.name && st.action == Action::Roll)
                .count();
            if behind {
                prop_assert_eq!(
                    reboots,
                    1,
                    "{} needs hop {} but reboots {} times",
                    &node.name,
                    hop.minor,
                    reboots
                );
            }
        }
        for step in hop.steps() {
            apply_step(&mut s, step, hub);
        }
    }
    let want = hub.newest(target.minor()).cloned();
    for node in &s.nodes {
        let k = &node.facts.kubernetes;
        if plan_hub.is_resolved() {
            prop_assert_eq!(&k.running, &want, "{} does not run the target", &node.name);
        } else {
            // Without the hub's list the plan cannot know a newer patch
            // exists, but nothing staged may be left unbooted.
            let minor = k.running.as_ref().map(|v| v.minor());
            prop_assert_eq!(
                minor,
                Some(target.minor()),
                "{} not on the target",
                &node.name
            );
        }
        prop_assert_eq!(
            &k.staged,
            &k.running,
            "{} left something staged",
            &node.name
        );
        prop_assert_eq!(
            k.configs.clone(),
            vec![pinned(Component::Kubernetes, target.minor())]
        );
        prop_assert!(!s.cordoned(&node.name), "{} left cordoned", &node.name);
        if let Some(c) = s.containerd_version {
            let ctr = node.facts.containerd.as_ref().unwrap();
            prop_assert_eq!(ctr.configs.clone(), vec![pinned(Component::Containerd, c)]);
            prop_assert_eq!(ctr.running.as_ref().map(|v| v.minor()), Some(c));
        }
    }
    prop_assert_eq!(
        s.cluster.version.as_ref().map(|v| v.minor()),
        Some(target.minor())
    );
    let again = super::plan(&s, target, plan_hub);
    prop_assert!(again.is_ok(), "{:?}", again);
    let again = again.unwrap_or_else(|_| plan.clone());
    prop_assert!(
        again.is_noop(),
        "not converged: {:?}",
        outline(&flat(&again))
    );
    Ok(())
}

fn same_step(planned: &Step, now: &Step) -> bool {
    planned == now
}

/// Re-planning after the first `k` steps of `before` ran yields the rest of
/// `before`, except that without the hub's list a node may download again
/// (sysupdate finds the newest already there: a no-op).
///
/// Removing old images is housekeeping: a plan with nothing else left to do
/// drops it, so it is not part of the comparison.
pub(super) fn check_resume(before: &Plan, k: usize, after: &Plan) -> Result<(), TestCaseError> {
    let housekeeping = |s: &Step| matches!(s.action, Action::RemoveImages { .. });
    let old = flat(before);
    let suffix: Vec<Step> = old[k.min(old.len())..]
        .iter()
        .filter(|s| !housekeeping(s))
        .cloned()
        .collect();
    let suffix = &suffix[..];
    let new: Vec<Step> = flat(after)
        .into_iter()
        .filter(|s| !housekeeping(s))
        .collect();
    let mut j = 0;
    let mut extras = Vec::new();
    for step in &new {
        if j < suffix.len() && same_step(&suffix[j], step) {
            j += 1;
        } else {
            extras.push(step.clone());
        }
    }
    prop_assert_eq!(
        j,
        suffix.len(),
        "remaining steps missing after the cut at {}:\n old {:?}\n new {:?}",
        k,
        outline(suffix),
        outline(&new)
    );
    for extra in &extras {
        let repeatable = matches!(extra.action, Action::Download { expect: None, .. });
        prop_assert!(
            repeatable,
            "re-plan after the cut at {} adds {:?}:\n old {:?}\n new {:?}",
            k,
            extra.describe(),
            outline(suffix),
            outline(&new)
        );
    }
    Ok(())
}

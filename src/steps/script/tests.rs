//! The script of a hop, as the run walks it and the dry run prints it.

use std::path::Path;

use super::*;
use crate::plan::{Phase, Step};

const INVENTORY: &str = "\
kubernetes_version: v1.35
sysupdate:
  hub: https://hub.example/ext
ssh:
  user: core
  identity_file: /nonexistent/id
  host_key_checking: strict
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: cp-2, address: 10.0.0.12, role: control-plane}
  - {name: w-1, address: 10.0.0.21, role: worker, zone: a}
  - {name: w-2, address: 10.0.0.22, role: worker, zone: b}
  - {name: w-3, address: 10.0.0.23, role: worker, zone: a}
";

pub(in crate::steps) fn inventory() -> Inventory {
    crate::inventory::parse(INVENTORY, Path::new("/tmp/inventory.yaml")).unwrap()
}

fn step(node: &str, action: Action) -> Step {
    Step {
        node: node.into(),
        action,
    }
}

fn phase(kind: PhaseKind, steps: Vec<Step>) -> Phase {
    Phase { kind, steps }
}

/// One hop to v1.35.3 of the inventory's fleet, as the planner phases it.
pub(in crate::steps) fn plan() -> Plan {
    let v: Version = "v1.35.3".parse().unwrap();
    let minor = v.minor();
    let some = Some(v.clone());
    let download = |n: &str| {
        step(
            n,
            Action::Download {
                component: crate::plan::Component::Kubernetes,
                minor,
                expect: some.clone(),
            },
        )
    };
    let stage = |n: &str| {
        step(
            n,
            Action::Stage {
                component: crate::plan::Component::Kubernetes,
                minor,
                expect: some.clone(),
            },
        )
    };
    let node = |n: &str| {
        step(
            n,
            Action::UpgradeNode {
                minor,
                version: some.clone(),
            },
        )
    };
    let hop = Hop {
        kind: HopKind::Upgrade,
        minor,
        version: some.clone(),
        kubeadm: true,
        sha256: Some("a".repeat(64)),
        phases: vec![
            // cp-2 had the image already: it is checked, not downloaded.
            phase(
                PhaseKind::Prepare,
                ["cp-1", "w-1", "w-2", "w-3"].map(download).to_vec(),
            ),
            phase(
                PhaseKind::FirstControlPlane,
                vec![step(
                    "cp-1",
                    Action::UpgradeApply {
                        minor,
                        version: some.clone(),
                    },
                )],
            ),
            phase(PhaseKind::OtherControlPlanes, vec![node("cp-2")]),
            phase(
                PhaseKind::ControlPlaneReboots,
                vec![
                    stage("cp-1"),
                    step("cp-1", Action::Roll),
                    stage("cp-2"),
                    step("cp-2", Action::Roll),
                ],
            ),
            phase(
                PhaseKind::WorkerPreparation,
                ["w-1", "w-2", "w-3"]
                    .into_iter()
                    .flat_map(|w| [node(w), stage(w)])
                    .collect(),
            ),
            phase(
                PhaseKind::WorkerReboots,
                ["w-1", "w-2", "w-3"]
                    .map(|w| step(w, Action::Roll))
                    .to_vec(),
            ),
        ],
        checks: Vec::new(),
        skip_system_verification: Vec::new(),
    };
    let inv = inventory();
    Plan {
        requested: crate::version::TargetVersion::Minor(minor),
        target: minor,
        cluster_from: Some("v1.34.2".parse().unwrap()),
        hub: inv.hub.clone(),
        containerd: inv.containerd_version,
        nodes: inv
            .nodes
            .iter()
            .map(|n| crate::plan::PlannedNode {
                name: n.name.clone(),
                role: n.role,
            })
            .collect(),
        hops: vec![hop],
        warnings: Vec::new(),
        fingerprint: Default::default(),
        ignored_checks: Vec::new(),
        workers: Default::default(),
    }
}

pub(in crate::steps) fn shape(max_unavailable: &str, soak: bool, etcd_snapshot: bool) -> Shape {
    Shape {
        max_unavailable: max_unavailable.parse().unwrap(),
        soak,
        etcd_snapshot,
    }
}

fn titles(tasks: &[Task], plan: &Plan) -> Vec<String> {
    tasks.iter().map(|t| t.title(plan)).collect()
}

#[test]
fn a_hop_is_its_phases_with_the_waits_and_last_looks_between_them() {
    let (plan, inv) = (plan(), inventory());
    let tasks = of_plan(&plan, &inv, shape("1", false, true));
    let want = [
        "hop 1/1: upgrade to v1.35.3",
        "the checks before the hop to v1.35.3",
        "cp-2: check the image downloaded before this run",
        "phase: download the new image (nodes in parallel)",
        "cp-1, w-1, w-2, w-3: download the new image",
        "phase: first control plane: kubeadm upgrade (one step at a time)",
        "cp-1: wait until every control plane is Ready, before its kubeadm",
        "cp-1: etcd snapshot before the upgrade to v1.35, copied here",
        "cp-1: kubeadm upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes (the v1.35.3 image's kubeadm)",
        "phase: other control planes: kubeadm upgrade node (one step at a time)",
        "cp-2: wait until every control plane is Ready, before its kubeadm",
        "cp-2: kubeadm upgrade node --skip-phases addon/kube-proxy (the v1.35.3 image's kubeadm)",
        "phase: control planes: reboot onto the new kubelet (one step at a time)",
        "cp-1: last look at what the new kubelet will read",
        "cp-1: stage kubernetes v1.35.3: point /etc/extensions/kubernetes.raw at it",
        "cp-1: drain, reboot, wait, uncordon",
        "cp-2: last look at what the new kubelet will read",
        "cp-2: stage kubernetes v1.35.3: point /etc/extensions/kubernetes.raw at it",
        "cp-2: drain, reboot, wait, uncordon",
        "phase: workers: kubeadm upgrade node, stage (nodes in parallel)",
        "w-1, w-2, w-3: workers: kubeadm upgrade node, stage",
        "phase: workers: reboot onto the new kubelet (one step at a time)",
        "w-1: last look at what the new kubelet will read",
        "w-1: drain, reboot, wait, uncordon",
        "w-2: last look at what the new kubelet will read",
        "w-2: drain, reboot, wait, uncordon",
        "w-3: last look at what the new kubelet will read",
        "w-3: drain, reboot, wait, uncordon",
        "verify: every kubelet at v1.35.3",
        "hop 1/1 done: every node runs v1.35.3",
    ];
    assert_eq!(titles(&tasks, &plan), want);
}

#[test]
fn the_last_step_of_each_node_records_it_and_rolls_carry_the_hops_version() {
    let (plan, inv) = (plan(), inventory());
    let tasks = of_plan(&plan, &inv, shape("1", false, true));
    for task in &tasks {
        match task {
            Task::Step {
                phase,
                step,
                finishes,
                ..
            } => {
                // Only the kubeadm steps come before a node's roll here.
                let s = &plan.hops[0].phases[*phase].steps[*step];
                assert!(!finishes, "{} is not a node's last step", s.describe());
            }
            Task::Roll {
                nodes,
                expect,
                finishes,
                ..
            } => {
                assert_eq!(finishes, nodes, "a roll is each node's last step here");
                assert_eq!(
                    expect.as_ref().map(|v| v.to_string()),
                    Some("v1.35.3".into())
                );
            }
            _ => {}
        }
    }
}

#[test]
fn without_a_snapshot_there_is_no_etcd_task_and_a_soak_follows_each_hop() {
    let (plan, inv) = (plan(), inventory());
    let tasks = of_plan(&plan, &inv, shape("1", true, false));
    assert!(!tasks.iter().any(|t| matches!(t, Task::EtcdSnapshot { .. })));
    assert_eq!(tasks.last(), Some(&Task::Soak { hop: 0 }));
}

#[test]
fn workers_roll_in_batches_within_one_zone() {
    let (plan, inv) = (plan(), inventory());
    let tasks = of_plan(&plan, &inv, shape("2", false, true));
    let rolls: Vec<Vec<String>> = tasks
        .iter()
        .filter_map(|t| match t {
            Task::Roll { nodes, .. } if nodes.iter().all(|n| n.starts_with("w-")) => {
                Some(nodes.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(rolls, vec![vec!["w-1", "w-3"], vec!["w-2"]]);
    // The last look takes in the whole batch, right before it goes down.
    let at = tasks
        .iter()
        .position(|t| matches!(t, Task::Roll { nodes, .. } if nodes.len() == 2))
        .unwrap();
    assert_eq!(
        tasks[at - 1],
        Task::LastLook {
            hop: 0,
            nodes: vec!["w-1".into(), "w-3".into()]
        }
    );
}

#[test]
fn a_reboot_is_one_roll_per_batch_onto_what_is_staged() {
    let minor = "v1.35".parse().unwrap();
    let tasks = of_reboots(&[
        (vec!["cp-1".into()], minor),
        (vec!["w-1".into(), "w-3".into()], minor),
    ]);
    assert_eq!(tasks.len(), 2);
    assert!(
        tasks
            .iter()
            .all(|t| matches!(t, Task::Roll { expect: None, .. }))
    );
    assert_eq!(tasks[1].node(), None);
    assert_eq!(tasks[0].node(), Some("cp-1"));
}

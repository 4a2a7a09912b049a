//! Test fixtures for the planner: a builder for fleets in any state, and a
//! model of what each step does to the facts (the executor as the planner
//! assumes it behaves), so tests can apply part of a plan and plan again.

use sha2::{Digest, Sha256};

use crate::inventory::Role;
use crate::node::{ClusterFacts, ClusterNode, Extension, NodeFacts, OsFacts, Pin, SysupdateConfig};
use crate::version::{Minor, Version};

use super::model::{Action, Component, Plan, Step};
use super::state::{FleetNode, FleetState};
use super::sysupdate::render_config;
use crate::hub::HubVersions;

pub const HUB: &str = "https://extensions.flatcar.org/extensions";

pub fn v(s: &str) -> Version {
    s.parse().unwrap()
}

pub fn m(s: &str) -> Minor {
    s.parse().unwrap()
}

/// A hub publishing every patch `0..=newest` of each `(minor, newest)`,
/// with a `SHA256SUMS` line each (the sum of the version's name).
pub fn hub(series: &[(u64, u64)]) -> HubVersions {
    let sums: String = series
        .iter()
        .flat_map(|&(minor, newest)| (0..=newest).map(move |p| Version::new(1, minor, p)))
        .map(|v| format!("{}  kubernetes-{v}-x86-64.raw\n", sha(&v.to_string())))
        .collect();
    HubVersions::from_sha256sums(&sums)
}

pub fn sha(text: &str) -> String {
    format!("{:x}", Sha256::digest(text.as_bytes()))
}

pub fn config(path: &str, content: &str, pin: Pin) -> SysupdateConfig {
    SysupdateConfig {
        path: path.to_string(),
        sha256: sha(content),
        pin,
        content: content.to_string(),
    }
}

/// The config fleetctl would write for `minor`.
pub fn pinned(component: Component, minor: Minor) -> SysupdateConfig {
    config(
        &component.config_path(),
        &render_config(component, minor, HUB).unwrap(),
        Pin::Pinned(minor),
    )
}

/// sysext-bakery's floating `kubernetes.conf`.
pub fn floating() -> SysupdateConfig {
    let text = render_config(Component::Kubernetes, m("v1.30"), HUB)
        .unwrap()
        .replace("kubernetes-v1.30.@v-%a.raw", "kubernetes-@v-%a.raw");
    config(&Component::Kubernetes.config_path(), &text, Pin::Floating)
}

/// A node booted on `running`, with it staged and pinned to its minor.
pub fn settled(component: Component, running: &Version) -> Extension {
    Extension {
        running: Some(running.clone()),
        staged: Some(running.clone()),
        staged_target: Some(format!(
            "/opt/extensions/{}/{}",
            component.name(),
            crate::remote::upgrade::image_file(component.name(), &running.to_string())
        )),
        images: vec![running.clone()],
        configs: vec![pinned(component, running.minor())],
    }
}

pub struct Fleet {
    pub state: FleetState,
}

/// A fleet whose kubeadm-config says `cluster`.
pub fn fleet(cluster: &str) -> Fleet {
    Fleet {
        state: FleetState {
            hub: HUB.to_string(),
            containerd_version: None,
            nodes: Vec::new(),
            cluster: ClusterFacts {
                nodes: Vec::new(),
                version: Some(v(cluster)),
                kube_proxy: false,
                apiservers: Vec::new(),
            },
        },
    }
}

impl Fleet {
    pub fn cp(self, name: &str, running: &str) -> Fleet {
        self.node(name, Role::ControlPlane, running)
    }

    pub fn worker(self, name: &str, running: &str) -> Fleet {
        self.node(name, Role::Worker, running)
    }

    /// A Ready, uncordoned node running, staging and pinned to `running`.
    pub fn node(mut self, name: &str, role: Role, running: &str) -> Fleet {
        let running = v(running);
        self.state.nodes.push(FleetNode {
            name: name.to_string(),
            role,
            facts: NodeFacts {
                hostname: name.to_string(),
                boot_id: format!("{name}-boot-0"),
                uptime_seconds: 1000,
                os: OsFacts {
                    running: "4230.2.0".to_string(),
                    staged: None,
                    current_op: "UPDATE_STATUS_IDLE".to_string(),
                },
                kubernetes: settled(Component::Kubernetes, &running),
                containerd: None,
                reboot_required: false,
                kubeadm_step: None,
                arch: Some("x86_64".into()),
                kubelet_files: Default::default(),
                cgroup: Default::default(),
                stage_records: Default::default(),
            },
        });
        self.state.cluster.nodes.push(ClusterNode {
            name: name.to_string(),
            ready: true,
            cordoned: false,
            kubelet_version: Some(running),
            control_plane: role == Role::ControlPlane,
        });
        self
    }

    /// Changes one node's facts.
    pub fn with(mut self, name: &str, f: impl FnOnce(&mut NodeFacts)) -> Fleet {
        let node = self
            .state
            .nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap();
        f(&mut node.facts);
        self
    }

    /// Changes what the API server says about one node.
    pub fn api(mut self, name: &str, f: impl FnOnce(&mut ClusterNode)) -> Fleet {
        let node = self
            .state
            .cluster
            .nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap();
        f(node);
        self
    }

    pub fn containerd(mut self, series: &str, running: &str) -> Fleet {
        self.state.containerd_version = Some(m(series));
        let running = v(running);
        for node in &mut self.state.nodes {
            node.facts.containerd = Some(settled(Component::Containerd, &running));
        }
        self
    }

    pub fn build(self) -> FleetState {
        self.state
    }
}

/// What the executor does to the fleet for one step, as the planner
/// assumes: Download fetches the newest patch of the minor on `hub` (not
/// staged), a kubeadm step leaves its marker (and `upgrade apply` moves
/// kubeadm-config), Stage points the symlink at the newest downloaded image
/// of the minor (containerd: keeps a patch of the same minor, else `.0`),
/// Roll boots whatever is staged (Flatcar included) and uncordons.
pub fn apply_step(state: &mut FleetState, step: &Step, hub: &HubVersions) {
    let cluster_version = state.cluster.version.clone();
    let Some(node) = state.nodes.iter_mut().find(|n| n.name == step.node) else {
        panic!("step for unknown node {}", step.node);
    };
    let facts = &mut node.facts;
    let newest_image = |facts: &NodeFacts, minor: Minor| {
        facts
            .kubernetes
            .images
            .iter()
            .filter(|i| i.minor() == minor)
            .max()
            .cloned()
    };
    match &step.action {
        Action::Download {
            component: Component::Kubernetes,
            minor,
            expect,
        } => {
            let got = hub
                .newest(*minor)
                .cloned()
                .or(expect.clone())
                .unwrap_or_else(|| minor.with_patch(0));
            if !facts.kubernetes.images.contains(&got) {
                facts.kubernetes.images.push(got);
            }
        }
        Action::Download { .. } => panic!("only kubernetes is downloaded apart from staging"),
        Action::UpgradeApply { version, minor } => {
            let image = version.clone().or_else(|| newest_image(facts, *minor));
            assert!(
                image
                    .as_ref()
                    .is_some_and(|i| facts.kubernetes.images.contains(i)),
                "{}: upgrade apply from an image that was not downloaded",
                step.node
            );
            facts.kubeadm_step = image.clone();
            state.cluster.version = image.or(cluster_version);
        }
        Action::UpgradeNode { version, minor } => {
            let image = version.clone().or_else(|| newest_image(facts, *minor));
            assert!(
                image
                    .as_ref()
                    .is_some_and(|i| facts.kubernetes.images.contains(i)),
                "{}: upgrade node from an image that was not downloaded",
                step.node
            );
            facts.kubeadm_step = image;
        }
        Action::Pin {
            component,
            minor,
            path,
            config: text,
            replaces,
            ..
        } => {
            let ext = extension(facts, *component);
            ext.configs
                .retain(|c| c.path != *path && !replaces.contains(&c.path));
            ext.configs.push(config(path, text, Pin::Pinned(*minor)));
            ext.configs.sort_by(|a, b| a.path.cmp(&b.path));
        }
        Action::Stage {
            component: Component::Kubernetes,
            minor,
            ..
        } => {
            let got = newest_image(facts, *minor)
                .unwrap_or_else(|| panic!("{}: staged {minor} without downloading it", step.node));
            facts.kubernetes.staged = Some(got);
        }
        Action::Stage {
            component,
            minor,
            expect,
        } => {
            let ext = extension(facts, *component);
            let got = expect
                .clone()
                .or_else(|| ext.staged.clone().filter(|s| s.minor() == *minor))
                .unwrap_or_else(|| minor.with_patch(0));
            ext.staged = Some(got.clone());
            if !ext.images.contains(&got) {
                ext.images.push(got);
            }
        }
        Action::Roll => {
            facts.boot_id.push('\'');
            facts.uptime_seconds = 5;
            facts.kubernetes.running = facts.kubernetes.staged.clone();
            if let Some(c) = &mut facts.containerd {
                c.running = c.staged.clone();
            }
            if let Some(os) = facts.os.staged.take() {
                facts.os.running = os;
            }
            facts.reboot_required = false;
            let kubelet = facts.kubernetes.running.clone();
            if let Some(cn) = state.cluster.nodes.iter_mut().find(|n| n.name == step.node) {
                cn.kubelet_version = kubelet;
                cn.cordoned = false;
            }
        }
        Action::Uncordon => cordon(state, &step.node, false),
        Action::RemoveImages { versions } => {
            assert!(
                facts
                    .kubernetes
                    .running
                    .as_ref()
                    .is_none_or(|r| !versions.contains(r)),
                "{}: removing the running image",
                step.node
            );
            facts.kubernetes.images.retain(|i| !versions.contains(i));
        }
    }
}

fn extension(facts: &mut NodeFacts, component: Component) -> &mut Extension {
    match component {
        Component::Kubernetes => &mut facts.kubernetes,
        Component::Containerd => facts.containerd.get_or_insert_with(|| Extension {
            running: None,
            staged: None,
            staged_target: None,
            images: Vec::new(),
            configs: Vec::new(),
        }),
    }
}

fn cordon(state: &mut FleetState, name: &str, cordoned: bool) {
    if let Some(n) = state.cluster.nodes.iter_mut().find(|n| n.name == name) {
        n.cordoned = cordoned;
    }
}

/// Every step of the plan, flattened in execution order.
pub fn flat(plan: &Plan) -> Vec<Step> {
    plan.steps().cloned().collect()
}

/// The fleet after the first `k` steps of `plan` ran.
pub fn after_steps(state: &FleetState, plan: &Plan, k: usize, hub: &HubVersions) -> FleetState {
    let mut s = state.clone();
    for step in flat(plan).iter().take(k) {
        apply_step(&mut s, step, hub);
    }
    s
}

/// `(node, action kind)` pairs, for compact assertions.
pub fn outline(steps: &[Step]) -> Vec<String> {
    let ver = |version: &Option<Version>, minor: &Minor| {
        version
            .as_ref()
            .map(|v| v.to_string())
            .unwrap_or_else(|| minor.to_string())
    };
    steps
        .iter()
        .map(|s| {
            let what = match &s.action {
                Action::Download {
                    component,
                    minor,
                    expect,
                } => format!("download {component} {}", ver(expect, minor)),
                Action::Pin {
                    component, minor, ..
                } => format!("pin {component} {minor}"),
                Action::Stage {
                    component,
                    expect,
                    minor,
                } => format!("stage {component} {}", ver(expect, minor)),
                Action::UpgradeApply { version, minor } => format!("apply {}", ver(version, minor)),
                Action::UpgradeNode { version, minor } => {
                    format!("upgrade-node {}", ver(version, minor))
                }
                Action::Roll => "roll".into(),
                Action::Uncordon => "uncordon".into(),
                Action::RemoveImages { versions } => format!(
                    "remove-images {}",
                    versions
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            format!("{} {what}", s.node)
        })
        .collect()
}

/// The hop's phases as `(phase, outline)`, for assertions on the order.
pub fn phased(hop: &super::model::Hop) -> Vec<(super::model::PhaseKind, Vec<String>)> {
    hop.phases
        .iter()
        .map(|p| (p.kind, outline(&p.steps)))
        .collect()
}

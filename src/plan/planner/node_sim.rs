//! The planner's simulation of a node: what each sysext component runs,
//! has staged and downloaded and is pinned to, as the plan predicts it hop
//! by hop, starting from the gathered facts.

use crate::inventory::Role;
use crate::plan::level::Level;
use crate::plan::model::Component;
use crate::plan::state::{FleetNode, FleetState};
use crate::version::{Minor, Version};

/// One sysext component of one node, as the plan predicts it.
#[derive(Debug, Clone)]
pub(super) struct ComponentSim {
    pub(super) running: Option<Level>,
    pub(super) staged: Option<Level>,
    /// Images present in `/opt/extensions/<name>/` (downloaded, staged or not).
    pub(super) images: Vec<Level>,
    /// Content of `/etc/sysupdate.<name>.d/<name>.conf`, if present.
    pub(super) main: Option<String>,
    /// Every other `.conf` in that directory.
    pub(super) strays: Vec<String>,
}

impl ComponentSim {
    pub(super) fn from_facts(
        component: Component,
        ext: Option<&crate::node::Extension>,
    ) -> ComponentSim {
        let Some(ext) = ext else {
            return ComponentSim {
                running: None,
                staged: None,
                images: Vec::new(),
                main: None,
                strays: Vec::new(),
            };
        };
        let (main, strays) = crate::node::main_and_stray_configs(ext, &component.config_path());
        ComponentSim {
            running: ext.running.as_ref().map(Level::exact),
            staged: ext.staged.as_ref().map(Level::exact),
            images: ext.images.iter().map(Level::exact).collect(),
            main,
            strays,
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct NodeSim {
    pub(super) name: String,
    pub(super) role: Role,
    pub(super) first: bool,
    pub(super) kubernetes: ComponentSim,
    pub(super) containerd: ComponentSim,
    pub(super) cordoned: bool,
    /// The minor whose kubeadm step last ran on the node for fleetctl.
    pub(super) kubeadm_step: Option<Minor>,
}

impl NodeSim {
    pub(super) fn from_facts(state: &FleetState, node: &FleetNode, first: bool) -> NodeSim {
        NodeSim {
            name: node.name.clone(),
            role: node.role,
            first,
            kubernetes: ComponentSim::from_facts(
                Component::Kubernetes,
                Some(&node.facts.kubernetes),
            ),
            containerd: ComponentSim::from_facts(
                Component::Containerd,
                node.facts.containerd.as_ref(),
            ),
            cordoned: state.cordoned(&node.name),
            kubeadm_step: node.facts.kubeadm_step.as_ref().map(Version::minor),
        }
    }
}

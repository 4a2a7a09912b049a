//! containerd rolled back with kubernetes: when the reboot that brought a
//! node its new kubelet brought it a new containerd too, either may be
//! why the kubelet fails (a containerd serving no CRI v1 API fails every
//! kubelet: `validateServiceConnection` in kubernetes/kubernetes
//! pkg/kubelet/cri/remote/remote_runtime.go), so both go back to their kept
//! images, pinned, in the same reboot.
//!
//! "The same reboot" is read from the node: the records fleetctl writes
//! when it moves a symlink (`crate::remote::stage_record`): kubernetes and
//! containerd moved in one boot, an earlier one than the node runs now, and
//! containerd runs what it was moved to. Image files alone cannot tell it:
//! sysupdate keeps older images for months (`InstancesMax=`), and a
//! containerd updated long ago has a kept image as well.

use crate::node::{Extension, StageRecord};
use crate::version::{Minor, Version};

use super::model::{Action, Component};
use super::state::FleetState;
use super::sysupdate::render_config;

/// containerd's way back on one node.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerdBack {
    pub from: Version,
    pub to: Version,
    /// containerd's sysupdate config pinned to `to`'s minor.
    pub pin: Action,
}

impl ContainerdBack {
    /// `containerd 2.2.0 back to 2.1.4`.
    pub fn from_to(&self) -> String {
        format!("containerd {} back to {}", bare(&self.from), bare(&self.to))
    }
}

/// containerd's version as its images and the bakery name it (`2.1.4`).
pub fn bare(v: &Version) -> String {
    v.to_string().trim_start_matches('v').to_string()
}

/// containerd's rollback on `node` when its last change came in the same
/// reboot as kubernetes's, `None` when it did not (or the node has no
/// containerd sysext), `Err` when it did but its previous image is gone.
pub fn containerd_back(
    state: &FleetState,
    name: &str,
    facts: &crate::node::NodeFacts,
) -> Result<Option<ContainerdBack>, String> {
    let Some(ext) = &facts.containerd else {
        return Ok(None);
    };
    let (Some(c), Some(k)) = (
        facts.stage_records.get("containerd"),
        facts.stage_records.get("kubernetes"),
    ) else {
        return Ok(None);
    };
    let Some(to) = same_reboot(c, k, &facts.boot_id, ext) else {
        return Ok(None);
    };
    let Some(from) = ext.running.clone() else {
        return Ok(None);
    };
    if !ext.images.contains(&to) {
        return Err(format!(
            "{name}: containerd changed from {} to {} in the same reboot as kubernetes, but its \
             image {} is gone from /opt/extensions/containerd/: rolling kubernetes back alone \
             could leave the cause in place. Copy {} from the hub's containerd/ into \
             /opt/extensions/containerd/ and try again",
            bare(&to),
            bare(&from),
            bare(&to),
            crate::remote::upgrade::image_file("containerd", &bare(&to)),
        ));
    }
    let pin = pin_back(Component::Containerd, ext, to.minor(), &state.hub)
        .map_err(|e| format!("{name}: {e:#}"))?;
    Ok(Some(ContainerdBack { from, to, pin }))
}

/// The version containerd was moved from, when the move was in the same
/// boot as kubernetes's, before the running boot, and is what containerd
/// runs now (a reboot took it in).
fn same_reboot(
    c: &StageRecord,
    k: &StageRecord,
    boot_id: &str,
    ext: &Extension,
) -> Option<Version> {
    if c.boot_id != k.boot_id || c.boot_id == boot_id {
        return None;
    }
    let running = ext.running.as_ref()?;
    if ext.staged.as_ref() != Some(running) {
        return None;
    }
    c.previous.clone().filter(|p| p < running)
}

/// `component`'s sysupdate config pinned to `minor`: the main config
/// rewritten (its previous content kept for the diff), any other disabled.
pub fn pin_back(
    component: Component,
    ext: &Extension,
    minor: Minor,
    hub: &str,
) -> anyhow::Result<Action> {
    let main = component.config_path();
    let (previous, replaces) = crate::node::main_and_stray_configs(ext, &main);
    Ok(Action::Pin {
        component,
        minor,
        path: main,
        config: render_config(component, minor, hub)?,
        previous,
        replaces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::testkit::*;

    fn record(boot: &str, previous: &str) -> StageRecord {
        StageRecord {
            boot_id: boot.into(),
            previous: Some(v(previous)),
        }
    }

    fn node(s: &mut FleetState) -> &mut crate::node::NodeFacts {
        let n = s.nodes.iter_mut().find(|n| n.name == "w-1").unwrap();
        n.facts.boot_id = "boot-2".into();
        n.facts.containerd = Some(Extension {
            running: Some(v("v2.2.0")),
            staged: Some(v("v2.2.0")),
            staged_target: Some(
                "../../opt/extensions/containerd/containerd-2.2.0-x86-64.raw".into(),
            ),
            images: vec![v("v2.1.4"), v("v2.2.0")],
            configs: Vec::new(),
        });
        n.facts.stage_records = [
            ("containerd".to_string(), record("boot-1", "v2.1.4")),
            ("kubernetes".to_string(), record("boot-1", "v1.34.2")),
        ]
        .into();
        &mut n.facts
    }

    fn back(s: &FleetState) -> Result<Option<ContainerdBack>, String> {
        let n = s.nodes.iter().find(|n| n.name == "w-1").unwrap();
        containerd_back(s, &n.name, &n.facts)
    }

    #[test]
    fn containerd_moved_in_the_boot_kubernetes_moved_in_goes_back_pinned() {
        let mut s = fleet("v1.35.1")
            .cp("cp-1", "v1.35.1")
            .worker("w-1", "v1.35.1")
            .build();
        node(&mut s);
        let b = back(&s).unwrap().unwrap();
        assert_eq!(
            (bare(&b.from), bare(&b.to)),
            ("2.2.0".into(), "2.1.4".into())
        );
        match &b.pin {
            Action::Pin {
                component, config, ..
            } => {
                assert_eq!(*component, Component::Containerd);
                assert!(
                    config.contains("MatchPattern=containerd-2.1.@v-%a.raw"),
                    "{config}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn containerd_moved_in_another_boot_or_not_booted_yet_stays() {
        let mut s = fleet("v1.35.1")
            .cp("cp-1", "v1.35.1")
            .worker("w-1", "v1.35.1")
            .build();
        // Moved in an earlier boot than kubernetes: an old change.
        node(&mut s)
            .stage_records
            .insert("containerd".into(), record("boot-0", "v2.1.4"));
        assert_eq!(back(&s), Ok(None));
        // Moved in this very boot: not rebooted into yet.
        let f = node(&mut s);
        f.boot_id = "boot-1".into();
        assert_eq!(back(&s), Ok(None));
        // No record of kubernetes (staged by an older fleetctl).
        node(&mut s).stage_records.remove("kubernetes");
        assert_eq!(back(&s), Ok(None));
        // A record of a move forward to what runs (a rollback's own): nothing older.
        node(&mut s)
            .stage_records
            .insert("containerd".into(), record("boot-1", "v2.3.0"));
        assert_eq!(back(&s), Ok(None));
    }

    #[test]
    fn containerd_whose_previous_image_is_gone_refuses_naming_the_file() {
        let mut s = fleet("v1.35.1")
            .cp("cp-1", "v1.35.1")
            .worker("w-1", "v1.35.1")
            .build();
        node(&mut s).containerd.as_mut().unwrap().images = vec![v("v2.2.0")];
        let err = back(&s).unwrap_err();
        assert!(
            err.starts_with("w-1: containerd changed from 2.1.4 to 2.2.0 in the same reboot"),
            "{err}"
        );
        assert!(err.contains("containerd-2.1.4-x86-64.raw"), "{err}");
    }
}

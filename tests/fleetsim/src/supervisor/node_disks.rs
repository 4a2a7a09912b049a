//! Every node's disk, written before the first boot: the fleetsim binary
//! the nodes run, each node's provisioning (and its real-OS adaptation),
//! and the host keys the operator's known_hosts records.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::thread;

use anyhow::{Context, Result};

use crate::image::Cache;
use crate::layout::FleetDir;
use crate::provision::{Disk, NodePlan, generate_key, host_key, provision};
use crate::scenario::{Os, Scenario};

pub(super) fn copy_binary(fleet: &FleetDir) -> Result<()> {
    let exe = std::env::current_exe().context("finding the fleetsim executable")?;
    let target = fleet.binary();
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(&exe, &target)
        .with_context(|| format!("copying {} to {}", exe.display(), target.display()))?;
    fs::set_permissions(&target, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", target.display()))
}

/// Provisions every node's disk on a few threads (ssh-keygen dominates) and
/// returns the known_hosts lines in node order.
pub(super) fn provision_all(
    fleet: &FleetDir,
    scenario: &Scenario,
    plans: &[NodePlan],
    hub_url: &str,
    operator_key: &str,
    cache: &Cache,
) -> Result<Vec<String>> {
    let workers = plans.len().clamp(1, 8);
    let chunk = plans.len().div_ceil(workers);
    thread::scope(|s| {
        let handles: Vec<_> = plans
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|p| provision_one(fleet, scenario, p, hub_url, operator_key, cache))
                        .collect::<Result<Vec<String>>>()
                })
            })
            .collect();
        let mut lines = Vec::new();
        for h in handles {
            let part = h
                .join()
                .map_err(|_| anyhow::anyhow!("a provisioning thread panicked"))??;
            lines.extend(part);
        }
        Ok(lines)
    })
}

fn provision_one(
    fleet: &FleetDir,
    scenario: &Scenario,
    plan: &NodePlan,
    hub_url: &str,
    operator_key: &str,
    cache: &Cache,
) -> Result<String> {
    let name = &plan.spec.name;
    provision(fleet, scenario, plan, hub_url, operator_key, cache)
        .with_context(|| format!("provisioning node {name}"))?;
    if scenario.os_layer == Os::Systemd {
        let rootfs = crate::realos::rootfs::read(fleet)?;
        crate::realos::disk::adapt(
            &Disk { fleet, node: name },
            &rootfs,
            scenario.kubelet_restart,
            plan.spec.sysupdate_timer,
        )
        .with_context(|| format!("provisioning real-OS node {name}"))?;
    }
    let presented = host_key(&Disk { fleet, node: name })?;
    let recorded = if plan.spec.wrong_host_key {
        generate_key(&fleet.node(name).join("decoy_host_key"), "decoy")?
    } else {
        presented
    };
    Ok(known_hosts_line(plan, &recorded))
}

fn known_hosts_line(plan: &NodePlan, public_key: &str) -> String {
    let key: Vec<&str> = public_key.split_whitespace().take(2).collect();
    let host = if plan.port == 22 {
        plan.address.to_string()
    } else {
        format!("[{}]:{}", plan.address, plan.port)
    };
    format!("{host} {}\n", key.join(" "))
}

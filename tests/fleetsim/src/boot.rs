//! What changes between two boots of a node, applied by the supervisor while
//! the node is down: a staged Flatcar update becomes the running OS, and the
//! boot id is new. The kubernetes sysext is merged by node-init inside the
//! booting node (`crate::merge`), from whatever the symlink points at then.
//! This is the "staged is not running" rule in code: nothing inside a
//! running node changes what it runs; only a boot does.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::layout::FleetDir;
use crate::provision::{Disk, IMAGES_DIR, write_os_release};
use crate::scenario::{NodeSpec, Scenario};
use crate::state::{NodeBoot, OS_UPDATE_FILE, OsUpdate, now};

/// The record of a node's first boot. `kubernetes` stays empty until
/// node-init has merged the image (see [`set_kubernetes`]).
pub fn first_boot(scenario: &Scenario, spec: &NodeSpec) -> Result<NodeBoot> {
    Ok(NodeBoot {
        name: spec.name.clone(),
        role: spec.role,
        boot_id: crate::provision::new_boot_id()?,
        kubernetes: String::new(),
        os: scenario.os(spec),
        booted_at: now(),
        containerd: String::new(),
    })
}

/// The image a node's first boot merges: the scenario's running version,
/// whatever the symlink already points at.
pub fn first_image(scenario: &Scenario, spec: &NodeSpec) -> Result<String> {
    Ok(format!(
        "{IMAGES_DIR}/{}",
        scenario.running(spec)?.image_name()
    ))
}

/// The record of the boot after `previous`, with the disk changes it
/// implies applied. The notes say what the boot could not do (a staged OS
/// update that does not parse keeps the previous OS), for the event log.
pub fn next_boot(fleet: &FleetDir, previous: &NodeBoot) -> Result<(NodeBoot, Vec<String>)> {
    let disk = Disk {
        fleet,
        node: &previous.name,
    };
    let mut notes = Vec::new();
    let os = match apply_os_update(&disk) {
        Ok(Some(v)) => v,
        Ok(None) => previous.os.clone(),
        Err(e) => {
            notes.push(format!("kept Flatcar {}: {e:#}", previous.os));
            previous.os.clone()
        }
    };
    let boot = NodeBoot {
        name: previous.name.clone(),
        role: previous.role,
        boot_id: crate::provision::new_boot_id()?,
        kubernetes: String::new(),
        os,
        booted_at: now(),
        containerd: String::new(),
    };
    Ok((boot, notes))
}

/// Fills in the version node-init merged (empty: nothing merged). Runs
/// inside the booting node before the record is bound read-only.
pub fn set_kubernetes(node_json: &Path, version: &str, containerd: &str) -> Result<()> {
    let bytes = fs::read(node_json).with_context(|| format!("reading {}", node_json.display()))?;
    let mut boot: NodeBoot = serde_json::from_slice(&bytes)
        .with_context(|| format!("parsing {}", node_json.display()))?;
    boot.kubernetes = version.to_string();
    boot.containerd = containerd.to_string();
    let json = serde_json::to_vec_pretty(&boot).context("serializing the boot record")?;
    replace(node_json, &json)
}

/// Switches /usr to the staged Flatcar version (as the A/B partition swap
/// would) and clears the staged-update record; `None` when nothing is staged.
fn apply_os_update(disk: &Disk) -> Result<Option<String>> {
    let path = disk.path(OS_UPDATE_FILE)?;
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let update: OsUpdate = serde_json::from_slice(&bytes)
        .with_context(|| format!("{OS_UPDATE_FILE} is not {{\"new_version\": \"…\"}}"))?;
    write_os_release(disk, &update.new_version)?;
    fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    Ok(Some(update.new_version))
}

/// Writes what node-init and the tools read at boot: the boot record
/// (NODE_FILE inside the node) and the boot id file. Both are replaced by
/// rename, so a reader on the host never sees half a file; node-init binds
/// the new inodes when it starts.
pub fn write_boot(fleet: &FleetDir, boot: &NodeBoot) -> Result<()> {
    let json = serde_json::to_vec_pretty(boot).context("serializing the boot record")?;
    replace(&fleet.node_json(&boot.name), &json)?;
    replace(
        &fleet.boot_id(&boot.name),
        format!("{}\n", boot.boot_id).as_bytes(),
    )
}

fn replace(path: &Path, content: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    fs::write(&tmp, content).with_context(|| format!("writing {}", Path::new(&tmp).display()))?;
    fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

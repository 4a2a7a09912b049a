//! What provisioning does differently on a real-OS node's disk. The common
//! provisioning (`crate::provision`) writes the node's upper layers as for
//! an emulated node; this then takes back what the real OS provides itself
//! and adds the units that make the real one run the sim's pieces:
//!
//! - the emulated systemctl, systemd-run, journalctl, systemd-sysext, reboot
//!   and shutdown links go: the root's real ones show through (the kubelet,
//!   kubeadm, kubectl, containerd and update_engine_client links stay: those
//!   remain emulated); systemd-sysupdate's link stays as its recorder, and
//!   the real binary is copied where the recorder runs it (`super::record`);
//! - the host's account files go: the root's own (Debian's system users and
//!   Flatcar's `core`, made by rootfs.sh) show through, with root and core
//!   unlocked for key logins (`UsePAM no` refuses a `!` password field);
//! - sshd runs as Debian's `ssh.service`, pointed at the node's own config;
//! - `kubelet.service` (from the merged sysext) gets `FLEETSIM_UNIT`, the
//!   switch that makes the emulated kubelet act as the service, and the
//!   scenario's `kubelet_restart` as its `RestartSec=` (the bakery unit's 10
//!   s by default; tests lower it, as they do for emulated nodes);
//! - `systemd-sysupdate.service` and `.timer` lose their
//!   `ConditionVirtualization=!container` (systemd's units skip themselves
//!   in containers, and a node is one to systemd): on a Flatcar machine they
//!   run; the timer is enabled only when the scenario says so
//!   (`super::timer`);
//! - Kured's pod is a unit, `fleetsim-kured.service`, started at every boot
//!   after the kubelet, as node-init starts it on an emulated node; it ends
//!   at once unless Kured's DaemonSet is active (`crate::kured::pod`);
//! - `reboot.target` wants `fleetsim-reboot-record.service`, which writes
//!   the reboot into the event log (`super::record`).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::accounts::AccountFile;
use crate::layout::{SSHD_CONFIG, TOOL_LINKS};
use crate::provision::Disk;
use crate::tools::kubelet::{UNIT, UNIT_ENV};

/// The emulated tools whose real ones a real-OS node runs. systemd-sysupdate
/// is among them too, behind its recorder (`super::record`).
const REAL_TOOLS: [&str; 6] = [
    "usr/bin/systemctl",
    "usr/bin/systemd-run",
    "usr/bin/journalctl",
    "usr/bin/systemd-sysext",
    "usr/sbin/reboot",
    "usr/sbin/shutdown",
];

pub fn adapt(
    disk: &Disk,
    rootfs: &Path,
    kubelet_restart: f64,
    sysupdate_timer: bool,
) -> Result<()> {
    for rel in REAL_TOOLS {
        debug_assert!(TOOL_LINKS.contains(&rel));
        let path = disk.path(&format!("/{rel}"))?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
        }
    }
    for file in AccountFile::ALL {
        let path = disk.path(file.path())?;
        let _ = fs::remove_file(&path);
    }
    unlock(disk, rootfs)?;
    for (name, path) in super::record::RECORDED {
        debug_assert!(TOOL_LINKS.contains(&path.trim_start_matches('/')));
        let real = rootfs.join(path.trim_start_matches('/'));
        let to = format!("{}/{name}", super::record::REAL_DIR);
        disk.dir(super::record::REAL_DIR)?;
        let dest = disk.path(&to)?;
        fs::copy(&real, &dest)
            .with_context(|| format!("copying {} to {}", real.display(), dest.display()))?;
    }
    let sshd = format!(
        "# fleetsim: the node's own sshd config (docs/simulator.md)\n\
         [Service]\n\
         ExecStartPre=\n\
         ExecStartPre=/usr/sbin/sshd -t -f {SSHD_CONFIG}\n\
         ExecStart=\n\
         ExecStart=/usr/sbin/sshd -D -f {SSHD_CONFIG}\n"
    );
    disk.file(
        "/etc/systemd/system/ssh.service.d/fleetsim.conf",
        sshd.as_bytes(),
        0o644,
        (0, 0),
    )?;
    // systemd's sysupdate units skip themselves in containers, and a node is
    // one to systemd; the timer runs only where the scenario enables it.
    for unit in ["systemd-sysupdate.service", super::timer::TIMER] {
        machine(disk, unit)?;
    }
    if sysupdate_timer {
        super::timer::enable(disk)?;
    }
    kured_pod(disk)?;
    reboot_recorder(disk)?;
    let kubelet = format!(
        "# fleetsim: makes the emulated kubelet act as this service\n\
         [Service]\n\
         Environment={UNIT_ENV}={UNIT}\n\
         RestartSec={}ms\n",
        (kubelet_restart.max(0.0) * 1000.0).round() as u64
    );
    disk.file(
        &format!("/etc/systemd/system/{UNIT}.d/20-fleetsim.conf"),
        kubelet.as_bytes(),
        0o644,
        (0, 0),
    )
}

/// Drops `unit`'s `ConditionVirtualization=!container`: a node is a
/// machine, not a container.
fn machine(disk: &Disk, unit: &str) -> Result<()> {
    disk.file(
        &format!("/etc/systemd/system/{unit}.d/10-fleetsim-machine.conf"),
        b"# fleetsim: a node is a machine, not a container (docs/simulator.md)\n\
          # An empty Condition resets every condition of the unit.\n\
          [Unit]\nConditionVirtualization=\n",
        0o644,
        (0, 0),
    )
}

/// The binary a Kured pod runs: fleetsim, found by its name (`main.rs`).
const KURED_BIN: &str = "/usr/lib/fleetsim/kured";
pub const KURED_UNIT: &str = "fleetsim-kured.service";

fn kured_pod(disk: &Disk) -> Result<()> {
    // The emulated kubelet's link: the same fleetsim inode.
    disk.hard_link(KURED_BIN, &disk.path("/usr/lib/fleetsim/kubelet")?)?;
    // A pod has no Restart= of its own here: node-init does not restart
    // one either, and a pod that returns found Kured inactive.
    let unit = format!(
        "# fleetsim: Kured's DaemonSet pod on this node (docs/simulator.md)\n\
         [Unit]\n\
         Description=Kured pod (fleetsim)\n\
         After={UNIT}\n\
         \n\
         [Service]\n\
         ExecStart={KURED_BIN} {node}\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        node = disk.node
    );
    disk.file(
        &format!("/etc/systemd/system/{KURED_UNIT}"),
        unit.as_bytes(),
        0o644,
        (0, 0),
    )?;
    disk.symlink(
        &format!("/etc/systemd/system/multi-user.target.wants/{KURED_UNIT}"),
        &format!("/etc/systemd/system/{KURED_UNIT}"),
    )
}

/// The unit that writes a reboot into the event log (`super::record`).
/// `RemainAfterExit=yes` makes that once per boot: systemctl's reboot asks
/// logind first and, on any error other than EACCES, EOPNOTSUPP or
/// EINPROGRESS, starts reboot.target itself (systemd
/// src/systemctl/systemctl-start-special.c, verb_start_special()). Under
/// load logind's answer can be lost while the shutdown stops D-Bus, so one
/// `systemctl reboot` may start reboot.target twice: a one-shot unit that
/// exited would run, and record, twice for one reboot.
fn reboot_recorder(disk: &Disk) -> Result<()> {
    use super::record::{REBOOT_RECORDER, REBOOT_UNIT};
    let bin = format!("/usr/lib/fleetsim/{REBOOT_RECORDER}");
    disk.hard_link(&bin, &disk.path("/usr/lib/fleetsim/kubelet")?)?;
    let unit = format!(
        "# fleetsim: records the reboot in the fleet's event log (docs/simulator.md)\n\
         [Unit]\n\
         Description=Record the reboot (fleetsim)\n\
         DefaultDependencies=no\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         RemainAfterExit=yes\n\
         ExecStart={bin}\n"
    );
    disk.file(
        &format!("/etc/systemd/system/{REBOOT_UNIT}"),
        unit.as_bytes(),
        0o644,
        (0, 0),
    )?;
    disk.symlink(
        &format!("/etc/systemd/system/reboot.target.wants/{REBOOT_UNIT}"),
        &format!("/etc/systemd/system/{REBOOT_UNIT}"),
    )
}

/// The root's /etc/shadow with `root` and `core` able to log in by key:
/// `*` (no password) instead of a locked `!`.
fn unlock(disk: &Disk, rootfs: &Path) -> Result<()> {
    let src = rootfs.join("etc/shadow");
    let text = fs::read_to_string(&src).with_context(|| format!("reading {}", src.display()))?;
    disk.file("/etc/shadow", unlocked(&text).as_bytes(), 0o640, (0, 42))
}

fn unlocked(shadow: &str) -> String {
    shadow
        .lines()
        .map(|l| {
            let mut fields: Vec<&str> = l.split(':').collect();
            if fields.len() > 1
                && (fields[0] == "root" || fields[0] == "core")
                && fields[1].starts_with('!')
            {
                fields[1] = "*";
            }
            fields.join(":") + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlocks_root_and_core_only() {
        let text = "root:!:19000:0:99999:7:::\ncore:!*:19000::::::\nsshd:!:19000::::::\n";
        assert_eq!(
            unlocked(text),
            "root:*:19000:0:99999:7:::\ncore:*:19000::::::\nsshd:!:19000::::::\n"
        );
    }
}

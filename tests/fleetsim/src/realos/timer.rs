//! The node's own `systemd-sysupdate.timer` (scenario node field
//! `sysupdate_timer`). Flatcar ships the timer disabled and the bakery's
//! Butane enables it (flatcar/sysext-bakery docs/kubernetes.md:
//! `systemd-sysupdate.timer` `enabled: true`), so on a real fleet patches of
//! the pinned minor arrive by themselves, moving `/etc/extensions/kubernetes.raw`
//! and touching `/run/reboot-required`, whatever fleetctl is doing.
//!
//! The unit is systemd's own (Debian 13's systemd-container: OnBootSec=15min,
//! OnUnitActiveSec=2h, OnCalendar=Sat, RandomizedDelaySec=4h); only its
//! schedule is shortened, so a test sees it fire: 3 s after boot, then every
//! minute, without a random delay.

use anyhow::Result;

use crate::provision::Disk;

pub const TIMER: &str = "systemd-sysupdate.timer";

/// Enables the timer (the link `systemctl enable` makes) with the test
/// schedule. An empty `OnBootSec=` resets every trigger of the unit,
/// `OnCalendar=` included (systemd.timer(5)), before the new ones.
pub fn enable(disk: &Disk) -> Result<()> {
    disk.symlink(
        &format!("/etc/systemd/system/timers.target.wants/{TIMER}"),
        &format!("/usr/lib/systemd/system/{TIMER}"),
    )?;
    disk.file(
        &format!("/etc/systemd/system/{TIMER}.d/20-fleetsim-schedule.conf"),
        b"# fleetsim: the bakery's timer on a test schedule (docs/simulator.md)\n\
          [Timer]\n\
          OnBootSec=\n\
          OnBootSec=3s\n\
          OnUnitActiveSec=1min\n\
          RandomizedDelaySec=0\n\
          AccuracySec=100ms\n\
          Persistent=no\n",
        0o644,
        (0, 0),
    )
}

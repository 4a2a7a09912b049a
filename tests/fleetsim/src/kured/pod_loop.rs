//! A Kured pod's loop (`cmd/kured/main.go` `rebootAsRequired`, as the
//! module above describes it): started on its node at every boot, it
//! releases a lock it still holds, then on every tick takes the lock,
//! cordons, drains and reboots its node when the sentinel is there.

use std::path::Path;
use std::time::Duration;

use anyhow::{Result, bail};

use super::SENTINEL;
use super::daemonset_lock::{Acquired, Settings, acquire, holding, release, set_unschedulable};
use crate::provision::SYSUPDATE_DIR;
use crate::state::{Event, Shared, now};

/// A Kured pod on node `me`: started by node-init at every boot while the
/// DaemonSet is active, it waits for its node's kubelet (which would start
/// it), then runs Kured's loop until the node goes down around it.
pub fn pod(me: &str) -> Result<()> {
    let shared = Shared::in_node();
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let mut pod = Pod {
        shared,
        me: me.to_string(),
        rng: seed(),
        last_holder: None,
    };
    // The kubelet starts the pod, and the pod needs the API.
    let settings = loop {
        let c = pod.shared.cluster()?;
        let Some(ds) = c.kured.as_ref().filter(|k| k.active) else {
            return Ok(());
        };
        let running = c
            .nodes
            .get(me)
            .and_then(|n| n.kubelet_running())
            .is_some_and(|k| k.boot_id == boot_id);
        if running && c.api_up(now()) {
            break Settings::of(ds);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("kured {me}: started ({settings:?})");
    // Kured's first loop ticks on delaytick(1m); the sim scales that
    // minute down to the period so tests need not wait for it.
    let startup = settings.period.min(60.0);
    pod.sleep_jittered(startup);
    while let Some(lock) = holding(&pod.shared, &settings, me)? {
        if !lock.metadata.unschedulable {
            set_unschedulable(&pod.shared, me, false)?;
            pod.record("uncordon", "ok");
        }
        match release(&pod.shared, &settings, me)? {
            Ok(()) => {
                pod.record("release", "ok");
                break;
            }
            Err(e) => pod.record("release", &format!("failed: {e}")),
        }
        std::thread::sleep(secs(startup));
    }
    pod.sleep_jittered(settings.period);
    loop {
        if pod.tick(&settings)? {
            // Waiting to be killed with the rest of the node.
            loop {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        std::thread::sleep(secs(settings.period));
    }
}

struct Pod {
    shared: Shared,
    me: String,
    rng: u64,
    /// Who held the lock when this pod last failed to take it: logged
    /// once per holder, not once per tick.
    last_holder: Option<String>,
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    t ^ (std::process::id() as u64).rotate_left(32) | 1
}

impl Pod {
    /// delaytick's first tick: between d/2 and 3d/2.
    fn sleep_jittered(&mut self, d: f64) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let unit = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        std::thread::sleep(secs(d / 2.0 + d * unit));
    }

    /// One tick of the main loop; true once the reboot is under way.
    fn tick(&mut self, s: &Settings) -> Result<bool> {
        let c = self.shared.cluster()?;
        if c.kured.as_ref().is_none_or(|k| !k.active) || !c.api_up(now()) {
            return Ok(false);
        }
        if !Path::new(SENTINEL).exists() {
            return Ok(false);
        }
        let unschedulable = c.nodes.get(&self.me).is_some_and(|n| n.unschedulable);
        if holding(&self.shared, s, &self.me)?.is_none() {
            match acquire(&self.shared, s, &self.me, unschedulable)? {
                Acquired::Yes => {
                    self.last_holder = None;
                    self.record("acquire", "ok");
                }
                Acquired::HeldBy(holder) => {
                    if self.last_holder.as_ref() != Some(&holder) {
                        self.record("acquire", &format!("held by {holder}"));
                        self.last_holder = Some(holder);
                    }
                    return Ok(false);
                }
                Acquired::Failed(e) => {
                    self.record("acquire", &format!("failed: {e}"));
                    return Ok(false);
                }
            }
        }
        set_unschedulable(&self.shared, &self.me, true)?;
        self.record("cordon", "ok");
        // Kured drains without a timeout by default: a budget that blocks
        // an eviction keeps it here, lock held, until the budget allows it.
        let mut told = false;
        while !crate::api::objects::budgets::evictions_refused(
            &self.shared.cluster()?,
            &self.shared.faults()?,
            &self.me,
        )
        .is_empty()
        {
            if !told {
                self.record(
                    "drain",
                    "waiting: Cannot evict pod as it would violate the pod's disruption budget.",
                );
                told = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.record("drain", "ok");
        self.record("reboot", "ok");
        // Kured runs `/bin/systemctl reboot` through nsenter into PID 1's
        // namespaces; the pod already runs in its node's.
        if crate::power::inside_a_real_os_node() {
            let status = std::process::Command::new("/usr/bin/systemctl")
                .arg("reboot")
                .status();
            return match status {
                Ok(s) if s.success() => Ok(true),
                Ok(s) => bail!("systemctl reboot: {s}"),
                Err(e) => bail!("running systemctl reboot: {e}"),
            };
        }
        if !crate::power::inside_a_node() {
            bail!("PID 1 is not node-init: not rebooting the host");
        }
        // SAFETY: signalling our namespace's init, which has a handler.
        unsafe { libc::kill(1, libc::SIGTERM) };
        Ok(true)
    }

    fn record(&self, what: &str, result: &str) {
        eprintln!("kured {}: {what}: {result}", self.me);
        let event = Event {
            t: now(),
            node: self.me.clone(),
            argv: vec!["(kured)".into(), what.into()],
            result: result.into(),
            pins: crate::pins::kubernetes_pins(Path::new(SYSUPDATE_DIR)),
            ..Default::default()
        };
        let _ = self.shared.record(&event);
    }
}

//! The heartbeat in HA while the control plane kubectl ran on reboots, on
//! the fake API server (`lock_testkit`) reached through fake control
//! planes, any of which can be down: what
//! `in_ha_the_heartbeat_goes_through_another_control_plane_while_cp_1_reboots`
//! proved on a real-OS fleet of four nodes in about 100 s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::steps::lock::clock::ClockOffset;
use crate::steps::lock::lock_testkit::{Api, me};
use crate::steps::lock::{LockOptions, acquire};
use crate::steps::{Lease, Rerun};
use crate::ui::Printer;

/// The one API server, as kubectl on control plane `name` reaches it; when
/// that node is down (rebooting), nothing gets through it.
struct Through {
    api: Arc<Api>,
    name: String,
    down: Arc<AtomicBool>,
}

impl Kubectl for Through {
    async fn kubectl(
        &self,
        label: &str,
        args: &[String],
        stdin: Option<&str>,
    ) -> anyhow::Result<crate::ssh::Output> {
        if self.down.load(Ordering::SeqCst) {
            anyhow::bail!("{}: the SSH connection dropped", self.name);
        }
        self.api.kubectl(label, args, stdin).await
    }

    fn note(&self, kind: &str, detail: &str) {
        self.api.note(kind, detail);
    }

    fn node(&self) -> &str {
        &self.name
    }
}

/// `cp-1`… in inventory order, each up or down; the connection in use and
/// every connection attempted, by node name.
struct FakePlanes {
    api: Arc<Api>,
    down: Vec<Arc<AtomicBool>>,
    current: usize,
    through: Through,
    connects: Vec<String>,
}

fn name(i: usize) -> String {
    format!("cp-{}", i + 1)
}

impl FakePlanes {
    fn new(api: Arc<Api>, count: usize) -> FakePlanes {
        let down: Vec<Arc<AtomicBool>> = (0..count).map(|_| Arc::default()).collect();
        let through = Through {
            api: api.clone(),
            name: name(0),
            down: down[0].clone(),
        };
        FakePlanes {
            api,
            down,
            current: 0,
            through,
            connects: Vec::new(),
        }
    }

    fn set_down(&self, i: usize, down: bool) {
        self.down[i].store(down, Ordering::SeqCst);
    }
}

impl Planes for FakePlanes {
    type Api = Through;

    fn api(&self) -> &Through {
        &self.through
    }

    async fn failover(&mut self) -> anyhow::Result<()> {
        let (down, connects) = (&self.down, &mut self.connects);
        let (i, ()) = first_answering(self.current, down.len(), |i| {
            connects.push(name(i));
            let refused = down[i].load(Ordering::SeqCst);
            async move {
                match refused {
                    true => anyhow::bail!("{}: connection refused", name(i)),
                    false => Ok(()),
                }
            }
        })
        .await?;
        self.through = Through {
            api: self.api.clone(),
            name: name(i),
            down: self.down[i].clone(),
        };
        self.current = i;
        Ok(())
    }
}

/// fleetctl's configmap lock taken on `api`, and a run's stop holding its
/// lease, last renewed `ago` (a TTL of 120 s, a margin of 60 s).
async fn held(api: &Api, ago: Duration) -> (Lock, Stop) {
    let now = SystemTime::now();
    let lock = acquire(api, &LockOptions::default(), &me(), now)
        .await
        .unwrap();
    let stop = Stop::default();
    stop.hold_lease(Lease {
        what: lock.describe(),
        renewed: Instant::now() - ago,
        ttl: Duration::from_secs(120),
        margin: Duration::from_secs(60),
        rerun: Rerun::Apply,
    });
    (lock, stop)
}

fn heartbeat_written(api: &Api) -> SystemTime {
    let state = api.state();
    let beat = &state.lock_configmap().unwrap().data["heartbeat"];
    humantime::parse_rfc3339(beat).unwrap()
}

fn patches(api: &Api) -> usize {
    api.calls_of("patch configmap").len()
}

#[tokio::test]
async fn while_cp_1_reboots_the_heartbeat_lands_through_cp_2_and_stays_there() {
    let api = Arc::new(Api::default());
    // 70 s since the last heartbeat: past the lease's margin unless this
    // one lands.
    let (lock, stop) = held(&api, Duration::from_secs(70)).await;
    let mut planes = FakePlanes::new(api.clone(), 3);
    let printer = Printer::new(true, 0);
    let mut warned = false;

    // cp-1 goes down: the heartbeat through it fails, and lands at once
    // through cp-2, the next control plane in inventory order.
    planes.set_down(0, true);
    let before = patches(&api);
    let go_on = heartbeat_round(
        &lock,
        ClockOffset::NONE,
        &mut planes,
        &stop,
        &mut warned,
        &printer,
    )
    .await;
    assert!(go_on);
    assert_eq!(planes.connects, ["cp-1", "cp-2"], "cp-1 first, then cp-2");
    assert_eq!(planes.api().node(), "cp-2");
    assert_eq!(patches(&api), before + 1, "the heartbeat landed once");
    assert!(
        !stop.requested(),
        "the lease was renewed: {:?}",
        stop.reason()
    );
    assert!(stop.lapsed_now().is_none());
    assert!(!warned, "a heartbeat that landed clears the warning");

    // While cp-1 stays down the next beats go through cp-2 directly.
    heartbeat_round(
        &lock,
        ClockOffset::NONE,
        &mut planes,
        &stop,
        &mut warned,
        &printer,
    )
    .await;
    assert_eq!(planes.connects, ["cp-1", "cp-2"], "no new connection");
    assert_eq!(patches(&api), before + 2);

    // cp-2 reboots in turn with cp-1 back: round to cp-3, then cp-1.
    planes.set_down(0, false);
    planes.set_down(1, true);
    planes.set_down(2, true);
    heartbeat_round(
        &lock,
        ClockOffset::NONE,
        &mut planes,
        &stop,
        &mut warned,
        &printer,
    )
    .await;
    assert_eq!(planes.connects[2..], ["cp-2", "cp-3", "cp-1"]);
    assert_eq!(planes.api().node(), "cp-1");
    assert_eq!(patches(&api), before + 3);
    assert!(!stop.requested(), "{:?}", stop.reason());
}

#[tokio::test]
async fn with_no_control_plane_answering_the_run_stops_once_the_lease_reaches_its_margin() {
    let api = Arc::new(Api::default());
    let mut planes = FakePlanes::new(api.clone(), 2);
    planes.set_down(0, true);
    planes.set_down(1, true);
    let printer = Printer::new(true, 0);
    let mut warned = false;

    // 30 s since the last heartbeat: the lease holds a while yet.
    let (lock, stop) = held(&api, Duration::from_secs(30)).await;
    let go_on = heartbeat_round(
        &lock,
        ClockOffset::NONE,
        &mut planes,
        &stop,
        &mut warned,
        &printer,
    )
    .await;
    assert!(go_on, "an unreachable API is no reason to give up yet");
    assert!(warned, "said once");
    assert!(!stop.requested(), "{:?}", stop.reason());
    assert_eq!(patches(&api), 0);

    // 70 s: past the margin, and still nobody answers.
    api.state().configmaps.clear();
    let (lock, stop) = held(&api, Duration::from_secs(70)).await;
    heartbeat_round(
        &lock,
        ClockOffset::NONE,
        &mut planes,
        &stop,
        &mut warned,
        &printer,
    )
    .await;
    assert!(stop.requested());
    let why = stop.reason().unwrap();
    assert!(why.contains("fleetctl's lock (configmap"), "{why}");
}

#[tokio::test]
async fn a_lock_found_lost_through_another_control_plane_stops_the_run() {
    let api = Arc::new(Api::default());
    let (lock, stop) = held(&api, Duration::ZERO).await;
    let mut planes = FakePlanes::new(api.clone(), 2);
    planes.set_down(0, true);
    // Someone ran `--force-unlock` while cp-1 was down.
    api.state().configmaps.clear();
    let go_on = heartbeat_round(
        &lock,
        ClockOffset::NONE,
        &mut planes,
        &stop,
        &mut false,
        &Printer::new(true, 0),
    )
    .await;
    assert!(!go_on, "no more heartbeats");
    assert_eq!(planes.api().node(), "cp-2");
    let why = stop.reason().unwrap();
    assert!(
        why.contains("is no longer held by this fleetctl run"),
        "{why}"
    );
}

#[tokio::test]
async fn the_heartbeat_through_another_control_plane_is_written_in_the_clusters_time() {
    let api = Arc::new(Api::default());
    let (lock, stop) = held(&api, Duration::ZERO).await;
    let mut planes = FakePlanes::new(api.clone(), 2);
    planes.set_down(0, true);
    // This machine's clock 4 minutes behind the cluster's.
    let laptop = SystemTime::now();
    let clock = ClockOffset::measured(laptop, laptop + Duration::from_secs(240), laptop);
    heartbeat_round(
        &lock,
        clock,
        &mut planes,
        &stop,
        &mut false,
        &Printer::new(true, 0),
    )
    .await;
    let ahead = heartbeat_written(&api)
        .duration_since(laptop)
        .unwrap_or_default();
    assert!(
        ahead >= Duration::from_secs(239) && ahead < Duration::from_secs(250),
        "the heartbeat is {ahead:?} ahead of this machine's clock, not the cluster's 4m"
    );
}

#[tokio::test]
async fn the_lock_is_given_back_through_another_control_plane_when_cp_1_is_down() {
    let api = Arc::new(Api::default());
    let (lock, _stop) = held(&api, Duration::ZERO).await;
    let mut planes = FakePlanes::new(api.clone(), 2);
    planes.set_down(0, true);
    release_through(&lock, &mut planes).await.unwrap();
    assert!(api.state().configmaps.is_empty(), "released through cp-2");
    assert_eq!(planes.api().node(), "cp-2");

    // Nobody answers: the error says why, the lock stays (it expires).
    let (lock, _stop) = held(&api, Duration::ZERO).await;
    planes.set_down(1, true);
    let e = release_through(&lock, &mut planes).await.unwrap_err();
    assert!(
        format!("{e:#}").contains("the SSH connection dropped"),
        "{e:#}"
    );
    assert!(!api.state().configmaps.is_empty());
}

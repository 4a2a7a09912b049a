//! The dry listing's own tests: inert text, and the offline rollback's.

use super::*;

#[test]
fn the_listing_cannot_carry_our_colours_or_act_on_the_terminal() {
    let hostile = crate::ui::escape::HOSTILE;
    let mut out = Out::default();
    out.push(&format!("== 1/1 {hostile}\n"));
    // A stray config's file name, as the node listed it, in a pin.
    out.line(
        "w-1",
        &upgrade::pin_config("/etc/sysupdate.d/k.conf", &[hostile.into()]),
    );
    crate::ui::escape::assert_inert(&out.text);
}

/// `rollback` without the API runs its roll offline, under no lock
/// (`roll::roll_offline`): its dry run must not show a lock, a hold, a
/// gate or a drain the run will not do.
#[test]
fn the_dry_run_of_a_rollback_without_the_api_shows_no_lock_and_no_drain() {
    use crate::steps::execute::{dry_run, dry_run_offline};
    use crate::steps::script::Task;
    use crate::steps::script::tests::{inventory, plan};
    let (plan, inv) = (plan(), inventory());
    let settings = Settings {
        node_timeout: Duration::from_secs(600),
        drain_timeout: Duration::from_secs(300),
        ssh: crate::ssh::Options::new(
            "/nonexistent/known_hosts".into(),
            crate::inventory::HostKeyChecking::Strict,
        ),
        targets: Default::default(),
        parallel: 1,
        max_unavailable: "1".parse().unwrap(),
        ignored_checks: Vec::new(),
        hub_images: None,
        etcd_backups: None,
        etcd_snapshot_max: 0,
        checks_judged: None,
        pace: Default::default(),
        on_failure: Default::default(),
        rerun: crate::steps::Rerun::Rollback,
        kured_gates: true,
    };
    let hop = &plan.hops[0];
    let tasks = [Task::Roll {
        nodes: vec!["cp-1".into()],
        minor: hop.minor,
        expect: hop.version.clone(),
        finishes: vec!["cp-1".into()],
        rollback: true,
    }];
    let online = dry_run(&tasks, &plan, &inv, &settings);
    assert!(online.contains("drain") && online.contains("take the lock"));
    let listing = dry_run_offline(&tasks, &plan, &inv, &settings);
    // The heading is the task's title, the run's journal's too.
    let offline: String = listing
        .lines()
        .filter(|l| !l.starts_with("== "))
        .collect::<Vec<_>>()
        .join("\n");
    for absent in ["lock", "drain", "gates", "soak", "window", "Kured"] {
        assert!(!offline.contains(absent), "{absent} in:\n{offline}");
    }
    assert!(offline.contains(upgrade::REBOOT), "{offline}");
    assert!(offline.contains("(until Ready)"), "{offline}");
}

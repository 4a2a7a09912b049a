//! The run configuration from flags and inventories: what each command
//! resolves, what the command line overrides in the inventory, and the
//! refusals, each a usage error (exit 2) before anything is touched.

use std::path::Path;
use std::time::Duration;

use clap::Parser;

use super::*;
use crate::cli::{Cli, Command};

/// Two nodes, a user to log in as (no `~/.ssh/config` needed), and `extra`
/// appended at the top level.
fn inventory(extra: &str) -> Inventory {
    let text = format!(
        "kubernetes_version: v1.37\nssh: {{user: core}}\nnodes:\n\
         \x20 - {{name: cp-1, address: 10.0.0.1, role: control-plane}}\n\
         \x20 - {{name: w-1, address: 10.0.0.2, role: worker}}\n{extra}"
    );
    crate::inventory::parse(&text, Path::new("/ops/inventory.yaml")).unwrap()
}

fn cli(args: &[&str]) -> Cli {
    let mut argv = vec!["fleetctl"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).unwrap()
}

/// The configuration `args` (a whole command line after `fleetctl`)
/// resolves to against `inv`.
fn config(args: &[&str], inv: &Inventory) -> anyhow::Result<RunConfig> {
    let cli = cli(args);
    match &cli.command {
        Command::Apply(a) => RunConfig::apply(&cli.global, a, inv),
        Command::Reboot(a) => RunConfig::reboot(&cli.global, a, inv),
        Command::Rollback(a) => RunConfig::rollback(&cli.global, a, inv),
        _ => panic!("not a command that runs: {args:?}"),
    }
}

/// The refusal `args` meets, which must be a usage error.
fn refusal(args: &[&str], inv: &Inventory) -> String {
    let Err(e) = config(args, inv) else {
        panic!("{args:?} was not refused");
    };
    assert_eq!(crate::error::exit_code(&e), 2, "{args:?}: {e:#}");
    format!("{e:#}")
}

#[test]
fn window_kured_names_kureds_window_and_the_old_flag_still_does() {
    let inv = inventory("window: 'Sat 01:00-05:00'\n");
    let c = config(&["apply", "--window", "kured"], &inv).unwrap();
    assert!(c.kured_window);
    // Kured's window is read after the lock: none before it, not even
    // the inventory's.
    assert!(c.pace.window.is_none());
    assert!(c.refuse_outside_window().is_ok());
    // The old flag means the same, the inventory's window set aside too.
    let c = config(&["reboot", "--kured-window"], &inv).unwrap();
    assert!(c.kured_window && c.pace.window.is_none());
    let c = config(&["apply", "--window", "Sat,Sun 01:00-05:00"], &inv).unwrap();
    assert!(!c.kured_window);
    assert_eq!(
        c.pace.window.map(|w| w.to_string()),
        Window::parse("Sat,Sun 01:00-05:00")
            .ok()
            .map(|w| w.to_string())
    );
    assert!(!config(&["apply"], &inventory("")).unwrap().kured_window);
    assert!(
        Cli::try_parse_from(["fleetctl", "apply", "--window", "kurd"]).is_err(),
        "a typo is no window"
    );
}

#[test]
fn the_inventorys_window_and_kured_hold_unless_the_command_line_says_otherwise() {
    let inv = inventory("window: 'Sat 01:00-05:00'\nkured: ops/kured\n");
    let c = config(&["rollback", "w-1"], &inv).unwrap();
    assert_eq!(
        c.pace.window.as_ref().map(|w| w.to_string()),
        inv.window.as_ref().map(|w| w.to_string())
    );
    assert_eq!(c.kured, inv.kured);
    assert_eq!(c.take_request().kured, inv.kured);
    let c = config(
        &[
            "rollback",
            "w-1",
            "--window",
            "Sun 02:00-03:00",
            "--kured",
            "kube-system/kured",
        ],
        &inv,
    )
    .unwrap();
    assert_eq!(
        c.pace.window.map(|w| w.to_string()),
        Window::parse("Sun 02:00-03:00").ok().map(|w| w.to_string())
    );
    assert_eq!(
        c.kured.map(|k| k.to_string()).as_deref(),
        Some("kube-system/kured")
    );
    let c = config(&["reboot"], &inventory("")).unwrap();
    assert!(c.kured.is_none() && c.pace.window.is_none());
}

#[test]
fn kureds_window_without_kureds_gates_is_refused() {
    let text = refusal(
        &["reboot", "--window", "kured", "--no-kured-gates"],
        &inventory(""),
    );
    assert!(
        text.contains("--window kured holds each node to Kured's reboot window"),
        "{text}"
    );
    // The older flag and --no-kured-gates: clap's own conflict.
    assert!(
        Cli::try_parse_from(["fleetctl", "reboot", "--kured-window", "--no-kured-gates"]).is_err()
    );
}

#[test]
fn a_bad_alert_gate_is_refused_naming_the_flag() {
    for url in ["prometheus:9090", "http://user:pw@prom:9090", "http:///x"] {
        let text = refusal(&["apply", "--alert-gate", url], &inventory(""));
        assert!(text.contains("--alert-gate"), "{url}: {text}");
    }
    let c = config(
        &[
            "reboot",
            "--alert-gate",
            "http://prom:9090",
            "--alert-filter",
            "^Watchdog$",
            "--alert-firing-only",
            "--alert-gate-timeout",
            "3m",
            "--alert-gate-interval",
            "5s",
        ],
        &inventory(""),
    )
    .unwrap();
    let gate = c.pace.alert_gate.as_ref().unwrap();
    assert_eq!(gate.query_url, "http://prom:9090/api/v1/query?query=ALERTS");
    assert!(gate.filter.firing_only);
    assert!(gate.filter.exclude.is_some());
    assert_eq!(gate.timeout, Duration::from_secs(180));
    assert_eq!(gate.interval, Duration::from_secs(5));
    // Kured's Prometheus gate, when kept, waits as long.
    assert_eq!(c.alert_gate_timeout, Duration::from_secs(180));
}

#[test]
fn a_plain_http_hub_is_refused_for_apply_only_unless_allowed() {
    let inv = inventory("sysupdate: {hub: 'http://hub.lan/ext'}\n");
    let text = refusal(&["apply"], &inv);
    assert!(text.contains("--allow-insecure-hub"), "{text}");
    assert!(config(&["apply", "--allow-insecure-hub"], &inv).is_ok());
    // reboot and rollback download nothing from the hub.
    assert!(config(&["reboot"], &inv).is_ok());
    assert!(config(&["rollback", "w-1"], &inv).is_ok());
}

#[test]
fn apply_brings_its_own_settings_and_reboot_and_rollback_none() {
    let inv = inventory("");
    let c = config(
        &[
            "apply",
            "--on-failure",
            "rollback",
            "--etcd-snapshot-max",
            "1GiB",
            "--ignore-check",
            "pdb",
            "--workers",
            "every-hop",
        ],
        &inv,
    )
    .unwrap();
    assert_eq!(c.rerun, Rerun::Apply);
    assert_eq!(c.on_failure, OnFailure::Rollback);
    assert_eq!(c.etcd_backups, Some(inv.state_dir().join("backups")));
    assert_eq!(c.etcd_snapshot_max, 1 << 30);
    assert_eq!(c.ignore_checks.len(), 1);
    assert_eq!(c.workers, Some(WorkerStrategy::EveryHop));
    let c = config(&["apply", "--skip-etcd-snapshot"], &inv).unwrap();
    assert_eq!(c.etcd_backups, None);
    assert_eq!((c.on_failure, c.workers), (OnFailure::Stop, None));
    for (args, rerun) in [
        (&["reboot"][..], Rerun::Reboot),
        (&["rollback", "w-1"][..], Rerun::Rollback),
    ] {
        let c = config(args, &inv).unwrap();
        assert_eq!(c.rerun, rerun);
        assert_eq!(c.on_failure, OnFailure::Stop);
        assert_eq!((c.etcd_backups.clone(), c.etcd_snapshot_max), (None, 0));
        assert!(c.ignore_checks.is_empty() && c.workers.is_none());
    }
}

#[test]
fn the_steps_settings_carry_the_command_line_and_what_the_recheck_found() {
    let inv = inventory("");
    let c = config(
        &[
            "--parallel",
            "3",
            "--connect-timeout",
            "4s",
            "reboot",
            "--node-timeout",
            "7m",
            "--drain-timeout",
            "2m",
            "--max-unavailable",
            "50%",
            "--soak",
            "1m",
            "--no-kured-gates",
            "--ceph-timeout",
            "9m",
        ],
        &inv,
    )
    .unwrap();
    let s = c.settings(HopFindings::default());
    assert_eq!(s.parallel, 3);
    assert_eq!(s.ssh.connect_timeout, Duration::from_secs(4));
    assert_eq!(s.node_timeout, Duration::from_secs(420));
    assert_eq!(s.drain_timeout, Duration::from_secs(120));
    assert_eq!(s.max_unavailable, "50%".parse().unwrap());
    assert_eq!(s.pace.soak, Duration::from_secs(60));
    assert_eq!(s.pace.ceph.timeout, Duration::from_secs(540));
    assert!(s.pace.ceph.enabled);
    assert!(!s.kured_gates);
    assert_eq!(
        s.targets.keys().map(String::as_str).collect::<Vec<_>>(),
        ["cp-1", "w-1"]
    );
    assert!(s.ignored_checks.is_empty() && s.hub_images.is_none() && s.checks_judged.is_none());
    let found = HopFindings {
        ignored_checks: c.ignore_checks.clone(),
        hub_images: Some(Vec::new()),
        checks_judged: Some(Instant::now()),
    };
    let s = c.settings(found);
    assert!(s.hub_images.is_some() && s.checks_judged.is_some());
    let r = c.take_request();
    assert_eq!(
        (r.node_timeout, r.drain_timeout),
        (s.node_timeout, s.drain_timeout)
    );
    assert_eq!(r.rerun, Rerun::Reboot);
}

#[test]
fn the_ceph_gate_flags() {
    let c = config(&["apply", "--no-ceph-gate"], &inventory("")).unwrap();
    assert!(!c.pace.ceph.enabled);
    let c = config(
        &[
            "apply",
            "--ceph-hold-on",
            "SLOW_OPS",
            "--ceph-recovery-timeout",
            "1h",
        ],
        &inventory(""),
    )
    .unwrap();
    assert!(c.pace.ceph.enabled);
    assert_eq!(c.pace.ceph.hold_on, ["SLOW_OPS"]);
    assert_eq!(c.pace.ceph.recovery_timeout, Duration::from_secs(3600));
    assert!(
        Cli::try_parse_from(["fleetctl", "apply", "--no-ceph-gate", "--ceph-hold-on", "X"])
            .is_err()
    );
}

#[test]
fn status_and_plan_reach_the_fleet_as_the_runs_do() {
    let inv = inventory("");
    let cli = cli(&["--parallel", "5", "--connect-timeout", "2s", "status"]);
    let reach = Reach::new(&cli.global, &inv);
    assert_eq!(reach.parallel, 5);
    assert_eq!(reach.ssh.connect_timeout, Duration::from_secs(2));
}

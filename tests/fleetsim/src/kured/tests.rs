//! The manifest, the chart and the lock values against kured's own shapes.

use super::*;

#[test]
fn the_manifest_and_the_chart() {
    let m = KuredSpec::default().daemonset();
    assert_eq!(
        (m.namespace.as_str(), m.name.as_str()),
        ("kube-system", "kured")
    );
    assert_eq!(
        m.command,
        [
            "/usr/bin/kured",
            "--reboot-sentinel=/sentinel/reboot-required"
        ]
    );
    assert!(m.args.is_empty());
    assert_eq!(m.image, "ghcr.io/kubereboot/kured:1.23.0");
    let h = KuredSpec {
        helm: Some("kured/kured".into()),
        period: 0.5,
        ..Default::default()
    }
    .daemonset();
    assert_eq!((h.namespace.as_str(), h.name.as_str()), ("kured", "kured"));
    assert_eq!(h.command, ["/usr/bin/kured"]);
    assert_eq!(
        &h.args[..3],
        [
            "--ds-name=kured",
            "--ds-namespace=kured",
            "--metrics-port=8080"
        ]
    );
    assert!(h.args.contains(&"--period=500ms".to_string()));
    let other = KuredSpec {
        helm: Some("ops/reboots".into()),
        ..Default::default()
    }
    .daemonset();
    assert_eq!(other.name, "reboots-kured");
    let s = Settings::of(&other);
    assert_eq!(
        (s.ds_namespace.as_str(), s.ds_name.as_str()),
        ("ops", "reboots-kured")
    );
    assert_eq!(s.period, 3600.0);
}

#[test]
fn the_multi_owner_lock_as_can_acquire_multiple_fills_it() {
    let t0 = 1_764_601_445.0;
    let entry = |node: &str, at: f64, ttl: f64| LockValue::new(node, false, at, ttl);
    // Room: appended, whatever the others are.
    let empty = MultiLock::parse(r#"{"maxOwners":2,"locks":null}"#).unwrap();
    let one = empty.with_entry(entry("w-1", t0, 0.0), 2, t0).unwrap();
    assert_eq!(one.max_owners, 2);
    let two = one.with_entry(entry("w-2", t0, 0.0), 2, t0).unwrap();
    assert_eq!(two.locks.as_ref().map(Vec::len), Some(2));
    // Full of unexpired entries: no room.
    assert_eq!(two.with_entry(entry("w-3", t0, 0.0), 2, t0 + 1e6), None);
    // Full, one expired: it makes room.
    let full = MultiLock {
        max_owners: 2,
        locks: Some(vec![entry("w-1", t0, 60.0), entry("w-2", t0, 0.0)]),
    };
    let next = full
        .with_entry(entry("w-3", t0 + 61.0, 0.0), 2, t0 + 61.0)
        .unwrap();
    let ids: Vec<&str> = next
        .locks
        .iter()
        .flatten()
        .map(|l| l.node_id.as_str())
        .collect();
    assert_eq!(ids, ["w-2", "w-3"]);
    // fleetctl's lock with every slot taken, heartbeat fresh: no room.
    let fleetctl = r#"{"maxOwners":2,"locks":[{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":900000000000},{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false},"created":"2026-11-29T19:30:12Z","TTL":900000000000}]}"#;
    let held = MultiLock::parse(fleetctl).unwrap();
    let created = parse_rfc3339("2026-11-29T19:30:12Z").unwrap();
    assert_eq!(
        held.with_entry(entry("w-1", created, 0.0), 2, created + 899.0),
        None
    );
    assert!(
        held.with_entry(entry("w-1", created, 0.0), 2, created + 900.0)
            .is_some()
    );
    // A single-form value reads as an empty multi-owner one.
    let single = MultiLock::parse(&LockValue::new("w-1", false, t0, 0.0).to_json()).unwrap();
    assert_eq!(single.locks, None);
    assert!(MultiLock::parse("not json").is_err());
    assert_eq!(
        Settings::of(
            &KuredSpec {
                concurrency: 3,
                ..Default::default()
            }
            .daemonset()
        )
        .concurrency,
        3
    );
}

#[test]
fn lock_values_as_kured_reads_and_writes_them() {
    let v = LockValue::new("w-1", false, 1_764_601_445.5, 0.0);
    assert_eq!(
        v.to_json(),
        r#"{"nodeID":"w-1","metadata":{"unschedulable":false},"created":"2025-12-01T15:04:05.5Z","TTL":0}"#
    );
    assert!(!v.expired(2e9), "TTL 0 never expires");
    let fleetctl = r#"{"nodeID":"fleetctl/me@lap","metadata":{"unschedulable":false,"fleetctl":{"host":"lap","pid":1,"started":"x"}},"created":"2026-11-29T19:30:12Z","TTL":900000000000}"#;
    let v = LockValue::parse(fleetctl).unwrap();
    let created = parse_rfc3339("2026-11-29T19:30:12Z").unwrap();
    assert!(!v.expired(created + 899.0));
    assert!(v.expired(created + 900.0));
    assert!(LockValue::parse("").is_err());
    let multi = LockValue::parse(r#"{"maxOwners":2,"locks":[]}"#).unwrap();
    assert_eq!(
        multi.node_id, "",
        "a multi-owner value reads as nobody's, forever"
    );
    assert_eq!(
        parse_rfc3339("1970-01-02T00:00:01+01:00"),
        Some(86_401.0 - 3600.0)
    );
}

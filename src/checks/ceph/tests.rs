use super::*;

fn check(code: &str, severity: &str) -> CephCheck {
    CephCheck {
        code: code.into(),
        severity: severity.into(),
        message: format!("{code} happened"),
    }
}

fn health(status: &str, checks: Vec<CephCheck>) -> Health {
    Health {
        status: status.into(),
        checks,
    }
}

#[test]
fn benign_warnings_pass_and_availability_codes_and_every_error_hold() {
    let p = Policy::default();
    let benign = health(
        "HEALTH_WARN",
        vec![
            check("AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED", "HEALTH_WARN"),
            check("POOL_NO_REDUNDANCY", "HEALTH_WARN"),
            check("SOMETHING_NEW", "HEALTH_WARN"),
        ],
    );
    assert!(holding(&benign, &p).is_empty());
    assert_eq!(passing(&benign, &p).len(), 3);
    for code in ["PG_AVAILABILITY", "PG_DEGRADED", "OSD_DOWN", "MON_DOWN"] {
        let h = health("HEALTH_WARN", vec![check(code, "HEALTH_WARN")]);
        let held = holding(&h, &p);
        assert_eq!(held.len(), 1, "{code}");
        assert!(held[0].starts_with(code), "{held:?}");
    }
    let err = health("HEALTH_ERR", vec![check("SOMETHING_NEW", "HEALTH_ERR")]);
    assert!(holding(&err, &p)[0].contains("every HEALTH_ERR holds"));
    // A HEALTH_ERR whose checks are not listed holds all the same.
    assert_eq!(holding(&health("HEALTH_ERR", vec![]), &p).len(), 1);
    // The operator names more.
    let p = Policy {
        hold_on: vec!["SOMETHING_NEW".into()],
    };
    assert!(holding(&benign, &p)[0].contains("--ceph-hold-on"));
}

fn status(last_checked: Option<i64>, health: Option<Health>) -> CephClusterStatus {
    CephClusterStatus {
        name: "rook-ceph/rook-ceph".into(),
        namespace: "rook-ceph".into(),
        health,
        last_checked,
        last_checked_text: "2026-12-07T03:00:00Z".into(),
    }
}

#[test]
fn a_stale_or_missing_status_is_unknown_and_holds() {
    let p = Policy::default();
    let ok = Some(health("HEALTH_OK", vec![]));
    let at = |t, h| Reading::Status {
        status: status(t, h),
        now: 10_000,
    };
    assert!(before_drain(&at(Some(10_000 - 120), ok.clone()), &p).is_empty());
    let stale = before_drain(&at(Some(10_000 - 121), ok.clone()), &p);
    assert!(stale[0].contains("unknown"), "{stale:?}");
    assert!(before_drain(&at(None, ok.clone()), &p)[0].contains("unknown"));
    assert!(before_drain(&at(Some(10_000), None), &p)[0].contains("no .status.ceph"));
    assert!(!before_drain(&Reading::Unreadable("x".into()), &p).is_empty());
    // Recovery counts only a check made since the node returned.
    assert!(!recovered(&at(Some(9_990), ok.clone()), 9_995).is_empty());
    assert!(recovered(&at(Some(9_996), ok), 9_995).is_empty());
    let degraded = Some(health(
        "HEALTH_WARN",
        vec![check("PG_DEGRADED", "HEALTH_WARN")],
    ));
    assert!(!recovered(&at(Some(9_996), degraded), 9_995).is_empty());
}

#[test]
fn the_toolbox_holds_on_unsafe_pgs_and_a_refused_ok_to_stop() {
    let p = Policy::default();
    let pgs = |s: &str| PgStates {
        by_state: vec![(s.to_string(), 32)],
    };
    let ok = OkToStop {
        ok_to_stop: true,
        osds: vec![1],
        num_ok_pgs: 32,
        num_not_ok_pgs: 0,
    };
    let reading = |state: &str, stop: OkToStop| Reading::Toolbox {
        health: health("HEALTH_OK", vec![]),
        pgs: pgs(state),
        stop: Some((vec![1], Ok(stop))),
    };
    assert!(before_drain(&reading("active+clean", ok.clone()), &p).is_empty());
    assert!(before_drain(&reading("active+clean+scrubbing+deep", ok.clone()), &p).is_empty());
    for bad in [
        "active+undersized+degraded",
        "active+recovering+degraded",
        "undersized+degraded+peered",
        "peering",
    ] {
        assert_eq!(
            before_drain(&reading(bad, ok.clone()), &p).len(),
            1,
            "{bad}"
        );
    }
    let refused = OkToStop {
        ok_to_stop: false,
        num_not_ok_pgs: 7,
        ..ok.clone()
    };
    let held = before_drain(&reading("active+clean", refused), &p);
    assert!(held[0].contains("ok-to-stop 1` says no: 7 PGs"), "{held:?}");
    assert!(recovered(&reading("active+clean", ok.clone()), 0).is_empty());
    assert!(!recovered(&reading("active+recovering+degraded", ok), 0).is_empty());
}

#[test]
fn cephs_json_is_read_as_ceph_prints_it() {
    let ok = parse_ok_to_stop(
        r#"{"ok_to_stop":false,"osds":[1],"num_ok_pgs":161,"num_not_ok_pgs":50,"bad_become_inactive":["1.0"],"ok_become_degraded":["1.2"]}"#,
    )
    .unwrap();
    assert_eq!(
        ok,
        OkToStop {
            ok_to_stop: false,
            osds: vec![1],
            num_ok_pgs: 161,
            num_not_ok_pgs: 50
        }
    );
    assert!(parse_ok_to_stop(r#"{"osds":[1]}"#).is_err());
    assert!(parse_ok_to_stop("Error EBUSY").is_err());
    let pgs = parse_pg_stat(
        r#"{"pg_ready":true,"pg_summary":{"num_pg_by_state":[{"name":"active+clean","num":30},{"name":"active+undersized+degraded","num":2}],"num_pgs":32}}"#,
    )
    .unwrap();
    assert_eq!(pgs.unsafe_states(), ["2 PGs active+undersized+degraded"]);
    let h = parse_health(
        r#"{"status":"HEALTH_WARN","checks":{"OSD_DOWN":{"severity":"HEALTH_WARN","summary":{"message":"1 osds down","count":1},"muted":false}},"mutes":[]}"#,
    )
    .unwrap();
    assert_eq!(h.checks[0].code, "OSD_DOWN");
    assert_eq!(h.checks[0].message, "1 osds down");
    let tree = r#"{"nodes":[{"id":-1,"name":"default","type":"root","children":[-2]},{"id":-2,"name":"w-1","type":"host","children":[0,3]},{"id":0,"name":"osd.0","type":"osd"}],"stray":[]}"#;
    assert_eq!(host_osds(tree, "w-1").unwrap(), [0, 3]);
    assert!(host_osds(tree, "w-2").unwrap().is_empty());
}

#[test]
fn hostile_input_is_bounded() {
    let long = "x".repeat(1_000);
    let mut checks = String::new();
    for i in 0..2_000 {
        checks.push_str(&format!(
            r#""C{i}\u001b[31m":{{"severity":"HEALTH_WARN","summary":{{"message":"{long}\n"}}}},"#
        ));
    }
    let doc = format!(
        r#"{{"status":"HEALTH_WARN","checks":{{{}}}}}"#,
        checks.trim_end_matches(',')
    );
    let h = parse_health(&doc).unwrap();
    assert!(h.checks.len() <= 512);
    assert!(h.checks.iter().all(|c| c.code == "UNREADABLE_CODE"));
    assert!(h.checks[0].message.chars().count() <= 241);
    assert!(!h.checks[0].message.contains('\n'));
    let huge = format!("[{}]", "1,".repeat(3 << 20));
    assert!(parse_pg_stat(&huge).is_err());
    assert!(parse_health(r#"{"status":"ALL GOOD"}"#).is_err());
}

fn discovery_output(clusters: (&str, i32, &str), toolbox: &str) -> String {
    let section = |name: &str, out: &str, rc: i32, err: &str| {
        format!(
            "@@fleetctl:begin {name}@@\n{out}\n@@fleetctl:stderr@@\n{err}\n@@fleetctl:end {rc}@@\n"
        )
    };
    format!(
        "@@fleetctl:ceph 1@@\n{}{}{}@@fleetctl:done@@\n",
        section("clusters", clusters.0, clusters.1, clusters.2),
        section("clock", "1765078000", 0, ""),
        section("toolbox", toolbox, 0, ""),
    )
}

#[test]
fn discovery_finds_clusters_and_ready_toolboxes_and_no_crd_is_no_ceph() {
    let none = read_discovery(&discovery_output(
        (
            "",
            1,
            "error: the server doesn't have a resource type \"cephclusters\"",
        ),
        r#"{"items":[]}"#,
    ))
    .unwrap();
    assert_eq!(none.clusters, Ok(vec![]));
    assert_eq!(none.now, Some(1765078000));
    let cluster = r#"{"items":[{"metadata":{"namespace":"rook-ceph","name":"rook-ceph"},"status":{"ceph":{"health":"HEALTH_WARN","lastChecked":"2025-12-07T03:26:40Z","details":{"AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED":{"severity":"HEALTH_WARN","message":"mons are allowing insecure global_id reclaim"}}}}}]}"#;
    let toolbox = r#"{"items":[
        {"metadata":{"namespace":"rook-ceph","name":"rook-ceph-tools-1"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}},
        {"metadata":{"namespace":"rook-ceph","name":"rook-ceph-tools-2"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"False"}]}},
        {"metadata":{"namespace":"rook-ceph","name":"$(reboot)"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}]}"#;
    let d = read_discovery(&discovery_output((cluster, 0, ""), toolbox)).unwrap();
    let clusters = d.clusters.unwrap();
    assert_eq!(clusters[0].name, "rook-ceph/rook-ceph");
    assert_eq!(clusters[0].last_checked, Some(1765078000));
    assert_eq!(
        clusters[0].health.as_ref().unwrap().checks[0].code,
        "AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED"
    );
    assert_eq!(
        d.toolboxes,
        [Toolbox {
            namespace: "rook-ceph".into(),
            pod: "rook-ceph-tools-1".into()
        }]
    );
    let failed = read_discovery(&discovery_output(("", 1, "Unauthorized"), "")).unwrap();
    assert!(failed.clusters.unwrap_err().contains("Unauthorized"));
}

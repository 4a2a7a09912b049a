use super::*;
use crate::state::{ClusterNode, KubeletRun};

fn node(role: Role, started: Option<f64>) -> ClusterNode {
    ClusterNode {
        role,
        up: started.is_some(),
        booted_at: 0.0,
        kubelet_version: "v1.34.2".into(),
        unschedulable: false,
        control_plane_version: None,
        os: String::new(),
        boot_id: "b".into(),
        address: String::new(),
        kubelet: started.map(|s| KubeletRun {
            boot_id: "b".into(),
            started_at: s,
            manifests_out: Vec::new(),
        }),
        labels: Default::default(),
    }
}

fn cluster(w1: Option<f64>) -> Cluster {
    let mut c = Cluster::default();
    c.nodes
        .insert("cp-1".into(), node(Role::ControlPlane, Some(0.0)));
    c.nodes.insert("w-1".into(), node(Role::Worker, w1));
    c.nodes.insert("w-2".into(), node(Role::Worker, Some(0.0)));
    c.nodes.insert("w-3".into(), node(Role::Worker, Some(0.0)));
    c
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn a_node_down_degrades_every_pg_and_recovery_follows_its_return() {
    let spec = CephSpec {
        warnings: vec!["AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED".into()],
        ..CephSpec::default()
    };
    let f = Faults::default();
    let clean = state(&cluster(Some(0.0)), &f, &spec, 100.0);
    assert_eq!(clean.pgs, [("active+clean".to_string(), 32)].into());
    assert_eq!(clean.health(), "HEALTH_WARN");
    assert_eq!(
        clean.checks.keys().collect::<Vec<_>>(),
        ["AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED"]
    );
    let down = state(&cluster(None), &f, &spec, 100.0);
    assert_eq!(
        down.pgs,
        [("active+undersized+degraded".to_string(), 32)].into()
    );
    for code in ["OSD_DOWN", "OSD_HOST_DOWN", "PG_DEGRADED"] {
        assert!(down.checks.contains_key(code), "{code}");
    }
    assert!(!down.checks.contains_key("PG_AVAILABILITY"));
    // Back at 100 (its kubelet), its OSD at 101, recovered at 107.
    let back = cluster(Some(100.0));
    assert_eq!(
        state(&back, &f, &spec, 103.0).pgs,
        [("active+recovering+degraded".to_string(), 32)].into()
    );
    assert_eq!(
        state(&back, &f, &spec, 107.5).pgs,
        [("active+clean".to_string(), 32)].into()
    );
}

#[test]
fn an_injected_error_is_health_err_and_the_status_is_as_of_the_last_check() {
    let spec = CephSpec {
        created: 1000.0,
        refresh: 5.0,
        ..CephSpec::default()
    };
    let f = Faults {
        ceph_health_err: Some("OSD_FULL".into()),
        ..Faults::default()
    };
    let c = cluster(Some(0.0));
    assert_eq!(last_checked(&spec, 1012.0), 1010.0);
    let j = cluster_json(&c, &f, &spec, 1012.0);
    assert_eq!(j["status"]["ceph"]["health"], "HEALTH_ERR");
    assert_eq!(
        j["status"]["ceph"]["details"]["OSD_FULL"]["severity"],
        "HEALTH_ERR"
    );
    assert_eq!(j["status"]["ceph"]["lastChecked"], rfc3339(1010.0));
}

#[test]
fn a_stopped_operator_leaves_the_status_as_it_last_wrote_it() {
    let spec = CephSpec {
        created: 1000.0,
        refresh: 5.0,
        ..CephSpec::default()
    };
    let c = cluster(Some(0.0));
    let stopped = Faults {
        ceph_operator_stopped: Some(1007.0),
        ..Faults::default()
    };
    let j = cluster_json(&c, &stopped, &spec, 1400.0);
    assert_eq!(j["status"]["ceph"]["lastChecked"], rfc3339(1005.0));
    let never = Faults {
        ceph_operator_stopped: Some(0.0),
        ..Faults::default()
    };
    let j = cluster_json(&c, &never, &spec, 1400.0);
    assert!(j["status"].get("ceph").is_none(), "{j:#}");
    assert_eq!(j["status"]["phase"], "Ready");
}

#[test]
fn ok_to_stop_refuses_a_second_host_while_one_is_down() {
    let spec = CephSpec::default();
    let f = Faults::default();
    let all = state(&cluster(Some(0.0)), &f, &spec, 100.0);
    let a = toolbox::run(&spec, &all, &words("ceph osd ok-to-stop 1 --format json"));
    assert_eq!(a.code, 0, "{}", a.stderr);
    let v: Value = serde_json::from_str(&a.stdout).unwrap();
    assert_eq!(v["ok_to_stop"], true);
    assert_eq!(v["osds"], json!([1]));
    assert_eq!(v["num_ok_pgs"], 32);
    assert_eq!(v["num_not_ok_pgs"], 0);
    assert_eq!(v["ok_become_degraded"].as_array().unwrap().len(), 32);

    let one_down = state(&cluster(None), &f, &spec, 100.0);
    let a = toolbox::run(
        &spec,
        &one_down,
        &words("ceph osd ok-to-stop 1 --format json"),
    );
    assert_eq!(a.code, 16);
    assert!(a.stderr.starts_with("Error EBUSY: unsafe to stop osd(s)"));
    let v: Value = serde_json::from_str(&a.stdout).unwrap();
    assert_eq!(v["ok_to_stop"], false);
    assert_eq!(v["num_not_ok_pgs"], 32);
    assert_eq!(v["bad_become_inactive"].as_array().unwrap().len(), 32);

    let a = toolbox::run(&spec, &all, &words("ceph osd ok-to-stop 9"));
    assert_eq!(a.code, 22);
    let a = toolbox::run(&spec, &all, &words("ceph osd frobnicate"));
    assert_eq!(a.code, 22);
}

#[test]
fn pg_stat_and_the_tree_answer_in_cephs_shapes() {
    let spec = CephSpec::default();
    let s = state(&cluster(None), &Faults::default(), &spec, 100.0);
    let v: Value =
        serde_json::from_str(&toolbox::run(&spec, &s, &words("ceph pg stat -f json")).stdout)
            .unwrap();
    assert_eq!(
        v["pg_summary"]["num_pg_by_state"],
        json!([{"name": "active+undersized+degraded", "num": 32}])
    );
    let v: Value = serde_json::from_str(
        &toolbox::run(&spec, &s, &words("ceph osd tree --format json")).stdout,
    )
    .unwrap();
    let w1 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "w-1")
        .unwrap();
    assert_eq!(w1["type"], "host");
    assert_eq!(w1["children"], json!([0]));
    let osd0 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "osd.0")
        .unwrap();
    assert_eq!(osd0["status"], "down");
    let v: Value = serde_json::from_str(
        &toolbox::run(&spec, &s, &words("ceph health detail --format json")).stdout,
    )
    .unwrap();
    assert_eq!(v["status"], "HEALTH_WARN");
    assert_eq!(v["checks"]["PG_DEGRADED"]["severity"], "HEALTH_WARN");
}

//! The `ceph` CLI of Rook's toolbox pod (`kubectl exec … -- ceph …`), for
//! the commands an operator's gate asks, answering from `super::state` at
//! the moment of the call (the mons and the mgr see the OSDs at once):
//!
//! - `status`: `health` (`status`, `checks` code → severity, summary
//!   message and count, `mutes`), `osdmap` (`num_osds`, `num_up_osds`,
//!   `num_in_osds`), `pgmap` (`pgs_by_state` of `state_name`/`count`,
//!   `num_pgs`), as `ceph -s -f json` prints them;
//! - `health detail`: `status`, `checks` (with `detail` lists), `mutes`;
//! - `pg stat`: `pg_ready` and `pg_summary` with `num_pg_by_state`
//!   (`name`/`num`) and `num_pgs` (mgr `PGMap::print_summary`'s JSON);
//! - `osd tree`: `nodes` (root, host buckets named after the nodes, OSDs
//!   with `status` up/down) and `stray`;
//! - `osd ok-to-stop ID…`: the mgr's `offline_pg_report` (ceph
//!   `src/mgr/DaemonServer.h`): `ok_to_stop`, `osds`, `num_ok_pgs`,
//!   `num_not_ok_pgs`, and the PG lists `bad_already_inactive`,
//!   `bad_become_inactive`, `ok_become_degraded` when not empty; exit 16
//!   (EBUSY) with `Error EBUSY: unsafe to stop osd(s) at this time (N PGs
//!   are or would become offline)` on stderr when not ok, as
//!   `DaemonServer::_handle_command` replies.
//!
//! Anything else is Ceph's `EINVAL` (exit 22). Output is JSON only with
//! `--format json` / `-f json` (or json-pretty); otherwise one line of text.

use serde_json::{Value, json};

use super::{CephSpec, State};

/// What a command printed and its exit status.
pub struct Answer {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

fn ok(v: Value) -> Answer {
    Answer {
        stdout: format!("{v}\n"),
        stderr: String::new(),
        code: 0,
    }
}

fn einval(msg: &str) -> Answer {
    Answer {
        stdout: String::new(),
        stderr: format!("{msg}\nError EINVAL: invalid command\n"),
        code: 22,
    }
}

/// Runs `words` (the command after `kubectl exec POD --`) against `s`.
pub fn run(spec: &CephSpec, s: &State, words: &[String]) -> Answer {
    let Some((prog, rest)) = words.split_first() else {
        return einval("no command");
    };
    if prog != "ceph" {
        return Answer {
            stdout: String::new(),
            stderr: format!("fleetsim: the toolbox models only `ceph`, not `{prog}`\n"),
            code: 127,
        };
    }
    let mut json = false;
    let mut args: Vec<&str> = Vec::new();
    let mut it = rest.iter().map(String::as_str);
    while let Some(w) = it.next() {
        match w {
            "--format" | "-f" => json = it.next().is_some_and(|f| f.starts_with("json")),
            w if w.starts_with("--format=") => json = w["--format=".len()..].starts_with("json"),
            w => args.push(w),
        }
    }
    let answer = match args.as_slice() {
        ["status"] | ["-s"] => status(spec, s),
        ["health", "detail"] => health(s, true),
        ["health"] => health(s, false),
        ["pg", "stat"] => pg_stat(s),
        ["osd", "tree"] => osd_tree(s),
        // The mgr always dumps its report, as JSON without a format.
        ["osd", "ok-to-stop", ids @ ..] => return ok_to_stop(s, ids),
        _ => {
            return einval(&format!(
                "no valid command found; 10 closest matches:\nstatus\nhealth detail\npg stat\n\
                 osd tree\nosd ok-to-stop <ids>... [--max <int>]\n(got: {})",
                args.join(" ")
            ));
        }
    };
    if json {
        ok(answer)
    } else {
        Answer {
            stdout: format!("{}\n", s.health()),
            stderr: String::new(),
            code: 0,
        }
    }
}

fn checks(s: &State, detail: bool) -> Value {
    let map: serde_json::Map<String, Value> = s
        .checks
        .iter()
        .map(|(code, (sev, msg))| {
            let mut c = json!({
                "severity": sev,
                "summary": {"message": msg, "count": 1},
                "muted": false,
            });
            if detail {
                c["detail"] = json!([{"message": msg}]);
            }
            (code.clone(), c)
        })
        .collect();
    json!({"status": s.health(), "checks": map, "mutes": []})
}

fn health(s: &State, detail: bool) -> Value {
    checks(s, detail)
}

fn status(spec: &CephSpec, s: &State) -> Value {
    let up = s.osds.iter().filter(|(_, u)| *u).count();
    json!({
        "fsid": crate::tools::util::uid_of(&format!("fsid/{}/{}", spec.namespace, spec.name)),
        "health": checks(s, false),
        "quorum_names": ["a", "b", "c"],
        "osdmap": {"num_osds": s.osds.len(), "num_up_osds": up, "num_in_osds": s.osds.len(), "num_remapped_pgs": 0},
        "pgmap": {
            "pgs_by_state": s.pgs.iter().map(|(n, c)| json!({"state_name": n, "count": c})).collect::<Vec<_>>(),
            "num_pools": 1,
            "num_pgs": s.total_pgs,
        },
    })
}

fn pg_stat(s: &State) -> Value {
    json!({
        "pg_ready": true,
        "pg_summary": {
            "num_pg_by_state": s.pgs.iter().map(|(n, c)| json!({"name": n, "num": c})).collect::<Vec<_>>(),
            "num_pgs": s.total_pgs,
        },
    })
}

fn osd_tree(s: &State) -> Value {
    let mut hosts: Vec<&String> = s.osds.iter().map(|(o, _)| &o.host).collect();
    hosts.dedup();
    let mut nodes = vec![json!({
        "id": -1, "name": "default", "type": "root", "type_id": 11,
        "children": (0..hosts.len()).map(|i| -(i as i64) - 2).collect::<Vec<_>>(),
    })];
    for (i, h) in hosts.iter().enumerate() {
        let ids: Vec<u32> = s
            .osds
            .iter()
            .filter(|(o, _)| &o.host == *h)
            .map(|(o, _)| o.id)
            .collect();
        nodes.push(json!({"id": -(i as i64) - 2, "name": h, "type": "host", "type_id": 1, "pool_weights": {}, "children": ids}));
    }
    for (o, up) in &s.osds {
        nodes.push(json!({
            "id": o.id, "device_class": "hdd", "name": format!("osd.{}", o.id), "type": "osd",
            "type_id": 0, "crush_weight": 0.0977, "depth": 2, "pool_weights": {}, "exists": 1,
            "status": if *up { "up" } else { "down" }, "reweight": 1, "primary_affinity": 1,
        }));
    }
    json!({"nodes": nodes, "stray": []})
}

fn ok_to_stop(s: &State, ids: &[&str]) -> Answer {
    let mut osds = Vec::new();
    for w in ids.iter().filter(|w| !w.starts_with("--max")) {
        let id = w.strip_prefix("osd.").unwrap_or(w);
        match id.parse::<u32>() {
            Ok(n) if s.osds.iter().any(|(o, _)| o.id == n) => osds.push(n),
            _ => {
                return Answer {
                    stdout: String::new(),
                    stderr: format!("Error EINVAL: osd.{id} does not exist\n"),
                    code: 22,
                };
            }
        }
    }
    if osds.is_empty() {
        return Answer {
            stdout: String::new(),
            stderr: "Error EINVAL: must specify one or more OSDs\n".into(),
            code: 22,
        };
    }
    osds.sort_unstable();
    osds.dedup();
    let (mut good, mut already, mut to_inactive, mut degraded) = (0u32, vec![], vec![], vec![]);
    for (pg, acting) in &s.placement {
        let up_now = acting.iter().filter(|&&i| s.up(i)).count();
        let up_after = acting
            .iter()
            .filter(|&&i| s.up(i) && !osds.contains(&i))
            .count();
        if up_now < s.min_size {
            already.push(pg.clone());
        } else if up_after < s.min_size {
            to_inactive.push(pg.clone());
        } else {
            good += 1;
            if up_after < acting.len() {
                degraded.push(pg.clone());
            }
        }
    }
    let not_ok = already.len() + to_inactive.len();
    let mut out = json!({
        "ok_to_stop": not_ok == 0,
        "osds": osds,
        "num_ok_pgs": good,
        "num_not_ok_pgs": not_ok,
    });
    for (key, list) in [
        ("bad_already_inactive", &already),
        ("bad_become_inactive", &to_inactive),
        ("ok_become_degraded", &degraded),
    ] {
        if !list.is_empty() {
            out[key] = json!(list);
        }
    }
    let stdout = format!("{out}\n");
    if not_ok == 0 {
        let ids: Vec<String> = osds.iter().map(u32::to_string).collect();
        Answer {
            stdout,
            stderr: format!(
                "OSD(s) {} are ok to stop without reducing availability or risking data, provided there are no other concurrent failures or interventions.\n{} PGs are likely to be degraded (but remain available) as a result.\n",
                ids.join(","),
                degraded.len()
            ),
            code: 0,
        }
    } else {
        Answer {
            stdout,
            stderr: format!(
                "Error EBUSY: unsafe to stop osd(s) at this time ({not_ok} PGs are or would become offline)\n"
            ),
            code: 16,
        }
    }
}

//! `status`'s etcd section: each member of kubeadm's stacked etcd as its
//! peers see it (`crate::checks::EtcdMembers`, the reading the etcd gate
//! makes before a control plane's drain), in the table and in the JSON.

use serde::Serialize;

use crate::checks::EtcdMembers;
use crate::ui;

/// The members, or why they could not be read.
#[derive(Debug, Serialize)]
pub struct EtcdReport {
    pub members: Vec<EtcdMemberReport>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct EtcdMemberReport {
    pub name: String,
    /// Answers, knows a leader, raises no alarm.
    pub healthy: bool,
    pub leader: bool,
    pub learner: bool,
    /// `None` when it did not answer.
    pub raft_index: Option<u64>,
    pub raft_applied_index: Option<u64>,
    /// Why it is not healthy.
    pub problem: Option<String>,
}

/// The report of a reading: `None` with no stacked etcd.
pub fn etcd_report(read: anyhow::Result<Option<EtcdMembers>>) -> Option<EtcdReport> {
    match read {
        Ok(None) => None,
        Err(e) => Some(EtcdReport {
            members: Vec::new(),
            error: Some(format!("{e:#}")),
        }),
        Ok(Some(m)) => {
            let leader = m.leader().map(|l| l.id);
            Some(EtcdReport {
                members: m
                    .members
                    .iter()
                    .map(|x| EtcdMemberReport {
                        name: x.name.clone(),
                        healthy: x.healthy(),
                        leader: Some(x.id) == leader,
                        learner: x.learner,
                        raft_index: x.status.as_ref().map(|s| s.raft_index),
                        raft_applied_index: x.status.as_ref().map(|s| s.raft_applied_index),
                        problem: x.problem(),
                    })
                    .collect(),
                error: None,
            })
        }
    }
}

/// One line: `etcd: cp-1 healthy, leader, raft index 45 · cp-2 …`.
pub fn render(r: &EtcdReport) -> String {
    if let Some(e) = &r.error {
        return format!("etcd: {} ({})\n", ui::attention("unknown"), esc(e));
    }
    let members: Vec<String> = r
        .members
        .iter()
        .map(|m| {
            let mut words = vec![match m.healthy {
                true => ui::good("healthy"),
                false => ui::bad("unhealthy"),
            }];
            if m.leader {
                words.push("leader".into());
            }
            if m.learner {
                words.push("learner".into());
            }
            if let Some(i) = m.raft_index {
                words.push(format!("raft index {i}"));
            }
            format!("{} {}", esc(&m.name), words.join(", "))
        })
        .collect();
    let mut out = format!("etcd: {}\n", members.join(" · "));
    for p in r.members.iter().filter_map(|m| m.problem.as_ref()) {
        out.push_str(&format!("{} {}\n", ui::attention("warning:"), esc(p)));
    }
    out
}

/// What etcd said (a member's name, why it is unhealthy), escaped before it
/// meets our colours: the table keeps those (issue 38).
fn esc(text: &str) -> std::borrow::Cow<'_, str> {
    ui::escape::escape_controls(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_etcd_says_cannot_carry_our_colours_or_act_on_the_terminal() {
        let hostile = crate::ui::escape::HOSTILE;
        let r = EtcdReport {
            members: vec![EtcdMemberReport {
                name: hostile.into(),
                healthy: false,
                leader: false,
                learner: false,
                raft_index: None,
                raft_applied_index: None,
                problem: Some(hostile.into()),
            }],
            error: None,
        };
        let line = render(&r);
        crate::ui::escape::assert_inert(&line);
        assert_eq!(line.matches("\\033[32mfine").count(), 2, "{line:?}");
        let failed = EtcdReport {
            members: Vec::new(),
            error: Some(hostile.into()),
        };
        crate::ui::escape::assert_inert(&render(&failed));
    }

    #[test]
    fn members_in_one_line_with_whatever_is_wrong() {
        let members = r#"{"members":[{"ID":1,"name":"cp-1","clientURLs":["https://a:2379"]},{"ID":2,"name":"cp-2","clientURLs":["https://b:2379"]}]}"#;
        let status = r#"[{"Endpoint":"https://a:2379","Status":{"header":{"member_id":1},"leader":1,"raftIndex":45,"raftAppliedIndex":45}}]"#;
        let m = crate::checks::parse_etcd_members(
            members,
            status,
            "Failed to get the status of endpoint https://b:2379 (context deadline exceeded)",
        )
        .unwrap();
        let r = etcd_report(Ok(Some(m))).unwrap();
        let line = render(&r);
        assert!(
            line.contains("cp-1 healthy, leader, raft index 45"),
            "{line}"
        );
        assert!(line.contains("cp-2 unhealthy"), "{line}");
        assert!(line.contains("etcd member cp-2 does not answer"), "{line}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["members"][0]["raft_index"], 45);
        assert_eq!(json["members"][1]["healthy"], false);
        assert!(etcd_report(Ok(None)).is_none());
        assert!(render(&etcd_report(Err(anyhow::anyhow!("no API"))).unwrap()).contains("unknown"));
    }
}

//! etcd as a gate: what `etcdctl member list -w json` and `etcdctl
//! endpoint status --cluster -w json` say about each member, and whether
//! the cluster can spare one (before a control plane's drain) or has it
//! back (after its reboot).
//!
//! What etcdctl prints (etcd-io/etcd `etcdctl/ctlv3/command/ep_command.go`,
//! `epStatusCommandFunc`; `printer_json.go`): `endpoint status --cluster`
//! asks the member list of the endpoint it reaches, then every member's
//! client URL in turn; each that answers is one `{"Endpoint": URL,
//! "Status": StatusResponse}` in one JSON array on stdout, each that does
//! not is a line `Failed to get the status of endpoint URL (ERR)` on
//! stderr, and the exit status is 1 if any failed. StatusResponse
//! (api/etcdserverpb/rpc.proto) carries `header.member_id`, `leader` (the
//! member id of the leader this member knows, 0 for none), `raftIndex`
//! (the last log index it has), `raftAppliedIndex` (what it applied, 3.4
//! and later), `raftTerm` and `errors` (its active alarms, e.g. `NOSPACE`;
//! omitted when none). `member list -w json` gives each member's `ID`,
//! `name` (kubeadm names a stacked member after its node: `--name` in
//! `cmd/kubeadm/app/phases/etcd/local.go`), `clientURLs` and `isLearner`.
//!
//! A member is healthy here when it answers, knows a leader and raises no
//! alarm. "Caught up" is its raft index within [`CATCH_UP_ENTRIES`] of the
//! leader's, read in the same call: etcd itself judges a member ready by
//! how close its log is to the leader's (`isLearnerReady` in
//! server/etcdserver/server.go compares the learner's match index with the
//! leader's commit index).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Deserialize;

/// How many raft entries a member may be behind the leader and count as
/// caught up: the two indexes are read a few milliseconds apart, so a
/// cluster taking writes shows a small gap even between members in step.
pub const CATCH_UP_ENTRIES: u64 = 100;

/// The longest etcdctl output read (a member list of a few members, one
/// status per member: a few KiB).
const MAX_OUTPUT: usize = 256 * 1024;

/// The most members read: etcd recommends at most 7.
const MAX_MEMBERS: usize = 64;

/// One etcd member as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdMember {
    /// kubeadm's member name: its node's name.
    pub name: String,
    pub id: u64,
    pub learner: bool,
    /// What the member said of itself; `None`: it did not answer.
    pub status: Option<MemberStatus>,
    /// Why it did not answer, as etcdctl said.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    pub leader: u64,
    pub raft_index: u64,
    pub raft_applied_index: u64,
    pub raft_term: u64,
    pub alarms: Vec<String>,
}

impl EtcdMember {
    /// Answers, knows a leader, raises no alarm.
    pub fn healthy(&self) -> bool {
        self.status
            .as_ref()
            .is_some_and(|s| s.leader != 0 && s.alarms.is_empty())
    }

    /// Why it is not healthy, in words; `None` when it is.
    pub fn problem(&self) -> Option<String> {
        let Some(s) = &self.status else {
            return Some(format!(
                "etcd member {} does not answer ({})",
                self.name,
                self.error.as_deref().unwrap_or("no status")
            ));
        };
        if s.leader == 0 {
            return Some(format!("etcd member {} has no leader", self.name));
        }
        if !s.alarms.is_empty() {
            return Some(format!(
                "etcd member {} raises {}",
                self.name,
                s.alarms.join(", ")
            ));
        }
        None
    }
}

/// Every member, with what it said of itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EtcdMembers {
    pub members: Vec<EtcdMember>,
}

#[derive(Deserialize)]
struct MemberList {
    #[serde(default)]
    members: Vec<ListedMember>,
}

#[derive(Deserialize)]
struct ListedMember {
    #[serde(rename = "ID")]
    id: u64,
    #[serde(default)]
    name: String,
    #[serde(default, rename = "clientURLs")]
    client_urls: Vec<String>,
    #[serde(default, rename = "isLearner")]
    is_learner: bool,
}

#[derive(Deserialize)]
struct EndpointStatus {
    #[serde(rename = "Endpoint")]
    endpoint: String,
    #[serde(rename = "Status")]
    status: StatusResponse,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusResponse {
    header: Header,
    #[serde(default)]
    leader: u64,
    #[serde(default)]
    raft_index: u64,
    #[serde(default)]
    raft_applied_index: u64,
    #[serde(default)]
    raft_term: u64,
    #[serde(default)]
    errors: Vec<String>,
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    member_id: u64,
}

/// The first JSON document on a line of `out` that starts with `open`.
fn json_line(out: &str, open: char) -> Option<&str> {
    out.lines().map(str::trim).find(|l| l.starts_with(open))
}

/// Reads `member list -w json` (`members`), and `endpoint status --cluster
/// -w json` with its stderr (`status`, `status_err`). A member absent from
/// the statuses did not answer; its error is etcdctl's line naming its URL.
pub fn parse_etcd_members(members: &str, status: &str, status_err: &str) -> Result<EtcdMembers> {
    let bounded = |s: &str| s.len() <= MAX_OUTPUT;
    if !bounded(members) || !bounded(status) || !bounded(status_err) {
        anyhow::bail!("etcdctl printed more than {MAX_OUTPUT} bytes; not an etcd member list");
    }
    let list: MemberList = serde_json::from_str(
        json_line(members, '{').context("`etcdctl member list -w json` printed no JSON")?,
    )
    .context("`etcdctl member list -w json` printed unexpected JSON")?;
    if list.members.is_empty() || list.members.len() > MAX_MEMBERS {
        anyhow::bail!(
            "`etcdctl member list` names {} members; expected 1 to {MAX_MEMBERS}",
            list.members.len()
        );
    }
    let statuses: Vec<EndpointStatus> = match json_line(status, '[') {
        Some(line) => serde_json::from_str(line)
            .context("`etcdctl endpoint status -w json` printed unexpected JSON")?,
        None => Vec::new(),
    };
    let by_id: BTreeMap<u64, &EndpointStatus> = statuses
        .iter()
        .map(|s| (s.status.header.member_id, s))
        .collect();
    let members = list
        .members
        .iter()
        .map(|m| {
            let answered = by_id.get(&m.id).or_else(|| {
                statuses
                    .iter()
                    .find(|s| m.client_urls.contains(&s.endpoint))
                    .as_ref()
                    .and_then(|s| by_id.get(&s.status.header.member_id))
            });
            let status = answered.map(|s| MemberStatus {
                leader: s.status.leader,
                raft_index: s.status.raft_index,
                raft_applied_index: s.status.raft_applied_index,
                raft_term: s.status.raft_term,
                alarms: s.status.errors.iter().take(8).cloned().collect(),
            });
            let error = match status {
                Some(_) => None,
                // etcdctl's own line for the endpoint; its client's log
                // lines (zap JSON) name the URL too, with a timestamp.
                None => Some(
                    status_err
                        .lines()
                        .filter(|l| m.client_urls.iter().any(|u| l.contains(u.as_str())))
                        .min_by_key(|l| !l.starts_with("Failed to get the status"))
                        .map(|l| l.trim().chars().take(300).collect())
                        .unwrap_or_else(|| "no status".to_string()),
                ),
            };
            EtcdMember {
                // A member that has not started yet has no name: its ID.
                name: if m.name.is_empty() {
                    format!("{:x}", m.id)
                } else {
                    m.name.chars().take(253).collect()
                },
                id: m.id,
                learner: m.is_learner,
                status,
                error,
            }
        })
        .collect();
    Ok(EtcdMembers { members })
}

impl EtcdMembers {
    pub fn member(&self, name: &str) -> Option<&EtcdMember> {
        self.members.iter().find(|m| m.name == name)
    }

    /// The leader as most members see it.
    pub fn leader(&self) -> Option<&EtcdMember> {
        let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
        for s in self.members.iter().filter_map(|m| m.status.as_ref()) {
            if s.leader != 0 {
                *votes.entry(s.leader).or_default() += 1;
            }
        }
        let (id, _) = votes.into_iter().max_by_key(|(_, n)| *n)?;
        self.members.iter().find(|m| m.id == id)
    }

    /// Voting members (learners do not count towards quorum).
    fn voters(&self) -> impl Iterator<Item = &EtcdMember> {
        self.members.iter().filter(|m| !m.learner)
    }

    /// What stops `node`'s member from going down now: every member must
    /// be healthy, and the healthy voters other than it must still be a
    /// quorum (more than half of all voters; raft's rule) where a whole
    /// cluster could spare one member at all (three or more). Empty: it may
    /// go. A node with no member of its own is judged the same way (the
    /// cluster must be whole before any control plane goes). `down_already`:
    /// `node` is out of service already (a rollback), so its own member's
    /// health is no reason to wait.
    pub fn before_down(&self, node: &str, down_already: bool) -> Vec<String> {
        let mut problems: Vec<String> = self
            .members
            .iter()
            .filter(|m| !(down_already && m.name == node))
            .filter_map(|m| m.problem())
            .collect();
        let voters = self.voters().count();
        let quorum = voters / 2 + 1;
        let left = self
            .voters()
            .filter(|m| m.name != node && m.healthy())
            .count();
        // One or two members never keep quorum with one down: that is the
        // cluster's shape, which waiting cannot change (a single control
        // plane takes its API down with it, as before this gate).
        let can_ever_spare = voters.saturating_sub(1) >= quorum;
        if can_ever_spare && left < quorum {
            problems.push(format!(
                "etcd would lose quorum without {node}: {left} healthy of {voters} members would \
                 remain, and etcd needs {quorum}"
            ));
        }
        problems
    }

    /// Why `node`'s member is not back yet (healthy and within
    /// [`CATCH_UP_ENTRIES`] of the leader's raft index); `None`: it is.
    pub fn not_caught_up(&self, node: &str) -> Option<String> {
        let Some(me) = self.member(node) else {
            return Some(format!("{node} is not an etcd member"));
        };
        if let Some(problem) = me.problem() {
            return Some(problem);
        }
        let Some(leader) = self.leader() else {
            return Some("no etcd member knows a leader".to_string());
        };
        let (Some(mine), Some(theirs)) = (&me.status, &leader.status) else {
            return Some(format!(
                "the etcd leader ({}) does not answer, so {node}'s progress is unknown",
                leader.name
            ));
        };
        let behind = theirs.raft_index.saturating_sub(mine.raft_applied_index);
        (behind > CATCH_UP_ENTRIES).then(|| {
            format!(
                "etcd member {node} has applied raft index {}, {behind} behind the leader {} at {}",
                mine.raft_applied_index, leader.name, theirs.raft_index
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMBERS: &str = r#"{"header":{"cluster_id":17237436991929493444,"member_id":9372538179322589801,"raft_term":2},"members":[{"ID":9372538179322589801,"name":"cp-1","peerURLs":["https://10.0.0.11:2380"],"clientURLs":["https://10.0.0.11:2379"]},{"ID":10501334649042878790,"name":"cp-2","peerURLs":["https://10.0.0.12:2380"],"clientURLs":["https://10.0.0.12:2379"]},{"ID":18249187646912138824,"name":"cp-3","peerURLs":["https://10.0.0.13:2380"],"clientURLs":["https://10.0.0.13:2379"]}]}"#;

    fn status(ep: &str, id: u64, leader: u64, index: u64, applied: u64, errors: &str) -> String {
        format!(
            r#"{{"Endpoint":"{ep}","Status":{{"header":{{"cluster_id":17237436991929493444,"member_id":{id},"revision":41,"raft_term":2}},"version":"3.4.30","dbSize":24576,"leader":{leader},"raftIndex":{index},"raftTerm":2,"raftAppliedIndex":{applied}{errors},"dbSizeInUse":24576}}}}"#
        )
    }

    const L: u64 = 9372538179322589801;

    fn all(cp2_index: u64, cp2_applied: u64) -> String {
        format!(
            "[{},{},{}]",
            status("https://10.0.0.11:2379", L, L, 500, 500, ""),
            status(
                "https://10.0.0.12:2379",
                10501334649042878790,
                L,
                cp2_index,
                cp2_applied,
                ""
            ),
            status(
                "https://10.0.0.13:2379",
                18249187646912138824,
                L,
                500,
                500,
                ""
            )
        )
    }

    #[test]
    fn a_whole_cluster_can_spare_any_member_and_has_each_back() {
        let m = parse_etcd_members(MEMBERS, &all(500, 500), "").unwrap();
        assert_eq!(m.members.len(), 3);
        assert_eq!(m.leader().unwrap().name, "cp-1");
        for n in ["cp-1", "cp-2", "cp-3"] {
            assert!(m.before_down(n, false).is_empty(), "{n}");
            assert_eq!(m.not_caught_up(n), None, "{n}");
        }
        // Large member ids (above 2^63) are read exactly.
        assert_eq!(m.member("cp-3").unwrap().id, 18249187646912138824);
    }

    #[test]
    fn a_member_that_does_not_answer_holds_every_drain_and_quorum_is_counted() {
        let two = format!(
            "[{},{}]",
            status("https://10.0.0.11:2379", L, L, 500, 500, ""),
            status(
                "https://10.0.0.13:2379",
                18249187646912138824,
                L,
                500,
                500,
                ""
            )
        );
        let err = "{\"level\":\"warn\",\"ts\":\"2026-12-07T03:55:30.358Z\",\"msg\":\"retrying of unary invoker failed\",\"target\":\"passthrough:///https://10.0.0.12:2379\"}\n\
                   Failed to get the status of endpoint https://10.0.0.12:2379 (context deadline exceeded)\n";
        let m = parse_etcd_members(MEMBERS, &two, err).unwrap();
        let p = m.before_down("cp-1", false);
        assert!(p[0].contains("cp-2 does not answer"), "{p:?}");
        assert!(p[0].contains("context deadline exceeded"), "{p:?}");
        assert!(
            p[1].contains("lose quorum without cp-1: 1 healthy of 3"),
            "{p:?}"
        );
        // cp-2 itself is down: the others still make a quorum, but the
        // cluster is not whole.
        assert_eq!(m.before_down("cp-2", false).len(), 1);
        assert!(m.not_caught_up("cp-2").unwrap().contains("does not answer"));
    }

    #[test]
    fn a_member_behind_the_leader_is_not_caught_up() {
        let m = parse_etcd_members(MEMBERS, &all(500, 300), "").unwrap();
        let why = m.not_caught_up("cp-2").unwrap();
        assert!(
            why.contains("applied raft index 300, 200 behind the leader cp-1 at 500"),
            "{why}"
        );
        let m = parse_etcd_members(MEMBERS, &all(500, 500 - CATCH_UP_ENTRIES), "").unwrap();
        assert_eq!(m.not_caught_up("cp-2"), None);
    }

    #[test]
    fn alarms_and_no_leader_are_problems() {
        let s = format!(
            "[{},{},{}]",
            status(
                "https://10.0.0.11:2379",
                L,
                L,
                5,
                5,
                r#","errors":["memberID:9372538179322589801 alarm:NOSPACE "]"#
            ),
            status("https://10.0.0.12:2379", 10501334649042878790, 0, 5, 5, ""),
            status("https://10.0.0.13:2379", 18249187646912138824, L, 5, 5, "")
        );
        let m = parse_etcd_members(MEMBERS, &s, "").unwrap();
        let p = m.before_down("cp-3", false);
        assert!(
            p.iter()
                .any(|p| p.contains("cp-1 raises") && p.contains("NOSPACE")),
            "{p:?}"
        );
        assert!(p.iter().any(|p| p.contains("cp-2 has no leader")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("lose quorum")), "{p:?}");
    }

    #[test]
    fn a_single_member_goes_as_before_and_comes_back() {
        let one = r#"{"members":[{"ID":1,"name":"cp-1","clientURLs":["https://10.0.0.11:2379"]}]}"#;
        let s = format!("[{}]", status("https://10.0.0.11:2379", 1, 1, 9, 9, ""));
        let m = parse_etcd_members(one, &s, "").unwrap();
        assert!(m.before_down("cp-1", false).is_empty());
        assert_eq!(m.not_caught_up("cp-1"), None);
    }

    #[test]
    fn hostile_or_broken_output_is_an_error() {
        assert!(parse_etcd_members("", "", "").is_err());
        assert!(parse_etcd_members("{\"members\":[]}", "[]", "").is_err());
        assert!(parse_etcd_members(MEMBERS, "[{\"Endpoint\":1}]", "").is_err());
        let huge = format!("{{\"members\":[{}]}}", "x".repeat(MAX_OUTPUT));
        assert!(parse_etcd_members(&huge, "", "").is_err());
        // No statuses at all: every member is down.
        let m = parse_etcd_members(MEMBERS, "", "Error: context deadline exceeded").unwrap();
        assert!(m.members.iter().all(|m| !m.healthy()));
        assert!(m.leader().is_none());
    }
}

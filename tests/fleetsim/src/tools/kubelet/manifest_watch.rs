//! A control plane's kubelet and its static pod manifests
//! (`crate::static_pod_files`): what it runs is what the directory holds.
//!
//! The real kubelet's file source (pkg/kubelet/config/file.go,
//! file_linux.go) lists `staticPodPath` at start, on every inotify event
//! and every `fileCheckFrequency` (20 s, the kubelet's default); a pod
//! whose file is gone is removed (its containers killed with the pod's
//! grace period), a pod whose file appears is started. The sim looks every
//! second. Only etcd is a process here; kube-apiserver's absence shows as
//! its node's API server down (`Cluster::static_pods_running`); the other
//! two components have no process and nothing reads their absence but the
//! record.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;

use crate::etcd_pod::member::{Member, Plan, node_objects};
use crate::state::NodeBoot;
use crate::static_pod_files::{self as files, API_SERVER, CONTROL_PLANE, ETCD};
use crate::tools::Env;

/// How often the sim's kubelet looks at the directory (the real one is
/// woken by inotify at once, and looks every 20 s anyway).
pub(super) const POLL: Duration = Duration::from_secs(1);
/// How long the kubelet's first start waits for its etcd member before it
/// posts its status anyway (a member without quorum never becomes healthy).
const ETCD_WAIT: Duration = Duration::from_secs(30);

/// The static pods of one kubelet run.
pub(super) struct StaticPods {
    root: PathBuf,
    /// This node's member as the cluster sees it; `None` with no stacked etcd.
    plan: Option<Plan>,
    member: Option<Member>,
    /// The components whose manifest was missing at the last look.
    out: Vec<String>,
}

/// The components whose manifest is not in the directory.
fn missing(root: &std::path::Path, etcd: bool) -> Vec<String> {
    CONTROL_PLANE
        .iter()
        .copied()
        .chain(etcd.then_some(ETCD))
        .filter(|c| !files::present(root, c))
        .map(str::to_string)
        .collect()
}

impl StaticPods {
    /// The kubelet's start on a control plane: the etcd member first, when
    /// its manifest is there, waited for (at most 30 s) and given this
    /// node's objects: a real kubelet's status reaches the API only through
    /// a kube-apiserver, which needs etcd.
    pub(super) fn start(env: &mut Env, boot: &NodeBoot) -> Result<StaticPods> {
        let root = env.path("/");
        let plan = Plan::of(&env.shared().cluster()?, &boot.name);
        let out = missing(&root, plan.is_some());
        let mut pods = StaticPods {
            root,
            plan,
            member: None,
            out,
        };
        if pods.start_member(env, boot) {
            pods.first_objects(env, boot);
        }
        Ok(pods)
    }

    /// The components missing at start, for the kubelet's record.
    pub(super) fn out(&self) -> Vec<String> {
        self.out.clone()
    }

    /// Starts the member from the manifest's data directory when its
    /// manifest is there; whether it started.
    fn start_member(&mut self, env: &mut Env, boot: &NodeBoot) -> bool {
        let Some(plan) = self.plan.clone() else {
            return false;
        };
        if self.out.iter().any(|c| c == ETCD) {
            return false;
        }
        let data_dir = match files::etcd_data_dir(&self.root) {
            Ok(d) => d,
            Err(e) => {
                let msg = format!("\"Could not process manifest file\" err=\"{e:#}\"");
                super::log(env, boot, 'E', "file.go:187", &msg);
                return false;
            }
        };
        let late = env
            .shared()
            .update_faults(|f| f.etcd_late.remove(&boot.name))
            .ok()
            .flatten()
            .filter(|s| s.is_finite() && *s > 0.0);
        if let Some(secs) = late {
            let msg = format!(
                "\"Starting the etcd static pod late\" pod=\"kube-system/etcd-{}\" delay=\"{secs}s\"",
                boot.name
            );
            super::log(env, boot, 'I', "kuberuntime_manager.go:1094", &msg);
            self.member = Some(Member::start_late(
                &self.root,
                Plan { data_dir, ..plan },
                Duration::from_secs_f64(secs.min(3600.0)),
            ));
            return true;
        }
        match Member::start(&self.root, Plan { data_dir, ..plan }) {
            Ok(m) => {
                self.member = Some(m);
                true
            }
            Err(e) => {
                let msg = format!("\"Failed to start the etcd static pod\" err=\"{e:#}\"");
                super::log(env, boot, 'E', "kuberuntime_manager.go:1256", &msg);
                false
            }
        }
    }

    fn first_objects(&mut self, env: &mut Env, boot: &NodeBoot) {
        let Some(member) = self.member.as_mut() else {
            return;
        };
        if !member.wait_healthy(ETCD_WAIT) {
            let msg = format!(
                "\"etcd is not healthy yet\" pod=\"kube-system/etcd-{}\" waited=\"{}s\"",
                boot.name,
                ETCD_WAIT.as_secs()
            );
            super::log(env, boot, 'W', "prober.go:107", &msg);
        } else if let Err(e) = member.put(&node_objects(&boot.name, &boot.boot_id)) {
            let msg = format!("\"Writing the node's objects to etcd\" err=\"{e:#}\"");
            super::log(env, boot, 'E', "kubelet_node_status.go:96", &msg);
        }
    }

    /// One look at the directory, and the member's restart policy.
    pub(super) fn tick(&mut self, env: &mut Env, boot: &NodeBoot) {
        let now_out = missing(&self.root, self.plan.is_some());
        if now_out != self.out {
            let etcd_gone = now_out.iter().any(|c| c == ETCD);
            self.out = now_out;
            if etcd_gone {
                if let Some(m) = self.member.take() {
                    m.stop();
                }
            } else if self.member.is_none() {
                self.start_member(env, boot);
            }
            self.record(env, boot);
        }
        if let Some(m) = self.member.as_mut()
            && let Err(e) = m.tick()
        {
            eprintln!("fleetsim: kubelet: restarting etcd: {e:#}");
        }
    }

    /// What the API server's side reads: which manifests this kubelet found
    /// missing (kube-apiserver's means its node serves no API).
    fn record(&self, env: &mut Env, boot: &NodeBoot) {
        let out = self.out.clone();
        let changed = env.shared().update_cluster(|c| {
            if let Some(k) = c
                .nodes
                .get_mut(&boot.name)
                .and_then(|n| n.kubelet.as_mut())
                .filter(|k| k.boot_id == boot.boot_id)
            {
                k.manifests_out = out;
                c.resource_version += 1;
            }
            Ok(())
        });
        if let Err(e) = changed {
            eprintln!("fleetsim: kubelet: recording the static pods: {e:#}");
        }
        let words = if self.out.is_empty() {
            "every manifest in place".to_string()
        } else {
            format!("missing {}", self.out.join(", "))
        };
        let api = if self.out.iter().any(|c| c == API_SERVER) {
            "down"
        } else {
            "up"
        };
        let msg = format!("\"Static pod manifests changed\" {words} kube-apiserver={api}");
        super::log(env, boot, 'I', "file.go:212", &msg);
    }
}

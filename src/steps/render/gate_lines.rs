//! The dry run's lines for the gates that depend on what the run finds
//! under the lock (`super`): the Kured blockers taken over when the lock is
//! Kured's (`crate::steps::kured_gates`, `crate::steps::kured_labels`), and
//! the Ceph gate when a CephCluster exists (`crate::steps::storage_gate`).

use super::{Ctx, Out, human};

impl Ctx<'_> {
    /// Kured's blockers, judged before the drain when the lock is Kured's
    /// (`steps::kured_gates`, after the alert gate in `steps::hold`).
    pub(super) fn kured_blockers(&self, out: &mut Out, nodes: &[String]) {
        if !self.settings.kured_gates {
            out.line("-", "(Kured's blockers are not judged: --no-kured-gates)");
            return;
        }
        let alerts = match &self.settings.pace.alert_gate {
            Some(_) => "",
            None => "the alerts at its --prometheus-url, then ",
        };
        for node in nodes {
            out.line(
                self.api,
                &format!(
                    "(when the lock is Kured's, the Kured blockers taken over, until none holds: \
                     {alerts}the pods matching its --blocking-pod-selector on {node}, up to {}) {}",
                    human(self.settings.node_timeout),
                    crate::remote::kured_pods::blocking_pods("<selector>", node)
                ),
            );
        }
    }

    /// The Ceph gate after the batch is back (`steps::storage_gate`).
    pub(super) fn ceph_after(&self, out: &mut Out) {
        let ceph = &self.settings.pace.ceph;
        if ceph.enabled {
            out.line(
                self.api,
                &format!(
                    "(when a CephCluster exists: the Ceph gate, until every PG is active+clean \
                     again, up to {})",
                    human(ceph.recovery_timeout)
                ),
            );
        }
    }

    /// The Ceph gate before the drain (`steps::storage_gate`).
    pub(super) fn ceph_before(&self, out: &mut Out, nodes: &[String]) {
        let ceph = &self.settings.pace.ceph;
        if !ceph.enabled {
            out.line("-", "(the Ceph gate is OFF: --no-ceph-gate)");
            return;
        }
        out.line(
            self.api,
            &format!(
                "(when a CephCluster exists: the Ceph gate, until Ceph can spare {}: `ceph osd \
                 ok-to-stop` in Rook's toolbox, else the CephCluster's .status.ceph, with no PG \
                 degraded, undersized or inactive and no health code that holds; up to {})",
                nodes.join(", "),
                human(ceph.timeout)
            ),
        );
    }
}

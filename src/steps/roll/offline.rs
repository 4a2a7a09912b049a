//! The roll of a lone control plane rolled back while its API server is
//! down (`apply --on-failure rollback`, `steps::on_failure`): no hold, no
//! gates, no drain, all of which need the API; only the reboot into the
//! kept image and the wait, which asks the node's own API server once it
//! answers again, then Ready and uncordon.
//!
//! The lock stays as the roll before left it: fleetctl cannot renew it
//! through an API that is down, but nobody can take it either (Kured's
//! lock is an annotation on its DaemonSet, kured's
//! pkg/daemonsetlock/daemonsetlock.go `Acquire` reads and updates it
//! through the API; so is fleetctl's Lease), so it cannot pass to a Kured
//! reboot before the API is back, and the heartbeat renews it as soon as it
//! answers. The stretch must still fit in what is left of the lease, as any
//! reboot's must: a lease that would lapse while the node is down refuses.

use super::flow::reboot_and_wait;
use super::{Apply, SshRoll};
use crate::version::{Minor, Version};

/// Reboots `node` into what is staged and waits for it, its API server
/// and Ready; no drain is possible and none is tried.
pub async fn roll_offline(
    apply: &mut Apply<'_>,
    node: &str,
    minor: Minor,
    expect: Option<&Version>,
) -> anyhow::Result<()> {
    apply.stop.ensure_lease(
        &format!("{node}: reboot and wait for it"),
        apply.settings.node_timeout,
    )?;
    apply.begin(
        node,
        "reboot into the kept image (no drain: the API is down)",
    );
    let batch = [node.to_string()];
    reboot_and_wait(
        &mut SshRoll { apply },
        &batch,
        minor,
        expect,
        true,
        true,
        true,
    )
    .await
}

//! The SystemVerification preflight of `kubeadm upgrade apply|node` on a
//! cgroup v1 node: from v1.35 kubeadm passes the kubelet version the
//! upgrade leads to (the detected one's MINOR+1, kubernetes/kubernetes#134744),
//! and system-validators v1.12.1's cgroup validator errors on cgroup v1 for
//! a v1.35+ kubelet (kubernetes/system-validators#61), whatever the
//! kubelet's `failCgroupV1` says. `--ignore-preflight-errors` naming
//! SystemVerification (any case) or `all` turns it into a warning, as
//! kubeadm's upgrade docs ask (kubernetes/website#53082).

use super::super::util::KubeVersion;
use super::super::{Env, say};
use super::ignores;

/// The first kubeadm whose upgrade preflight refuses cgroup v1.
const SYSTEM_VERIFICATION_CGROUP_SINCE_MINOR: u64 = 35;

/// The SystemVerification preflight's cgroup validator: from kubeadm v1.35,
/// on a cgroup v1 node, an error unless ignored (then kubeadm prints it as
/// a warning and goes on). `Err` is kubeadm's message.
pub(super) fn system_verification(
    env: &mut Env,
    kubeadm: KubeVersion,
    ignore: &[String],
) -> Result<(), String> {
    if kubeadm.minor < SYSTEM_VERIFICATION_CGROUP_SINCE_MINOR
        || crate::cgroup::is_v2(&env.path("/"))
    {
        return Ok(());
    }
    // Worded after kubeadm's upgrade docs (kubernetes/website#53082); the
    // validator's own text is not in the stored sources.
    let finding = format!(
        "SystemVerification]: cgroups v1 support is unsupported and will be removed in a future release; \
         the kubelet v1.{} this upgrade leads to refuses it by default. Migrate to cgroups v2, or set the \
         kubelet configuration option FailCgroupV1 to false and explicitly skip this validation",
        kubeadm.minor
    );
    if ignores(ignore, "SystemVerification") {
        say!(env, "\t[WARNING {finding}");
        return Ok(());
    }
    Err(format!(
        "[preflight] Some fatal errors occurred:\n\t[ERROR {finding}\n\
         [preflight] If you know what you are doing, you can make a check non-fatal with \
         `--ignore-preflight-errors=...`"
    ))
}

//! What `kubectl drain`'s exit and words mean for the roll, decided from
//! the readings alone (`super::drain` runs it and acts on the verdict), so
//! the rule is tested without a fleet.
//!
//! The real kubectl does not fail when the API refuses its cordon:
//! `RunCordonOrUncordon` (staging/src/k8s.io/kubectl/pkg/cmd/drain/drain.go)
//! prints `error: unable to cordon node "w-1": …` and returns nil, and the
//! drain goes on evicting, so `kubectl drain` can exit 0 with the node
//! drained but still schedulable. Only `node/NAME cordoned` (or `already
//! cordoned`) in its output says the cordon held
//! (`crate::remote::kubectl::drain_cordoned`).

use std::time::Duration;

use super::blocked_pods;
use crate::remote::kubectl;
use crate::steps::Rerun;

/// How a drain ended, read from its output.
#[derive(Debug)]
pub(super) enum DrainVerdict {
    /// Cordoned and drained: the node may be rebooted.
    Drained,
    /// Never cordoned: nothing to undo, the node must not be rebooted.
    NotCordoned(anyhow::Error),
    /// Cordoned but not drained: the node is to be uncordoned again, and
    /// the error says `why` (the pods a budget protects, or kubectl's last
    /// words).
    NotDrained { why: String },
}

/// The verdict on `kubectl drain NODE`'s exit (`success`) and its output
/// (stdout and stderr together).
pub(super) fn drain_verdict(node: &str, success: bool, output: &str, rerun: Rerun) -> DrainVerdict {
    let cordoned = kubectl::drain_cordoned(node, output);
    if success && cordoned {
        return DrainVerdict::Drained;
    }
    if !cordoned {
        // A node drained but schedulable takes new pods: not rebooted.
        let why = kubectl::schedulability_refused(output)
            .or_else(|| output.trim().lines().last())
            .unwrap_or("it printed nothing");
        let done = if success {
            "kubectl evicted its pods, but the node stays schedulable and was not rebooted"
        } else {
            "nothing was rebooted"
        };
        return DrainVerdict::NotCordoned(anyhow::anyhow!(
            "{node}: kubectl drain could not cordon {node}: {why}. {done}; run \
             `{rerun}` again once the API server accepts the cordon"
        ));
    }
    let pods = blocked_pods(output);
    let why = if pods.is_empty() {
        format!(
            "kubectl said: {}",
            output.trim().lines().last().unwrap_or("nothing")
        )
    } else {
        format!("a PodDisruptionBudget blocks evicting {}", pods.join(", "))
    };
    DrainVerdict::NotDrained { why }
}

/// The error of a drain that did not finish: `why`, then whether the node
/// was uncordoned again (`state`), then what to do.
pub(super) fn not_drained(
    node: &str,
    timeout: Duration,
    why: &str,
    state: &str,
    rerun: Rerun,
) -> anyhow::Error {
    anyhow::anyhow!(
        "{node}: drain did not finish within {}: {why}. {state}. Make room for the pods (scale the \
         workload or relax the budget), then run `{rerun}` again",
        humantime::format_duration(timeout)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the real kubectl 1.33 printed when a validating webhook froze
    /// the Node (seen against the simulated API server): the cordon
    /// refused, the evictions done, exit 0.
    const REFUSED: &str = "error: unable to cordon node \"w-1\": admission webhook \
         \"freeze.policy.example.com\" denied the request: node w-1 is frozen\n\
         evicting pod default/web-7d9f\n\
         pod/web-7d9f evicted\n";

    #[test]
    fn a_cordon_the_api_refused_is_never_drained_even_when_kubectl_exits_0() {
        for success in [true, false] {
            let DrainVerdict::NotCordoned(e) = drain_verdict("w-1", success, REFUSED, Rerun::Apply)
            else {
                panic!("exit {success}: a refused cordon taken for a drain");
            };
            let text = format!("{e:#}");
            for words in [
                "w-1: kubectl drain could not cordon w-1",
                "admission webhook \"freeze.policy.example.com\" denied the request",
                "run `fleetctl apply` again once the API server accepts the cordon",
            ] {
                assert!(text.contains(words), "no `{words}` in {text}");
            }
        }
    }

    #[test]
    fn a_drain_is_done_only_cordoned_and_exited_0() {
        let drained = "node/w-1 cordoned\nevicting pod default/web-7d9f\nnode/w-1 drained\n";
        assert!(matches!(
            drain_verdict("w-1", true, drained, Rerun::Apply),
            DrainVerdict::Drained
        ));
        let again = "node/w-1 already cordoned\nnode/w-1 drained\n";
        assert!(matches!(
            drain_verdict("w-1", true, again, Rerun::Reboot),
            DrainVerdict::Drained
        ));
        // Another node's cordon is not this one's.
        assert!(matches!(
            drain_verdict("w-1", true, "node/w-10 cordoned\n", Rerun::Apply),
            DrainVerdict::NotCordoned(_)
        ));
    }

    #[test]
    fn a_drain_a_budget_blocked_names_the_pods_to_make_room_for() {
        let blocked = "node/w-1 cordoned\n\
             evicting pod default/web-7d9f\n\
             error when evicting pods/\"web-7d9f\" -n \"default\" (will retry after 5s): Cannot \
             evict pod as it would violate the pod's disruption budget.\n\
             error: unable to drain node \"w-1\" due to error: global timeout reached: 2s\n";
        let DrainVerdict::NotDrained { why } = drain_verdict("w-1", false, blocked, Rerun::Apply)
        else {
            panic!("a blocked drain taken for done or never cordoned");
        };
        assert_eq!(
            why,
            "a PodDisruptionBudget blocks evicting default/web-7d9f"
        );
        let e = not_drained(
            "w-1",
            Duration::from_secs(2),
            &why,
            "w-1 was uncordoned again; nothing was rebooted",
            Rerun::Apply,
        );
        assert_eq!(
            e.to_string(),
            "w-1: drain did not finish within 2s: a PodDisruptionBudget blocks evicting \
             default/web-7d9f. w-1 was uncordoned again; nothing was rebooted. Make room for the \
             pods (scale the workload or relax the budget), then run `fleetctl apply` again"
        );
    }
}

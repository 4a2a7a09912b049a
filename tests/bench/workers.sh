#!/usr/bin/env bash
# `--workers jump` (the default) against `--workers every-hop` on the same
# fleet: tests/bench/apply.sh once per strategy, each on a fresh simulated
# fleet of the same shape, then both wall times and reboot counts side by side.
#
#   bash tests/bench/workers.sh [RUNS]        (as root; RUNS per strategy, default 1)
#
# Settings (environment) as apply.sh's, with other defaults: FROM=v1.35.1
# TO=v1.37 (two hops, so the workers have one to jump over; from v1.34 every
# worker still holds --pod-infra-container-image and takes v1.35 anyway,
# docs/upgrade-path.md), WORKERS=3, BOOT=3 KUBELET=3 (short reboots; the
# saving grows with the reboot time: BOOT=30 KUBELET=15 for a VM).
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-1}
export FROM=${FROM:-v1.35.1} TO=${TO:-v1.37} WORKERS=${WORKERS:-3}
export BOOT=${BOOT:-3} KUBELET=${KUBELET:-3}

if [ -z "${NO_BUILD:-}" ]; then
    echo "==> cargo build --release --workspace --bins" >&2
    cargo build -q --release --workspace --bins
fi
export NO_BUILD=1

out=$(mktemp /tmp/fleetctl-bench-workers-XXXXXX)
trap 'rm -f "$out"' EXIT
for strategy in every-hop jump; do
    PLAN_ARGS="--workers $strategy" bash tests/bench/apply.sh "$runs" | tee "$out.$strategy"
done
summary() {
    awk -v s="$1" '
        /^run [0-9]+: apply took/ {
            wall += $5; reboots += $7; n++
        }
        END { if (n) printf "%-9s apply %6.1f s, %4.1f reboots (mean of %d)\n", s, wall / n, reboots / n, n }
    ' "$out.$1"
}
echo "== --workers every-hop vs jump, $FROM -> $TO, 1 control plane + $WORKERS workers, boot $BOOT s, kubelet $KUBELET s"
summary every-hop
summary jump
rm -f "$out.every-hop" "$out.jump"

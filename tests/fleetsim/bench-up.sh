#!/usr/bin/env bash
# How long a fleet takes to come up (ready file written) and to go down.
#   bash tests/fleetsim/bench-up.sh [NODES] [RUNS]     (default: 6 nodes, 3 runs)
# Needs root, like the simulator. Prints one line per run.
set -euo pipefail
cd "$(dirname "$0")/../.."

nodes=${1:-6}
runs=${2:-3}
[ "$nodes" -ge 1 ] || { echo "bench-up: NODES must be at least 1" >&2; exit 2; }

# The simulated nodes boot squashfs sysext images (docs/simulator.md, "Images").
if ! command -v mksquashfs >/dev/null; then
    echo "==> installing squashfs-tools" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq squashfs-tools >/dev/null
fi

cargo build -q -p fleetsim
now() { date +%s.%N; }

for run in $(seq "$runs"); do
    dir=$(mktemp -d /tmp/fleetsim-bench-XXXXXX)
    {
        echo "kubernetes: v1.34.2"
        echo "nodes:"
        echo "  - {name: cp-1, role: control-plane}"
        for i in $(seq $((nodes - 1))); do
            echo "  - {name: w-$i, role: worker}"
        done
    } >"$dir/scenario.yaml"

    start=$(now)
    target/debug/fleetsim up --scenario "$dir/scenario.yaml" --dir "$dir" >"$dir/supervisor.log" 2>&1 &
    pid=$!
    while [ ! -e "$dir/ready" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$dir/supervisor.log" >&2
            exit 1
        fi
        sleep 0.01
    done
    up=$(now)
    kill -TERM "$pid"
    wait "$pid" || true
    down=$(now)
    rm -rf "$dir"
    awk -v n="$nodes" -v r="$run" -v s="$start" -v u="$up" -v d="$down" \
        'BEGIN { printf "run %d: %d nodes up in %.2f s, down in %.2f s\n", r, n, u - s, d - u }'
done

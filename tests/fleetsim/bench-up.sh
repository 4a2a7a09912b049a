#!/usr/bin/env bash
# How long a fleet takes to be ready (ready file written) and to go down,
# and how much memory it holds while up.
#   bash tests/fleetsim/bench-up.sh [NODES] [RUNS] [--light]   (default: 6 nodes, 3 runs)
# Needs root, like the simulator. Prints one line per run. Memory is the
# proportional set size (Pss, shared pages split between their users) of
# every process of the fleet, summed: the supervisor and all it started.
set -euo pipefail
cd "$(dirname "$0")/../.."

light=
args=()
for a in "$@"; do
    case $a in
        --light) light=--light ;;
        *) args+=("$a") ;;
    esac
done
nodes=${args[0]:-6}
runs=${args[1]:-3}
[ "$nodes" -ge 1 ] || { echo "bench-up: NODES must be at least 1" >&2; exit 2; }

# The simulated nodes boot squashfs sysext images (docs/simulator.md, "Images").
if ! command -v mksquashfs >/dev/null; then
    echo "==> installing squashfs-tools" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq squashfs-tools >/dev/null
fi

# The memory figure walks the process tree with ps (procps).
if ! command -v ps >/dev/null; then
    echo "==> installing procps" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq procps >/dev/null
fi

cargo build -q -p fleetsim
now() { date +%s.%N; }

# The Pss of $1 and all its descendants, in MiB.
fleet_pss() {
    local root=$1
    ps -e -o pid=,ppid= | awk -v root="$root" '
        { parent[$1] = $2 }
        END {
            for (p in parent) {
                q = p
                while (q != "" && q != 0 && q != root) q = parent[q]
                if (q == root) print p
            }
            print root
        }' | while read -r pid; do
        awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || true
    done | awk '{ kb += $1 } END { printf "%.0f", kb / 1024 }'
}

for run in $(seq "$runs"); do
    dir=$(mktemp -d /tmp/fleetsim-bench-XXXXXX)
    start=$(now)
    target/debug/fleetsim up --nodes "$nodes" $light --dir "$dir" >"$dir/supervisor.log" 2>&1 &
    pid=$!
    while [ ! -e "$dir/ready" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -20 "$dir/supervisor.log" >&2
            exit 1
        fi
        sleep 0.01
    done
    up=$(now)
    mem=$(fleet_pss "$pid")
    processes=$(ps -e -o ppid= | wc -l)
    kill -TERM "$pid"
    wait "$pid" || true
    down=$(now)
    rm -rf "$dir"
    awk -v n="$nodes" -v r="$run" -v s="$start" -v u="$up" -v d="$down" -v m="$mem" -v l="${light:-full}" \
        'BEGIN { printf "run %d: %d %s nodes up in %.2f s, down in %.2f s, %s MiB (Pss) while up\n", r, n, (l == "full" ? "full" : "light"), u - s, d - u, m }'
done

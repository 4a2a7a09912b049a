#!/usr/bin/env bash
# How much time `fleetctl apply` adds on top of what the fleet itself needs.
#
#   bash tests/bench/apply.sh [RUNS]          (default: 1 run; as root, like the simulator)
#
# Each run starts a fresh simulated fleet (1 control plane + WORKERS workers
# at FROM), runs `fleetctl plan TO` and then times `fleetctl apply --yes`.
# The irreducible time is what no tool can avoid: every reboot waits for the
# node to boot (BOOT s) and then for its kubelet to report Ready (KUBELET s),
# one node at a time. Reboots are counted from the fleet's event log, so the
# figure follows what really happened, not what the plan said. Everything
# else is apply's overhead: gathering, staging, gates, drains, kubeadm,
# noticing that a node is back, uncordoning, saving the plan.
#
# Settings (environment): WORKERS=3 BOOT=30 KUBELET=15 API=1 FROM=v1.34.2
# TO=v1.36 (two minor hops), SSH_USER=core (Flatcar's login; fleetctl runs
# its commands through sudo. With root, every command also pays for the
# host's /root/.bashrc, which bash reads for commands sshd runs), NO_BUILD=1 to skip the release build, KEEP=1
# to keep each run's directory (journal, event log) for a closer look,
# FLEETSIM=PATH to use another simulator build, FLEETCTL=PATH to time
# another fleetctl binary (an older build, to compare
# before and after a change under the same load), APPLY_ARGS to pass apply
# more flags (e.g. --skip-etcd-snapshot to see what the snapshot costs),
# PLAN_ARGS to pass plan more flags (e.g. --workers every-hop; see
# tests/bench/workers.sh, which compares the two worker strategies),
# The machine's core count and load average are printed with the figures:
# on a busy machine every SSH login and kubectl call costs more.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-1}
workers=${WORKERS:-3}
# A VM's Flatcar reboot and its kubelet's first Ready status take about
# this long (bare metal: minutes). BOOT=3 KUBELET=3 gives a quick run in
# which kubectl's fixed cost per node dominates the percentage (docs/architecture.md, "Performance").
boot=${BOOT:-30}
kubelet=${KUBELET:-15}
api=${API:-1}
from=${FROM:-v1.34.2}
to=${TO:-v1.36}
user=${SSH_USER:-core}

die() { printf 'bench/apply: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run me as root: the simulator creates namespaces and mounts"
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number, not \`$runs\`"
[[ $workers =~ ^[0-9]+$ ]] || die "WORKERS must be a number, not \`$workers\`"
[[ $user =~ ^(core|root)$ ]] || die "SSH_USER must be core or root (the simulated nodes have no others)"

# The simulated nodes boot squashfs sysext images (docs/simulator.md, "Images").
if ! command -v mksquashfs >/dev/null; then
    echo "==> installing squashfs-tools" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq squashfs-tools >/dev/null
fi

if [ -z "${NO_BUILD:-}" ]; then
    echo "==> cargo build --release --workspace --bins" >&2
    cargo build -q --release --workspace --bins || die "the release build failed"
fi
fleetctl=${FLEETCTL:-target/release/fleetctl}
fleetsim=${FLEETSIM:-target/release/fleetsim}
[ -x "$fleetctl" ] && [ -x "$fleetsim" ] || die "$fleetctl or $fleetsim is missing (build without NO_BUILD)"

dir=
supervisor=
teardown() {
    if [ -n "$supervisor" ] && kill -0 "$supervisor" 2>/dev/null; then
        kill -TERM "$supervisor" 2>/dev/null || true
        wait "$supervisor" 2>/dev/null || true
    fi
    supervisor=
    if [ -n "$dir" ] && [ -n "${KEEP:-}" ]; then
        echo "  kept $dir (journal in fleet/.fleetctl/journal, events: $fleetsim events --dir $dir/fleet)"
    elif [ -n "$dir" ]; then
        rm -rf "$dir"
    fi
    dir=
}
trap teardown EXIT
trap 'teardown; exit 130' INT TERM

now() { date +%s.%N; }

start_fleet() {
    dir=$(mktemp -d /tmp/fleetctl-bench-XXXXXX)
    {
        echo "kubernetes: $from"
        echo "boot_delay: $boot"
        echo "kubelet_delay: $kubelet"
        echo "api_delay: $api"
        echo "nodes:"
        echo "  - {name: cp-1, role: control-plane, user: $user}"
        for i in $(seq "$workers"); do
            echo "  - {name: w-$i, role: worker, user: $user}"
        done
    } >"$dir/scenario.yaml"
    "$fleetsim" up --scenario "$dir/scenario.yaml" --dir "$dir/fleet" >"$dir/supervisor.log" 2>&1 &
    supervisor=$!
    for _ in $(seq 600); do
        if [ -e "$dir/fleet/ready" ]; then
            # `ready` means at rest: API answering, every kubelet Ready.
            return 0
        fi
        kill -0 "$supervisor" 2>/dev/null || break
        sleep 0.1
    done
    cat "$dir/supervisor.log" >&2
    die "the fleet did not start"
}

# The event log as "t node what" lines, for the awk below.
events() {
    "$fleetsim" events --dir "$dir/fleet" --json | awk '
        {
            t = $0; sub(/.*"t":/, "", t); sub(/,.*/, "", t)
            n = $0; sub(/.*"node":"/, "", n); sub(/".*/, "", n)
            a = $0; sub(/.*"argv":\["/, "", a); sub(/".*/, "", a)
            print t, n, a
        }'
}

# Wall time, reboots, irreducible time and overhead of one apply, with where
# the overhead went: before the first node goes down, between a node being
# Ready and the next one going down, a reboot beyond its boot delay (the
# simulator's own shutdown and boot), and after the last node is Ready.
report() {
    local run=$1 start=$2 end=$3
    events | awk -v run="$run" -v s="$start" -v e="$end" -v boot="$boot" -v kubelet="$kubelet" '
        $1 < s || $1 > e { next }
        $3 == "(shutdown)" {
            reboots++
            if (ready == "") first = $1 - s
            else {
                between += $1 - ready
                if ($1 - ready > longest) { longest = $1 - ready; longest_node = $2 }
            }
            down[$2] = $1
        }
        $3 == "(boot)" && ($2 in down) {
            extra += $1 - down[$2] - boot
            ready = $1 + kubelet
            delete down[$2]
        }
        END {
            wall = e - s
            irreducible = reboots * (boot + kubelet)
            over = wall - irreducible
            printf "run %d: apply took %.1f s; %d reboots x (%g s boot + %g s kubelet) = %.1f s irreducible; overhead %.1f s (%.1f %%)\n",
                run, wall, reboots, boot, kubelet, irreducible, over, (irreducible > 0 ? 100 * over / irreducible : 0)
            if (reboots > 0) {
                last = ready == "" ? 0 : e - ready
                printf "  before the first reboot:   %5.1f s  (gather, re-plan, lock, pin and stage, gates, drain)\n", first
                printf "  between reboots:           %5.1f s  (%.2f s each, longest %.2f s before %s: Ready, uncordon, gates, drain, reboot)\n",
                    between, (reboots > 1 ? between / (reboots - 1) : 0), longest, longest_node
                printf "  reboots beyond boot delay: %5.1f s  (the simulator shutting down and booting a node)\n", extra
                printf "  after the last Ready:      %5.1f s  (uncordon, verify, release the lock)\n", last
            }
            printf "%.3f %.3f\n", wall, (irreducible > 0 ? 100 * over / irreducible : 0) > "/dev/stderr"
        }' 2>"$dir/figures"
}

# Where apply's commands spent their time, from its journal (summed per
# kind of command; commands on several nodes at once overlap).
journal_top() {
    local jsonl
    jsonl=$(ls "$dir"/fleet/.fleetctl/journal/*.jsonl 2>/dev/null | tail -n 1)
    [ -n "$jsonl" ] || return 0
    awk '
        /"kind":"command"/ {
            d = $0; sub(/.*"detail":"/, "", d); sub(/".*/, "", d)
            gsub(/(cp|w)-[0-9]+/, "NODE", d)
            ms = $0; sub(/.*"elapsed_ms":/, "", ms); sub(/[,}].*/, "", ms)
            total[d] += ms; count[d]++
        }
        END { for (d in total) printf "%8.1f s %4d x  %s\n", total[d] / 1000, count[d], d }
    ' "$jsonl" | sort -rn | head -n 8 | sed 's/^/  journal: /'
}

printf '%s on 1 control plane + %d workers as %s, %s -> %s%s; boot %g s, kubelet %g s, API %g s; %s cores, load %s\n' \
    "$fleetctl" "$workers" "$user" "$from" "$to" "${PLAN_ARGS:+ (plan $PLAN_ARGS)}" "$boot" "$kubelet" "$api" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
# The simulated hub is plain HTTP on loopback, a network that is ours.
export FLEETCTL_ALLOW_INSECURE_HUB=true
sum_wall=0 sum_pct=0
for run in $(seq "$runs"); do
    start_fleet
    inventory="$dir/fleet/inventory.yaml"
    # shellcheck disable=SC2086 # PLAN_ARGS is a list of flags
    "$fleetctl" -i "$inventory" plan "$to" ${PLAN_ARGS:-} >"$dir/plan.out" 2>&1 || {
        cat "$dir/plan.out" >&2
        die "fleetctl plan $to failed"
    }
    start=$(now)
    # shellcheck disable=SC2086 # APPLY_ARGS is a list of flags
    if ! "$fleetctl" -i "$inventory" apply --yes ${APPLY_ARGS:-} >"$dir/apply.out" 2>&1; then
        cat "$dir/apply.out" >&2
        die "fleetctl apply failed (run $run)"
    fi
    end=$(now)
    report "$run" "$start" "$end"
    journal_top
    read -r wall pct <"$dir/figures"
    sum_wall=$(awk -v a="$sum_wall" -v b="$wall" 'BEGIN { print a + b }')
    sum_pct=$(awk -v a="$sum_pct" -v b="$pct" 'BEGIN { print a + b }')
    teardown
done
if [ "$runs" -gt 1 ]; then
    awk -v n="$runs" -v w="$sum_wall" -v p="$sum_pct" \
        'BEGIN { printf "mean of %d runs: apply %.1f s, overhead %.1f %%\n", n, w / n, p / n }'
fi

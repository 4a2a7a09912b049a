#!/usr/bin/env bash
# How long `fleetctl status` takes on 1, 10 and 50 simulated nodes, next to
# what an operator would otherwise write: a parallel OpenSSH loop (one `ssh`
# process per node, all started at once) doing the same remote work — the
# facts script on every node, the cluster script on the first one.
#
#   bash tests/bench/status.sh [RUNS] [SIZES...]     (default: 5 runs; 1 10 50 nodes)
#
# Needs root and what the simulator needs (docs/simulator.md). Builds fleetctl
# with --release (its crypto is Rust; a debug build would measure the
# compiler, not the design) and fleetsim as the tests do. Prints one line per
# size with the median wall time and operator-side CPU of each side; every
# run of either side is checked for complete output, so a fast failure cannot
# pass for a fast run.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-5}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 10 50)
[ "$runs" -ge 1 ] || { echo "status.sh: RUNS must be at least 1" >&2; exit 2; }

# The simulated nodes boot squashfs sysext images (docs/simulator.md, "Images").
if ! command -v mksquashfs >/dev/null; then
    echo "==> installing squashfs-tools" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq squashfs-tools >/dev/null
fi

cargo build -q --release -p fleetctl --bin fleetctl
cargo build -q -p fleetsim --bin fleetsim
fleetctl=$PWD/target/release/fleetctl
fleetsim=$PWD/target/debug/fleetsim

work=$(mktemp -d /tmp/fleetsim-bench-XXXXXX)
supervisor=""
fleet=""

stop_fleet() {
    if [ -n "$supervisor" ]; then
        kill -TERM "$supervisor" 2>/dev/null || true
        wait "$supervisor" 2>/dev/null || true
        supervisor=""
    fi
    if [ -n "$fleet" ]; then
        rm -rf "$fleet"
        fleet=""
    fi
}
trap 'stop_fleet; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# The exact scripts fleetctl runs: src/remote/mod.rs concatenates these files.
cat src/remote/prelude.sh src/remote/facts.sh >"$work/facts.sh"
cat src/remote/prelude.sh src/remote/cluster.sh >"$work/cluster.sh"
# fleetctl gets an empty home: no ~/.ssh/config, no agent, like the loop's -F /dev/null.
mkdir -p "$work/home"

start_fleet() {
    local nodes=$1
    fleet=$(mktemp -d /tmp/fleetsim-bench-XXXXXX)
    {
        echo "kubernetes: v1.34.2"
        echo "nodes:"
        echo "  - {name: cp-1, role: control-plane}"
        for i in $(seq $((nodes - 1))); do
            echo "  - {name: w-$i, role: worker}"
        done
    } >"$work/scenario.yaml"
    "$fleetsim" up --scenario "$work/scenario.yaml" --dir "$fleet" >"$work/supervisor.log" 2>&1 &
    supervisor=$!
    while [ ! -e "$fleet/ready" ]; do
        if ! kill -0 "$supervisor" 2>/dev/null; then
            cat "$work/supervisor.log" >&2
            echo "status.sh: the simulated fleet did not start" >&2
            exit 1
        fi
        sleep 0.05
    done
    # sshd answers before the kubelets are Ready and the API server is up
    # (kubelet_delay, api_delay): wait until status says all is well.
    local tries=0
    until HOME=$work/home SSH_AUTH_SOCK="" "$fleetctl" -i "$fleet/inventory.yaml" status >/dev/null 2>&1; do
        tries=$((tries + 1))
        [ "$tries" -lt 100 ] || { echo "status.sh: the fleet never settled" >&2; exit 1; }
        sleep 0.1
    done
    sed -n 's/^  - {name: [^,]*, address: \([0-9.]*\),.*/\1/p' "$fleet/inventory.yaml" >"$work/addresses"
    port=$(sed -n 's/^  port: \([0-9]*\)$/\1/p' "$fleet/inventory.yaml")
    [ "$(wc -l <"$work/addresses")" -eq "$nodes" ] || {
        echo "status.sh: expected $nodes addresses in $fleet/inventory.yaml" >&2
        exit 1
    }
}

now_ns() { date +%s%N; }

run_fleetctl() {
    HOME=$work/home SSH_AUTH_SOCK="" "$fleetctl" -i "$fleet/inventory.yaml" --no-color \
        status --output json >"$work/fleetctl.json" 2>"$work/fleetctl.err" || {
        cat "$work/fleetctl.err" >&2
        echo "status.sh: fleetctl status failed on $fleet" >&2
        exit 1
    }
}

# OpenSSH, by default with the key exchange fleetctl negotiates with this
# sshd (curve25519-sha256), so the comparison is about connections,
# processes and round trips, not algorithms. kex=default leaves OpenSSH's
# own preference (sntrup761x25519 on OpenSSH 9.x): what a plain loop gets.
kex=curve25519-sha256
ssh_node() {
    local kex_opt=()
    [ "$kex" = default ] || kex_opt=(-o "KexAlgorithms=$kex")
    ssh -F /dev/null -o BatchMode=yes -o ConnectTimeout=10 "${kex_opt[@]}" \
        -o StrictHostKeyChecking=yes -o GlobalKnownHostsFile=/dev/null \
        -o UserKnownHostsFile="$fleet/ssh/known_hosts" \
        -o IdentitiesOnly=yes -i "$fleet/ssh/id_ed25519" -o LogLevel=ERROR \
        -p "$port" "root@$1" 'sh -s'
}

run_loop() {
    rm -f "$work"/out.*
    local i=0 first="" addr pid failed=0
    local pids=()
    while read -r addr; do
        [ -n "$first" ] || first=$addr
        ssh_node "$addr" <"$work/facts.sh" >"$work/out.facts.$i" 2>&1 &
        pids+=($!)
        i=$((i + 1))
    done <"$work/addresses"
    ssh_node "$first" <"$work/cluster.sh" >"$work/out.cluster" 2>&1 &
    pids+=($!)
    for pid in "${pids[@]}"; do
        wait "$pid" || failed=1
    done
    [ "$failed" -eq 0 ] || { echo "status.sh: an ssh of the loop failed" >&2; exit 1; }
}

check_fleetctl() {
    local nodes=$1 answered
    answered=$(jq -r '.summary.answered' "$work/fleetctl.json")
    [ "$answered" = "$nodes" ] && [ "$(jq -r '.cluster.answered_by' "$work/fleetctl.json")" = cp-1 ] || {
        echo "status.sh: fleetctl answered for $answered of $nodes nodes" >&2
        exit 1
    }
}

check_loop() {
    local nodes=$1 f
    for f in "$work"/out.facts.* "$work/out.cluster"; do
        tail -n 1 "$f" | grep -qx '@@fleetctl:done@@' || {
            echo "status.sh: incomplete output from the loop in $f:" >&2
            tail -n 5 "$f" >&2
            exit 1
        }
    done
    [ "$(ls "$work"/out.facts.* | wc -l)" -eq "$nodes" ] || { echo "status.sh: missing loop output" >&2; exit 1; }
    grep -q '"kind": *"Node"' "$work/out.cluster" || {
        echo "status.sh: the cluster script did not list the nodes" >&2
        exit 1
    }
}

# measure FILE COMMAND...: appends "wall_ms cpu_ms" of one run, CPU being
# what this side spent on the operator's machine (user + sys of the shell's
# children: fleetctl, or every ssh process of the loop).
measure() {
    local file=$1 t0 t1 c0 c1
    shift
    c0=$(children_cpu_ticks)
    t0=$(now_ns)
    "$@"
    t1=$(now_ns)
    c1=$(children_cpu_ticks)
    echo "$(((t1 - t0) / 1000000)) $(((c1 - c0) * 1000 / ticks))" >>"$file"
}
ticks=$(getconf CLK_TCK)
# cutime + cstime of this shell: every waited-for child and its descendants.
# (Not $BASHPID: that would be the $(...) subshell asking.)
children_cpu_ticks() { awk '{ print $16 + $17 }' "/proc/$$/stat"; }

# median FIELD <FILE
median() {
    awk -v f="$1" '{ print $f }' | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }

printf '%-5s  %-17s  %-17s  %-8s  %s\n' "" "fleetctl status" "ssh loop" "loop /" "ssh loop, OpenSSH's kex"
printf '%-5s  %-8s %-8s  %-8s %-8s  %-8s  %-8s %s\n' nodes wall cpu wall cpu fleetctl wall cpu
for n in "${sizes[@]}"; do
    start_fleet "$n"
    # One untimed round of each warms the page cache and the nodes' first logins.
    run_fleetctl && check_fleetctl "$n"
    run_loop && check_loop "$n"
    : >"$work/t.fleetctl"
    : >"$work/t.loop"
    : >"$work/t.default"
    for _ in $(seq "$runs"); do
        measure "$work/t.fleetctl" run_fleetctl
        check_fleetctl "$n"
        kex=curve25519-sha256
        measure "$work/t.loop" run_loop
        check_loop "$n"
        kex=default
        measure "$work/t.default" run_loop
        check_loop "$n"
    done
    f=$(median 1 <"$work/t.fleetctl")
    l=$(median 1 <"$work/t.loop")
    printf '%-5s  %-8s %-8s  %-8s %-8s  %-8s  %-8s %s\n' "$n" \
        "$(secs "$f")" "$(secs "$(median 2 <"$work/t.fleetctl")")" \
        "$(secs "$l")" "$(secs "$(median 2 <"$work/t.loop")")" \
        "$(awk -v f="$f" -v l="$l" 'BEGIN { printf "%.2f×", (f > 0 ? l / f : 0) }')" \
        "$(secs "$(median 1 <"$work/t.default")")" "$(secs "$(median 2 <"$work/t.default")")"
    stop_fleet
done
echo "median of $runs runs; wall = elapsed, cpu = user+sys on the operator side only"
echo "(the nodes' sshd and scripts share the same cores); $(nproc) cores, $(uname -sr)"

#!/usr/bin/env bash
# How long `fleetctl status` takes on 1, 50, 200 and 1,000 simulated nodes,
# and how much memory it needs, next to what an operator would otherwise
# write: a parallel OpenSSH loop (one `ssh` process per node) doing the same
# remote work — the facts script on every node, the cluster script on the
# first control plane.
#
#   bash tests/bench/status.sh [RUNS] [SIZES...]   (default: 3 runs; 1 50 200 1000 nodes)
#
# The fleets are light (`fleetsim up --nodes N --light`, docs/simulator.md):
# every node still a real sshd in its own namespaces, on its own address,
# with OpenSSH's default MaxStartups. Needs root and what the simulator needs.
# Builds fleetctl with --release (its crypto is Rust; a debug build would
# measure the compiler, not the design) and fleetsim as the tests do, in
# $CARGO_TARGET_DIR (default ./target).
#
# The loop comes in three forms:
# - all at once: every ssh started together, as `for …; do ssh … & done` does;
# - N at a time (N = fleetctl's default --parallel): at most N ssh processes
#   alive, each for its whole session, as `xargs -P N` would run them;
# - all at once with OpenSSH's own key exchange preference (sntrup761x25519
#   on OpenSSH 9.x) instead of the curve25519-sha256 fleetctl negotiates.
# None of them can meet sshd's MaxStartups: each node is its own sshd and
# gets one connection (the first control plane two). What an unbounded loop
# meets instead is the operator's CPU and the nodes' (here the same two
# cores): a run with any node missing is reported as failed, not timed.
#
# Prints one line per size: the median wall time and operator-side CPU of
# each side over the runs that completed, and fleetctl's peak RSS (GNU time's
# maximum resident set size, the largest of the runs). Every run of either
# side is checked for complete output, so a fast failure cannot pass for a
# fast run: an incomplete side shows `FAIL k/RUNS` and what went wrong is
# printed on stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."

runs=${1:-3}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 50 200 1000)
[ "$runs" -ge 1 ] || { echo "status.sh: RUNS must be at least 1" >&2; exit 2; }
for n in "${sizes[@]}"; do
    [ "$n" -ge 1 ] && [ "$n" -le 1000 ] || { echo "status.sh: sizes go from 1 to 1000 nodes" >&2; exit 2; }
done

# The simulated nodes boot squashfs sysext images (docs/simulator.md,
# "Images"); GNU time measures peak RSS; jq reads status's JSON.
missing=()
command -v mksquashfs >/dev/null || missing+=(squashfs-tools)
[ -x /usr/bin/time ] || missing+=(time)
command -v jq >/dev/null || missing+=(jq)
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cargo build -q --release -p fleetctl --bin fleetctl
cargo build -q -p fleetsim --bin fleetsim
target=${CARGO_TARGET_DIR:-$PWD/target}
fleetctl=$target/release/fleetctl
fleetsim=$target/debug/fleetsim
# fleetctl's own default --parallel (src/cli.rs): the bounded loop's width.
bound=$("$fleetctl" --help | grep -A 6 -e '--parallel' | grep -o 'default: [0-9]*' | grep -o '[0-9]*$' | head -n 1 || true)
bound=${bound:-16}

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
    "$fleetsim" up --nodes "$nodes" --light --dir "$fleet" >"$work/supervisor.log" 2>&1 &
    supervisor=$!
    while [ ! -e "$fleet/ready" ]; do
        if ! kill -0 "$supervisor" 2>/dev/null; then
            cat "$work/supervisor.log" >&2
            echo "status.sh: the simulated fleet did not start" >&2
            exit 1
        fi
        sleep 0.2
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

# One run of fleetctl under GNU time (%M: its peak RSS in KiB). Returns
# non-zero when it failed or answered for fewer than all nodes.
run_fleetctl() {
    local nodes=$1 answered by
    HOME=$work/home SSH_AUTH_SOCK="" /usr/bin/time -f %M -o "$work/fleetctl.rss" \
        "$fleetctl" -i "$fleet/inventory.yaml" --no-color status --output json \
        >"$work/fleetctl.json" 2>"$work/fleetctl.err" || {
        echo "status.sh: fleetctl status failed on $nodes nodes:" >&2
        tail -n 3 "$work/fleetctl.err" >&2
        return 1
    }
    answered=$(jq -r '.summary.answered' "$work/fleetctl.json")
    by=$(jq -r '.cluster.answered_by' "$work/fleetctl.json")
    [ "$answered" = "$nodes" ] && [ "$by" = cp-1 ] || {
        echo "status.sh: fleetctl answered for $answered of $nodes nodes (cluster: $by)" >&2
        return 1
    }
}

# OpenSSH, by default with the key exchange fleetctl negotiates with this
# sshd (curve25519-sha256), so the comparison is about connections,
# processes and round trips, not algorithms. kex=default leaves OpenSSH's
# own preference: what a plain loop gets.
kex=curve25519-sha256
# ssh_args ADDRESS: the ssh command line for one node, in $cmd.
ssh_args() {
    cmd=(ssh -F /dev/null -o BatchMode=yes -o ConnectTimeout=10)
    [ "$kex" = default ] || cmd+=(-o "KexAlgorithms=$kex")
    cmd+=(-o StrictHostKeyChecking=yes -o GlobalKnownHostsFile=/dev/null
        -o UserKnownHostsFile="$fleet/ssh/known_hosts"
        -o IdentitiesOnly=yes -i "$fleet/ssh/id_ed25519" -o LogLevel=ERROR
        -p "$port" "root@$1" 'sh -s')
}

# run_loop WIDTH: the facts script on every node and the cluster script on
# the first, at most WIDTH ssh processes alive at once (0: all at once).
# Whether each did its work is check_loop's to say. Waits for its own ssh
# processes only (the fleet's supervisor is a job of this shell too).
run_loop() {
    local width=$1 i=0 addr done_pid cmd
    local -A alive=()
    local all=()
    rm -f "$work"/out.*
    # spawn INPUT OUTPUT ADDRESS
    spawn() {
        ssh_args "$3"
        "${cmd[@]}" <"$1" >"$2" 2>&1 &
        alive[$!]=1
        all+=($!)
    }
    while read -r addr; do
        [ "$i" -gt 0 ] || spawn "$work/cluster.sh" "$work/out.cluster" "$addr"
        while [ "$width" -gt 0 ] && [ "${#alive[@]}" -ge "$width" ]; do
            done_pid=""
            wait -n -p done_pid "${!alive[@]}" || true
            [ -z "$done_pid" ] || unset "alive[$done_pid]"
        done
        spawn "$work/facts.sh" "$work/out.facts.$i" "$addr"
        i=$((i + 1))
    done <"$work/addresses"
    wait "${all[@]}" || true
}

# Returns non-zero, saying what was missing, unless every node's facts and
# the cluster's answer came back complete.
check_loop() {
    local nodes=$1 side=$2 f bad=0 first_bad=""
    for f in "$work"/out.facts.* "$work/out.cluster"; do
        tail -n 1 "$f" | grep -qx '@@fleetctl:done@@' || {
            bad=$((bad + 1))
            [ -n "$first_bad" ] || first_bad=$f
        }
    done
    if [ "$bad" -gt 0 ]; then
        echo "status.sh: the loop ($side, $nodes nodes) left $bad of $((nodes + 1)) outputs incomplete; e.g. $(basename "$first_bad"):" >&2
        tail -n 2 "$first_bad" >&2
        echo "  (all reasons: $(cat "$work"/out.* | grep -v '^@@' | grep -oE 'Connection timed out during banner exchange|Connection reset by peer|Connection closed by [^ ]+ port [0-9]+|Connection refused|Exceeded MaxStartups|kex_exchange_identification: [a-z ]+' | sort | uniq -c | sort -rn | head -n 4 | awk '{c=$1; $1=""; printf "%s×%s;", c, $0}'))" >&2
        return 1
    fi
    [ "$(ls "$work"/out.facts.* | wc -l)" -eq "$nodes" ] || { echo "status.sh: missing loop output" >&2; return 1; }
    grep -q '"kind": *"Node"' "$work/out.cluster" || {
        echo "status.sh: the cluster script did not list the nodes" >&2
        return 1
    }
}

ticks=$(getconf CLK_TCK)
# cutime + cstime of this shell: every waited-for child and its descendants.
# (Not $BASHPID: that would be the $(...) subshell asking.)
children_cpu_ticks() { awk '{ print $16 + $17 }' "/proc/$$/stat"; }

# measure SIDE NODES: one run of SIDE; appends "wall_ms cpu_ms" to
# $work/t.SIDE when its output was complete, else counts a failure. CPU is
# what this side spent on the operator's machine (user + sys of fleetctl,
# or of every ssh process of the loop).
measure() {
    local side=$1 nodes=$2 t0 t1 c0 c1 ok=1
    c0=$(children_cpu_ticks)
    t0=$(now_ns)
    case $side in
        fleetctl) run_fleetctl "$nodes" || ok=0 ;;
        all) kex=curve25519-sha256 run_loop 0 ;;
        bounded) kex=curve25519-sha256 run_loop "$bound" ;;
        default) kex=default run_loop 0 ;;
    esac
    t1=$(now_ns)
    c1=$(children_cpu_ticks)
    # A fleet torn down under us (SIGTERM from elsewhere) is not a result.
    kill -0 "$supervisor" 2>/dev/null || {
        tail -n 3 "$work/supervisor.log" >&2
        echo "status.sh: the simulated fleet went away during a run" >&2
        exit 1
    }
    [ "$side" = fleetctl ] || check_loop "$nodes" "$(label "$side")" || ok=0
    if [ "$ok" -eq 1 ]; then
        echo "$(((t1 - t0) / 1000000)) $(((c1 - c0) * 1000 / ticks))" >>"$work/t.$side"
        [ "$side" != fleetctl ] || cat "$work/fleetctl.rss" >>"$work/rss"
    else
        echo x >>"$work/failed.$side"
    fi
}

label() {
    case $1 in
        all) echo "ssh, all at once" ;;
        bounded) echo "ssh, $bound at a time" ;;
        default) echo "all at once, OpenSSH kex" ;;
        *) echo "$1" ;;
    esac
}

# median FIELD <FILE
median() {
    awk -v f="$1" '{ print $f }' | sort -n |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }

# "wall cpu" of SIDE, or "FAIL k/RUNS" when any run was incomplete.
cells() {
    local side=$1 failed
    failed=$(cat "$work/failed.$side" 2>/dev/null | wc -l)
    if [ "$failed" -gt 0 ]; then
        printf '%-8s %-8s' "FAIL" "$failed/$runs"
    else
        printf '%-8s %-8s' "$(secs "$(median 1 <"$work/t.$side")")" "$(secs "$(median 2 <"$work/t.$side")")"
    fi
}

printf '%-5s  %-26s  %-26s  %-17s  %s\n' "" "fleetctl status" "ssh, all at once" "ssh, $bound at a time" "all at once, OpenSSH kex"
printf '%-5s  %-8s %-8s %-8s  %-8s %-8s %-8s  %-8s %-8s  %-8s %s\n' nodes wall cpu "peak RSS" wall cpu "1 ssh" wall cpu wall cpu
for n in "${sizes[@]}"; do
    start_fleet "$n"
    rm -f "$work"/t.* "$work"/failed.* "$work/rss"
    # One untimed round of each warms the page cache and the nodes' first
    # logins (root's ~/.kube/cache, sshd's pages).
    run_fleetctl "$n" || true
    run_loop 0
    for _ in $(seq "$runs"); do
        for side in fleetctl all bounded default; do
            measure "$side" "$n"
        done
    done
    rss="-"
    [ -s "$work/rss" ] && rss="$(sort -n "$work/rss" | tail -n 1 | awk '{ printf "%.0f MB", $1 * 1024 / 1e6 }')"
    # One loop ssh's own peak RSS, on the first node: the all-at-once loop
    # holds one such process per node at the same time.
    ssh_args "$(head -n 1 "$work/addresses")"
    one_ssh=$(/usr/bin/time -f %M -o "$work/ssh.rss" "${cmd[@]}" <"$work/facts.sh" >/dev/null 2>&1 &&
        awk '{ printf "%.0f MB", $1 * 1024 / 1e6 }' "$work/ssh.rss" || echo "?")
    printf '%-5s  %s %-8s  %s %-8s  %s  %s\n' "$n" "$(cells fleetctl)" "$rss" "$(cells all)" "$one_ssh" "$(cells bounded)" "$(cells default)"
    stop_fleet
done
echo "median of $runs runs over the complete ones; wall = elapsed, cpu = user+sys on the operator side only"
echo "(the nodes' sshd and scripts share the same cores); peak RSS = fleetctl's largest maximum resident set"
echo "size over the runs (GNU time), 1 ssh = the same for one ssh of the loop, in MB of 10^6 bytes"
echo "$(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB, $(uname -sr)"

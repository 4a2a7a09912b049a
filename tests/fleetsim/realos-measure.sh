#!/usr/bin/env bash
# Measures real-OS nodes (docs/simulator.md, "Real-OS nodes"): the time a
# 1+3 fleet takes from `fleetsim up` to ready (the root already cached),
# and each node's memory, the proportional set size (Pss) of every process
# in its PID namespace (systemd, journald, logind, dbus, sshd, the kubelet).
# As root, after `cargo build -p fleetsim`. Usage: realos-measure.sh [WORKERS]
# (OS=emulated measures today's node-init nodes instead, for comparison.)
set -euo pipefail
cd "$(dirname "$0")/../.."
workers=${1:-3}
os=${OS:-systemd}
bash tests/fleetsim/rootfs.sh >/dev/null
dir=$(mktemp -d /tmp/fleetsim-measure-XXXXXX)
{
    echo "kubernetes: v1.34.2"
    echo "os_layer: $os"
    echo "nodes:"
    echo "  - {name: cp-1, role: control-plane}"
    for i in $(seq 1 "$workers"); do echo "  - {name: w-$i, role: worker}"; done
} >"$dir/scenario.yaml"
start=$(date +%s.%N)
target/debug/fleetsim up --scenario "$dir/scenario.yaml" --dir "$dir/fleet" >"$dir/up.log" 2>&1 &
sup=$!
trap 'kill $sup 2>/dev/null; wait $sup 2>/dev/null; rm -rf "$dir"' EXIT
until [ -e "$dir/fleet/ready" ]; do
    kill -0 $sup 2>/dev/null || { cat "$dir/up.log"; exit 1; }
    sleep 0.05
done
ready=$(date +%s.%N)
# Arithmetic in awk: a fresh Debian 12 has no bc.
echo "1+$workers $os fleet ready in $(awk -v a="$start" -v b="$ready" 'BEGIN { printf "%.2f", b - a }') s"
sleep 5 # let first-boot services settle
for unshare in $(pgrep -P $sup -x unshare); do
    init=$(cat /proc/$unshare/task/$unshare/children | awk '{print $1}')
    ns=$(readlink /proc/$init/ns/pid)
    name=$(cat /proc/$init/root/etc/hostname)
    total=0; rss=0; n=0
    for p in /proc/[0-9]*; do
        [ "$(readlink $p/ns/pid 2>/dev/null)" = "$ns" ] || continue
        kb=$(awk '/^Pss:/{print $2}' $p/smaps_rollup 2>/dev/null || echo 0)
        r=$(awk '/^Rss:/{print $2}' $p/smaps_rollup 2>/dev/null || echo 0)
        total=$((total + ${kb:-0})); rss=$((rss + ${r:-0})); n=$((n + 1))
    done
    echo "$name: $n processes, Pss $((total / 1024)) MiB, Rss $((rss / 1024)) MiB"
done

#!/usr/bin/env bash
# What a real-OS node costs the machine, in CPU-seconds: the test suite is
# CPU-bound (docs/architecture.md, "Tests and CI"), and most of its CPU is the fleets'
# own, not fleetctl's. Measures, for a fresh 1 control plane + 2 workers
# fleet: its boot until `fleetctl status` answers, 30 s idle, one
# `fleetctl status`, REBOOTS reboots of w-1 (`systemctl reboot` over SSH,
# then until its boot id changes and sshd answers), and the teardown.
#
#   bash tests/bench/node-cpu.sh [REBOOTS]     (default 5; as root, after
#                                               `cargo build --workspace`)
#
# The figures are the whole machine's busy time (/proc/stat: user, nice,
# system, irq, softirq), because the kernel's share (namespaces, mounts,
# page faults of big binaries, the work a teardown leaves to kworkers) is
# about half and is not charged to any one process. Run it on a quiet
# machine; the idle line shows what the machine does without the fleet
# (`before`: 10 s with nothing started).
set -euo pipefail
cd "$(dirname "$0")/../.."
reboots=${1:-5}
bin=${BIN:-target/debug}
bash tests/fleetsim/rootfs.sh >/dev/null

busy() { awk '/^cpu /{printf "%.2f", ($2+$3+$4+$7+$8)/100}' /proc/stat; }
# Arithmetic in awk: a fresh Debian 12 has no bc.
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
since() { calc "$(busy) - $1"; }

dir=$(mktemp -d /tmp/fleetsim-nodecpu-XXXXXX)
cat >"$dir/scenario.yaml" <<EOF
os_layer: systemd
kubernetes: v1.34.2
api_latency: 0.01
nodes:
  - {name: cp-1, role: control-plane}
  - {name: w-1, role: worker}
  - {name: w-2, role: worker}
EOF
sup=
trap '[ -n "$sup" ] && kill $sup 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

c=$(busy); sleep 10; echo "before: machine idle 10 s: $(since "$c") CPU-s"

c=$(busy); t=$(date +%s.%N)
"$bin/fleetsim" up --scenario "$dir/scenario.yaml" --dir "$dir/fleet" >"$dir/up.log" 2>&1 &
sup=$!
inv="$dir/fleet/inventory.yaml"
until [ -e "$dir/fleet/ready" ] && "$bin/fleetctl" --inventory "$inv" status >/dev/null 2>&1; do
    kill -0 $sup 2>/dev/null || { cat "$dir/up.log"; exit 1; }
    sleep 0.2
done
echo "boot 3 nodes until status answers: $(since "$c") CPU-s in $(calc "$(date +%s.%N) - $t") s"

c=$(busy); sleep 30; echo "idle 30 s: $(since "$c") CPU-s"
c=$(busy); "$bin/fleetctl" --inventory "$inv" status >/dev/null; echo "one status: $(since "$c") CPU-s"

port=$(awk '/^  port:/{print $2}' "$inv")
addr=$(awk -F'address: ' '/name: w-1,/{split($2,a,","); print a[1]}' "$inv")
node() {
    ssh -F /dev/null -i "$dir/fleet/ssh/id_ed25519" -o UserKnownHostsFile="$dir/fleet/ssh/known_hosts" \
        -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=2 -p "$port" "root@$addr" "$@"
}
c=$(busy); t=$(date +%s.%N)
for _ in $(seq "$reboots"); do
    old=$(node cat /proc/sys/kernel/random/boot_id)
    node systemctl reboot >/dev/null 2>&1 || true
    until new=$(node cat /proc/sys/kernel/random/boot_id 2>/dev/null) && [ "$new" != "$old" ]; do sleep 0.1; done
done
echo "$reboots reboots of w-1: $(calc "$(since "$c") / $reboots") CPU-s each, $(calc "($(date +%s.%N) - $t) / $reboots") s each"

c=$(busy)
kill $sup; wait $sup 2>/dev/null || true; sup=
sleep 3
echo "teardown (and 3 s after): $(since "$c") CPU-s"

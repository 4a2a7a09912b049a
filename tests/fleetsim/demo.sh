#!/usr/bin/env bash
# The README's first command: bash tests/fleetsim/demo.sh
#
# On a fresh Debian machine, as root: installs what the simulator needs,
# builds the workspace, starts a simulated Flatcar fleet (1 control plane +
# 3 workers at Kubernetes v1.34, each booting the real systemd 257 with a
# real sshd, the control plane a real etcd), runs fleetctl against
# it, prints the fleet's event log and tears the fleet down, also on Ctrl-C.
# Exits non-zero if any fleetctl command failed.
set -uo pipefail

cd "$(dirname "$0")/../.." || exit 1

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
    bold=$'\033[1m' plain=$'\033[0m'
else
    bold='' plain=''
fi
say() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run me as root: the simulator creates namespaces and mounts (sudo bash $0)"

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
command -v sudo >/dev/null || missing+=(sudo)
command -v curl >/dev/null || missing+=(curl)
command -v mksquashfs >/dev/null || missing+=(squashfs-tools)
command -v unshare >/dev/null || missing+=(util-linux)
command -v debootstrap >/dev/null || missing+=(debootstrap)
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
[ -x /usr/bin/etcdctl ] || missing+=(etcd-client)
if [ ${#missing[@]} -gt 0 ]; then
    say "Installing ${missing[*]} (the simulated nodes run the real OpenSSH server, boot a Debian 13 root with the real systemd and squashfs images, and each control plane runs a real etcd)"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
# rustup's installer puts cargo there without touching this shell's PATH.
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
command -v cargo >/dev/null || die "cargo is missing: install Rust first (https://rustup.rs)"

say "Building fleetctl and the simulator (cargo build --workspace)"
cargo build --workspace || die "the build failed"

dir=$(mktemp -d /tmp/fleetsim-demo-XXXXXX) || die "mktemp failed"
supervisor=
cleanup() {
    trap - EXIT INT TERM
    if [ -n "$supervisor" ] && kill -0 "$supervisor" 2>/dev/null; then
        say "Tearing the fleet down"
        kill -TERM "$supervisor" 2>/dev/null
        wait "$supervisor" 2>/dev/null
    fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

say "Starting a simulated fleet: 1 control plane + 3 workers at v1.34 (tests/fleetsim/scenarios/demo.yaml)"
# Its nodes boot a Debian 13 root with the real systemd 257, built once by
# debootstrap and cached in /var/cache/fleetsim (docs/simulator.md).
ls -d "${FLEETSIM_ROOTFS_CACHE:-/var/cache/fleetsim}"/rootfs-*/.fleetsim-rootfs-complete >/dev/null 2>&1 ||
    echo "(first run: building the nodes' Debian 13 root with debootstrap, 1 to 5 minutes, once)"
target/debug/fleetsim up --scenario tests/fleetsim/scenarios/demo.yaml --dir "$dir" \
    >"$dir/supervisor.log" 2>&1 &
supervisor=$!
# Ten minutes: a first run builds the root before any node boots.
for _ in $(seq 6000); do
    [ -e "$dir/ready" ] && break
    kill -0 "$supervisor" 2>/dev/null || { cat "$dir/supervisor.log" >&2; die "the fleet did not start"; }
    sleep 0.1
done
[ -e "$dir/ready" ] || { cat "$dir/supervisor.log" >&2; die "the fleet was not ready after 10 minutes"; }
cat "$dir/supervisor.log"
# sshd answers before the kubelets report Ready, as on real nodes; give them
# the scenario's kubelet delay so the first status shows a settled fleet.
sleep 3

say "The inventory fleetctl will use ($dir/inventory.yaml)"
cat "$dir/inventory.yaml"

failed=0
fleetctl() {
    printf '\n%s$ fleetctl %s%s\n' "$bold" "$*" "$plain"
    target/debug/fleetctl "$@"
    local rc=$?
    if [ $rc -ne 0 ]; then
        printf 'demo: fleetctl %s exited with %d\n' "$*" "$rc" >&2
        failed=1
    fi
}

inventory="$dir/inventory.yaml"
# The simulated hub is plain HTTP on this machine's loopback, a network that
# is ours; fleetctl refuses an http:// hub unless told (docs/security.md).
export FLEETCTL_ALLOW_INSECURE_HUB=true
say "What the fleet runs now"
fleetctl -i "$inventory" status
say "Plan the upgrade to v1.37 (one minor at a time)"
fleetctl -i "$inventory" plan v1.37
say "Apply it"
fleetctl -i "$inventory" apply --yes
say "What the fleet runs afterwards"
fleetctl -i "$inventory" status

say "What happened on the nodes (the simulator's event log)"
target/debug/fleetsim events --dir "$dir"

if [ $failed -ne 0 ]; then
    say "Done, but some fleetctl commands failed (see above)"
    exit 1
fi
say "Done"

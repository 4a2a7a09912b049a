# fleetctl metrics: the deprecated-API gauge of each kube-apiserver instance,
# read at the instance own advertise address (the gauge lives in each
# kube-apiserver process: it counts only the requests that instance served).
# Read-only; runs as root on the first control plane, whose admin.conf
# carries the cluster CA that verifies every instance serving certificate
# (kubeadm makes it cover the advertise address). Rust appends one probe per
# instance, `probe "metrics NODE" fleetctl_metrics_at ADDR:PORT`, each
# argument validated (an IP address, a node name) before it is written here.
# Parsed by crate::node::parse_instance_metrics.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
printf "@@fleetctl:metrics 1@@\n"

# As fleetctl_metrics in checks.sh: only the gauge and one metric every
# kube-apiserver exports, so that an empty answer is told apart.
fleetctl_metrics_at() {
	fleetctl_page=$($fleetctl_timeout $fleetctl_kubectl --server="https://$1" get --raw /metrics) || return
	printf "%s\n" "$fleetctl_page" |
		grep -E "^(apiserver_requested_deprecated_apis|process_start_time_seconds)[ {]"
	return 0
}

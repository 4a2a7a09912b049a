# fleetctl cluster facts: what the API server says. Read-only; runs as root on
# the first reachable control-plane node. Parsed by crate::node::parse_cluster.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
printf "@@fleetctl:cluster 1@@\n"
probe nodes $fleetctl_timeout $fleetctl_kubectl get nodes -o json
probe kubeadm-config $fleetctl_timeout $fleetctl_kubectl -n kube-system get configmap kubeadm-config -o json
probe kube-proxy $fleetctl_timeout $fleetctl_kubectl -n kube-system get daemonset kube-proxy -o name
printf "@@fleetctl:done@@\n"

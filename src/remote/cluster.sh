# fleetctl cluster facts: what the API server says. Read-only; runs as root on
# the first reachable control-plane node. Parsed by crate::node::parse_cluster.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
printf "@@fleetctl:cluster 1@@\n"
probe nodes $fleetctl_timeout $fleetctl_kubectl get nodes -o json
# The ClusterConfiguration of kubeadm, and whether kube-proxy runs (it should
# not: Cilium replaces it), in one call: kubectl prints the List of those
# that exist, or nothing when none does (crate::node::parse_cluster). The
# KubeletConfiguration too, for the checks that follow when planning
# (crate::remote::CHECKS_AFTER_CLUSTER_SCRIPT).
probe kube-system $fleetctl_timeout $fleetctl_kubectl -n kube-system get configmap/kubeadm-config configmap/kubelet-config daemonset/kube-proxy --ignore-not-found -o json
# The version each kube-apiserver really runs (the image tag of its mirror pod):
# the skew check of a rollback goes by these, not by kubeadm-config alone (issue 38).
probe apiservers $fleetctl_timeout $fleetctl_kubectl -n kube-system get pods -l component=kube-apiserver -o json
printf "@@fleetctl:done@@\n"

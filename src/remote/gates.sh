# fleetctl gates: what the API server says before a node is taken down, in
# one round trip: /readyz and the nodes, asked at the same time. Read-only;
# runs as root on the first control-plane node. Parsed by
# crate::node::parse_gates.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
printf "@@fleetctl:gates 1@@\n"
fleetctl_dir=$(mktemp -d /run/fleetctl-gates.XXXXXX) || exit 1
probe readyz $fleetctl_timeout $fleetctl_kubectl get --raw /readyz >"$fleetctl_dir/readyz" &
probe nodes $fleetctl_timeout $fleetctl_kubectl get nodes -o json
wait
cat "$fleetctl_dir/readyz"
rm -rf "$fleetctl_dir"
printf "@@fleetctl:done@@\n"

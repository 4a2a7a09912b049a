# fleetctl ceph: what the Ceph gate reads first, in one round trip: the
# cluster's clock (a CephCluster's lastChecked is judged in the cluster's
# time), every CephCluster in any namespace, and Rook's toolbox pods.
# Read-only; runs as root on the first control plane. Parsed by
# crate::checks::ceph::read_discovery.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
printf "@@fleetctl:ceph 1@@\n"
fleetctl_dir=$(mktemp -d /run/fleetctl-ceph.XXXXXX) || exit 1
probe toolbox $fleetctl_timeout $fleetctl_kubectl get pods --all-namespaces -l app=rook-ceph-tools -o json >"$fleetctl_dir/toolbox" &
probe clusters $fleetctl_timeout $fleetctl_kubectl get cephclusters.ceph.rook.io --all-namespaces -o json
probe clock date -u +%s
wait
cat "$fleetctl_dir/toolbox"
rm -rf "$fleetctl_dir"
printf "@@fleetctl:done@@\n"

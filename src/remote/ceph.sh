# fleetctl ceph: what the Ceph gate reads first, in one round trip: the
# cluster's clock (a CephCluster's lastChecked is judged in the cluster's
# time), every CephCluster in any namespace, and then, if there is one,
# Rook's toolbox pods.
# Read-only; runs as root on the first control plane. Parsed by
# crate::checks::ceph::read_discovery.

fleetctl_kubectl="kubectl --kubeconfig /etc/kubernetes/admin.conf --request-timeout=20s"
# Every CephCluster, named as resource.version.group. kubectl reads a name
# with two dots or more as resource.version.group first (cli-runtime's
# resource.Builder.mappingFor, via apimachinery's schema.ParseResourceArg):
# `cephclusters.ceph.rook.io` would be version "ceph" of group "rook.io",
# which no server has, and client-go's DeferredDiscoveryRESTMapper.KindFor
# answers a miss from its disk cache by dropping the cache and reading
# every API group again (issue 40: half a second of each gate, and every
# kubectl after it starts from no cache). Rook serves CephCluster as
# ceph.rook.io/v1 (deploy/examples/crds.yaml), so that name hits the cache.
# Only a server without v1 (no Rook, or a Rook that dropped v1) is asked
# again by group alone, as before, so a CephCluster of another version
# would still be judged, never taken for no Ceph.
fleetctl_clusters() {
	if $fleetctl_timeout $fleetctl_kubectl get cephclusters.v1.ceph.rook.io --all-namespaces -o json \
		>"$fleetctl_dir/clusters" 2>"$fleetctl_dir/clusters.err"; then
		cat "$fleetctl_dir/clusters"
		return 0
	fi
	fleetctl_clusters_rc=$?
	if grep -q "have a resource type" "$fleetctl_dir/clusters.err"; then
		$fleetctl_timeout $fleetctl_kubectl get cephclusters.ceph.rook.io --all-namespaces -o json
		return
	fi
	cat "$fleetctl_dir/clusters"
	cat "$fleetctl_dir/clusters.err" >&2
	return "$fleetctl_clusters_rc"
}

printf "@@fleetctl:ceph 1@@\n"
fleetctl_dir=$(mktemp -d /run/fleetctl-ceph.XXXXXX) || exit 1
probe clusters fleetctl_clusters >"$fleetctl_dir/section"
cat "$fleetctl_dir/section"
# Rook's toolbox is looked for only where a CephCluster was listed (kubectl
# prints each item's kind, which apimachinery's
# unstructuredJSONScheme.decodeToList fills in from the list's where the
# server left it out): a cluster without Rook is asked one kubectl call
# before every drain, not two. Its section is then empty: no toolbox.
if grep -q "\"kind\": *\"CephCluster\"" "$fleetctl_dir/section"; then
	probe toolbox $fleetctl_timeout $fleetctl_kubectl get pods --all-namespaces -l app=rook-ceph-tools -o json
else
	probe toolbox true
fi
probe clock date -u +%s
rm -rf "$fleetctl_dir"
printf "@@fleetctl:done@@\n"

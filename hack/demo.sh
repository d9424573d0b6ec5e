#!/usr/bin/env bash
# The operator's main job on the local cluster: starts the cluster (make
# localcluster-up has done that), installs cert-manager and the operator from
# config/ as a user would, applies a sample EtcdCluster and shows how to use
# it.
# Usage: hack/demo.sh KUBECTL KUSTOMIZE ETCDCTL STATE_DIR
set -euo pipefail
kubectl=$1 kustomize=$2 etcdctl=$3 state=$4
export KUBECONFIG=$state/admin.kubeconfig
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

echo "== Nodes"
"$kubectl" get nodes -o wide

echo "== Installing cert-manager"
"$here/localcluster/install-cert-manager.sh" "$kubectl"

echo "== Installing the operator from config/default (its own ServiceAccount and RBAC)"
"$kustomize" build "$root/config/default" | "$kubectl" apply --server-side --force-conflicts -f - >/dev/null
"$kubectl" -n etcd-operator-system rollout status deployment/etcd-operator-controller-manager --timeout=180s

echo "== Applying examples/simple.yaml"
"$kubectl" apply --server-side -f "$root/examples/simple.yaml"
"$kubectl" wait etcdcluster/simple --for=condition=Ready --timeout=300s
"$kubectl" get etcdclusters,pods -o wide
endpoint="http://$("$kubectl" get service simple -o jsonpath='{.spec.clusterIP}'):2379"
echo "== etcd's own view, through the client Service ($endpoint)"
"$etcdctl" --endpoints "$endpoint" member list -w table
"$etcdctl" --endpoints "$endpoint" put /demo/hello world >/dev/null
"$etcdctl" --endpoints "$endpoint" get /demo/hello

cat <<EOT

A real 3-member etcd cluster runs on the local cluster, managed by the
operator installed from config/.

  export KUBECONFIG=$KUBECONFIG
  $kubectl get etcdclusters,pods -A
  $kubectl describe etcdcluster simple
  $kubectl scale etcd simple --replicas=5
  $etcdctl --endpoints $endpoint endpoint status -w table --cluster

Back it up and restore it into a new cluster (docs/backups.md): start the
local S3 server, which prints the next steps, with
  make localcluster-s3

Stop everything and remove what the demo created:  make demo-down
EOT

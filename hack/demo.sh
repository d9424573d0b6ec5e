#!/usr/bin/env bash
# The operator's main job on the local cluster: starts the cluster (make
# localcluster-up has done that), installs cert-manager and the operator from
# config/ as a user would, applies a sample EtcdCluster and shows how to use
# it.
# Usage: hack/demo.sh KUBECTL KUSTOMIZE STATE_DIR
set -euo pipefail
kubectl=$1 kustomize=$2 state=$3
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
"$kubectl" wait etcdcluster/simple --for=jsonpath='{.status.selector}' --timeout=60s >/dev/null
"$kubectl" get etcdclusters -o wide

cat <<EOT

The operator is installed and reconciling examples/simple.yaml.

  export KUBECONFIG=$KUBECONFIG
  $kubectl get etcdclusters,pods -A
  $kubectl describe etcdcluster simple

Stop everything and remove what the demo created:  make demo-down
EOT

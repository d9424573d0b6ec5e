#!/usr/bin/env bash
# The operator's main job on the local cluster: starts the cluster (make
# localcluster-up has done that), installs cert-manager and the operator from
# config/ as a user would, applies a sample EtcdCluster and shows how to use
# it.
# With CATALOG_IMAGE set (make demo OLM=1), it installs both through the
# Operator Lifecycle Manager instead, as OperatorHub users do: OLM, then
# cert-manager from the community catalog, then the operator from that
# catalog image, subscribed in OLM's global operators namespace.
# Usage: [CATALOG_IMAGE=IMAGE] hack/demo.sh KUBECTL KUSTOMIZE ETCDCTL STATE_DIR
set -euo pipefail
kubectl=$1 kustomize=$2 etcdctl=$3 state=$4
catalog_image=${CATALOG_IMAGE:-}
export KUBECONFIG=$state/admin.kubeconfig
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

echo "== Nodes"
"$kubectl" get nodes -o wide

# subscribe PACKAGE SOURCE: subscribes the global operators namespace to
# PACKAGE from CatalogSource SOURCE and waits for its CSV to succeed.
subscribe() {
  "$kubectl" apply --server-side -f - >/dev/null <<EOY
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: $1
  namespace: operators
spec:
  name: $1
  source: $2
  sourceNamespace: olm
  installPlanApproval: Automatic
EOY
  local csv="" deadline=$((SECONDS + 300))
  until [ -n "$csv" ] && [ "$("$kubectl" -n operators get csv "$csv" -o jsonpath='{.status.phase}' 2>/dev/null)" = Succeeded ]; do
    if [ "$SECONDS" -gt "$deadline" ]; then
      "$kubectl" -n operators get subscription,installplan,csv
      echo "$1 did not install within 5 minutes" >&2
      exit 1
    fi
    sleep 2
    csv=$("$kubectl" -n operators get subscription "$1" -o jsonpath='{.status.installedCSV}')
  done
  echo "$1: CSV $csv Succeeded"
}

if [ -n "$catalog_image" ]; then
  echo "== Installing the Operator Lifecycle Manager"
  "$here/localcluster/install-olm.sh" "$kubectl"
  echo "== Installing cert-manager from the community catalog"
  subscribe cert-manager operatorhubio-catalog
  echo "== Installing the operator from the catalog $catalog_image"
  "$kubectl" apply --server-side -f - >/dev/null <<EOY
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: etcd-operator
  namespace: olm
spec:
  sourceType: grpc
  image: $catalog_image
  displayName: etcd operator
EOY
  subscribe etcd-operator etcd-operator
else
  echo "== Installing cert-manager"
  "$here/localcluster/install-cert-manager.sh" "$kubectl"

  echo "== Installing the operator from config/default (its own ServiceAccount and RBAC)"
  "$kustomize" build "$root/config/default" | "$kubectl" apply --server-side --force-conflicts -f - >/dev/null
  "$kubectl" -n etcd-operator-system rollout status deployment/etcd-operator-controller-manager --timeout=180s
fi

echo "== Applying examples/simple.yaml"
"$kubectl" apply --server-side -f "$root/examples/simple.yaml"
"$kubectl" wait etcdcluster/simple --for=condition=Ready --timeout=300s
"$kubectl" get etcdclusters,pods -o wide
endpoint="http://$("$kubectl" get service simple -o jsonpath='{.spec.clusterIP}'):2379"
echo "== etcd's own view, through the client Service ($endpoint)"
"$etcdctl" --endpoints "$endpoint" member list -w table
"$etcdctl" --endpoints "$endpoint" put /demo/hello world >/dev/null
"$etcdctl" --endpoints "$endpoint" get /demo/hello

installed="from config/"
if [ -n "$catalog_image" ]; then
  installed="by OLM from $catalog_image"
fi
cat <<EOT

A real 3-member etcd cluster runs on the local cluster, managed by the
operator installed $installed.

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

#!/usr/bin/env bash
# Installs the Operator Lifecycle Manager on the cluster in $KUBECONFIG: its
# CRDs from the OLM Go module (hack/tools/operator-framework), then
# hack/localcluster/olm.yaml, and waits until the olm and catalog operators
# run. Running it again changes nothing.
# Usage: hack/localcluster/install-olm.sh KUBECTL
set -euo pipefail
kubectl=$1
here=$(cd "$(dirname "$0")" && pwd)
crds=$(cd "$here/../tools/operator-framework" && go list -m -f '{{.Dir}}' github.com/operator-framework/operator-lifecycle-manager)/deploy/chart/crds
for f in "$crds"/*.yaml; do
  "$kubectl" apply --server-side --force-conflicts -f "$f" >/dev/null
done
"$kubectl" wait --for=condition=Established --timeout=60s \
  crd/catalogsources.operators.coreos.com crd/clusterserviceversions.operators.coreos.com \
  crd/installplans.operators.coreos.com crd/olmconfigs.operators.coreos.com \
  crd/operatorconditions.operators.coreos.com crd/operatorgroups.operators.coreos.com \
  crd/operators.operators.coreos.com crd/subscriptions.operators.coreos.com >/dev/null
"$kubectl" apply --server-side --force-conflicts -f "$here/olm.yaml" >/dev/null
for d in olm-operator catalog-operator; do
  if ! "$kubectl" -n olm rollout status "deployment/$d" --timeout=120s; then
    # What a user would look at.
    "$kubectl" -n olm get pods -o wide
    "$kubectl" -n olm describe pods -l "app=$d" | tail -40
    "$kubectl" -n olm logs -l "app=$d" --tail=40 || true
    exit 1
  fi
done

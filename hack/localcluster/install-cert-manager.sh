#!/usr/bin/env bash
# Installs cert-manager on the cluster in $KUBECONFIG: its CRDs from the
# cert-manager Go module, then hack/localcluster/cert-manager.yaml, and waits
# until the controller runs.
# Usage: hack/localcluster/install-cert-manager.sh KUBECTL
set -euo pipefail
kubectl=$1
here=$(cd "$(dirname "$0")" && pwd)
crds=$(cd "$here/../cert-manager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds
for f in "$crds"/*.yaml; do
  "$kubectl" apply --server-side --force-conflicts -f "$f" >/dev/null
done
"$kubectl" wait --for=condition=Established --timeout=60s crd/certificates.cert-manager.io crd/issuers.cert-manager.io crd/clusterissuers.cert-manager.io crd/certificaterequests.cert-manager.io >/dev/null
"$kubectl" apply --server-side -f "$here/cert-manager.yaml" >/dev/null
"$kubectl" -n cert-manager rollout status deployment/cert-manager --timeout=120s

#!/usr/bin/env bash
# Runs the S3 server (versitygw) on the cluster in $KUBECONFIG: installs
# cert-manager (install-cert-manager.sh; nothing changes when it runs),
# applies hack/localcluster/s3.yaml and waits until the server is ready.
# Running it again changes nothing. With --print, says how to reach it.
# Usage: hack/localcluster/install-s3.sh KUBECTL [--print]
set -euo pipefail
kubectl=$1 print=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
"$here/install-cert-manager.sh" "$kubectl" >/dev/null
"$kubectl" apply --server-side --force-conflicts -f "$here/s3.yaml" >/dev/null
"$kubectl" -n s3-system wait --for=condition=Ready --timeout=120s certificate/s3-tls >/dev/null
"$kubectl" -n s3-system rollout status deployment/s3 --timeout=180s >/dev/null
[ "$print" = --print ] || exit 0

ip=$("$kubectl" -n s3-system get service s3 -o jsonpath='{.spec.clusterIP}')
access=$("$kubectl" -n s3-system get secret s3-root -o jsonpath='{.data.ROOT_ACCESS_KEY_ID}' | base64 -d)
secret=$("$kubectl" -n s3-system get secret s3-root -o jsonpath='{.data.ROOT_SECRET_ACCESS_KEY}' | base64 -d)
ca=$(dirname "$KUBECONFIG")/s3-ca.crt
"$kubectl" -n s3-system get secret s3-tls -o jsonpath='{.data.ca\.crt}' | base64 -d > "$ca"
cat <<EOT
The S3 server (versitygw v1.8.0, POSIX backend) runs in namespace s3-system.

  in the cluster:  https://s3.s3-system.svc
  from this host:  https://s3.s3-system.svc, reached at the Service's
                   ClusterIP $ip:443 (the name is not in the host's DNS)
  CA:              $ca (ca.crt of Secret s3-system/s3-tls)
  root keys:       $access / $secret (Secret s3-system/s3-root)

  curl --cacert $ca --resolve s3.s3-system.svc:443:$ip https://s3.s3-system.svc/_/health
EOT

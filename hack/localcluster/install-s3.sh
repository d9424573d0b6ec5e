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
# What examples/backups/ name, in namespace default: the bucket
# etcd-backups, and the Secrets s3-credentials and s3-ca.
code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$ca" --resolve "s3.s3-system.svc:443:$ip" \
  --aws-sigv4 "aws:amz:us-east-1:s3" --user "$access:$secret" \
  -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
  -X PUT https://s3.s3-system.svc/etcd-backups)
case "$code" in 200|409) ;; *) echo "creating bucket etcd-backups: HTTP $code" >&2; exit 1 ;; esac
"$kubectl" -n default create secret generic s3-credentials \
  --from-literal=AWS_ACCESS_KEY_ID="$access" --from-literal=AWS_SECRET_ACCESS_KEY="$secret" \
  --dry-run=client -o yaml | "$kubectl" apply --server-side -f - >/dev/null
"$kubectl" -n default create secret generic s3-ca --from-file=ca.crt="$ca" \
  --dry-run=client -o yaml | "$kubectl" apply --server-side -f - >/dev/null
cat <<EOT
The S3 server (versitygw v1.8.0, POSIX backend) runs in namespace s3-system.

  in the cluster:  https://s3.s3-system.svc
  from this host:  https://s3.s3-system.svc, reached at the Service's
                   ClusterIP $ip:443 (the name is not in the host's DNS)
  CA:              $ca (ca.crt of Secret s3-system/s3-tls)
  root keys:       $access / $secret (Secret s3-system/s3-root)

  curl --cacert $ca --resolve s3.s3-system.svc:443:$ip https://s3.s3-system.svc/_/health

In namespace default, for examples/backups/: the bucket etcd-backups, and
the Secrets s3-credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and
s3-ca (ca.crt). Take a backup of the demo's cluster, then restore it:

  $kubectl apply -f examples/backups/backup-s3.yaml
  $kubectl get etcdbackup simple-now -o wide
  $kubectl apply -f examples/backups/restore.yaml
  $kubectl get etcd simple-restored
EOT

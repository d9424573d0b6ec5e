#!/usr/bin/env bash
# Runs a command with the local cluster up: reuses the one running from the
# state directory, or starts one on NETWORK (localcluster up --network) and
# stops it afterwards. The command finds the cluster in $LOCALCLUSTER_STATE.
# Usage: hack/with-localcluster.sh LOCALCLUSTER STATE_DIR BIN_DIR NODES NETWORK -- COMMAND...
set -uo pipefail
localcluster=$1 state=$2 bin=$3 nodes=$4 network=$5
shift 6
out=$("$localcluster" up --detach --state-dir "$state" --bin-dir "$bin" --nodes "$nodes" --network "$network") || { echo "$out"; exit 1; }
echo "$out"
started=1
case "$out" in *"already running"*) started=0 ;; esac
LOCALCLUSTER_STATE=$state "$@"
rc=$?
if [ "$started" = 1 ] && [ -z "${LOCALCLUSTER_KEEP:-}" ]; then
  "$localcluster" down --state-dir "$state"
fi
exit $rc

#!/usr/bin/env bash
# Runs a command with the local cluster up: reuses the one running from the
# state directory, or starts one and stops it afterwards.
# Usage: hack/with-localcluster.sh LOCALCLUSTER STATE_DIR BIN_DIR NODES -- COMMAND...
set -uo pipefail
localcluster=$1 state=$2 bin=$3 nodes=$4
shift 5
out=$("$localcluster" up --detach --state-dir "$state" --bin-dir "$bin" --nodes "$nodes") || { echo "$out"; exit 1; }
echo "$out"
started=1
case "$out" in *"already running"*) started=0 ;; esac
"$@"
rc=$?
if [ "$started" = 1 ] && [ -z "${LOCALCLUSTER_KEEP:-}" ]; then
  "$localcluster" down --state-dir "$state"
fi
exit $rc

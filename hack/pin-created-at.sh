#!/usr/bin/env bash
# Pins the createdAt annotation of a CSV, which `operator-sdk generate bundle`
# sets to the current time, so that generating the bundle twice gives no diff.
# Usage: hack/pin-created-at.sh CSV_FILE TIMESTAMP
set -euo pipefail
csv=$1 created_at=$2
grep -q '^    createdAt: ' "$csv" || { echo "$csv has no createdAt annotation" >&2; exit 1; }
sed -i "s/^    createdAt: .*/    createdAt: \"$created_at\"/" "$csv"

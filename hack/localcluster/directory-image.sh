#!/usr/bin/env bash
# Makes image REF for the local cluster, which pulls from no registry: the
# directory IMAGES/REPO/TAG holds image.json (CONFIG: the image it is built
# from, its entrypoint and cmd; internal/localcluster/images) and rootfs/,
# with each SRC copied to DEST in it, as the image's Dockerfile copies them.
# Usage: hack/localcluster/directory-image.sh IMAGES REF CONFIG SRC:DEST...
set -euo pipefail
images=$1 ref=$2 config=$3
shift 3
case "$ref" in
  */*:*) repo=${ref%:*} tag=${ref##*:} ;;
  *) echo "directory-image.sh: $ref: give the registry, the repository and a tag (ghcr.io/org/name:v1)" >&2; exit 2 ;;
esac
dir=$images/$repo/$tag
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/rootfs"
printf '%s\n' "$config" > "$dir.tmp/image.json"
for pair in "$@"; do
  src=${pair%%:*} dest=${pair#*:}
  mkdir -p "$(dirname "$dir.tmp/rootfs$dest")"
  cp -R "$src" "$dir.tmp/rootfs$dest"
done
rm -rf "$dir" && mv "$dir.tmp" "$dir"
echo "$ref: $dir"

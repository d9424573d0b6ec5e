#!/usr/bin/env bash
# Makes the local cluster's stand-in for OperatorHub's community catalog
# (quay.io/operatorhubio/catalog:latest, the CatalogSource
# operatorhubio-catalog of hack/localcluster/olm.yaml): a file-based catalog
# with the one package the operator needs installed first, cert-manager, whose
# bundle (hack/localcluster/olm/cert-manager plus cert-manager's CRDs from
# its Go module) is an image of its own that OLM unpacks as it does any.
# Usage: hack/localcluster/community-catalog.sh IMAGES OPM OPM_IMAGE
set -euo pipefail
images=$1 opm=$2 opm_image=$3
here=$(cd "$(dirname "$0")" && pwd)
bundle_img=quay.io/community-operator-pipeline-prod/cert-manager:v1.21.2
catalog_img=quay.io/operatorhubio/catalog:latest
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp -R "$here/olm/cert-manager" "$work/bundle"
crds=$(cd "$here/../cert-manager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds
cp "$crds"/*.yaml "$work/bundle/manifests/"
chmod -R u+w "$work/bundle"
"$here/directory-image.sh" "$images" "$bundle_img" '{"from":"scratch"}' \
  "$work/bundle/manifests:/manifests" "$work/bundle/metadata:/metadata"

mkdir -p "$work/catalog/cert-manager"
{
  "$opm" init cert-manager --default-channel=stable -o yaml
  printf -- '---\nschema: olm.channel\npackage: cert-manager\nname: stable\nentries:\n- name: cert-manager.v1.21.2\n---\n'
  # The bundle as a registry lists it: its image, which OLM unpacks.
  "$opm" render "$work/bundle" -o yaml | sed "s|^image: \"\"$|image: $bundle_img|; s|^image: ''$|image: $bundle_img|"
} > "$work/catalog/cert-manager/catalog.yaml"
"$opm" validate "$work/catalog"
"$here/directory-image.sh" "$images" "$catalog_img" \
  "{\"from\":\"$opm_image\",\"entrypoint\":[\"/bin/opm\"],\"cmd\":[\"serve\",\"/configs\",\"--cache-dir=/tmp/cache\"]}" \
  "$work/catalog:/configs"
dir=$images/${catalog_img/://}/rootfs
"$opm" serve "$dir/configs" --cache-dir="$dir/tmp/cache" --cache-only --termination-log=/dev/null 2>/dev/null

#!/usr/bin/env bash
# Writes third_party/ (or the directory given): the release manifests sless
# takes from Knative Serving and Tekton Pipelines, at the versions go.mod
# selects, with each project's LICENSE, copied from the Go module cache
# (downloaded through the module proxy when missing). The test bed loads
# them; test/generate checks that third_party/ is what this script writes.
#
#   bash hack/third-party.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-third_party}

# module, then the globs of its source that are copied.
specs=(
  "knative.dev/serving config/core/100-namespace.yaml config/core/200-roles/*.yaml config/core/200-serviceaccount.yaml config/core/300-resources/*.yaml config/core/configmaps/*.yaml config/core/deployments/activator.yaml config/core/deployments/autoscaler.yaml"
  "knative.dev/networking config/certificate.yaml config/ingress.yaml config/serverlessservice.yaml config/domain-claim.yaml config/config-network.yaml"
  "knative.dev/caching config/image.yaml"
  "github.com/tektoncd/pipeline config/100-namespace/*.yaml config/300-crds/*.yaml config/config-*.yaml"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
# Everything but the hand-written README.md is this script's.
find "$out" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
{
  echo "# Written by hack/third-party.sh from the Go module cache: module and version (go.mod's)."
} >"$out/VERSIONS"
for spec in "${specs[@]}"; do
  read -r mod globs <<<"$spec"
  version=$(go list -m -f '{{.Version}}' "$mod")
  # Outside any module, so go.mod and go.sum stay as they are for a module
  # (knative.dev/caching) no package of sless imports.
  dir=$(cd "$tmp" && GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "$mod@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "third-party.sh: no module directory for $mod@$version" >&2; exit 1; }
  dest="$out/$mod"
  mkdir -p "$dest"
  cp "$dir/LICENSE" "$dest/LICENSE"
  for g in $globs; do
    matched=0
    for f in "$dir"/$g; do
      [ -f "$f" ] || continue
      rel=${f#"$dir/"}
      mkdir -p "$dest/$(dirname "$rel")"
      cp "$f" "$dest/$rel"
      matched=1
    done
    [ "$matched" = 1 ] || { echo "third-party.sh: $g matches nothing in $mod@$version" >&2; exit 1; }
  done
  chmod -R u+w,go-w "$dest"
  echo "$mod $version" >>"$out/VERSIONS"
done
